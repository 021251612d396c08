"""The target's side of ``python -m cassette_hook attach PID`` (``attach``): run in the
process attached to, by the scripts the attacher hands to ``sys.remote_exec``, in its
main thread at a point where it may run Python code.

:func:`start` installs the import hook, instruments the modules already imported that
the patterns match and activates the contexts as whole-program contexts (every thread,
as ``--context`` does); :func:`stop` deactivates them, writes their reports and leaves the
program as it was: its functions get their compiled code back (as the lazy hook gives it
back when the process goes idle, ``lazy_mode.give_back``) and the hook is removed if
this attach installed it.  Each reports to the attacher through a status file, written
whole (a rename), which the attacher waits for: what went wrong is said there, never
raised into the program.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import json
import os
import sys

from .. import context_stack, _process, _specs
from ..importhook import finder, lazy_mode

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Any, TextIO


class _Session:
    """What one attach activated, until its :func:`stop`."""

    def __init__(self, contexts: list[context_stack.Context], stream: TextIO | None, installed: bool) -> None:
        self.contexts, self.stream, self.installed = contexts, stream, installed


_session: _Session | None = None


def say(status: str, **fields: Any) -> None:
    """Write ``fields`` to the status file ``status`` whole, so that the attacher, which
    polls for it, never reads half of it."""
    partial = status + ".partial"
    with open(partial, "w", encoding="utf-8") as file:
        json.dump(fields, file)
    os.replace(partial, status)


def start(request: dict[str, Any]) -> None:
    """Attach as ``request`` (made by ``attach.request``) asks, and say ``started`` or
    what went wrong."""
    status = request["status"]
    try:
        fields = _start(request)
    except Exception as exc:  # anything: said to the attacher, never raised into the program
        fields = {"state": "error", "kind": "failure", "message": f"{type(exc).__name__}: {exc}"}
    say(status, **fields)


def _start(request: dict[str, Any]) -> dict[str, Any]:
    global _session
    if _session is not None:
        return {"state": "error", "kind": "failure",
                "message": "another attach is in progress in this process: wait for its end"}
    stream: TextIO | None = None
    output = request["output"]
    if output is None:  # (the report goes to a file of the attacher's, which shows it)
        output = stream = open(request["report"], "w", encoding="utf-8")
    try:
        contexts = _specs.make_all([_absolute_paths(spec, request["cwd"]) for spec in request["contexts"]], output)
    except Exception as exc:  # a bad name, option or report file: the user's mistake
        if stream is not None:
            stream.close()
        return {"state": "error", "kind": "usage", "message": _specs.describe_error(exc, "--context", "--output")}
    include = request["include"] or [default_include()]
    installed = finder.installed() is None
    if installed:
        finder.install(include, request["exclude"])
    patterns = finder.Patterns(include, request["exclude"])
    instrumented = _instrument_imported(patterns)
    context_stack.push_whole_program(contexts)
    _session = _Session(contexts, stream, installed)
    return {"state": "started", "include": include, "instrumented": instrumented}


def default_include() -> str:
    """What ``python -m cassette_hook`` instruments by default, for the program this
    process runs: the top package of a ``-m`` module, the directory of a script (or the
    directory or zip file run), or for ``-c`` code and an interactive session the current
    directory."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if isinstance(name, str) and name and name != "__main__":
        return name.partition(".")[0]
    file = getattr(main, "__file__", None)
    if isinstance(file, str):
        return os.path.dirname(os.path.realpath(file))
    return os.getcwd()


def _instrument_imported(patterns: finder.Patterns) -> list[str]:
    """Instrument the modules already imported that ``patterns`` match (their functions
    given back their compiled code when the process goes idle); their names."""
    done = []
    for name, module in list(sys.modules.items()):
        if module is not None and patterns.matches(name, getattr(module, "__file__", None)):
            finder.instrument_until_idle(module)
            done.append(name)
    return sorted(done)


def _absolute_paths(spec: str, cwd: str) -> str:
    """``spec`` with the file names of its options (``profile,raw=prof.json``) made
    absolute from ``cwd``, the attaching user's directory, where they would otherwise
    be the target's."""
    name, options = _specs.parse(spec)
    found = _specs.load(name)
    parsers = getattr(found if isinstance(found, type) else type(found), "option_parsers", {})
    from ..contexts import _base

    for key, value in options.items():
        if parsers.get(key) is _base.path:
            options[key] = os.path.join(cwd, value)
    return ",".join([name, *(f"{key}={value}" for key, value in options.items())])


def stop(request: dict[str, Any]) -> None:
    """End the attach: deactivate the contexts, write their reports, leave the program as
    it was; say ``written`` or what went wrong."""
    status = request["status"]
    try:
        fields = _stop()
    except Exception as exc:
        fields = {"state": "error", "kind": "failure", "message": f"{type(exc).__name__}: {exc}"}
    say(status, **fields)


def _stop() -> dict[str, Any]:
    global _session
    session = _session
    if session is None:
        return {"state": "error", "kind": "failure", "message": "no attach is in progress in this process"}
    _session = None
    context_stack.pop_whole_program(session.contexts)
    _write_reports(session.contexts)
    if session.stream is not None:
        session.stream.close()
    if session.installed:
        finder.uninstall()
    lazy_mode.give_back()
    return {"state": "written"}


def _write_reports(contexts: list[context_stack.Context]) -> None:
    for ctx in contexts:
        _process.write_report(ctx)
