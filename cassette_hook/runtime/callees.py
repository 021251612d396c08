"""What runs for a callee under a plan: one definition.

``recurse(ctx, f, *args)`` runs ``f``'s own body with its call sites overdubbed:
:func:`runnable` says what that body is -- a function's twin, a bound method's function's
twin bound alike, a partial's one call, a class's construction (its Python ``__new__`` and
``__init__`` as call sites), a callable instance's ``__call__`` -- and, for a callee that
has none, :func:`without_body` runs an operator's Python dunders or ``fallback``.  The
defaults of ``overdub`` (``execute``, then ``recurse``) and of ``fallback`` (the
primitive, called as the plain program would) are defined here and given to the
generics; the hot path (``callsites``) asks the same functions for every callee it does
not find in a plan's tables.  The call sites this module makes of its own (a partial's
call, a constructor's ``__new__`` and ``__init__``) go through the hot path's entry
points (``hotpath``).
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import functools
import threading
import weakref
from types import BuiltinFunctionType, FunctionType, MethodDescriptorType, MethodType, WrapperDescriptorType
from typing import TYPE_CHECKING, Any, Callable

from .. import context_stack, _native, dispatch, generics
from . import hotpath, special_methods, operators
from ..generics import OverdubInstead, execute, fallback
from .._own import strip_traceback
from .._weakid import WeakIdCache
from .primitives import INDIRECT_KINDS, CMethodType, call_primitive

if TYPE_CHECKING:
    from .plan import Plan


def _default_overdub(ctx: Any, f: Any, /, *args: Any, **kwargs: Any) -> Any:
    # Only an explicit overdub(ctx, f, ...) gets here: a call site runs the callee itself,
    # so a program's own call of a non-callable keeps Python's error.
    if not callable(f):
        from .._saferepr import short_repr, type_name

        # CPython's words for the type, then which argument it was
        raise TypeError(f"overdub(): {type_name(f)!r} object is not callable "
                        f"(f = {short_repr(f)}, in overdub(ctx, f, *args, **kwargs))")
    out = execute(ctx, f, *args, **kwargs)
    if out is not OverdubInstead:
        return out
    return recurse(ctx, f, *args, **kwargs)


def _default_fallback(ctx: Any, f: Any, /, *args: Any, **kwargs: Any) -> Any:
    if ctx.tag is not None:  # primitives get untagged arguments
        args, kwargs = ctx.tag.for_primitive(f, args, kwargs)
    return call_primitive(f, args, kwargs)


_top: Callable[[], context_stack.Entry | None]
_get_active: Callable[[], Any]
_set_active: Callable[[Any], Any]


def _follow(variable: Any, top: Callable[[], context_stack.Entry | None]) -> None:
    """Keep the stack's reader and its variable's methods at hand, as globals (see
    ``context_stack.follow``)."""
    global _top, _get_active, _set_active
    _top, _get_active, _set_active = top, variable.get, variable.set


context_stack.follow(_follow)


class _Overloads(threading.local):
    """What overload runs popped on this thread: ``running`` is ``(entry, below)`` while
    ``callsites._overloaded`` runs an overload of ``entry`` with the stack's variable set
    to ``below`` (saved and put back around each overload, so an overload's calls record
    theirs and the outer one applies again after), else None.  :func:`recurse` reads it
    to put that entry back rather than push a new one: the pure-Python ``unpop``."""

    running: tuple[context_stack.Entry, Any] | None = None


overloads = _Overloads()


def recurse(ctx: context_stack.Context, f: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run ``f``'s own body under ``ctx``, its calls overdubbed; ``fallback`` if it has none.

    The common case is an overload of ``ctx``'s own entry recursing into its callee: the
    entry is popped (its overload runs popped), so ``ctx`` is not on top.  Then, as the
    C path's ``_speedups.unpop`` does, the popped entry is put back for the call (the
    variable set to it and back), rather than a new entry pushed and popped (its plan
    looked up, its watchers told, about 30 Python calls): when the thread's record
    (:data:`overloads`) says an overload of ``ctx`` runs, with no ``with`` block since
    (the variable still holds what the overload set it to), and ``ctx`` does not tag
    (a tagging context's extent is counted by its pushes)."""
    top = _top()
    if top is not None and top.ctx is ctx:
        try:
            run = runnable(top.plan, f)
            out = run(*args, **kwargs) if run is not None else without_body(top, f, args, kwargs)
        except BaseException as exc:  # (the program's traceback: without this frame and ours below it)
            strip_traceback(exc)
            raise
    elif (running := overloads.running) is not None and running[0].ctx is ctx and ctx.tag is None \
            and running[1] is _get_active():
        entry, below = running
        try:  # (set inside, put back by value as the try's last step: see run_popped)
            _set_active(entry)
            # (``Plan.twin``'s look-up, here: a matched overload's recurse costs its twin's
            # frame, not two more: docs/performance.md, "A matched identity overload on the
            # pure-Python path")
            found = entry.plan.twins.values.get(id(f)) if type(f) is FunctionType else None
            if (found is not None and f.__code__ is found[1] and f.__defaults__ is found[2]
                    and f.__kwdefaults__ is found[3]):
                out = found[0](*args, **kwargs) if kwargs else found[0](*args)
            else:
                run = runnable(entry.plan, f)
                out = run(*args, **kwargs) if run is not None else without_body(entry, f, args, kwargs)
            _set_active(below)
        except BaseException as exc:
            _set_active(below)
            strip_traceback(exc)
            raise
        return out
    else:
        context_stack.checked(ctx, "recurse")
        held = context_stack.active.get()
        # The push inside the try, and the pop as its last step, not in a ``finally`` (whose
        # first line is a place for an interrupt before the pop): an interrupt anywhere
        # pops, once (see context_stack, "atomic with respect to an interrupt").
        try:
            plan = context_stack.push(ctx).plan  # (no reference to the entry kept: its pop lets it go)
            run = runnable(plan, f)
            out = run(*args, **kwargs) if run is not None else without_body(context_stack.top(), f, args, kwargs)  # type: ignore[arg-type]  # (pushed)
            context_stack.pop_if_pushed(ctx, held)
        except BaseException as exc:
            context_stack.pop_if_pushed(ctx, held)
            strip_traceback(exc)
            raise
    return out if ctx.tag is None else ctx.tag.leave(out)  # no wrapper outlives its context


# The runtime's: in C, one whose common case (an overload of ctx's own entry) puts that
# entry back for the call instead of pushing a new one, and whose calls run this code only
# past the thread's budget of C levels (docs/internals.md, "recurse without a frame").
recurse = _native.runtime.recurse_from(recurse, strip_traceback)


def canrecurse(ctx: context_stack.Context, f: Any, /, *args: Any, **kwargs: Any) -> bool:
    """Does ``recurse(ctx, f, *args)`` run a Python body (rather than ``fallback``)?"""
    plan = context_stack.plan_of(context_stack.checked(ctx, "canrecurse"))
    plain = args if ctx.tag is None else ctx.tag.for_primitive(f, args, kwargs)[0]  # as ``without_body`` sees them
    return (runnable(plan, f) or operators.body(f, plain)) is not None


canoverdub = canrecurse


def without_body(entry: context_stack.Entry, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``recurse`` into a callee ``runnable`` found no Python body for (``entry`` is the top
    of the stack): an operator's protocol through Python dunders, else ``fallback``."""
    plain, plain_kwargs = (args, kwargs) if entry.ctx.tag is None else entry.ctx.tag.for_primitive(f, args, kwargs)
    run = operators.body(f, plain)
    if run is not None:
        return run(*plain, **plain_kwargs)
    if entry.plan.fallback:
        method = fallback.resolve((entry.ctx, f, *args))
        if method is not _default_fallback:
            return run_popped(entry, method, (entry.ctx, f, *args), kwargs)
    return call_primitive(f, plain, plain_kwargs)


def run_popped(entry: context_stack.Entry, method: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
    """Run an overload or hook with its own context popped off the stack, seen by the
    contexts below it (see :func:`seen_below`).

    The stack's variable is set to the entry below inside the ``try`` and put back by
    value, not by a token (an interrupt right after the set, the token not yet stored,
    still puts it back), as the ``try``'s last step, not in a ``finally`` (whose first
    line is a place for an interrupt before it runs): an interrupt anywhere leaves the
    variable as it was.  The C path's (``_speedups.popped_call``, a ``Site``'s
    ``run_popped``) writes no variable: it records for this thread that while the
    variable holds ``entry``, the top is the one below, two ``ContextVar.set`` calls less
    (docs/internals.md, "The C hot path")."""
    below, held = entry.below, _get_active()
    try:
        _set_active(below)
        out = method(*args, **kwargs) if below is None else seen_below(method, args, kwargs)
        _set_active(held)
    except BaseException:
        _set_active(held)
        raise
    return out


run_popped = _native.runtime.accelerated("popped_call", run_popped)


# -- what "the callee's own body" is ---------------------------------------------------

def runnable(plan: Plan, f: Any) -> Callable[..., Any] | None:
    """A callable that runs ``f``'s own body with its calls overdubbed, or ``None``.

    Called with ``f``'s arguments.  ``None`` means ``f`` is a primitive: no Python body,
    or one outside the context's scope.  Twins and construction kinds are cached in the
    plan.
    """
    kind = type(f)
    if kind is FunctionType:
        return plan.twin(f)
    if kind is BuiltinFunctionType or kind is CMethodType:  # C code (what _special_call would find out, dearer)
        return None
    if kind is MethodType:
        func = f.__func__
        twin = plan.twin(func) if type(func) is FunctionType else runnable(plan, func)
        return None if twin is None else MethodType(twin, f.__self__)
    if kind is functools.partial:  # its body is one call: of f.func with the merged arguments
        return functools.partial(hotpath.call, f.func, *f.args, **f.keywords)
    if isinstance(f, type):
        return _construction(plan, f)
    call_method = getattr(kind, "__call__", None)  # noqa: B004 -- the method itself, not a callable() test
    if type(call_method) is FunctionType and kind.__dict__.get("__call__") is call_method:
        # The common callable instance: a plain function on its class.  (mypy does not narrow
        # type(x) is T within an ``and``; a cast would cost a call here.)
        twin = plan.twin(call_method)  # type: ignore[arg-type]
        return None if twin is None else MethodType(twin, f)
    return _special_call(plan, f, kind)


def _special_call(plan: Plan, obj: object, kind: type) -> Callable[..., Any] | None:
    """``runnable`` for ``obj(...)`` when ``kind.__call__`` is inherited or not a plain
    function: a staticmethod, a classmethod, a partial, a builtin, or -- through the
    metaclass -- nothing at all (see :mod:`special_methods`)."""
    raw = special_methods.lookup(kind, "__call__")
    if type(raw) is FunctionType:
        twin = plan.twin(raw)
        return None if twin is None else MethodType(twin, obj)
    run = special_methods.bound(raw, obj, kind)
    return runnable(plan, run) if special_methods.recursible(run) else None


# id(type) -> True: the C types whose every instance a call site calls as it is under a
# plan with no hooks (see :func:`note_called_as_is`; the C hot path reads ``values``).
CALLED_AS_IS: WeakIdCache[bool] = WeakIdCache()

_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: no attribute of the type can be set or deleted
# Kinds whose instances ``runnable`` or ``callsites.callable_for`` tell apart one by one
# (a twin, a partial's call, an emulated builtin), whatever their ``__call__``.
_PER_OBJECT = frozenset({FunctionType, MethodType, functools.partial, BuiltinFunctionType, CMethodType,
                         MethodDescriptorType, *INDIRECT_KINDS})


def note_called_as_is(kind: type) -> None:
    """Enter ``kind`` in :data:`CALLED_AS_IS` if the answer just given for one of its
    instances -- call it as it is -- holds for every instance.

    ``functools.lru_cache``'s wrapper is the common case: a call site met it at every call
    (and a bound method whose ``__func__`` it is, an ``lru_cache`` on a method), and asked
    ``runnable`` and ``_special_call`` each time (docs/performance.md, "Callable C
    objects").  The answer holds for every instance when ``kind`` is no class of classes,
    its ``__call__`` is C code of its own (its ``tp_call`` slot, or a C method) -- which
    binds to nothing ``recursible`` -- and an immutable type, so that no ``__call__`` can
    be set on it later; and when no instance is told apart by ``runnable`` or
    ``callable_for``.
    """
    if (kind.__flags__ & _IMMUTABLE_TYPE and kind not in _PER_OBJECT and not issubclass(kind, type)
            and type(kind.__dict__.get("__call__")) in (WrapperDescriptorType, MethodDescriptorType)):
        CALLED_AS_IS.set(kind, True)


def _construction(plan: Plan, cls: type) -> Callable[..., Any] | None:
    how = plan.constructions.values.get(id(cls))
    if how is None:
        how = _how_to_construct(plan, cls)
        plan.constructions.set(cls, how)
        if how == "python":
            plan.constructors.set(cls, functools.partial(hotpath.construct_by_ref, weakref.ref(cls)))
    if how == "metaclass":  # a metaclass with its own __call__
        return _special_call(plan, cls, type(cls))
    return plan.constructors.values.get(id(cls))  # "python": construct it; else None


def _how_to_construct(plan: Plan, cls: type[Any]) -> str:
    if not plan.recurses_into(cls):
        return "primitive"
    if special_methods.lookup(type(cls), "__call__") is not _TYPE_CALL:
        return "metaclass"
    init = special_methods.bound(special_methods.lookup(cls, "__init__"), None, cls)
    if init is None:
        return "primitive"  # an __init__ only the interpreter should bind (see special_methods)
    bodies = (_body(cls.__new__), _body(init))
    if any(body is not None and plan.recurses_into(body) for body in bodies):
        return "python"
    return "primitive"  # nothing in scope happens in Python when constructing it


_TYPE_CALL = type.__dict__["__call__"]


def _body(method: Any) -> FunctionType | None:
    """The Python function a ``__new__`` or ``__init__`` runs: itself, a method's, a partial's."""
    if type(method) is MethodType:
        method = method.__func__
    elif type(method) is functools.partial:
        method = method.func
    return method if type(method) is FunctionType else None


def construct_by_ref(ref: weakref.ref[type], /, *args: Any, **kwargs: Any) -> Any:
    """What a plan's constructor calls: ``construct`` of the class, held weakly."""
    try:
        return construct(ref(), *args, **kwargs)  # type: ignore[arg-type]  # alive: it is being called
    except BaseException as exc:  # (the program's traceback: without this frame and ours below it)
        strip_traceback(exc)
        raise


def construct(cls: type[Any], /, *args: Any, **kwargs: Any) -> Any:
    """``type.__call__`` with Python ``__new__`` and ``__init__`` as overdubbed calls."""
    new: Callable[..., Any] = cls.__new__  # as type.__call__ gets it: a staticmethod unwrapped, a classmethod bound
    if new is object.__new__:
        obj = new(cls)  # only Python __init__ takes the arguments (else we would not be here)
    elif type(new) is FunctionType or type(new) is MethodType:
        obj = hotpath.resolve(new)(cls, *args, **kwargs)
    else:
        obj = new(cls, *args, **kwargs)
    kind = type(obj)
    if cls in kind.__mro__:  # a real subclass: type.__call__ ignores ABC registration
        raw = special_methods.lookup(kind, "__init__")
        if type(raw) is FunctionType:
            result = hotpath.resolve(raw)(obj, *args, **kwargs)
        else:  # bound as type.__call__ binds it; kind.__init__ would unwrap a staticmethod
            init = special_methods.bound(raw, obj, kind)
            if init is None:
                init = raw.__get__(obj, kind)  # a descriptor of a subclass's own (cls's is known)
            result = (hotpath.resolve(init) if special_methods.recursible(init) else init)(*args, **kwargs)
        if result is not None:
            raise TypeError(f"__init__() should return None, not '{type(result).__name__}'")
    return obj


def seen_below(hook: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run a hook or overload, popped, as an overdubbed call of the contexts below it.

    Nesting composes (as in Cassette, where an outer context overdubs the inner one's
    machinery): the outer contexts see the method run and, through its twin, every call
    it makes.  A generic is dispatched here, so that they see the method, not the
    dispatcher (cassette_hook's own code, which is never overdubbed).
    """
    if isinstance(hook, dispatch.Generic):
        hook = hook.resolve(args)
    return hotpath.call(hook, *args, **kwargs)


def direct_constructor(plan: Plan, cls: type) -> Callable[..., Any] | None:
    """``Plan.direct_twin`` for a class: what constructs it overdubbed (a Python ``__init__``
    recursed into), entered as ``(constructor, None, None, None)``: a class has no code to
    go stale, and how it constructs is this plan's for good."""
    if plan.direct_twins is None:
        return None
    constructor = None
    if not plan.names(cls) and runnable(plan, cls) is not None:
        constructor = plan.constructors.values.get(id(cls))
    plan.enter_direct(cls, None if constructor is None else (constructor, None, None, None))  # type: ignore[arg-type]  # a Twin of a class
    return constructor


generics.overdub.default = _default_overdub
generics.fallback.default = _default_fallback
generics.overdub.runnable, generics.overdub.without_body = runnable, without_body
generics.overdub.seen_below = seen_below
generics.overdub.run_popped = _native.runtime.run_popped
