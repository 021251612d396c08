"""The runtime side of the import hook's mode switch (see ``importhook.dual_code``).

Code the import hook loaded first reads one builtin, ``__cassette_hook_active__``: true
while any context is active anywhere in the process.  It is kept true while any
:class:`~cassette_hook.context_stack.Entry` of the active stack lives, not just while a
``with`` block is open: an asyncio task or a copied ``contextvars.Context`` may hold an
entry after the block that pushed it has ended, and must still see its context.  Only
then does the code ask :func:`enter` whether *this* thread or task has a context whose
scope covers the module -- so a thread with no context runs the plain body even while
another thread runs under one.

At interpreter shutdown CPython restores the builtins from a copy it took at startup,
dropping these names, while finalizers, weakref callbacks and generators being closed
may still run switched code: :func:`_at_shutdown` gives them what they read.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import atexit
import builtins
import functools
import weakref
from types import FunctionType, ModuleType

from .._locks import rlock
from .. import context_stack, _native
from .._own import strip_traceback
from ..rewrite import _names

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Any, Callable

_lock = rlock()  # re-entrant: an activity watcher may push a context
# The live entries, and those whose context counts operators as calls: weak references
# that a C callback drops as each entry dies (``set.discard``; on the C path
# ``_speedups.entry_gone``, which also turns off a flag whose set it empties).  No Python
# code runs as an entry dies, so no interrupt can cut the bookkeeping short or be
# swallowed there: the sets are always exact.  A flag is on before an entry that needs it
# is used; it is off once its set is empty: at once on the C path, at the next
# :func:`settle` on the pure-Python one (after each pop, and at the next call of switched
# code that finds no context: ``enter``).
_live: set[weakref.ref[context_stack.Entry]] = set()
_live_operators: set[weakref.ref[context_stack.Entry]] = set()
_busy = False  # have the activity watchers been told ``busy()`` last?
_activity_watchers: list[tuple[Callable[[], None], Callable[[], None]]] = []
setattr(builtins, _names.ACTIVE, False)
setattr(builtins, _names.TWIN, False)  # (true in the mirror of the builtins a twin reads: ``plan``)
# Switched code's operator sites run only while this is true: while some context that
# counts operators lives.  Otherwise each operator runs as compiled, and a context that
# does not count them (``null``, most observers of calls) pays a builtin's load and a
# jump per operator.
setattr(builtins, _names.OPERATORS_ON, False)
_native.runtime.watch_live(_live, _live_operators, builtins, _names.ACTIVE, _names.OPERATORS_ON)
_gone = _native.runtime.accelerated("entry_gone", _live.discard)
_gone_operator = _native.runtime.accelerated("entry_gone", _live_operators.discard)


def watch_activity(busy: Callable[[], None], idle: Callable[[], None]) -> None:
    """Call ``busy()`` as the process goes from no live entry to one (before that entry's
    context runs anything) and ``idle()`` once its last live entry has gone (at the next
    :func:`settle`): under this module's lock, so that the two alternate whatever the
    threads do.  An interrupt in ``busy()`` has it called again at the next entry."""
    _activity_watchers.append((busy, idle))


def entry_made(entry: context_stack.Entry) -> None:
    """An entry is about to be pushed: followed, then the flags on.  (An interrupt
    between the two leaves a flag off for an entry that is never pushed.)"""
    global _busy
    with _lock:
        if _busy and not _live:  # the last entry went since the last settle (at a collection, say)
            settle()  # (so that idle() and busy() alternate)
        if not _busy:
            for busy, _ in _activity_watchers:
                busy()
            _busy = True
        if entry.plan.operators:
            _live_operators.add(weakref.ref(entry, _gone_operator))
            setattr(builtins, _names.OPERATORS_ON, True)
        _live.add(weakref.ref(entry, _gone))
        setattr(builtins, _names.ACTIVE, True)


def active() -> bool:
    """Is a context active anywhere in the process (does an entry live)?"""
    return bool(_live)


def settle() -> None:
    """Turn off the flags that no live entry needs, and tell the activity watchers when
    the last live entry has gone."""
    global _busy
    with _lock:
        if not _live_operators:
            setattr(builtins, _names.OPERATORS_ON, False)
        if not _live:
            setattr(builtins, _names.ACTIVE, False)
            if _busy:
                _busy = False
                for _, idle in _activity_watchers:
                    idle()


_switched_namespaces: weakref.WeakSet[ModuleType | FunctionType] = weakref.WeakSet()  # see keep_at_shutdown
_top: Callable[[], context_stack.Entry | None]


def _follow(variable: Any, top: Callable[[], context_stack.Entry | None]) -> None:
    """Keep the stack's reader at hand, as a global (see ``context_stack.follow``)."""
    global _top
    _top = top


context_stack.follow(_follow)


def entry_retired(entry: context_stack.Entry) -> None:
    """A whole-program entry that its stack's variable no longer holds (though the old
    variable may keep it alive: ``context_stack._retire``) is live no more."""
    with _lock:
        _forget(entry)


def _forget(entry: context_stack.Entry) -> None:
    for live in (_live, _live_operators):
        for ref in [ref for ref in live if ref() is entry]:
            live.discard(ref)


context_stack.watch_entries(entry_made, settle, entry_retired)


def enter(module: str) -> bool:
    """Should a switched body of ``module`` run rewritten here and now?  (The pure-Python
    path's; the C path's is ``_speedups.runs_here``.)"""
    entry = _top()
    if entry is None:
        if not _live:  # the last live entry went since the last pop (a task's, a copied context's)
            settle()
        return False
    return entry.plan.runs_module(module)


def install_builtins() -> None:
    """Put the hooks switched code loads by name among the builtins (idempotent: called
    as each module is switched, it makes the hooks once, then only checks that each is
    there -- making them, a ``functools.partial`` an operator, was most of a call)."""
    global _hooks
    if _hooks is None:
        _hooks = _made_hooks()
    for name, value in _hooks:
        if getattr(builtins, name, None) is None:
            setattr(builtins, name, value)


_hooks: list[tuple[str, Any]] | None = None  # (made at the first install_builtins)


def _made_hooks() -> list[tuple[str, Any]]:
    """The hooks switched code loads by name among the builtins, and their names."""
    from .. import _native
    from ..runtime import callsites

    hooks, runtime = _names.HOOKS, _native.runtime
    observe = runtime.accelerated("operator_call", _operator_call)  # C: no frame of ours
    names: dict[object, Any] = {  # the hooks' names are GlobalName strings
        **{_names.operator_name(op): functools.partial(observe, op) for op in _names.OPERATORS},
        _names.ENTER: runtime.accelerated("runs_here", enter),  # (asked at every call)
        hooks.resolve: callsites.resolve,
        hooks.resolve_star: callsites.resolve_star,
        hooks.call: callsites.call,
        hooks.call_ex: callsites.call_ex,
        hooks.yield_from: callsites.HOOKS.yield_from,
        **({} if runtime.method_of is None else {_names.METHOD: runtime.method_of}),
    }
    # An exact str: one key of a str subclass would turn the builtins dict into a general
    # dict, and CPython stops specializing every builtin lookup.
    return [(str(name), value) for name, value in names.items()]


def _operator_call(op: Any, /, *args: Any) -> Any:
    """An operator in switched code: a call site if the context counts operators as calls."""
    __tracebackhide__ = True
    try:
        entry = _top()
        if entry is None or not entry.plan.operators:
            return op(*args)
        from ..runtime.callsites import call

        return call(op, *args)
    except BaseException as exc:  # (the program's traceback: without this frame and ours below it)
        strip_traceback(exc)
        raise


def keep_at_shutdown(owner: ModuleType | FunctionType) -> None:
    """Remember a module about to run switched code (or a function given switched code
    by ``instrument``), so that :func:`_at_shutdown` reaches its globals."""
    _switched_namespaces.add(owner)


def _hook_names() -> list[str]:
    hooks = _names.HOOKS
    return [str(name) for name in (_names.ENTER, hooks.resolve, hooks.resolve_star, hooks.call, hooks.call_ex,
                                   hooks.yield_from, _names.METHOD,
                                   *(_names.operator_name(op) for op in _names.OPERATORS))]


def _at_shutdown() -> None:
    """Keep switched code working through interpreter teardown.

    Registered when cassette_hook is imported, so it runs after the atexit handlers
    registered later (the program's, the contexts' reports).  From here on no context is
    active in this thread, and every namespace switched code runs in gets a false
    ``__cassette_hook_active__`` and the hooks, in its globals, which ``LOAD_GLOBAL``
    reads before the builtins: once CPython has put back its startup copy of the
    builtins, a ``__del__``, a weakref callback or a finalizer still takes the plain
    body, and a generator suspended in the rewritten body still finds its hooks.  (When
    CPython then clears a module's globals to ``None``, the flag stays false.)
    """
    context_stack.close()
    names: dict[str, Any] = {str(name): getattr(builtins, name) for name in _hook_names() if hasattr(builtins, name)}
    names[_names.ACTIVE] = names[_names.OPERATORS_ON] = False
    for owner in list(_switched_namespaces):
        namespace = owner.__globals__ if isinstance(owner, FunctionType) else vars(owner)
        namespace.update(names)


atexit.register(_at_shutdown)
