"""The contextual generics -- ``overdub``, ``prehook``, ``posthook``, ``fallback``,
``execute`` -- their default methods, and ``recurse``.

Defaults follow Cassette: hooks do nothing; ``overdub`` asks ``execute`` (Cassette 0.1)
and otherwise recurses; ``recurse`` runs the callee's own body with its call sites
overdubbed, or hands a callee without a Python body to ``fallback``, which calls it.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
import sys
from types import BuiltinFunctionType, FrameType, FunctionType, MethodType
from typing import Any, Callable

from . import _context
from . import dispatch, plan as _plan


class _OverdubInstead:
    """What ``execute`` returns to mean "not a primitive: overdub the call"."""

    _instance: _OverdubInstead | None = None

    def __new__(cls) -> _OverdubInstead:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __call__(self) -> _OverdubInstead:  # Cassette spells it OverdubInstead()
        return self

    def __repr__(self) -> str:
        return "OverdubInstead"


OverdubInstead = _OverdubInstead()


class ContextGeneric(dispatch.Generic):
    """A generic whose registrations also reset the context plans (see :mod:`plan`)."""

    def register(self, func: Any = None, /, **options: Any) -> Any:
        if func is None:
            return lambda fn: self.register(fn, **options)
        result = super().register(func, **options)
        _plan.invalidate()
        return result

    def unregister(self, func: Any) -> None:
        super().unregister(func)
        _plan.invalidate()


def _no_hook(ctx: Any, *args: Any, **kwargs: Any) -> None:
    return None


def _default_execute(ctx: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
    return OverdubInstead


def _default_overdub(ctx: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
    out = execute(ctx, f, *args, **kwargs)
    if out is not OverdubInstead:
        return out
    return recurse(ctx, f, *args, **kwargs)


def _default_fallback(ctx: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
    return call_primitive(f, args, kwargs)


prehook = ContextGeneric("prehook", _no_hook, "Called before every overdubbed call: prehook(ctx, f, *args).")
posthook = ContextGeneric("posthook", _no_hook,
                          "Called after every overdubbed call that returned: posthook(ctx, out, f, *args).")
execute = ContextGeneric("execute", _default_execute,
                         "Cassette 0.1: return anything but OverdubInstead to make the call a primitive.")
overdub = ContextGeneric("overdub", _default_overdub, "Run f(*args) overdubbed by ctx: overdub(ctx, f, *args).")
fallback = ContextGeneric("fallback", _default_fallback,
                          "Run a callee that has no Python body to recurse into: by default, call it.")

DEFAULTS = {
    "prehook": _no_hook, "posthook": _no_hook, "execute": _default_execute,
    "overdub": _default_overdub, "fallback": _default_fallback,
}


def recurse(ctx: _context.Context, f: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``f``'s own body under ``ctx``, its calls overdubbed; ``fallback`` if it has none."""
    top = _context.active.get()
    if top is not None and top.ctx is ctx:
        return recurse_in(top, f, args, kwargs)
    entry = _context.push(ctx)
    try:
        return recurse_in(entry, f, args, kwargs)
    finally:
        _context.pop(ctx)


def canrecurse(ctx: _context.Context, f: Any, *args: Any, **kwargs: Any) -> bool:
    """Does ``recurse(ctx, f, *args)`` run a Python body (rather than ``fallback``)?"""
    return (_plan.plan_for(ctx).runnable(f) or operators.body(f, args)) is not None


canoverdub = canrecurse


def recurse_in(entry: _context.Entry, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``recurse`` with ``entry`` already the top of the stack."""
    run = entry.plan.runnable(f) or operators.body(f, args)
    if run is not None:
        return run(*args, **kwargs)
    if entry.plan.fallback:
        method = fallback.resolve((entry.ctx, f, *args))
        if method is not _default_fallback:
            return run_popped(entry, method, (entry.ctx, f, *args), kwargs)
    return call_primitive(f, args, kwargs)


def run_popped(entry: _context.Entry, method: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
    """Run an overload or hook with its own context popped off the stack."""
    token = _context.active.set(entry.below)
    try:
        return method(*args, **kwargs)
    finally:
        _context.active.reset(token)


# -- what "the callee's own body" is ---------------------------------------------------

def runnable(plan: _plan.Plan, f: Any) -> Callable[..., Any] | None:
    """A callable that runs ``f``'s own body with its calls overdubbed, or ``None``.

    Called with ``f``'s arguments.  ``None`` means ``f`` is a primitive: no Python body,
    or one outside the context's scope.  (``Plan.runnable`` caches this.)
    """
    kind = type(f)
    if kind is FunctionType:
        return plan.twin(f)
    if kind is MethodType:
        twin = runnable(plan, f.__func__)
        return None if twin is None else MethodType(twin, f.__self__)
    if kind is functools.partial:  # its body is one call: of f.func with the merged arguments
        return functools.partial(call, f.func, *f.args, **f.keywords)
    if isinstance(f, type):
        return _construction(plan, f)
    call_method = getattr(kind, "__call__", None)
    if type(call_method) is FunctionType:  # a callable instance of a Python class
        twin = plan.twin(call_method)
        return None if twin is None else MethodType(twin, f)
    return None


def _construction(plan: _plan.Plan, cls: type) -> Callable[..., Any] | None:
    how = plan.constructions.values.get(id(cls))
    if how is None:
        how = _how_to_construct(cls)
        plan.constructions.set(cls, how)
    if how == "metaclass":  # a metaclass with its own __call__
        twin = plan.twin(type(cls).__call__)  # type: ignore[arg-type]
        return None if twin is None else MethodType(twin, cls)
    return functools.partial(construct, cls) if how == "python" else None


def _how_to_construct(cls: type) -> str:
    meta_call = type(cls).__call__
    if type(meta_call) is FunctionType:
        return "metaclass"
    if meta_call is type.__call__ and (type(cls.__new__) is FunctionType or type(cls.__init__) is FunctionType):
        return "python"
    return "primitive"  # nothing Python-level happens in constructing it


def construct(cls: type, *args: Any, **kwargs: Any) -> Any:
    """``type.__call__`` with Python ``__new__`` and ``__init__`` as overdubbed calls."""
    new = cls.__new__
    if new is object.__new__:
        obj = new(cls)  # only Python __init__ takes the arguments (else we would not be here)
    elif type(new) is FunctionType:
        obj = resolve(new)(cls, *args, **kwargs)
    else:
        obj = new(cls, *args, **kwargs)
    if isinstance(obj, cls):
        init = type(obj).__init__
        result = (resolve(init) if type(init) is FunctionType else init)(obj, *args, **kwargs)
        if result is not None:
            raise TypeError(f"__init__() should return None, not '{type(result).__name__}'")
    return obj


# -- primitives: calling C code as the plain program would -----------------------------

def call_primitive(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call ``f`` as the plain program would, seen from the user's frame.

    Two kinds of builtins need care: the frame-sensitive ones (``locals()``, ``super()``,
    ``sys._getframe()`` ...), which must see the user's frame, not ours; and the
    higher-order ones (``map``, ``sorted(key=)`` ...), whose Python callbacks must be
    overdubbed too.
    """
    special = _SPECIAL.get(id(f))
    if special is None and type(f) is BuiltinFunctionType and f.__name__ in HIGHER_ORDER_NAMES:
        receiver = f.__self__  # a bound builtin method such as ``items.sort``?
        unbound = getattr(type(receiver), f.__name__, None)
        special = _SPECIAL.get(id(unbound))
        if special is not None:
            f, args = unbound, (receiver, *args)
    if special is not None:
        if special[0]:
            return special[1](user_frame(), args, kwargs)
        args, kwargs = special[1](args, kwargs)
    return f(*args, **kwargs)


def primitive(f: Any, /, *args: Any, **kwargs: Any) -> Any:
    return call_primitive(f, args, kwargs)


def primitive_callable(f: Any) -> Any:
    """What to call for a primitive ``f`` from the user's own frame: ``f`` itself, unless
    it takes callbacks that must be overdubbed."""
    if id(f) in _SPECIAL and not _SPECIAL[id(f)][0] or (
        type(f) is BuiltinFunctionType and f.__name__ in HIGHER_ORDER_NAMES
    ):
        return functools.partial(primitive, f)
    return f


def user_frame() -> FrameType:
    """The innermost frame that is not cassette_hook's own."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _is_own(frame):
        frame = frame.f_back
    assert frame is not None
    return frame


def _is_own(frame: FrameType) -> bool:
    name = frame.f_globals.get("__name__") or ""
    return name == "cassette_hook" or name.startswith("cassette_hook.")


def _locals_of(frame: FrameType) -> dict[str, Any]:
    found = frame.f_locals
    return found if type(found) is dict else dict(found)  # 3.13: a snapshot, as locals() gives


def _frame_locals(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _locals_of(frame) if not args and not kwargs else locals(*args, **kwargs)


def _frame_globals(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return frame.f_globals if not args and not kwargs else globals(*args, **kwargs)


def _frame_vars(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _locals_of(frame) if not args and not kwargs else vars(*args, **kwargs)


def _frame_dir(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return sorted(_locals_of(frame)) if not args and not kwargs else dir(*args, **kwargs)


def _namespaced(run: Callable[..., Any]) -> Callable[[FrameType, tuple[Any, ...], dict[str, Any]], Any]:
    """``eval``/``exec`` with the user's namespaces filled in where the call left them out."""

    def with_frame(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if len(args) == 1 and "globals" not in kwargs and "locals" not in kwargs:
            args = (args[0], frame.f_globals, _locals_of(frame))
        return run(*args, **kwargs)

    return with_frame


def _frame_super(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if args or kwargs:
        return super(*args, **kwargs)
    code = frame.f_code
    names = _locals_of(frame)
    if code.co_argcount == 0:
        raise RuntimeError("super(): no arguments")
    if "__class__" not in code.co_freevars:
        raise RuntimeError("super(): __class__ cell not found")
    return super(names["__class__"], names[code.co_varnames[0]])


def _outer_frame(frame: FrameType, depth: int) -> FrameType:
    """``depth`` user frames above ``frame``, not counting cassette_hook's own frames."""
    for _ in range(depth):
        up = frame.f_back
        while up is not None and _is_own(up):
            up = up.f_back
        if up is None:
            raise ValueError("call stack is not deep enough")
        frame = up
    return frame


def _frame_getframe(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _outer_frame(frame, operator.index(args[0]) if args else 0) if not kwargs else sys._getframe(*args, **kwargs)


FRAME_SENSITIVE: dict[Any, Callable[[FrameType, tuple[Any, ...], dict[str, Any]], Any]] = {
    locals: _frame_locals, globals: _frame_globals, vars: _frame_vars, dir: _frame_dir,
    eval: _namespaced(eval), exec: _namespaced(exec), super: _frame_super,
    sys._getframe: _frame_getframe,
}
if sys.version_info >= (3, 12):
    def _frame_modulename(frame: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        depth = kwargs.get("depth", args[0] if args else 0)
        return _outer_frame(frame, depth).f_globals.get("__name__")

    FRAME_SENSITIVE[sys._getframemodulename] = _frame_modulename


def _overdubbed(callback: Any) -> Any:
    """``callback`` as a call site: C code calling it back is overdubbed like a call would be."""
    if type(callback) in (FunctionType, MethodType, functools.partial):
        return functools.partial(call, callback)
    return callback


def _wrap_positional(*positions: int, keyword: str | None = None, nargs: int = 0) -> Callable[..., Any]:
    """Overdub the callbacks at these positions (only in calls with ``nargs`` or more)."""

    def wrap(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if len(args) >= nargs and any(p < len(args) for p in positions):
            args = tuple(_overdubbed(a) if i in positions else a for i, a in enumerate(args))
        if keyword is not None and keyword in kwargs:
            kwargs = {**kwargs, keyword: _overdubbed(kwargs[keyword])}
        return args, kwargs

    return wrap


_HIGHER_ORDER: dict[Any, Callable[..., Any]] = {
    map: _wrap_positional(0), filter: _wrap_positional(0), functools.reduce: _wrap_positional(0),
    sorted: _wrap_positional(keyword="key"), min: _wrap_positional(keyword="key"),
    max: _wrap_positional(keyword="key"), list.sort: _wrap_positional(keyword="key"),
    functools.cmp_to_key: _wrap_positional(0),
    iter: _wrap_positional(0, nargs=2),  # iter(callable, sentinel)
    itertools.starmap: _wrap_positional(0), itertools.takewhile: _wrap_positional(0),
    itertools.dropwhile: _wrap_positional(0), itertools.filterfalse: _wrap_positional(0),
    itertools.groupby: _wrap_positional(1, keyword="key"),
    itertools.accumulate: _wrap_positional(1, keyword="func"),
    re.Pattern.sub: _wrap_positional(1), re.Pattern.subn: _wrap_positional(1),
}
HIGHER_ORDER_NAMES = frozenset(f.__name__ for f in _HIGHER_ORDER)

# Keyed by id: these builtins live as long as the interpreter, and an id lookup works for
# any callee, hashable or not.  The flag says whether the handler wants the user's frame.
_SPECIAL: dict[int, tuple[bool, Callable[..., Any]]] = {
    **{id(f): (True, handler) for f, handler in FRAME_SENSITIVE.items()},
    **{id(f): (False, wrap) for f, wrap in _HIGHER_ORDER.items()},
}

# Last: callsite builds on this module (and this module's bodies call callsite.call).
from . import operators  # noqa: E402
from .callsite import call, resolve  # noqa: E402
