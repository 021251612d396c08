"""The trace's timeline: the Chrome Trace Event format, which Perfetto, ``chrome://tracing``
and speedscope open.

The format (the "Trace Event Format" document of the Chromium project) is a JSON object
whose ``traceEvents`` list holds the events.  A call is a *complete event*, ``"ph": "X"``,
with its ``name``, its start ``ts`` and its duration ``dur`` in microseconds, the process
``pid`` and thread ``tid`` that made it, and ``args`` shown in the viewer; a thread's name
and a process's are *metadata events*, ``"ph": "M"``, named ``thread_name`` and
``process_name``.  Viewers draw one track per ``(pid, tid)``, nesting the calls of a
track by time: so a call is one event, whatever its callees, and the events of the calls
a run of repeats is made of are kept apart (folding them into one would cover the
caller's time between them, which is what a timeline is read for).

Times are this process's ``perf_counter_ns`` (steady) anchored at the wall clock when the
trace started, so that the timelines of several processes -- of one machine, or of
machines whose clocks agree -- line up when they are merged (:func:`merge`).
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import json
import os
import sys
import time
from typing import Any, Iterable

FORMAT = "Chrome Trace Event format (JSON object)"


class Clock:
    """Microseconds since the epoch, read from the steady clock (``perf_counter_ns``)."""

    def __init__(self) -> None:
        self.wall_ns = time.time_ns()
        self.steady_ns = time.perf_counter_ns()

    def microseconds(self, steady_ns: int) -> float:
        return round((self.wall_ns + steady_ns - self.steady_ns) / 1000, 3)


def process_label() -> str:
    """What the viewer calls this process: its program.  Not its id too: the viewers show
    the events' ``pid`` beside the name (speedscope showed ``primes.py (pid 4242) (pid
    4242)``, seen in formats/check_formats.py's screenshot)."""
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def document(events: list[dict[str, Any]], left_out: int, limit: int | None) -> dict[str, Any]:
    """The file's JSON object.  ``left_out`` calls were not recorded, past ``limit``."""
    other: dict[str, Any] = {"exporter": "cassette_hook trace", "calls_left_out": left_out}
    if left_out:
        other["note"] = (f"the timeline stops at {limit} calls: {left_out} more calls were left out "
                         "(the trace option events=all records every call)")
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def write(file: str, data: dict[str, Any]) -> None:
    with open(file, "w", encoding="utf-8") as stream:
        json.dump(data, stream, separators=(",", ":"))
        stream.write("\n")


class TimelineError(ValueError):
    """A file given to :func:`merge` is not a timeline; the message names it."""


def load(file: str | os.PathLike[str]) -> dict[str, Any]:
    """A timeline file's object, checked to be one (``traceEvents``, a list)."""
    name = os.fspath(file)
    try:
        with open(name, encoding="utf-8") as stream:
            data = json.load(stream)
    except (OSError, ValueError) as exc:
        raise TimelineError(f"{name}: cannot read a timeline: {exc}") from None
    if isinstance(data, list):  # (the format's JSON array form)
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TimelineError(f"{name}: not a timeline (a JSON object with a traceEvents list)")
    return data


def merge(files: Iterable[str | os.PathLike[str]]) -> dict[str, Any]:
    """One timeline of several (of the processes of a tree, or of several machines): one
    track per process and thread.  Two files with the same process id (from different
    machines, or a reused id) keep their processes apart: the later one's id is changed,
    and its process name says which file it came from."""
    events: list[dict[str, Any]] = []
    left_out = 0
    used: set[int] = set()
    for file in files:
        data = load(file)
        own = data["traceEvents"]
        pids: set[int] = {e["pid"] for e in own if isinstance(e, dict) and isinstance(e.get("pid"), int)}
        renumber: dict[int, int] = {}
        for pid in sorted(pids):
            new = pid
            while new in used:
                new += 1_000_000_000  # (beyond any real process id)
            renumber[pid] = new
        used.update(renumber.values())
        for event in own:
            if not isinstance(event, dict):
                raise TimelineError(f"{os.fspath(file)}: an event that is not a JSON object: {event!r}")
            old = event.get("pid")
            if isinstance(old, int) and renumber.get(old, old) != old:
                event = {**event, "pid": renumber[old]}
                if event.get("ph") == "M" and event.get("name") == "process_name":
                    event["args"] = {"name": f"{event.get('args', {}).get('name', old)} [{os.fspath(file)}]"}
            events.append(event)
        other = data.get("otherData")
        if isinstance(other, dict) and isinstance(other.get("calls_left_out"), int):
            left_out += other["calls_left_out"]
    merged = document(events, left_out, None)
    if left_out:
        merged["otherData"]["note"] = (f"{left_out} calls were left out of the merged timelines "
                                       "(the trace option events=all records every call)")
    return merged
