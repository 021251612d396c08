"""``python -m cassette_hook attach PID``: contexts in a running process, for a while.

    python -m cassette_hook attach PID --context SPEC... (--duration S | --until-signal)
                                   [--output FILE] [--include P]... [--exclude P]... [--timeout S]

CPython 3.14 lets a process run a script in another one at its next safe point
(``sys.remote_exec``, PEP 768).  This process writes a script that imports cassette_hook
from the target's own ``sys.path`` and calls ``_attached.start``, hands it to
``remote_exec``, and waits (``--timeout``) for the status file the target writes: started,
or what went wrong.  At the end of the window (``--duration`` seconds, or SIGINT/SIGTERM)
a second script calls ``_attached.stop``, which writes the reports; this process waits
for that too, and says where the report is.

A script the target has not run by the timeout may still run later, when the target
reaches a safe point: both sides then race to *claim* the attach (a file made with
``O_EXCL``).  If this process wins, it gives up and the script, when it runs, does
nothing; if the script wins, it was starting just then, and this process waits for it
and ends the window at once.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import json
import os
import signal
import sys
import time

from .. import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, Sequence

EXIT_FAILURE, EXIT_USAGE = 1, 2

# The script the target runs (sys.remote_exec runs it in a namespace of its own): nothing
# in it may raise into the program, whatever the target's state.
_SCRIPT = '''\
def _cassette_hook_attach(request):
    import os, shutil, sys
    def say(**fields):
        import json
        with open(request["status"] + ".partial", "w", encoding="utf-8") as file:
            json.dump(fields, file)
        os.replace(request["status"] + ".partial", request["status"])
    if request["claim"] is not None:
        try:
            os.close(os.open(request["claim"], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:  # the attacher gave up waiting for this script: do nothing
            shutil.rmtree(os.path.dirname(request["claim"]), ignore_errors=True)
            return
    try:
        import cassette_hook
        from cassette_hook.cli import _attached
    except Exception as exc:
        say(state="error", kind="import", message=f"{type(exc).__name__}: {exc}", executable=sys.executable)
        return
    if cassette_hook.__version__ != request["version"]:
        say(state="error", kind="version", message=cassette_hook.__version__, executable=sys.executable)
        return
    getattr(_attached, request["call"])(request)
try:
    _cassette_hook_attach(__import__("json").loads(%r))
finally:
    del _cassette_hook_attach
'''


class AttachError(Exception):
    """What went wrong, in one line for the user; ``status``: the exit status."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.status = status


def _parser() -> argparse.ArgumentParser:
    import argparse

    from . import reexec

    parser = argparse.ArgumentParser(
        prog=f"{reexec.PROG} attach",
        description="Attach to a running CPython 3.14+ process (sys.remote_exec, PEP 768) and run contexts in "
                    "it for a while, as whole-program contexts (every thread), then write their reports and "
                    "leave it running as before. Both this Python and the target's must be 3.14 or later, "
                    "and cassette_hook must be importable in the target.",
    )
    parser.add_argument("pid", metavar="PID", help="the id of the process to attach to")
    parser.add_argument("--context", action="append", metavar="SPEC", required=True,
                        help="a context to activate in the target: NAME or module:attr, optionally followed by "
                             ",key=value options, as for the main command (repeatable; the last is innermost)")
    window = parser.add_mutually_exclusive_group(required=True)
    window.add_argument("--duration", type=float, metavar="S",
                        help="end the window after S seconds (or at SIGINT/SIGTERM, if earlier)")
    window.add_argument("--until-signal", action="store_true",
                        help="end the window when this command gets SIGINT (Ctrl-C) or SIGTERM")
    parser.add_argument("--output", metavar="FILE",
                        help="where the contexts write their reports (relative to this directory; default: "
                             "this command's standard error)")
    parser.add_argument("--include", action="append", metavar="P", default=[],
                        help="instrument modules matching P, already imported or imported during the window "
                             "(default: the target's program: its script's directory, or its -m module's "
                             "top package); the trace context then shows the calls inside them too")
    parser.add_argument("--exclude", action="append", metavar="P", default=[],
                        help="do not instrument modules matching P (repeatable)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="S",
                        help="how long to wait for the target to reach a point where it runs Python code, at "
                             "the start and at the end of the window (default: 10)")
    return parser


def main(argv: Sequence[str]) -> int:
    parser = _parser()
    options = parser.parse_args(list(argv))
    try:
        pid = _check_options(options)
        _check_python()
        return _attach(pid, options)
    except AttachError as exc:
        if exc.status == EXIT_USAGE:
            parser.error(str(exc))
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return exc.status


def _check_options(options: argparse.Namespace) -> int:
    from .. import _specs
    from .options import trace_inside

    if not options.pid.isdigit() or int(options.pid) <= 0:
        raise AttachError(f"PID: expected a process id (a whole number > 0), not {options.pid!r}", EXIT_USAGE)
    for patterns, option in ((options.include, "--include"), (options.exclude, "--exclude")):
        if "" in patterns:
            raise AttachError(f"{option}: a pattern must be a non-empty string, not ''", EXIT_USAGE)
    for number, option in ((options.duration, "--duration"), (options.timeout, "--timeout")):
        if number is not None and not number > 0:
            raise AttachError(f"{option}: expected a number of seconds > 0, not {number}", EXIT_USAGE)
    for spec in options.context:
        try:
            _specs.parse(spec)
        except _specs.SpecError as exc:
            raise AttachError(f"--context: {exc}", EXIT_USAGE) from None
    options.context = [trace_inside(spec, options.include) for spec in options.context]
    # (directories are the user's, relative to this directory, not the target's)
    options.include, options.exclude = _absolute(options.include), _absolute(options.exclude)
    return int(options.pid)


def _absolute(patterns: list[str]) -> list[str]:
    return [os.path.abspath(p) if os.sep in p or "/" in p or p in (".", "..") else p for p in patterns]


def _check_python() -> None:
    """``sys.remote_exec`` is CPython 3.14's: older ones cannot attach (nor be attached to)."""
    if sys.version_info < (3, 14) or not hasattr(sys, "remote_exec"):
        import platform

        raise AttachError(
            f"attach needs CPython 3.14 or later (sys.remote_exec, PEP 768), both for this command and in the "
            f"target process; this is {platform.python_implementation()} {platform.python_version()} "
            f"({sys.executable}): run it with a python3.14 or later")


def _attach(pid: int, options: argparse.Namespace) -> int:
    import shutil
    import tempfile

    _check_process(pid)
    # SIGTERM ends the window as SIGINT does, from now on (also while attaching: a
    # service manager's stop must not leave the target instrumented).  SIGINT's handler is
    # set too: a command started in the background by a shell without job control (a
    # script's `cmd &`, CI runners) inherits SIGINT ignored, and Python then leaves it so,
    # where `--until-signal` promises that SIGINT ends the window.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    directory = tempfile.mkdtemp(prefix="cassette_hook-attach-")
    _give_to_owner(directory, pid)
    request = {"version": __version__, "cwd": os.getcwd(), "contexts": options.context,
               "include": options.include, "exclude": options.exclude,
               "output": None if options.output is None else os.path.abspath(options.output),
               "report": os.path.join(directory, "report.txt")}
    duration = options.duration
    try:
        started = _run(pid, directory, "start", request, options.timeout, claim=True)
    except KeyboardInterrupt:  # before the target started: it never will, or the window ends at once
        if _claim(os.path.join(directory, "claimed")):
            raise AttachError(f"interrupted before process {pid} attached: not attached", 130) from None
        started, duration = _poll(pid, os.path.join(directory, "start.json"), None, options.timeout, True), 0.0
    if started is None:  # the target never ran the script: it does nothing if it runs it later
        raise AttachError(f"process {pid} did not reach a point where it runs Python code within {options.timeout:g} s "
                          f"(blocked in a system call or in C code?): not attached; try again, or a longer --timeout")
    _check_status(pid, started, directory)
    where = options.output or "standard error"
    window = "until SIGINT (Ctrl-C) or SIGTERM" if options.until_signal else f"for {options.duration:g} s"
    modules = ", ".join(started["instrumented"]) or "no module"
    _wait(pid, duration, f"cassette_hook: attached to process {pid} ({modules} instrumented), {window}; "
                         f"the report goes to {where}")
    written = _run(pid, directory, "stop", request, options.timeout, claim=False)
    if written is None:  # (the script stays: the target runs it when it can, writing the report then)
        raise AttachError(f"process {pid} did not reach a point where it runs Python code within {options.timeout:g} s "
                          f"of the window's end: the contexts stay active until it does, and the report is written "
                          f"to {where} then")
    _check_status(pid, written, directory)
    if options.output is None:
        with open(request["report"], encoding="utf-8") as report:
            shutil.copyfileobj(report, sys.stderr)
        print(f"cassette_hook: detached from process {pid}", file=sys.stderr)
    else:
        print(f"cassette_hook: detached from process {pid}; the report is in {options.output}", file=sys.stderr)
    shutil.rmtree(directory, ignore_errors=True)
    return 0


def _check_process(pid: int) -> None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise AttachError(f"no process with id {pid}") from None
    except PermissionError:  # (another user's: remote_exec will say whether we may)
        pass


def _give_to_owner(directory: str, pid: int) -> None:
    """Let the target write its status (and the default report) in ``directory``: as root
    attaching to another user's process, give the directory to that user."""
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return
    if owner != os.getuid() and os.getuid() == 0:
        os.chown(directory, owner, -1)


def _run(pid: int, directory: str, call: str, request: dict[str, Any], timeout: float,
         claim: bool) -> dict[str, Any] | None:
    """Have the target call ``_attached.<call>(request)`` and return the status it says;
    ``None`` if it has not run the script within ``timeout`` seconds (with ``claim``, it
    then never will)."""
    status = os.path.join(directory, f"{call}.json")
    request = {**request, "call": call, "status": status,
               "claim": os.path.join(directory, "claimed") if claim else None}
    script = os.path.join(directory, f"{call}.py")
    with open(script, "w", encoding="utf-8") as file:
        file.write(_SCRIPT % json.dumps(request))
    os.chmod(script, 0o644)
    try:
        sys.remote_exec(pid, script)  # type: ignore[attr-defined,unused-ignore]  # (3.14)
    except (RuntimeError, OSError) as exc:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)
        raise AttachError(_why_not(pid, exc)) from None
    return _poll(pid, status, request["claim"], timeout, claim)


def _poll(pid: int, status: str, claim_file: str | None, timeout: float, starting: bool) -> dict[str, Any] | None:
    """The status the target writes to ``status``, or ``None`` after ``timeout`` seconds
    (having claimed ``claim_file``, if given, first)."""
    deadline = time.monotonic() + timeout
    while True:
        found = _read_status(status)
        if found is not None:
            return found
        if time.monotonic() > deadline:
            if claim_file is None or _claim(claim_file):
                return None
            deadline += timeout  # (the script claimed it first: it is running now)
        if not _alive(pid):
            raise AttachError(f"process {pid} ended before it attached" if starting else
                              f"process {pid} ended during the window: no report")
        time.sleep(0.02)


def _read_status(status: str) -> dict[str, Any] | None:
    try:
        with open(status, encoding="utf-8") as file:
            found: dict[str, Any] = json.load(file)
            return found
    except FileNotFoundError:
        return None


def _claim(claim: str) -> bool:
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _check_status(pid: int, found: dict[str, Any], directory: str) -> None:
    """Raise what the target said went wrong, if it did."""
    if found["state"] != "error":
        return
    import shutil

    shutil.rmtree(directory, ignore_errors=True)
    kind, message = found["kind"], found["message"]
    if kind == "import":
        raise AttachError(f"cassette_hook cannot be imported in process {pid} ({message}): install it into the "
                          f"target's environment ({found['executable']} -m pip install cassette_hook)")
    if kind == "version":
        raise AttachError(f"process {pid} imports cassette_hook {message}, this is {__version__}: attach with the "
                          f"same version ({found['executable']} -m cassette_hook attach ...)")
    if kind == "usage":
        raise AttachError(message, EXIT_USAGE)
    raise AttachError(f"process {pid}: {message}")


def _why_not(pid: int, exc: BaseException) -> str:
    """``sys.remote_exec``'s failure, in words that say what to do."""
    text = str(exc)
    exe = _executable(pid)
    if isinstance(exc, PermissionError):
        return f"no permission to attach to process {pid} ({exc}): {_ptrace_needs()}"
    if "not enabled" in text:
        return (f"remote debugging is disabled in process {pid} ({text}): it was started with "
                f"PYTHON_DISABLE_REMOTE_DEBUG set or -X disable-remote-debug (or on a Python built without it); "
                f"start it without them")
    if "Can't send commands" in text:
        return f"process {pid} ({exe}) runs another Python version: {text}; attach with the target's own python"
    if "PyRuntime" in text:
        return f"process {pid} ({exe}) is not a CPython 3.14 or later process ({text})"
    return f"cannot attach to process {pid} ({exe}): {type(exc).__name__}: {text}"


def _executable(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return "its executable unknown"


def _ptrace_needs() -> str:
    """What the kernel's ptrace policy needs of this process to attach."""
    yama = "/proc/sys/kernel/yama/ptrace_scope"
    try:
        with open(yama, encoding="ascii") as file:
            scope = file.read().strip()
    except OSError:
        return "run this command as the target's user, or as root (CAP_SYS_PTRACE)"
    needs = {
        "0": "run this command as the target's user, or as root (CAP_SYS_PTRACE)",
        "1": "only a parent process may attach to its children unless it has CAP_SYS_PTRACE: run this command "
             f"as root (sudo), or allow attaching to any process of your own with 'echo 0 > {yama}' (as root)",
        "2": "only a process with CAP_SYS_PTRACE may attach: run this command as root (sudo)",
        "3": "attaching is disabled on this machine until the next reboot",
    }
    return f"{yama} is {scope}: {needs.get(scope, 'see the kernel documentation of Yama')}"


def _wait(pid: int, duration: float | None, attached: str) -> None:
    """Say ``attached``, then wait until ``duration`` seconds have passed (``None``:
    forever), or SIGINT or SIGTERM comes (both ``KeyboardInterrupt`` here: see
    :func:`_attach`); raise if the target ends meanwhile.  Said inside, so that a signal
    sent by one who read it ends the window.  From then on, both signals are ignored: the
    reports are being written, and ``--timeout`` bounds the wait for them."""
    try:
        print(attached, file=sys.stderr, flush=True)
        _sleep(pid, duration)
    except KeyboardInterrupt:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _sleep(pid: int, duration: float | None) -> None:
    end = None if duration is None else time.monotonic() + duration
    while end is None or time.monotonic() < end:
        if not _alive(pid):
            raise AttachError(f"process {pid} ended during the window: no report")
        time.sleep(0.1 if end is None else min(0.1, max(0.0, end - time.monotonic())))
