"""Contexts active for a whole process: the command line's, and ``install_from_env``'s.

They are whole-program contexts (``_context.push_whole_program``): active in every
thread of the process, from its first call, and never deactivated.  Their reports are
written by an ``atexit`` handler, which runs after the program's other threads have
finished (so their work is in the report; a daemon thread still running then is
reported as far as it got) and also after ``sys.exit`` or an uncaught exception.

A forked child keeps them, with what they gathered before the fork (it may be inside
calls they are watching), and writes reports of its own: file names with ``{pid}`` get
the child's id when written, other names become ``name.<pid>.ext``
(``ReportingContext.separate``).  It writes them when it ends, also when
``multiprocessing`` ends it with ``os._exit``, which skips ``atexit``.

A process that ``install_from_env`` instrumented without being asked by a person --
every Python process a ``sitecustomize`` reaches, ``multiprocessing``'s resource tracker
and forkserver included -- writes no report for a context that observed nothing.
"""

from __future__ import annotations

import atexit
import os
import sys

from . import _context, _debug, _specs, _unmatched, importhook

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Iterable, Mapping

INCLUDE, EXCLUDE, CONTEXT, OUTPUT, SEPARATE = (
    "CASSETTE_HOOK_INCLUDE", "CASSETTE_HOOK_EXCLUDE", "CASSETTE_HOOK_CONTEXT", "CASSETTE_HOOK_OUTPUT",
    "CASSETTE_HOOK_SEPARATE")
DEBUG, EAGER = "CASSETTE_HOOK_DEBUG", "CASSETTE_HOOK_EAGER"

_active: list[_context.Context] = []
_reports_if_empty = True  # False in processes install_from_env instrumented
_writes_at_multiprocessing_exit = False


def activate(contexts: Iterable[_context.Context]) -> None:
    """Activate ``contexts`` (the last one innermost) in every thread for the rest of the
    process."""
    contexts = list(contexts)
    if not _active:
        atexit.register(write_reports)
        os.register_at_fork(after_in_child=_forked)
    _context.push_whole_program(contexts)
    _active.extend(contexts)


def _forked() -> None:
    """In a forked child: its reports go to files of its own, written when it ends."""
    global _writes_at_multiprocessing_exit
    separate(_active)
    util = sys.modules.get("multiprocessing.util")
    if util is not None and not _writes_at_multiprocessing_exit:  # (the registration is inherited)
        # multiprocessing clears the finalizers a child inherits, then runs these
        util.register_after_fork(_forked, _write_at_multiprocessing_exit)
        _writes_at_multiprocessing_exit = True


def _write_at_multiprocessing_exit(_: object) -> None:
    """In a child ``multiprocessing`` forked: write the reports before it ends with ``os._exit``."""
    from multiprocessing import util

    util.Finalize(None, write_reports, exitpriority=-100)


def contexts() -> list[_context.Context]:
    """The process-wide contexts, outermost first."""
    return list(_active)


def write_reports() -> None:
    """Have each process-wide context that reports write its report, once."""
    while _active:
        ctx = _active.pop()
        if _reports_if_empty or not _observed_nothing(ctx):
            write_report(ctx)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def separate(contexts: Iterable[_context.Context]) -> None:
    """Send the reports of ``contexts`` to files of this process's own (``name.<pid>.ext``)."""
    for ctx in contexts:
        rename = getattr(ctx, "separate", None)
        if rename is not None:
            rename()


def _observed_nothing(ctx: _context.Context) -> bool:
    observed_nothing = getattr(ctx, "observed_nothing", None)
    return observed_nothing is not None and observed_nothing()


def write_report(ctx: _context.Context) -> None:
    """Have ``ctx`` write its report if it makes one; a failure is printed, not raised,
    so that one broken report does not hide the others."""
    write = getattr(ctx, "write_report", None)
    if write is None:
        return
    try:
        write()
    except Exception as exc:
        print(f"cassette_hook: {type(ctx).__name__} could not write its report: {type(exc).__name__}: {exc}",
              file=sys.stderr)


def split(value: str | None, separator: str = ",") -> list[str]:
    return [part.strip() for part in (value or "").split(separator) if part.strip()]


def install_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Instrument this process as the environment says; for a ``sitecustomize.py``.

    ``CASSETTE_HOOK_INCLUDE`` and ``CASSETTE_HOOK_EXCLUDE`` hold comma-separated module
    patterns for :func:`~cassette_hook.install`; ``CASSETTE_HOOK_CONTEXT`` holds context
    specs as for ``--context``, separated by ``;`` (a spec's own options use commas), made
    active for the whole process, their reports going to ``CASSETTE_HOOK_OUTPUT`` (where
    ``{pid}`` stands for the id of the process writing the report: a forked child's own).
    ``CASSETTE_HOOK_DEBUG`` holds ``--debug`` categories; a non-empty ``CASSETTE_HOOK_EAGER``
    installs the hook with ``lazy=False``.  A context that observed nothing
    writes no report.  Returns whether anything was installed.  A bad spec raises
    ``SpecError``, naming it and what is available; a report file that cannot be written
    raises ``ReportPathError`` naming the variable that gave it, before anything is
    installed.  An include pattern that matched no imported module is named on stderr at
    exit, except in the children of ``--subprocesses`` (which are given the patterns of
    the whole tree).

    Under ``python -E`` or ``-I`` the environment is not read, as CPython reads none of
    its ``PYTHON*`` variables then: nothing is installed (a mapping given as ``environ``
    is read all the same: it is an argument, not the environment).
    """
    global _reports_if_empty
    if environ is None:
        if sys.flags.ignore_environment:  # (-I sets it too)
            return False
        environ = os.environ
    _debug.enable(split(environ.get(DEBUG)))
    include, exclude = split(environ.get(INCLUDE)), split(environ.get(EXCLUDE))
    specs = split(environ.get(CONTEXT), ";")
    output = environ.get(OUTPUT) or None
    try:
        contexts = [_specs.make(spec, output) for spec in specs]
    except Exception as exc:
        from .contexts import ReportPathError  # (a context raised it: imported by now)

        if not isinstance(exc, ReportPathError):
            raise
        raise ReportPathError(_specs.describe_error(exc, CONTEXT, OUTPUT), exc.option) from None
    if environ.get(SEPARATE):  # a child of ``--subprocesses``: keep off the parent's files
        separate(contexts)
    if include:
        if not environ.get(SEPARATE):
            _unmatched.warn_at_exit(include, INCLUDE)
        importhook.install(include, exclude, lazy=not environ.get(EAGER))
    _reports_if_empty = False
    activate(contexts)
    return bool(include or contexts)
