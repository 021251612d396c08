"""A thread started by ``Thread.start`` run as a primitive, with its ``run`` and
``threading.excepthook`` called as call sites.

Where a plan runs ``threading`` as a primitive (the trace: ``libraries = False``), the
new thread's ``_bootstrap_inner`` calls ``self.run()`` and, if it raises,
``self._invoke_excepthook(self)``, whose ``invoke_excepthook`` calls the hook it reads
from ``threading``'s globals: plain code, so a ``Thread`` subclass's own ``run`` and the
program's ``threading.excepthook`` would run unseen.  Nothing is handed over that a
call site could be made of: ``run`` is read off the thread in the new thread, after
``start`` has returned, and the hook off the module at the call.  Putting a call site in
the instance or the module would show it to the program (``vars(thread)``,
``thread.run``, ``threading.excepthook is hook``).

So the thread runs *copies* of ``Thread.start``, ``_bootstrap`` and ``_bootstrap_inner``
(made once, with the ``bytecode`` package), which differ from the originals in one
thing: where the original reads ``self._bootstrap``, ``self._bootstrap_inner``,
``self.run`` or ``self._invoke_excepthook``, the copy reads that attribute off a
:class:`_Receiver` of the thread (a constant of the copy's code, one per thread), which
reads it off the thread -- at the same moment, through the same lookup, the program's
``__getattribute__`` included -- and gives back the next copy, ``run`` as a call site,
or the standard ``invoke_excepthook`` with the program's hook as a call site.  A class's
own ``_bootstrap`` or ``_bootstrap_inner`` is given back as a call site (its
``super()._bootstrap()`` is a call site of ``threading``'s, which the primitive runs from
the copy again: ``primitives._thread_code``); anything else (a ``run`` set on the
instance that is not a Python callback) as read.  A ``threading.Timer``'s ``run`` is
copied too, reading its public ``function`` off the receiver, which gives it back as a
call site: the timer's ``run`` is the standard library's, and the function only ever
reaches it through that read.  The copies keep the originals' names, file and
line numbers, and their locals: the thread's frames and tracebacks read as plain.  What
differs is only what introspection of ``threading``'s own frames would find: their
``f_code`` is not ``Thread._bootstrap_inner.__code__``, and ``invoke_excepthook``'s
``f_globals`` is a copy of ``threading``'s (docs/internals.md, "Callbacks from C").
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import threading
from types import CodeType, FunctionType, MethodType
from typing import Any, Callable

from . import receivers

Handed = Callable[[Any], Any]  # a Python callback -> a call site of it (primitives._kept)

# What each copy (a method of threading's, by qualified name) reads off the receiver
# rather than off the thread.
_SWAPPED = {"Thread.start": ("_bootstrap",), "Thread._bootstrap": ("_bootstrap_inner",),
            "Thread._bootstrap_inner": ("run", "_invoke_excepthook"), "Timer.run": ("function",)}


def _original(qualname: str) -> FunctionType:
    """``threading``'s own method of that qualified name (``"Thread.start"``)."""
    kind, name = qualname.split(".")
    return vars(vars(threading)[kind])[name]  # type: ignore[no-any-return]


def _swapped_code(func: FunctionType, names: tuple[str, ...]) -> CodeType | None:
    """``func``'s code with each ``self.<name>`` of ``names`` read off the receiver
    (``receivers``); None where the code is not of the shape expected (each name read
    once, right after ``self`` is loaded), which leaves the thread to run plain."""
    code, found = receivers.swapped_code(func.__code__, names)
    return code if all(count == 1 for count in found.values()) else None


_copies: dict[str, CodeType] | None = None  # the copies' code, made at the first thread started here


def _codes() -> dict[str, CodeType]:
    global _copies
    if _copies is None:
        try:
            made = {name: _swapped_code(_original(name), names) for name, names in _SWAPPED.items()}
        except (RecursionError, MemoryError):
            return {}  # (this thread starts plain; the copies are tried again at the next)
        except Exception:  # a threading or bytecode the copies cannot be made of: threads start plain
            made = {"Thread.start": None}
        _copies = {name: code for name, code in made.items() if code is not None}
        if len(_copies) != len(made):
            _copies = {}
    return _copies


def _bound(name: str, thread: Any, receiver: _Receiver) -> MethodType:
    """The copy of ``threading.<name>`` (a qualified name) bound to ``thread``, reading ``receiver``."""
    code = receivers.with_receiver(_codes()[name], receiver)
    original = _original(name)
    func = FunctionType(code, original.__globals__, original.__name__, original.__defaults__)
    func.__qualname__ = original.__qualname__
    return MethodType(func, thread)


def _invoke_excepthook_code() -> CodeType | None:
    """The code of the ``invoke_excepthook`` that ``threading._make_invoke_excepthook`` makes."""
    make = getattr(threading, "_make_invoke_excepthook", None)
    consts = getattr(getattr(make, "__code__", None), "co_consts", ())
    return next((c for c in consts if isinstance(c, CodeType) and c.co_name == "invoke_excepthook"), None)


_INVOKE_EXCEPTHOOK = _invoke_excepthook_code()


class _Receiver:
    """What the copies read four of the thread's attributes off: each read off the thread
    as the original would, and given back as the copies need it."""

    __slots__ = ("_thread", "_handed")

    def __init__(self, thread: Any, handed: Handed) -> None:
        self._thread, self._handed = thread, handed

    def _own(self, name: str) -> Any:
        """The thread's ``_bootstrap`` or ``_bootstrap_inner``: threading's own as the next
        copy, a class's own (the program's) as a call site."""
        value = getattr(self._thread, name)  # (as ``self.<name>``: the program's lookup, if any)
        if type(value) is MethodType and value.__self__ is self._thread \
                and value.__func__ is vars(threading.Thread)[name]:
            return _bound(f"Thread.{name}", self._thread, self)
        return self._handed(value)

    @property
    def _bootstrap(self) -> Any:
        return self._own("_bootstrap")

    @property
    def _bootstrap_inner(self) -> Any:
        return self._own("_bootstrap_inner")

    @property
    def run(self) -> Any:
        run = self._thread.run
        if type(run) is MethodType and run.__func__ is threading.Thread.run:
            return run  # (its target is made a call site by the caller: primitives._thread_start)
        return self._handed(run)

    @property
    def function(self) -> Any:
        return self._handed(self._thread.function)  # (a Timer's: what its run calls)

    @property
    def _invoke_excepthook(self) -> Any:
        invoke = self._thread._invoke_excepthook
        hook = vars(threading).get("excepthook")
        handed = self._handed(hook)
        if type(invoke) is not FunctionType or invoke.__code__ is not _INVOKE_EXCEPTHOOK or handed is hook:
            return invoke
        namespace = {**invoke.__globals__, "excepthook": handed}  # (it reads the hook, and sets no global)
        return FunctionType(invoke.__code__, namespace, invoke.__name__, invoke.__defaults__, invoke.__closure__)


def seeing(name: str, thread: Any, handed: Handed) -> Callable[[], None] | None:
    """``thread.<method>``, where ``name`` is the method's qualified name in ``threading``
    (``"Thread.start"``, ``"Thread._bootstrap"``, ``"Thread._bootstrap_inner"``,
    ``"Timer.run"``): its code, bound, with what it calls of the thread's -- and so the
    new thread's ``run`` and ``threading.excepthook``, a timer's function -- handed over
    as call sites (by ``handed``); None where the copies cannot be made on this CPython."""
    if not _codes():
        return None
    return _bound(name, thread, _Receiver(thread, handed))
