"""The contextual generics -- ``overdub``, ``prehook``, ``posthook``, ``raisehook``,
``fallback``, ``execute`` -- and the registration of a context class's methods on them.

Defaults follow Cassette: hooks do nothing; ``execute`` says ``OverdubInstead``;
``overdub`` asks ``execute`` (Cassette 0.1) and otherwise recurses; ``fallback`` calls
the callee.  The last two run the callee, which is the runtime's business: ``callees``,
above this module, gives them as it loads.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import functools
from types import BuiltinMethodType, FunctionType, MethodType, ModuleType
from typing import Any, Callable

from . import context_stack, dispatch
from ._constant import Constant
from ._own import strip_traceback


class _OverdubInstead(Constant):
    """What ``execute`` returns to mean that the call is not a primitive and is overdubbed."""


OverdubInstead = _OverdubInstead()


class ContextGeneric(dispatch.Generic):
    """A generic called with a context first, then the callee (``posthook``: the call's
    result before it, ``raisehook``: its exception), whose registrations make the plans
    made before them stale (:data:`changes`; see :mod:`cassette_hook.runtime.plan`)."""

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
        if not isinstance(args[0], context_stack.Context):
            raise TypeError(context_stack.not_a_context(args[0], self.name))
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

        parameters = dispatch.parameters_of(func)
        for p in parameters:
            if p.kind == p.KEYWORD_ONLY and p.default is p.empty:
                raise TypeError(f"{where}: keyword-only parameter {p.name!r} has no default; the keyword "
                                f"arguments of a call take no part in dispatch, so a call without {p.name}= "
                                "would choose this method and fail: give it a default")
        first_pattern = method.pattern(0)  # None only for a method the arity check refused
        if first_pattern is not None and not first_pattern.can_hold(context_stack.Context):
            first = next(iter(parameters))
            annotation = inspect.formatannotation(first.annotation)
            raise TypeError(f"{where}: its first parameter {first.name!r} is annotated {annotation}, "
                            f"which is not a context type; it is called as {call} with a context first: "
                            "annotate it with a Context subclass, Ctx[M], or nothing")
        callee = method.pattern(len(leading) - 1)
        for bound in callee.named_objects() if callee is not None else ():
            receiver = _receiver_of(bound)
            if receiver is not None:
                on_receiver = _on_receiver(method, func, len(leading), callee, bound, receiver)
                if on_receiver is not None:
                    return on_receiver
                names = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
                raise TypeError(f"{where}: {_bound_method_advice(bound, receiver, names[len(leading) - 1:])}")
        return method.running(_leading_positional(func, len(leading)))

    def register(self, func: Any = None, /, **options: Any) -> Any:
        if func is None:
            return lambda fn: self.register(fn, **options)
        result = super().register(func, **options)
        _changed()
        return result

    def unregister(self, func: Any) -> None:
        super().unregister(func)
        _changed()


class OverdubGeneric(ContextGeneric):
    """``overdub``, whose call at the top level (``ch.overdub(ctx, f, ...)``) adds its own
    one frame above ``f`` and no other (docs/api.md, "Frames").

    As a generic it dispatches as the others do (call sites ask its dispatcher, in C or
    Python, directly).  Called, it does what its default does -- ``execute``, then
    ``recurse`` -- in this one frame: ``f``'s twin is called from here, where the default
    method and ``recurse`` would each be a frame of ours between the caller and ``f``.  An
    overload runs as at a call site, popped (ctx pushed and the stack's top set below it,
    so that its calls are seen by the contexts below): on the C path through the hot
    path's ``run_popped``, whose record lets the overload's ``recurse(ctx, f, ...)`` call
    ``f``'s twin with the overload's frame below it and none of ours.
    """

    runnable: Callable[[Any, Any], Any]
    """``callees.runnable``: what runs ``f``'s own body under a plan (given as it loads)."""
    without_body: Callable[..., Any]
    """``callees.without_body``: an operator's dunders or ``fallback``, for a callee with no body."""
    seen_below: Callable[..., Any]
    """``callees.seen_below``: an overload run as a call of the contexts below its own."""
    run_popped: Callable[..., Any] | None = None
    """The C hot path's ``run_popped(entry, method, *args, **kwargs)``, or None (pure Python)."""

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        try:
            method = self.resolve(args)  # (refuses a call without a context and a callee)
            ctx, f = args[0], args[1]
            default = method is self.default
            if default:
                if not callable(f):
                    return method(*args, **kwargs)  # the default's error
                out = execute(ctx, f, *args[2:], **kwargs)
                if out is not OverdubInstead:
                    return out
            top = context_stack.top()
            pushed = top is None or top.ctx is not ctx
            if pushed:
                context_stack.checked(ctx, "overdub")
            held = context_stack.active.get()
            # The push inside the try, and the pop as its last step, not in a ``finally``:
            # an interrupt anywhere pops, once (as in callees.recurse).
            try:
                entry = top if top is not None and not pushed else context_stack.push(ctx)
                if default:
                    run = self.runnable(entry.plan, f)  # recurse(ctx, f, ...), from this frame
                    out = run(*args[2:], **kwargs) if run is not None else self.without_body(entry, f, args[2:], kwargs)
                elif self.run_popped is not None:
                    out = self.run_popped(entry, method, *args, **kwargs)
                else:  # (callees.run_popped, from this frame: set inside, put back by value)
                    inside, below = context_stack.active.get(), entry.below
                    try:
                        context_stack.active.set(below)
                        out = method(*args, **kwargs) if below is None else self.seen_below(method, args, kwargs)
                        context_stack.active.set(inside)
                    except BaseException:
                        context_stack.active.set(inside)
                        raise
                del entry  # (no reference kept: the pop lets it go)
                if pushed:
                    context_stack.pop_if_pushed(ctx, held)
            except BaseException:
                if pushed:
                    context_stack.pop_if_pushed(ctx, held)
                raise
            return out if not default or ctx.tag is None else ctx.tag.leave(out)  # no wrapper outlives its context
        except BaseException as exc:  # (the caller's traceback: without this frame and ours below it)
            strip_traceback(exc)
            # A traceback the program keeps (``sys.last_exc``, a list of errors) keeps this
            # frame too, as the frames of the calls below it: not the stack's entries, which
            # would count as live for as long (``switch.active``).
            top = held = None
            entry = inside = below = None  # type: ignore[assignment]  # noqa: F841
            raise


changes = 0
"""How many overloads of the context generics have been registered or removed: a plan
made before the last change is stale."""


on_change: list[Callable[[], None]] = []
"""Called after each such change: ``runtime.plan`` stales the plans of active contexts
that call some callees directly, so that the change applies at their next call."""


def _changed() -> None:
    global changes
    changes += 1
    for callback in on_change:
        callback()


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
    receiver = getattr(obj, "__self__", None) if isinstance(obj, BuiltinMethodType) else None
    return None if receiver is None or isinstance(receiver, (type, ModuleType)) else receiver


def _on_receiver(method: Any, func: Any, leading: int, callee: Any, bound: Any, receiver: object) -> Any:
    """``Is[random.random]`` for the callee: "this function on this receiver" (docs/tutorial.md,
    mocking), or ``None`` where that reading is not given.

    A call presents a bound method unbound, its receiver first among the arguments
    (``random.random()`` as ``(Random.random, random._inst)``), so no call is the bound
    method itself.  But a bound method that a module holds as an attribute -- ``random``'s
    functions are its hidden ``Random`` instance's methods -- is what users know the
    function as, and what ``from random import random`` gives them.  So such a bound
    method, named alone, stands for its function and its receiver: the method is
    registered for the callee ``Is[function]`` followed by the argument ``Is[receiver]``,
    and runs the overload as written, with the bound method as the callee and without the
    receiver.  A bound method that is no module's attribute (``obj.method``, a new object
    at each access) is still refused, saying what to write."""
    import sys

    name = getattr(bound, "__name__", None)
    at = leading - 1
    if not (isinstance(callee, dispatch.Is) and len(callee.objects) == 1 and isinstance(name, str)
            and at < len(method.params)):
        return None
    if not any(getattr(module, "__dict__", {}).get(name) is bound for module in list(sys.modules.values())):
        return None
    if type(bound) is MethodType:
        function: object = bound.__func__
    else:
        function = next((unbound for klass in type(receiver).__mro__
                         if (unbound := klass.__dict__.get(name)) is not None and hasattr(unbound, "__get__")
                         and unbound.__get__(receiver, klass) == bound), None)
        if function is None:
            return None
    params = method.params
    method.params = (*params[:at], dispatch.Is(function), dispatch.Is(receiver), *params[at + 1:])
    method.required = max(method.required, at + 1) + 1
    run = _leading_positional(func, leading)

    def on_receiver(*args: Any, **kwargs: Any) -> Any:
        return run(*args[:at], bound, *args[at + 2:], **kwargs)

    return method.running(on_receiver)


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
overdub = OverdubGeneric("overdub", None, """``overdub(ctx, f, *args, **kwargs)``: run ``f(*args,
**kwargs)`` with every call inside it overdubbed by ``ctx``.  The call itself is not
hooked.  Overload it to replace what a call does inside a context; the default asks
``execute`` and otherwise calls ``recurse``.""")
fallback = ContextGeneric("fallback", None, """``fallback(ctx, f, *args, **kwargs)``: run a callee
that has no Python body to recurse into (a C function, or one outside the context's
scope).  By default it calls ``f``, with the context still active so that callbacks
from C (``sorted(key=...)``, ``map``) are overdubbed.""")
# (The defaults of ``overdub`` and ``fallback`` are ``callees``'s: see the module's docstring.)

HOOK_METHODS = {"prehook": prehook, "posthook": posthook, "raisehook": raisehook, "overdub": overdub,
                "fallback": fallback, "execute": execute}
"""The generics a context class's methods of the same name are registered on."""


def register_hook_methods(cls: type[context_stack.Context]) -> None:
    """Register the methods ``cls`` defines under the generics' names as their overloads
    for ``cls`` (``Context.__init_subclass__``)."""
    for name, generic in HOOK_METHODS.items():
        method = cls.__dict__.get(name)
        if method is not None:
            generic.register(method, self_type=cls)


context_stack.provide(register_hooks=register_hook_methods)
