"""What is cassette_hook's own code: one rule, by module name and by file.

cassette_hook never rewrites, recurses into or instruments its own code: rewritten code
calls into it, which must not call back into rewritten code of its own.  And where it
stands in for the program (a frame-sensitive builtin evaluated against the caller's
frame, the command line printing an uncaught exception, an annotation resolved in the
registering function's namespace) it skips its own frames to find the program's.  Both
ask this module: a module is ours if it is the package or in it (``cassette_hook_x`` is
not), a frame or code object is ours if its file is in the package's directory (which
counts ``python -m cassette_hook``'s ``__main__``, whose module name is not ours).
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import os
import sys

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from types import FrameType, TracebackType
    from typing import Callable

PACKAGE = __name__.partition(".")[0]
RUNS_ON = ("bytecode", "importlib_metadata", "zipp", "lazy_importer")
"""The packages cassette_hook's own code calls while a context is active (to rewrite, to
read entry points): never instrumented, as its own code is not."""
DIRECTORY = os.path.dirname(os.path.abspath(__file__)) + os.sep
"""The package's directory: a file in it is ours."""


def is_own_module(name: str) -> bool:
    """Is the module named ``name`` cassette_hook or one of its modules?"""
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def is_own_file(filename: str) -> bool:
    """Is ``filename`` (a code object's ``co_filename``) one of cassette_hook's files?"""
    return filename.startswith(DIRECTORY)


def is_own_frame(frame: FrameType) -> bool:
    """Does ``frame`` run cassette_hook's own code?"""
    return frame.f_code.co_filename.startswith(DIRECTORY)


def strip_traceback(exc: BaseException) -> None:
    """Take cassette_hook's entries off the head of ``exc``'s traceback: what an entry point
    of ours does as an exception leaves it for the program (docs/internals.md, "Tracebacks
    are the program's").

    Called in the handler of a function of ours that code other than ours calls (a call
    site, C code calling back), re-raising with a bare ``raise``: the entries of that
    frame and of ours below it, up to the first of the program's, go, and the frame the
    exception goes on to adds its own entry above what is left, as when the program makes
    the call plainly.  Entries further in were taken off by the entry points there (each
    does its own part), so only the head is walked: an exception that unwinds a deep
    recursion costs a step per level, not a walk of the whole chain per level.  Where it
    cannot (no room left on the stack for its calls), the traceback stays as it is: the
    exception goes on, which is what matters.
    """
    try:  # (the loop in a function of its own: see _locks)
        head = exc.__traceback__
        tb = _past_own(head)
        if tb is not head:
            if _HANDLED_APART:
                _handled_traceback()(exc, tb)
            exc.__traceback__ = tb
    except Exception:  # (at the recursion limit, where 3.10 counts C calls too) the traceback stays
        pass


def _past_own(tb: TracebackType | None) -> TracebackType | None:
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(DIRECTORY):
        tb = tb.tb_next
    return tb


# 3.10 keeps the handled exception's traceback apart from ``__traceback__``, and a bare
# ``raise`` re-raises with that one: it is set too (3.11 on read it off the exception).
_HANDLED_APART = sys.version_info < (3, 11)
_set_handled: Callable[[BaseException, TracebackType | None], None] | None = None


def _handled_traceback() -> Callable[[BaseException, TracebackType | None], None]:
    """What makes ``tb`` the traceback of ``exc``, the exception being handled (3.10): the C
    accelerator's ``handled_traceback``, else ``PyErr_SetExcInfo`` through ``ctypes`` (the
    pure-Python path), else nothing (no ``ctypes``: the entry point's own entry stays)."""
    global _set_handled
    if _set_handled is None:
        from . import _native

        _set_handled = _native.runtime.accelerated("handled_traceback", _through_ctypes)
    return _set_handled


def _through_ctypes(exc: BaseException, tb: TracebackType | None) -> None:
    """The pure-Python path's ``handled_traceback``: ``ctypes`` imported at its first call."""
    global _set_handled
    _set_handled = _ctypes_handled_traceback()
    _set_handled(exc, tb)


def _ctypes_handled_traceback() -> Callable[[BaseException, TracebackType | None], None]:
    try:
        import ctypes
    except ImportError:  # (an interpreter built without it)
        return lambda exc, tb: None
    api = ctypes.pythonapi
    put, incref = api.PyErr_SetExcInfo, api.Py_IncRef
    put.argtypes = (ctypes.py_object, ctypes.py_object, ctypes.c_void_p)  # (a traceback, or NULL for None)
    put.restype = None
    incref.argtypes = (ctypes.py_object,)

    def handled_traceback(exc: BaseException, tb: TracebackType | None) -> None:
        for obj in (type(exc), exc) if tb is None else (type(exc), exc, tb):
            incref(obj)  # PyErr_SetExcInfo takes (steals) a reference to each
        put(type(exc), exc, None if tb is None else id(tb))

    return handled_traceback
