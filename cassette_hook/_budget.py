"""The recursion limit, raised while a context is active anywhere in the process.

An overdubbed call may run its callee's body a few frames deeper than the plain program
would, so the limit is raised while any context is active, and overdubbed code reads
and sets the limit the program set (see ``primitives``).  Kept apart from the stack that
acquires it (``context_stack``), because rewriting code (``plan``, the import hook) asks it
for headroom too.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import sys
import threading

from . import _native
from ._locks import give_back, held_levels

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from types import FrameType

    from .context_stack import Entry


# The deepest recursion limit (in frames) at which a recursion without end under a
# context still ends in RecursionError, not in a crash, on the main thread's 8 MiB stack,
# measured for each Python with the contexts that cost the most C stack per frame (an
# ``overdub`` overload calling ``recurse``, a counting prehook, the null context, on
# both hot paths: docs/internals.md), and taken at about 4/5 of it, for the stack the program
# already uses.  3.10 and 3.11 run Python calls made from C on the C stack and check
# nothing; from 3.12 on CPython's own C recursion limit raises RecursionError first.
# (The pure-Python path's frames cost less C stack on 3.10: a ceiling of its own, 18,500,
# about 9/10 of its shallowest crash, 20,091, for its five frames a level under an overload.)
CEILINGS: dict[tuple[int, int], int] = {(3, 10): 15_500, (3, 11): 33_000}
PURE_CEILINGS: dict[tuple[int, int], int] = {(3, 10): 18_500, (3, 11): 33_000}


class _RecursionBudget:
    """Raise the recursion limit while any context is active anywhere in the process.

    An overdubbed call runs the callee's body up to five frames deeper than the plain
    program would (the call-site closure with hooks; with an ``overdub`` overload that
    recurses, the overload and ``recurse`` too), so a program that recursed close to the
    limit plain would fail under a context.  The raise is invisible to overdubbed code
    (see ``primitives``).
    """

    FACTOR = 8
    CEILING: int | None = {"C": CEILINGS, "Python": PURE_CEILINGS}[_native.runtime.name].get(sys.version_info[:2])
    """The most the limit is raised to (``None``: no ceiling): past it, the program's own
    recursion under a context would overflow the C stack before Python's limit stopped
    it (docs/internals.md, "The recursion-limit budget")."""

    def __init__(self) -> None:
        # Reentrant: code run under ``headroom`` may push a context.  A C lock, not
        # ``_locks.rlock``'s: ``release`` may run where the program's recursion is at its
        # limit, where ``rlock``'s Python ``__enter__`` (3.14+) would raise RecursionError
        # and leave the raise held.  So each ``with`` over it sits in a ``try`` of its
        # method's own frame whose ``except`` gives back what an interrupt as the ``with``
        # is entered left taken (``_locks.give_back``).
        self._lock = threading.RLock()
        self._users = 0
        self._saved = 0

    def acquire(self, entry: Entry) -> None:
        """Raise the limit for ``entry`` (the bottom of a stack), which records that it holds
        the raise (``entry.raises_limit``) in the same step as the count: an interrupt in here
        leaves either nothing done or both, and :meth:`release` undoes exactly what was done."""
        levels = held_levels(self._lock)
        try:
            with self._lock:
                if self._users == 0:
                    self._saved = sys.getrecursionlimit()
                    # One line, the call last: no signal check or line event between the three.
                    self._users = 1; entry.raises_limit = True; sys.setrecursionlimit(self._raised(self._saved))  # noqa: E702
                else:
                    self._users += 1; entry.raises_limit = True  # noqa: E702
        except BaseException:
            give_back(self._lock, levels)
            raise

    def release(self, entry: Entry) -> None:
        """Give back ``entry``'s raise, if it holds one (so it may be called again, and for an
        entry whose :meth:`acquire` an interrupt cut short)."""
        levels = held_levels(self._lock)
        try:
            with self._lock:
                if entry.raises_limit and self._users == 1:
                    # As in acquire: the count, the record and the limit in one step.
                    self._users = 0; entry.raises_limit = False; sys.setrecursionlimit(self._saved)  # noqa: E702
                elif entry.raises_limit:
                    self._users -= 1; entry.raises_limit = False  # noqa: E702
        except BaseException:
            give_back(self._lock, levels)
            raise

    def _raised(self, limit: int) -> int:
        """The real limit while a context is active, for the program's ``limit``: FACTOR
        times it, but not past the ceiling, even where the program's own limit is higher
        (there the C stack would overflow first under a context), nor below the present
        depth (which setrecursionlimit refuses)."""
        raised = limit * self.FACTOR
        if self.CEILING is None or type(limit) is not int or raised <= self.CEILING:
            return raised  # (not an int: setrecursionlimit's own error)
        depth, frame = 0, sys._getframe()
        frames: FrameType | None = frame
        while frames is not None:
            depth, frames = depth + 1, frames.f_back
        return max(self.CEILING, depth + 50)

    def limit(self) -> int:
        """The recursion limit as the program set it (what overdubbed code reads)."""
        levels = held_levels(self._lock)
        try:
            with self._lock:
                return self._saved if self._users else sys.getrecursionlimit()
        except BaseException:
            give_back(self._lock, levels)
            raise

    def set_limit(self, limit: int) -> None:
        """Set the program's limit; while raised, the real one stays higher (``_raised``)."""
        levels = held_levels(self._lock)
        try:
            with self._lock:
                if self._users:
                    sys.setrecursionlimit(self._raised(limit)); self._saved = limit  # noqa: E702  # (validates limit as the builtin does)
                else:
                    sys.setrecursionlimit(limit)
        except BaseException:
            give_back(self._lock, levels)
            raise

    def headroom(self, frames: int) -> _Headroom:
        """Allow ``frames`` more frames than the limit for a moment (``with``).

        For cassette_hook's own work that recurses (rewriting: the ``bytecode`` package)
        when it first meets a function deep in the program's recursion: there the work
        must not fail for want of stack the program never asked for.  The lock keeps
        ``acquire``/``release`` from saving or restoring the raised limit meanwhile.
        """
        return _Headroom(self._lock, frames)


class _Headroom:
    """:meth:`_RecursionBudget.headroom`'s ``with``: a class, not a
    ``contextlib.contextmanager``, whose Python code would look ``next`` and ``getattr``
    up in the program's builtins (``_builtins``)."""

    __slots__ = ("_frames", "_limit", "_lock")

    def __init__(self, lock: threading.RLock, frames: int) -> None:
        self._lock = lock
        self._frames = frames
        self._limit = 0

    def __enter__(self) -> None:
        levels = held_levels(self._lock)
        try:
            self._lock.acquire()
            limit = self._limit = sys.getrecursionlimit()
            try:  # (an interrupt just after the raise still restores the limit)
                sys.setrecursionlimit(limit + self._frames)
            except BaseException:
                sys.setrecursionlimit(limit)
                raise
        except BaseException:
            give_back(self._lock, levels)
            raise

    def __exit__(self, *exc_info: object) -> None:
        try:
            sys.setrecursionlimit(self._limit)
        finally:
            self._lock.release()


recursion_budget = _RecursionBudget()
