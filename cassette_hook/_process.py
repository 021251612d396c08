"""Contexts active for a whole process: the command line's, and ``install_from_env``'s.

They are whole-program contexts (``context_stack.push_whole_program``): active in every
thread of the process, from its first call, and never deactivated.  Their reports are
written by an ``atexit`` handler, which runs after the program's other threads have
finished (so their work is in the report; a daemon thread still running then is
reported as far as it got) and also after ``sys.exit`` or an uncaught exception.

A forked child keeps them, and writes reports of its own, of what it did itself:
file names with ``{pid}`` get the child's id when written, other names become
``name.<pid>.ext`` (``ReportingContext.separate``, where a context also starts its
records afresh).  It writes them however it ends: at exit (``atexit``), and, since a
child often ends without running ``atexit``, also in ``os._exit`` and before an
``os.exec*`` (which the child's ``os`` module gets wrappers for: ``_patch_exits``).

A process with reporting contexts also writes them when SIGTERM ends it
(``multiprocessing``'s ``terminate()``, a service manager): unless the program has a
handler of its own, cassette_hook's writes the reports, then ends the process by
SIGTERM as the default action would (``_catch_sigterm``).  Nothing can be written on
SIGKILL.

A process that ``install_from_env`` instrumented without being asked by a person --
every Python process a ``sitecustomize`` reaches, ``multiprocessing``'s resource tracker
and forkserver included -- writes no report for a context that observed nothing.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import atexit
import os
import sys

from . import context_stack, _debug, _specs
from .importhook import unmatched, finder

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Any, Iterable, Mapping, NoReturn

INCLUDE, EXCLUDE, CONTEXT, OUTPUT, SEPARATE = (
    "CASSETTE_HOOK_INCLUDE", "CASSETTE_HOOK_EXCLUDE", "CASSETTE_HOOK_CONTEXT", "CASSETTE_HOOK_OUTPUT",
    "CASSETTE_HOOK_SEPARATE")
DEBUG, EAGER = "CASSETTE_HOOK_DEBUG", "CASSETTE_HOOK_EAGER"

_active: list[context_stack.Context] = []
_reports_if_empty = True  # False in processes install_from_env instrumented


def activate(contexts: Iterable[context_stack.Context]) -> None:
    """Activate ``contexts`` (the last one innermost) in every thread for the rest of the
    process."""
    contexts = list(contexts)
    if not _active:
        atexit.register(write_reports)
        os.register_at_fork(after_in_child=_forked)
    context_stack.push_whole_program(contexts)
    _active.extend(contexts)
    if any(hasattr(ctx, "write_report") for ctx in _active):
        _catch_sigterm()
    _instrument_mp_main()


# What the ``-c`` code of a child ``multiprocessing`` starts holds (3.14's forkserver's
# code starts with ``import sys; `` before it).
_MULTIPROCESSING_CHILDREN = ("from multiprocessing.spawn import", "from multiprocessing.forkserver import")


def _instrument_mp_main() -> None:
    """In a child that ``multiprocessing`` started with *spawn*, or in its forkserver:
    the program's main script is run again there as ``__mp_main__`` (where a pool's
    ``work`` is found), by ``runpy.run_path``, which compiles it without the import hook.
    Have it instrumented, as the command line has ``__main__``, when the patterns take
    in its file: ``multiprocessing.spawn._fixup_main_from_path`` gets a wrapper that
    instruments the module it made (``importhook.instrument``)."""
    argv = getattr(sys, "orig_argv", [])
    code = argv[argv.index("-c") + 1] if "-c" in argv[:-1] else ""
    if not any(marker in code for marker in _MULTIPROCESSING_CHILDREN) or finder.installed() is None:
        return
    from multiprocessing import spawn

    from functools import partial

    from .runtime import hotpath

    fixup = spawn._fixup_main_from_path  # type: ignore[attr-defined]  # (private: not in typeshed)
    # The wrapper is ours, so neither traced nor shown: in a spawn child, whose
    # ``prepare`` calls it from overdubbed code, the call it stands in for is made as a
    # call site; a forkserver calls it from its own loop, which observes nothing.
    call = partial(hotpath.call, fixup) if "from multiprocessing.spawn import" in code else fixup

    def _fixup_main_from_path(main_path: str) -> None:
        call(main_path)
        main, patterns = sys.modules.get("__mp_main__"), finder.installed()
        if main is not None and patterns is not None and patterns.matches("__mp_main__", os.path.abspath(main_path)):
            finder.instrument(main)

    spawn._fixup_main_from_path = _wrapper(_fixup_main_from_path, fixup)  # type: ignore[attr-defined]
    _enter_as_a_call_site(code)


def _enter_as_a_call_site(code: str) -> None:
    """Have the child's entry into ``multiprocessing`` called as a call site, so that the
    child runs overdubbed from there on, as a *fork* child does (it goes on in the
    overdubbed call that forked it): the worker loop's calls of the program's functions
    (a pool's ``work``) are then calls the contexts see.  The ``-c`` code that makes the
    call is ``python``'s, compiled without the hook: in a *spawn* child it calls
    ``spawn.spawn_main``, which gets a ``partial`` of ``hotpath.call``; a forkserver
    calls ``forkserver._serve_one`` in each child it forks, which gets one (the
    forkserver's own loop runs as compiled, and it observes nothing of its own)."""
    from functools import partial

    from .runtime import hotpath

    if "from multiprocessing.spawn import" in code:
        from multiprocessing import spawn

        spawn.spawn_main = partial(hotpath.call, spawn.spawn_main)
    elif "from multiprocessing.forkserver import" in code:
        from multiprocessing import forkserver

        serve_one = forkserver._serve_one  # type: ignore[attr-defined]  # (private: not in typeshed)
        forkserver._serve_one = partial(hotpath.call, serve_one)  # type: ignore[attr-defined]


def _forked() -> None:
    """In a forked child: its reports go to files of its own, of what it does itself, and
    are written however it ends (see the module's docstring)."""
    global _ending, _terminated
    _ending = _terminated = False
    separate(_active)
    if any(hasattr(ctx, "write_report") for ctx in _active):
        _patch_exits()
        _catch_sigterm()  # (the parent's handler, if it had one, is inherited)


def _write_at_end() -> None:
    """Write the reports as the process ends without ``atexit``.  (The program's streams
    are not flushed, as they are not plain: a forked child's copy of its parent's
    buffered output would be printed twice.)"""
    global _ending
    _ending = True
    _write_all()


def _write_all() -> None:
    """Write the reports of the contexts that report, once: the process is ending, so the
    calls still running in this thread will never return (``process_ending``)."""
    while _active:
        ctx = _active.pop()
        if _reports_if_empty or not _observed_nothing(ctx):
            ending = getattr(ctx, "process_ending", None)
            if ending is not None:
                ending()
            write_report(ctx)


_ending = False  # the reports are being written as the process ends
_terminated = False  # SIGTERM came meanwhile: the process ends by it once they are written
_repeated = False  # SIGTERM is delivered again until the process ends (cli._sigterm.arm)


def _patch_exits() -> None:
    """Give ``os`` wrappers of ``_exit``, ``execv`` and ``execve`` (which the other
    ``exec*`` functions call) that write the reports first, as coverage.py's ``[run]
    patch = _exit, execv`` does: a forked child -- ``multiprocessing``'s, a prefork
    server's -- usually ends with ``os._exit``, which skips ``atexit``.  Once the reports
    are written the wrappers only call through.  Made once per process (a grandchild
    inherits them)."""
    if hasattr(os._exit, "__cassette_hook_wraps__"):
        return
    exit_ = os._exit

    def _exit(*args: Any, **kwargs: Any) -> NoReturn:
        _write_at_end()
        exit_(*args, **kwargs)

    os._exit = _wrapper(_exit, exit_)
    depth = [0]  # execvp and co. try execv on each directory of PATH: write once
    for name in ("execv", "execve", "_execvpe"):
        original = getattr(os, name, None)
        if original is not None:
            setattr(os, name, _wrapper(_writing_before_exec(original, depth), original))


def _writing_before_exec(original: Any, depth: list[int]) -> Any:
    """``original`` (an ``exec*`` function), writing the reports before the outermost call.
    The contexts stay active: if the exec fails, the process goes on and writes them
    again at its end."""

    def exec_(*args: Any, **kwargs: Any) -> Any:
        if not depth[0]:
            for ctx in list(_active):
                if _reports_if_empty or not _observed_nothing(ctx):
                    write_report(ctx)
        depth[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            depth[0] -= 1

    return exec_


def _wrapper(wrapper: Any, original: Any) -> Any:
    """``wrapper`` dressed as ``original`` (its name, docstring, ``__wrapped__``).  Its
    ``__module__`` stays ours: a context decides by it whether to trace a function's
    calls, and never traces ours (docs/contexts.md)."""
    for attribute in ("__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attribute, getattr(original, attribute))
        except (AttributeError, TypeError):
            pass
    wrapper.__wrapped__ = wrapper.__cassette_hook_wraps__ = original
    return wrapper


def _catch_sigterm() -> None:
    """Write the reports when SIGTERM ends the process, if the program has no handler of
    its own for it (its own handler, set before or after, takes over: the reports are
    written if it ends the program through ``sys.exit`` or, in a forked child,
    ``os._exit``).  Only the main thread can set a handler: from another one
    (``install_from_env`` called in a thread), nothing is set.  ``_sigterm`` delivers
    the signal again until the handler has run (a Python handler runs only when the main
    thread checks for signals, which a thread that blocked just after the signal came
    never does: see ``_sigterm.c``).  That also lets the handler put off writing when
    the signal interrupted a context mid-update (the trace writing a line): it writes at
    a later delivery, from a whole state (``_on_sigterm``)."""
    import signal

    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # not the main thread
        return
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:  # (set here or inherited: a forked child's timer)
        try:  # (not an accelerator: no Python version of it, so loaded on the pure path too)
            from .cli import _sigterm
        except ImportError:  # not built: a signal that comes as the main thread blocks may be lost
            return
        global _repeated
        _repeated = _sigterm.arm()


def _on_sigterm(signum: int, frame: object) -> None:
    """Write the reports, then end by SIGTERM, as the default action would have.  Called
    again while they are written (``_sigterm`` repeats the signal), or while ``atexit``
    writes them, it lets the writing finish."""
    global _terminated
    if _ending:
        _terminated = True
        return
    if _repeated and any(_updating_here(ctx) for ctx in _active):
        return  # (the signal interrupted this thread mid-update: it comes again in 100 ms)
    _write_at_end()
    _die_of_sigterm()


def _updating_here(ctx: context_stack.Context) -> bool:
    updating_here = getattr(ctx, "updating_here", None)
    return updating_here is not None and updating_here()


def _die_of_sigterm() -> NoReturn:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
    os._exit(128 + signal.SIGTERM)  # (not reached)


def contexts() -> list[context_stack.Context]:
    """The process-wide contexts, outermost first."""
    return list(_active)


def write_reports() -> None:
    """Have each process-wide context that reports write its report, once; at exit."""
    global _ending
    _ending = True
    _write_all()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    if _terminated:
        _die_of_sigterm()


def separate(contexts: Iterable[context_stack.Context]) -> None:
    """Send the reports of ``contexts`` to files of this process's own (``name.<pid>.ext``)."""
    for ctx in contexts:
        rename = getattr(ctx, "separate", None)
        if rename is not None:
            rename()


def _observed_nothing(ctx: context_stack.Context) -> bool:
    observed_nothing = getattr(ctx, "observed_nothing", None)
    return observed_nothing is not None and observed_nothing()


def write_report(ctx: context_stack.Context) -> None:
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


def reports_only_if_observed() -> None:
    """Write no report for a context that observed nothing, as in any process
    ``install_from_env`` instruments (a child of ``--subprocesses`` whose script the
    command line's way runs: ``cli.reexec.exec_script_child``)."""
    global _reports_if_empty
    _reports_if_empty = False


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
        contexts = _specs.make_all(specs, output)
    except Exception as exc:
        from .contexts import ReportPathError  # (a context raised it: imported by now)

        if not isinstance(exc, ReportPathError):
            raise
        raise ReportPathError(_specs.describe_error(exc, CONTEXT, OUTPUT), exc.option) from None
    if environ.get(SEPARATE):  # a child of ``--subprocesses``: keep off the parent's files
        separate(contexts)
    if include:
        if not environ.get(SEPARATE):
            unmatched.warn_at_exit(include, INCLUDE)
        finder.install(include, exclude, lazy=not environ.get(EAGER))
    _reports_if_empty = False
    activate(contexts)
    return bool(include or contexts)
