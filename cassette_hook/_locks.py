"""Reentrant locks that a ``with`` block takes and gives back whatever one interrupt does.

Up to CPython 3.13 a ``with lock:`` block over a C lock (``threading.RLock``) is safe from
an interrupt (a ``KeyboardInterrupt``, an exception a signal handler raises): one
instruction (``SETUP_WITH`` on 3.10, ``BEFORE_WITH`` on 3.11-3.13) calls the lock's
``__enter__`` and the block's protection starts at the next one, with no signal check
between; the lock's ``__exit__`` is C, and the check after it comes once it has released
the lock.

From 3.14 on, a ``with`` statement calls ``__enter__`` with an ordinary ``CALL``
(``LOAD_SPECIAL __enter__``, ``CALL 0``), and the block's protection (its exception
table's range) starts at the instruction after that ``CALL``.  When the callee is C, the
``CALL`` checks for signals after it returns, still inside the ``CALL`` and outside the
protection: a signal handler that raises there leaves the lock taken and the block's
``__exit__`` never called (docs/internals.md, "Interrupts").  Measured: a thread sending
``SIGUSR1`` to the main thread running ``with lock: pass`` over a ``threading.RLock``,
with a handler that raises, left the lock held after 198 of 951 interrupts on 3.14, and
after none on 3.13.

:func:`rlock` gives, from 3.14 on, an :class:`InterruptSafeRLock`: an RLock whose
``__enter__`` is Python, so that the ``with`` statement's ``CALL`` enters a Python frame
(called inline: no signal check as it returns) and the C acquisition's own signal check
falls inside that frame's ``try``, which gives back what it took.  Before 3.14 it gives a
plain ``threading.RLock``, safe there and a frame cheaper.

A lock's ``with`` block, and any ``try`` that puts state back, must also not hold a loop
whose back edge CPython 3.13 and 3.14 leave out of the exception table (a filtered
comprehension, ``any(genexp)`` on 3.14, a loop ending in an ``if``): an interrupt at that
back edge's signal check leaves the frame without ``__exit__`` or ``finally``.  Such a
loop lives in a function of its own, called from the block (docs/internals.md, "Loops
under a with block on 3.13 and 3.14"; ``tests/test_interrupts.py`` checks the package).
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import operator
import sys
import threading
from _thread import RLock as _CRLock

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Callable


class InterruptSafeRLock(_CRLock):  # type: ignore[misc]  # (final in typeshed; CPython lets it be subclassed)
    """A C reentrant lock (``threading.RLock``'s type) whose ``with`` block is left with
    the lock as it found it, even when an interrupt arrives as the block is entered.

    ``__exit__`` stays the C one: it releases before its own signal check.  ``__enter__``
    notes the thread's recursion count, then acquires inside a ``try``.  One interrupt, at
    any line, call or signal check of it, comes either before the acquisition (nothing
    taken: the count is unchanged, nothing is released), during it (a blocking acquisition
    that a signal handler interrupts takes nothing: the same), or after it, at the check
    that follows the C call (the count is one higher: the ``except`` gives that level
    back).  Comparing counts, not asking ``_is_owned()``, keeps a level the thread already
    held.  The ``except`` itself runs after the one interrupt.  What no Python ``__enter__``
    can close: a frame evaluator installed through PEP 523 (some debuggers) makes CPython
    call ``__enter__`` through C and check for signals as it returns, outside the block.
    """

    def __enter__(self) -> bool:  # type: ignore[override]  # (typeshed: ``acquire``; a ``with`` passes no arguments)
        count = self._recursion_count()  # type: ignore[attr-defined]  # (3.11+: this class is made on 3.14+)
        try:
            return self.acquire()
        except BaseException:
            if self._recursion_count() > count:  # type: ignore[attr-defined]
                self.release()
            raise


held_levels: Callable[[threading.RLock], int] = operator.methodcaller(
    "_recursion_count" if sys.version_info >= (3, 11) else "_is_owned")
"""How many levels of ``lock`` this thread holds: a C call, no Python frame.  (3.10's
RLock does not count, and its ``with`` needs no :func:`give_back`: whether it is held.)"""


def give_back(lock: threading.RLock, levels: int) -> None:
    """In the ``except BaseException:`` of a ``try`` around ``with lock:``: give back the
    level the ``with`` took if the exception came as it was entered (on 3.14, at the
    signal check after the C ``__enter__``, outside the block), ``levels`` being
    :data:`held_levels` before the ``try``.

    For a C lock that must be entered where a Python ``__enter__`` cannot run (the
    recursion budget's, released where the program's recursion is at its limit): the
    ``try`` is in the caller's own frame, so taking the lock adds no frame, and the
    ``except`` runs only after the one interrupt."""
    if held_levels(lock) > levels:
        lock.release()


def rlock() -> threading.RLock:
    """A reentrant lock for a ``with`` block of cassette_hook's own state, safe from one
    interrupt on every supported Python (see the module's docstring)."""
    return InterruptSafeRLock() if sys.version_info >= (3, 14) else threading.RLock()
