"""The recursion limit, raised while a context is active anywhere in the process.

An overdubbed call may run its callee's body a few frames deeper than the plain program
would, so the limit is raised while any context is active, and overdubbed code reads
and sets the limit the program set (see ``primitives``).  Kept apart from the stack that
acquires it (``_context``), because rewriting code (``plan``, the import hook) asks it
for headroom too.
"""

from __future__ import annotations

import contextlib
import sys
import threading

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Iterator


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
        self._lock = threading.RLock()  # reentrant: code run under ``headroom`` may push a context
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

    @contextlib.contextmanager
    def headroom(self, frames: int) -> Iterator[None]:
        """Allow ``frames`` more frames than the limit for a moment.

        For cassette_hook's own work that recurses (rewriting: the ``bytecode`` package)
        when it first meets a function deep in the program's recursion: there the work
        must not fail for want of stack the program never asked for.  The lock keeps
        ``acquire``/``release`` from saving or restoring the raised limit meanwhile.
        """
        with self._lock:
            limit = sys.getrecursionlimit()
            sys.setrecursionlimit(limit + frames)
            try:
                yield
            finally:
                sys.setrecursionlimit(limit)


recursion_budget = _RecursionBudget()
