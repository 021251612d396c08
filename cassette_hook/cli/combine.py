"""``python -m cassette_hook combine``: one report of the files of many processes.

    python -m cassette_hook combine prof.*.json [--output table.txt] [--flamegraph all.svg]
                                    [--speedscope all.json] [--collapsed FILE] [--dot FILE]
                                    [--raw FILE] [--sort KEY] [--limit N] [--map OLD=NEW]...
    python -m cassette_hook combine trace.*.json --timeline all.json

What ``coverage combine`` is to coverage data: a process tree (``--subprocesses``) or
many machines leave one file per process -- the profile's raw dumps (``profile,raw=``),
or the trace's timelines (``trace,timeline=``) -- and this makes one of them:
``ProfileContext.merge`` for dumps, ``_timeline.merge`` for timelines.  Which kind the
files are is read from the files themselves.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Sequence

PROFILE_REPORTS = ("flamegraph", "speedscope", "collapsed", "dot", "raw")


def _parser() -> argparse.ArgumentParser:
    import argparse

    from . import reexec

    parser = argparse.ArgumentParser(
        prog=f"{reexec.PROG} combine",
        description="Combine the files of several processes (or machines) into one report: profile dumps "
                    "(written by --context 'profile,raw=prof.{pid}.json') into one profile, or trace "
                    "timelines (--context 'trace,timeline=trace.{pid}.json') into one timeline with a "
                    "track per process and thread.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="the profile dumps, or the timelines")
    parser.add_argument("--output", metavar="FILE",
                        help="profiles: where the table goes (default: stdout)")
    for key, what in (("flamegraph", "an SVG flame graph"), ("speedscope", "speedscope JSON"),
                      ("collapsed", "collapsed stacks"), ("dot", "the Graphviz call graph"),
                      ("raw", "the merged dump (to combine again)")):
        parser.add_argument(f"--{key}", metavar="FILE", help=f"profiles: write {what} to FILE")
    parser.add_argument("--sort", choices=("self", "cumulative", "calls", "name"), default="self",
                        help="profiles: the table's order (default: self)")
    parser.add_argument("--limit", type=int, metavar="N", help="profiles: at most N rows of the table")
    parser.add_argument("--map", action="append", default=[], metavar="OLD=NEW",
                        help="profiles: source files under the directory OLD are under NEW here (sources "
                             "installed at different places on different machines; repeatable, the first "
                             "that applies is used)")
    parser.add_argument("--timeline", metavar="FILE", help="timelines: write the merged timeline to FILE")
    return parser


def main(argv: Sequence[str]) -> int:
    parser = _parser()
    options = parser.parse_args(list(argv))
    remap = []
    for pair in options.map:
        old, equals, new = pair.partition("=")
        if not equals or not old or not new:
            parser.error(f"--map {pair!r}: expected OLD=NEW, two directories")
        remap.append((old, new))
    kinds = {file: _kind(file) for file in options.files}
    for file, kind in kinds.items():
        if kind is None:
            parser.error(f"{file}: neither a profile dump (profile,raw=) nor a timeline (trace,timeline=)")
    if len(set(kinds.values())) > 1:
        parser.error("give profile dumps or timelines, not both: "
                     + ", ".join(f"{file} is a {kind}" for file, kind in kinds.items()))
    if "timeline" in kinds.values():
        return _timelines(parser, options)
    return _profiles(parser, options, remap)


def _kind(file: str) -> str | None:
    """``"profile"``, ``"timeline"``, or ``None`` (not readable as either)."""
    try:
        with open(file, encoding="utf-8") as stream:
            data = json.load(stream)
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and data.get("format") == "cassette_hook-profile":
        return "profile"
    if isinstance(data, list) or (isinstance(data, dict) and isinstance(data.get("traceEvents"), list)):
        return "timeline"
    return None


def _timelines(parser: argparse.ArgumentParser, options: argparse.Namespace) -> int:
    from ..contexts import _timeline

    given = [f"--{key}" for key in ("output", *PROFILE_REPORTS, "limit") if getattr(options, key) is not None]
    if given or options.map:
        parser.error(f"{', '.join(given + ['--map'] * bool(options.map))}: for profile dumps; "
                     "timelines are combined into --timeline FILE")
    if options.timeline is None:
        parser.error("timelines are combined into one file: give --timeline FILE")
    from ..contexts._base import ReportPathError, check_writable

    try:
        check_writable(options.timeline, f"cannot write --timeline {options.timeline!r}", "timeline")
        merged = _timeline.merge(options.files)
    except (ReportPathError, _timeline.TimelineError) as exc:
        parser.error(str(exc))
    _timeline.write(options.timeline, merged)
    return 0


def _profiles(parser: argparse.ArgumentParser, options: argparse.Namespace, remap: list[tuple[str, str]]) -> int:
    from ..contexts._base import ReportPathError, check_writable
    from ..contexts import ProfileContext, ProfileMergeError

    if options.timeline is not None:
        parser.error("--timeline: for timelines; these are profile dumps")
    files = {key: getattr(options, key) for key in PROFILE_REPORTS if getattr(options, key) is not None}
    reports = [(key, file) for key, file in [("output", options.output), *files.items()] if file is not None]
    try:  # (before the work of merging, which a report that cannot be written would waste)
        for key, file in reports:
            check_writable(file, f"cannot write --{key} {file!r}", key)
    except ReportPathError as exc:
        parser.error(str(exc))
    try:
        merged = ProfileContext.merge(options.files, options.output if options.output is not None else sys.stdout,
                                      remap=remap, sort=options.sort, limit=options.limit, **files)
    except ProfileMergeError as exc:
        parser.error(str(exc))
    except OSError as exc:  # a report file that cannot be written
        parser.error(f"cannot write a report: {exc}")
    try:
        merged.write_report()
    except OSError as exc:
        print(f"{parser.prog}: error: cannot write a report: {exc}", file=sys.stderr)
        return 1
    return 0
