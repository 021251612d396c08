"""The hot path: what every rewritten call site runs.

``call(f, *args, **kwargs)`` replaces ``f(*args, **kwargs)`` in rewritten code.  It reads
the top of the active context stack once.  With no context it just calls ``f``.  With a
context whose plan is *fast* (it overloads nothing, so there is nothing to observe) a
Python function or method goes straight to its cached twin: one dict lookup and a call,
no allocation.  Everything else -- hooks, dispatch, primitives -- is in :func:`site`,
off the hot path.
"""

from __future__ import annotations

import functools
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any

from . import _context, generics, rewrite

_active_get = _context.active.get


def call(f: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run ``f(*args, **kwargs)`` as the innermost active context sees it."""
    __tracebackhide__ = True  # pytest: show the user's frames, not this one
    entry = _active_get()
    if entry is not None:
        plan = entry.plan
        if plan.fast:
            kind = type(f)
            if kind is FunctionType:
                twin = plan.twins.values.get(id(f))
                if twin is not None:
                    return twin(*args, **kwargs)
            elif kind is MethodType:
                twin = plan.twins.values.get(id(f.__func__))
                if twin is not None:
                    return twin(f.__self__, *args, **kwargs)
        return site(entry, f, args, kwargs)
    if type(f) is BuiltinFunctionType:  # may be frame-sensitive: locals(), super() ...
        return generics.call_primitive(f, args, kwargs)
    return f(*args, **kwargs)


def call_ex(f: Any, args: Any, kwargs: Any = None, /) -> Any:
    """A star call ``f(*args, **kwargs)``: unpacked here, with the plain call's errors."""
    __tracebackhide__ = True
    if type(args) is not tuple and not _iterable(args) or kwargs is not None and not hasattr(kwargs, "keys"):
        return f(*args, **kwargs or {})  # raises the plain call's error, naming f
    return call(f, *args) if kwargs is None else call(f, *args, **kwargs)


def _iterable(obj: object) -> bool:
    try:
        iter(obj)  # type: ignore[call-overload]
    except TypeError:
        return False
    return True


def operator_site(op: Any) -> Any:
    """The callable an operator site loads: ``site(a, b)`` is ``call(op, a, b)``."""
    return _operator_sites.setdefault(op, functools.partial(call, op))


_operator_sites: dict[Any, Any] = {}
HOOKS = rewrite.Hooks(call=call, call_ex=call_ex, operator_site=operator_site)


def site(entry: _context.Entry, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """An overdubbed call: prehook, overdub (by default, recurse), posthook."""
    __tracebackhide__ = True
    plan = entry.plan
    if plan.fast:
        return generics.recurse_in(entry, f, args, kwargs)
    ctx = entry.ctx
    f, args = present(f, args)
    if plan.prehook:
        generics.run_popped(entry, generics.prehook, (ctx, f, *args), kwargs)
    if plan.overdub:
        method = generics.overdub.resolve((ctx, f, *args))
        if method is generics.DEFAULTS["overdub"]:
            out = _execute_or_recurse(entry, f, args, kwargs)
        else:
            out = generics.run_popped(entry, method, (ctx, f, *args), kwargs)
    else:
        out = _execute_or_recurse(entry, f, args, kwargs)
    if plan.posthook:
        generics.run_popped(entry, generics.posthook, (ctx, out, f, *args), kwargs)
    return out


def _execute_or_recurse(entry: _context.Entry, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if entry.plan.execute:
        method = generics.execute.resolve((entry.ctx, f, *args))
        if method is not generics.DEFAULTS["execute"]:
            out = generics.run_popped(entry, method, (entry.ctx, f, *args), kwargs)
            if out is not generics.OverdubInstead:
                return out
    found = generics.body(entry.plan, f, args)
    if found is None:  # no Python body: fallback
        return generics.recurse_in(entry, f, args, kwargs)
    run, args = found  # called from here, not from recurse_in: one frame less per level
    return run(*args, **kwargs)


def present(f: Any, args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """How hooks see a call: a method call ``obj.m(a)`` as ``(type(obj).m, obj, a)``."""
    kind = type(f)
    if kind is MethodType:
        return f.__func__, (f.__self__, *args)
    if kind is BuiltinFunctionType:
        receiver = f.__self__
        if receiver is not None and not isinstance(receiver, ModuleType):
            unbound = getattr(type(receiver), f.__name__, None)
            if unbound is not None and not isinstance(receiver, type):
                return unbound, (receiver, *args)
    return f, args
