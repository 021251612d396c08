"""The contextual generics -- ``overdub``, ``prehook``, ``posthook``, ``raisehook``,
``fallback``, ``execute`` -- their default methods, and ``recurse``.

Defaults follow Cassette: hooks do nothing; ``overdub`` asks ``execute`` (Cassette 0.1)
and otherwise recurses; ``recurse`` runs the callee's own body with its call sites
overdubbed, or hands a callee without a Python body to ``fallback``, which calls it.
"""

from __future__ import annotations

import functools
import weakref
from types import BuiltinFunctionType, BuiltinMethodType, CodeType, FunctionType, MethodType, ModuleType
from typing import Any, Callable

from . import _context, _native, _special, dispatch, plan as _plan
from ._constant import Constant


class _OverdubInstead(Constant):
    """What ``execute`` returns to mean that the call is not a primitive and is overdubbed."""


OverdubInstead = _OverdubInstead()


class ContextGeneric(dispatch.Generic):
    """A generic called with a context first, then the callee (``posthook``: the call's
    result before it, ``raisehook``: its exception), whose registrations also reset the
    context plans (see :mod:`plan`)."""

    @property
    def _leading(self) -> tuple[str, ...]:
        """The arguments every call passes before the callee's own."""
        return _LEADING.get(self.name, ("ctx", "f"))

    def _resolve_uncached(self, args: tuple[object, ...]) -> Callable[..., Any]:
        """Refuse a call that does not start with a context and the callee: the first time
        each combination of argument types is resolved, so no call pays for it after."""
        leading = self._leading
        if len(args) < len(leading):
            *first, last = ({"ctx": "a context", "out": "a result", "exc": "an exception", "f": "a callable"}[a]
                            for a in leading)
            raise TypeError(f"{self.name}() needs {', '.join(first)} and {last}: "
                            f"{self.name}({', '.join(leading)}, *args, **kwargs)")
        if not isinstance(args[0], _context.Context):
            raise TypeError(_context.not_a_context(args[0], self.name))
        return super()._resolve_uncached(args)

    def _signature(self, func: Any, self_type: type | None) -> Any:
        """Refuse, now, a method no call of this generic could ever run."""
        method = super()._signature(func, self_type)
        leading = self._leading
        call = f"{self.name}({', '.join(leading)}, *args, **kwargs)"
        where = f"{self.name}: cannot register {dispatch._describe(func)}"
        if len(method.params) < len(leading) and method.varargs is None:
            needed = ("self", *leading[1:]) if self_type is not None else leading
            taken = len(method.params)
            raise TypeError(f"{where}: it takes {taken or 'no'} positional parameter{'s' * (taken != 1)}, but "
                            f"it is called as {call}: give it at least {', '.join(needed)}")
        import inspect  # (registering a method, not importing cassette_hook)

        parameters = inspect.signature(func).parameters.values()
        for p in parameters:
            if p.kind == p.KEYWORD_ONLY and p.default is p.empty:
                raise TypeError(f"{where}: keyword-only parameter {p.name!r} has no default; the keyword "
                                f"arguments of a call take no part in dispatch, so a call without {p.name}= "
                                "would choose this method and fail: give it a default")
        first_pattern = method.pattern(0)  # None only for a method the arity check refused
        if first_pattern is not None and not first_pattern.can_hold(_context.Context):
            first = next(iter(parameters))
            annotation = inspect.formatannotation(first.annotation)
            raise TypeError(f"{where}: its first parameter {first.name!r} is annotated {annotation}, "
                            f"which is not a context type; it is called as {call} with a context first: "
                            "annotate it with a Context subclass, Ctx[M], or nothing")
        callee = method.pattern(len(leading) - 1)
        for bound in callee.named_objects() if callee is not None else ():
            receiver = _receiver_of(bound)
            if receiver is not None:
                names = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
                raise TypeError(f"{where}: {_bound_method_advice(bound, receiver, names[len(leading) - 1:])}")
        return method.running(_leading_positional(func, len(leading)))

    def register(self, func: Any = None, /, **options: Any) -> Any:
        if func is None:
            return lambda fn: self.register(fn, **options)
        result = super().register(func, **options)
        _plan.invalidate()
        return result

    def unregister(self, func: Any) -> None:
        super().unregister(func)
        _plan.invalidate()


_LEADING = {"posthook": ("ctx", "out", "f"), "raisehook": ("ctx", "exc", "f")}


def _leading_positional(func: Any, count: int) -> Any:
    """``func`` with its first ``count`` parameters positional-only.

    A hook is called as ``prehook(ctx, f, *args, **kwargs)`` with the program's keyword
    arguments as keywords, so ``def prehook(self, f, *args, **kwargs)`` -- the natural way
    to write it -- would fail with "multiple values for argument 'f'" on the program's
    ``g(f=1)``.  The leading parameters are only ever passed by position, so a copy whose
    code says so is the same method, and a keyword of the same name goes to ``**kwargs``.
    """
    if type(func) is not FunctionType:
        return func
    code = func.__code__
    positional = min(count, code.co_argcount)
    if code.co_posonlyargcount >= positional:
        return func
    copy = FunctionType(code.replace(co_posonlyargcount=positional), func.__globals__, func.__name__,
                        func.__defaults__, func.__closure__)
    copy.__kwdefaults__ = func.__kwdefaults__
    for name in functools.WRAPPER_ASSIGNMENTS:  # the same function, not a wrapper of it
        setattr(copy, name, getattr(func, name))
    copy.__dict__.update(func.__dict__)
    return copy


def _receiver_of(obj: object) -> object | None:
    """The receiver a method is bound to, if calls never present the method itself: a
    Python bound method, or a builtin one bound to an instance (``xs.append``)."""
    if type(obj) is MethodType:
        return obj.__self__
    receiver = getattr(obj, "__self__", None) if type(obj) is BuiltinMethodType else None
    return None if receiver is None or isinstance(receiver, (type, ModuleType)) else receiver


def _bound_method_advice(bound: Any, receiver: object, names: list[str]) -> str:
    """Why ``Is[obj.method]`` never matches a call, and what to write instead."""
    callee, after = (names + ["f"])[0], (names[1:] + ["self"])[0]
    name = getattr(bound, "__name__", "method")
    if isinstance(receiver, type):
        cls = receiver.__qualname__
        shown = f"{cls}.{name}(...) as ({cls}.{name}.__func__, {cls}, ...)"
        write = f"{callee}: Is[{cls}.{name}.__func__], and {after}: Is[{cls}] to leave out calls on subclasses"
    else:
        owner = type(receiver).__qualname__
        shown = f"obj.{name}(...) as ({owner}.{name}, obj, ...)"
        write = f"{callee}: Is[{owner}.{name}], and {after}: Is[obj] to match only the calls on that object"
    return (f"parameter {callee!r} is Is[...] of the bound method {bound!r}, which no call is: a call "
            f"site presents {shown}; write {write}")


def _no_hook(ctx: Any, /, *args: Any, **kwargs: Any) -> None:
    return None


def _default_execute(ctx: Any, f: Any, /, *args: Any, **kwargs: Any) -> Any:
    return OverdubInstead


def _default_overdub(ctx: Any, f: Any, /, *args: Any, **kwargs: Any) -> Any:
    # Only an explicit overdub(ctx, f, ...) gets here: a call site runs the callee itself,
    # so a program's own call of a non-callable keeps Python's error.
    if not callable(f):
        raise TypeError(f"overdub(): f is not callable: {f!r}")
    out = execute(ctx, f, *args, **kwargs)
    if out is not OverdubInstead:
        return out
    return recurse(ctx, f, *args, **kwargs)


def _default_fallback(ctx: Any, f: Any, /, *args: Any, **kwargs: Any) -> Any:
    if ctx.tag is not None:  # primitives get untagged arguments
        args, kwargs = tagging.for_primitive(f, args, kwargs)
    return call_primitive(f, args, kwargs)


prehook = ContextGeneric("prehook", _no_hook, """``prehook(ctx, f, *args, **kwargs)``: called before every
overdubbed call, once its arguments are evaluated.  Does nothing by default; overload it
with ``@prehook.register`` or a ``prehook`` method on the context class.""")
posthook = ContextGeneric("posthook", _no_hook, """``posthook(ctx, out, f, *args, **kwargs)``: called after
every overdubbed call that returned ``out`` (not after one that raised).  Does nothing by
default; overload it like ``prehook``.""")
raisehook = ContextGeneric("raisehook", _no_hook, """``raisehook(ctx, exc, f, *args, **kwargs)``: called after
every overdubbed call that raised ``exc``, which then goes on as it was.  So exactly one of
``posthook`` and ``raisehook`` follows each ``prehook`` that returned (what a profiler or a
tracer needs to keep its stack).  Does nothing by default; overload it like ``prehook``.
An exception it raises replaces the call's, which ends its ``__context__`` chain (as when
a hook raises inside an ``except``).""")
execute = ContextGeneric("execute", _default_execute, """``execute(ctx, f, *args, **kwargs)``, Cassette 0.1's
primitive hook: an overload that returns anything but ``OverdubInstead`` makes the call
a primitive with that result.  Returns ``OverdubInstead`` by default.""")
overdub = ContextGeneric("overdub", _default_overdub, """``overdub(ctx, f, *args, **kwargs)``: run ``f(*args,
**kwargs)`` with every call inside it overdubbed by ``ctx``.  The call itself is not
hooked.  Overload it to replace what a call does inside a context; the default asks
``execute`` and otherwise calls ``recurse``.""")
fallback = ContextGeneric("fallback", _default_fallback, """``fallback(ctx, f, *args, **kwargs)``: run a callee
that has no Python body to recurse into (a C function, or one outside the context's
scope).  By default it calls ``f``, with the context still active so that callbacks
from C (``sorted(key=...)``, ``map``) are overdubbed.""")

DEFAULTS: dict[str, Callable[..., Any]] = {
    "prehook": _no_hook, "posthook": _no_hook, "raisehook": _no_hook, "execute": _default_execute,
    "overdub": _default_overdub, "fallback": _default_fallback,
}


def recurse(ctx: _context.Context, f: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run ``f``'s own body under ``ctx``, its calls overdubbed; ``fallback`` if it has none."""
    top = _context.top()
    entry = top if top is not None and top.ctx is ctx else _context.push(_context.checked(ctx, "recurse"))
    try:
        run = runnable(entry.plan, f)
        out = run(*args, **kwargs) if run is not None else without_body(entry, f, args, kwargs)
    finally:
        if entry is not top:
            _context.pop(ctx)
    return out if ctx.tag is None else tagging.leave(ctx, out)  # no wrapper outlives its context


_recurse = recurse  # the reference, and what the C path's recurse hands all but its common case

if _native.speedups is not None:
    _unpop, _repop = _native.speedups.unpop, _native.speedups.repop

    def recurse(ctx: _context.Context, f: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run ``f``'s own body under ``ctx``, its calls overdubbed; ``fallback`` if it has none."""
        # On the C hot path an overload of ctx's own entry (the common case) puts that
        # entry back for the call (_speedups.unpop) instead of pushing a new one.
        run = _unpop(ctx, f)
        if run is None:
            return _recurse(ctx, f, *args, **kwargs)
        try:
            return run(*args, **kwargs) if kwargs else run(*args)  # (no dict handed on when empty)
        finally:
            _repop()


RECURSE_CODES: frozenset[CodeType] = frozenset({_recurse.__code__, recurse.__code__})  # (primitives skips their frames)


def canrecurse(ctx: _context.Context, f: Any, /, *args: Any, **kwargs: Any) -> bool:
    """Does ``recurse(ctx, f, *args)`` run a Python body (rather than ``fallback``)?"""
    plan = _plan.plan_for(_context.checked(ctx, "canrecurse"))
    plain = args if ctx.tag is None else tagging.for_primitive(f, args, kwargs)[0]  # as ``without_body`` sees them
    return (runnable(plan, f) or operators.body(f, plain)) is not None


canoverdub = canrecurse


def without_body(entry: _context.Entry, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``recurse`` into a callee ``runnable`` found no Python body for (``entry`` is the top
    of the stack): an operator's protocol through Python dunders, else ``fallback``."""
    plain, plain_kwargs = (args, kwargs) if entry.ctx.tag is None else tagging.for_primitive(f, args, kwargs)
    run = operators.body(f, plain)
    if run is not None:
        return run(*plain, **plain_kwargs)
    if entry.plan.fallback:
        method = fallback.resolve((entry.ctx, f, *args))
        if method is not _default_fallback:
            return run_popped(entry, method, (entry.ctx, f, *args), kwargs)
    return call_primitive(f, plain, plain_kwargs)


def run_popped(entry: _context.Entry, method: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
    """Run an overload or hook with its own context popped off the stack, seen by the
    contexts below it (see ``callsite.seen_below``)."""
    below = entry.below
    token = _context.active.set(below)
    try:
        return method(*args, **kwargs) if below is None else callsite.seen_below(method, args, kwargs)
    finally:
        _context.active.reset(token)


# -- what "the callee's own body" is ---------------------------------------------------

def runnable(plan: _plan.Plan, f: Any) -> Callable[..., Any] | None:
    """A callable that runs ``f``'s own body with its calls overdubbed, or ``None``.

    Called with ``f``'s arguments.  ``None`` means ``f`` is a primitive: no Python body,
    or one outside the context's scope.  Twins and construction kinds are cached in the
    plan.
    """
    kind = type(f)
    if kind is FunctionType:
        return plan.twin(f)
    if kind is BuiltinFunctionType:  # C code (what _special_call would find out, dearer)
        return None
    if kind is MethodType:
        twin = runnable(plan, f.__func__)
        return None if twin is None else MethodType(twin, f.__self__)
    if kind is functools.partial:  # its body is one call: of f.func with the merged arguments
        return functools.partial(callsite.call, f.func, *f.args, **f.keywords)
    if isinstance(f, type):
        return _construction(plan, f)
    call_method = getattr(kind, "__call__", None)  # noqa: B004 -- the method itself, not a callable() test
    if type(call_method) is FunctionType and kind.__dict__.get("__call__") is call_method:
        # The common callable instance: a plain function on its class.  (mypy does not narrow
        # type(x) is T within an ``and``; a cast would cost a call here.)
        twin = plan.twin(call_method)  # type: ignore[arg-type]
        return None if twin is None else MethodType(twin, f)
    return _special_call(plan, f, kind)


def _special_call(plan: _plan.Plan, obj: object, kind: type) -> Callable[..., Any] | None:
    """``runnable`` for ``obj(...)`` when ``kind.__call__`` is inherited or not a plain
    function: a staticmethod, a classmethod, a partial, a builtin, or -- through the
    metaclass -- nothing at all (see :mod:`_special`)."""
    raw = _special.lookup(kind, "__call__")
    if type(raw) is FunctionType:
        twin = plan.twin(raw)
        return None if twin is None else MethodType(twin, obj)
    run = _special.bound(raw, obj, kind)
    return runnable(plan, run) if _special.recursible(run) else None


def _construction(plan: _plan.Plan, cls: type) -> Callable[..., Any] | None:
    how = plan.constructions.values.get(id(cls))
    if how is None:
        how = _how_to_construct(plan, cls)
        plan.constructions.set(cls, how)
        if how == "python":
            plan.constructors.set(cls, functools.partial(callsite.construct_by_ref, weakref.ref(cls)))
    if how == "metaclass":  # a metaclass with its own __call__
        return _special_call(plan, cls, type(cls))
    return plan.constructors.values.get(id(cls))  # "python": construct it; else None


def _how_to_construct(plan: _plan.Plan, cls: type[Any]) -> str:
    if not plan.recurses_into(cls):
        return "primitive"
    if _special.lookup(type(cls), "__call__") is not _TYPE_CALL:
        return "metaclass"
    init = _special.bound(_special.lookup(cls, "__init__"), None, cls)
    if init is None:
        return "primitive"  # an __init__ only the interpreter should bind (see _special)
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
    return construct(ref(), *args, **kwargs)  # type: ignore[arg-type]  # alive: it is being called


def construct(cls: type[Any], /, *args: Any, **kwargs: Any) -> Any:
    """``type.__call__`` with Python ``__new__`` and ``__init__`` as overdubbed calls."""
    new: Callable[..., Any] = cls.__new__  # as type.__call__ gets it: a staticmethod unwrapped, a classmethod bound
    if new is object.__new__:
        obj = new(cls)  # only Python __init__ takes the arguments (else we would not be here)
    elif type(new) is FunctionType or type(new) is MethodType:
        obj = callsite.resolve(new)(cls, *args, **kwargs)
    else:
        obj = new(cls, *args, **kwargs)
    kind = type(obj)
    if cls in kind.__mro__:  # a real subclass: type.__call__ ignores ABC registration
        raw = _special.lookup(kind, "__init__")
        if type(raw) is FunctionType:
            result = callsite.resolve(raw)(obj, *args, **kwargs)
        else:  # bound as type.__call__ binds it; kind.__init__ would unwrap a staticmethod
            init = _special.bound(raw, obj, kind)
            if init is None:
                init = raw.__get__(obj, kind)  # a descriptor of a subclass's own (cls's is known)
            result = (callsite.resolve(init) if _special.recursible(init) else init)(*args, **kwargs)
        if result is not None:
            raise TypeError(f"__init__() should return None, not '{type(result).__name__}'")
    return obj


# Last: callsite builds on this module (and this module's bodies call callsite.call).
from . import operators, tagging  # noqa: E402
from . import callsite  # noqa: E402  (a module reference: callsite may be the one importing us; and its
# functions are the C ones once it has loaded them)
from .primitives import call_primitive  # noqa: E402
