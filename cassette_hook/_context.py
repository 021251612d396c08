"""Contexts and the active context stack.

The stack lives in a ``ContextVar`` so that each thread and each asyncio task has its own
(tasks inherit the stack active where they were created).  Its top is an :class:`Entry`:
the context, the :class:`~cassette_hook.plan.Plan` its class runs with, and the entry below.
Rewritten call sites read the top once per call, so the entry carries everything the hot
path needs without further lookups.
"""

from __future__ import annotations

import sys
import threading
from contextvars import ContextVar
from typing import Any, ClassVar, Sequence

from . import dispatch

HOOK_METHODS = ("prehook", "posthook", "overdub", "fallback", "execute")


class Entry:
    """One level of the active context stack.

    ``fast_twins`` is the plan's table of twins when the plan is fast (nothing to observe),
    else ``None``: the one attribute the hot path reads for the common case.
    """

    __slots__ = ("ctx", "plan", "below", "fast_twins")

    def __init__(self, ctx: Context, below: Entry | None) -> None:
        from .plan import plan_for

        self.ctx = ctx
        self.plan = plan = plan_for(ctx)
        self.below = below
        self.fast_twins = plan.twins.values if plan.fast else None
        _switch.entry_made(plan.operators)

    def __del__(self) -> None:
        try:
            operators = self.plan.operators
        except AttributeError:  # __init__ failed before the entry was counted
            return
        _switch.entry_gone(operators)


active: ContextVar[Entry | None] = ContextVar("cassette_hook.active", default=None)

from . import _switch  # noqa: E402  (it reads ``active``)


class Context:
    """An execution context: subclass it, give it overloads, and run code inside it.

    Class-level options (override in a subclass):

    - ``operators``: operators (``a + b``, ``a[i]``, ...) are call sites, seen as calls to
      the matching ``operator`` function.
    - ``include`` / ``exclude``: module-name patterns (prefixes like ``"pkg"`` or globs like
      ``"pkg.*.io"``) bounding recursion.  Functions outside are still seen by hooks but run
      as primitives, so the calls they make are not seen.

    Methods named ``prehook``, ``posthook``, ``overdub``, ``fallback`` or ``execute`` defined
    on a subclass are registered as overloads of the generic of that name for the subclass
    (their annotations, if any, constrain the other arguments).
    """

    operators: ClassVar[bool] = True
    include: ClassVar[Sequence[str] | None] = None
    exclude: ClassVar[Sequence[str]] = ()

    def __init__(self, metadata: Any = None, pass_: Any = None) -> None:
        _no_passes_yet(pass_)
        self.metadata = metadata
        self.pass_ = pass_
        self.tag: Any = None
        self.hooks_enabled = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        from . import generics

        for name in HOOK_METHODS:
            method = cls.__dict__.get(name)
            if method is not None:
                getattr(generics, name).register(method, self_type=cls)

    def __class_getitem__(cls, metadata_type: Any) -> dispatch.Parametric:
        """``Ctx[M]``: an annotation matching a ``Ctx`` whose metadata is an ``M``."""
        return dispatch.Parametric(cls, "metadata", metadata_type)

    def __enter__(self) -> Context:
        push(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        pop(self)

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(metadata={getattr(self, 'metadata', None)!r})"


def context(name: str, *, operators: bool = True, include: Sequence[str] | None = None,
            exclude: Sequence[str] = ()) -> type[Context]:
    """Make a new ``Context`` subclass named ``name`` (Cassette's ``@context``)."""
    if not name.isidentifier():
        raise ValueError(f"context name must be an identifier, not {name!r}")
    namespace = {"operators": operators, "include": include, "exclude": tuple(exclude)}
    cls = type(name, (Context,), namespace)
    cls.__module__ = sys._getframe(1).f_globals.get("__name__", __name__)
    return cls


def current_context() -> Context | None:
    """The innermost active context of this thread or task, or ``None``."""
    entry = active.get()
    return None if entry is None else entry.ctx


def _copy(ctx: Context, **changes: Any) -> Context:
    new = object.__new__(type(ctx))
    new.__dict__.update(ctx.__dict__)
    new.__dict__.update(changes)
    return new


_UNSET: Any = object()


def similarcontext(ctx: Context, *, metadata: Any = _UNSET, pass_: Any = _UNSET) -> Context:
    """A copy of ``ctx`` with new metadata and/or pass; the tag and hooks switch are kept."""
    _check(ctx, "similarcontext")
    changes = {}
    if metadata is not _UNSET:
        changes["metadata"] = metadata
    if pass_ is not _UNSET:
        _no_passes_yet(pass_)
        changes["pass_"] = pass_
    return _copy(ctx, **changes)


def disablehooks(ctx: Context) -> Context:
    """A copy of ``ctx`` whose prehooks and posthooks are not called."""
    _check(ctx, "disablehooks")
    return _copy(ctx, hooks_enabled=False)


def _no_passes_yet(pass_: Any) -> None:
    # The contract's passes (``ch.Pass``) come in a later version; a pass given now must
    # not be silently ignored.
    if pass_ is not None:
        raise NotImplementedError("cassette_hook: compiler passes (pass_=...) are not implemented in this version")


def _check(ctx: object, what: str) -> None:
    if not isinstance(ctx, Context):
        raise TypeError(f"{what}() takes a cassette_hook Context, not {type(ctx).__name__}")


# -- the stack -------------------------------------------------------------------------

def push(ctx: Context) -> Entry:
    """Make ``ctx`` the innermost active context."""
    _check(ctx, "activating")
    below = active.get()
    entry = Entry(ctx, below)
    if below is None:
        recursion_budget.acquire()
    active.set(entry)
    return entry


def pop(ctx: Context) -> None:
    """Deactivate ``ctx``, which must be the innermost active context."""
    entry = active.get()
    if entry is None or entry.ctx is not ctx:
        current = None if entry is None else entry.ctx
        raise RuntimeError(f"cannot deactivate {ctx!r}: the innermost active context is {current!r}")
    active.set(entry.below)
    if entry.below is None:
        recursion_budget.release()


class _RecursionBudget:
    """Raise the recursion limit while any context is active anywhere in the process.

    An overdubbed call runs the callee's body up to five frames deeper than the plain
    program would (the call-site closure with hooks; with an ``overdub`` overload that
    recurses, the overload and ``recurse`` too), so a program that recursed close to the
    limit plain would fail under a context.  The raise is invisible to overdubbed code
    (see ``primitives``).
    """

    FACTOR = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 0

    def acquire(self) -> None:
        with self._lock:
            if self._users == 0:
                self._saved = sys.getrecursionlimit()
                sys.setrecursionlimit(self._saved * self.FACTOR)
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                sys.setrecursionlimit(self._saved)

    def limit(self) -> int:
        """The recursion limit as the program set it (what overdubbed code reads)."""
        with self._lock:
            return self._saved if self._users else sys.getrecursionlimit()

    def set_limit(self, limit: int) -> None:
        """Set the program's limit; while raised, the real one stays FACTOR times higher."""
        with self._lock:
            if self._users:
                sys.setrecursionlimit(limit * self.FACTOR)  # validates limit as the builtin does
                self._saved = limit
            else:
                sys.setrecursionlimit(limit)


recursion_budget = _RecursionBudget()
