"""The profile's report formats, as text: a table, collapsed stacks, speedscope JSON and
a Graphviz call graph.  (The SVG flame graph has its own module, ``_flamegraph``.)

Each is a format other tools read, so each follows its tool's conventions exactly:

- collapsed stacks are Brendan Gregg's ``frame;frame;frame count`` lines, read by
  ``flamegraph.pl``, inferno and speedscope.  Frames cannot contain ``;`` or spaces, so
  those are replaced.  The count is the path's self time in nanoseconds.
- speedscope's file format (https://www.speedscope.app/file-format-schema.json), as a
  "sampled" profile per thread: each distinct call path is one sample weighted by its
  self time.  This is the aggregated tree, not a timeline, so speedscope's "time order"
  view shows the paths in the order they were first called.
- DOT, for Graphviz: a node per function, an edge per caller/callee pair weighted by its
  number of calls, with widths and colours by time.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import re
from typing import Any, Iterator

from ._calltree import FunctionStats, ThreadTree, edges, events, paths, self_time

SORT_KEYS = {
    "self": lambda s: (-s.self_ns, s.name),
    "cumulative": lambda s: (-s.cumulative_ns, s.name),
    "calls": lambda s: (-s.calls, s.name),
    "name": lambda s: (s.name,),
}


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}"


def table(stats: dict[str, FunctionStats], trees: list[ThreadTree], sort: str = "self",
          limit: int | None = None) -> str:
    """Per-function calls, self and cumulative time, sorted by ``sort`` (a key of
    ``SORT_KEYS``), at most ``limit`` rows."""
    total = sum(t.total() for t in trees)
    rows = sorted(stats.values(), key=SORT_KEYS[sort])
    calls = sum(s.calls for s in rows)
    threads = f"{len(trees)} thread{'s' * (len(trees) != 1)}"
    lines = [f"{calls} calls of {len(rows)} functions in {threads}, {_ms(total)} ms; sorted by {sort}", "",
             f"{'calls':>9} {'self ms':>11} {'self %':>7} {'cum ms':>11} {'cum %':>7}  function"]
    for s in rows[:limit]:
        lines.append(f"{s.calls:>9} {_ms(s.self_ns):>11} {_percent(s.self_ns, total):>7} "
                     f"{_ms(s.cumulative_ns):>11} {_percent(s.cumulative_ns, total):>7}  {s.name}")
    if limit is not None and len(rows) > limit:
        lines.append(f"... and {len(rows) - limit} more functions")
    return "\n".join(lines) + "\n"


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


_NOT_IN_FRAMES = re.compile(r"[;\s]+")


def frame_name(name: str) -> str:
    """A name as a collapsed-stack frame: no ``;`` and no whitespace."""
    return _NOT_IN_FRAMES.sub("_", name) or "?"


def stacks(trees: list[ThreadTree]) -> Iterator[tuple[list[str], int]]:
    """``(frames, self ns)`` for each call path with time of its own; with more than one
    thread, each stack starts with its thread's name."""
    for tree in trees:
        prefix = [tree.name] if len(trees) > 1 else []
        for names, node in paths(tree.root):
            weight = self_time(node)
            if weight:
                yield prefix + names, weight


def collapsed(trees: list[ThreadTree]) -> str:
    frames: dict[str, str] = {}  # name -> frame_name(name): deep stacks repeat names many times
    return "".join(f"{';'.join([frames.get(n) or frames.setdefault(n, frame_name(n)) for n in names])} {weight}\n"
                   for names, weight in stacks(trees))


SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def speedscope(trees: list[ThreadTree], locations: dict[str, tuple[str, int]], title: str) -> dict[str, Any]:
    frames: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    profiles = []
    for tree in trees:
        samples, weights = [], []
        stack: list[int] = []  # frame indices of the path being visited
        for entering, node in events(tree.root):
            if not entering:
                stack.pop()
                continue
            if node.name not in index:
                index[node.name] = len(frames)
                frame: dict[str, Any] = {"name": node.name}
                if node.name in locations:
                    frame["file"], frame["line"] = locations[node.name]
                frames.append(frame)
            stack.append(index[node.name])
            weight = self_time(node)
            if weight:
                samples.append(stack.copy())
                weights.append(weight)
        profiles.append({"type": "sampled", "name": tree.name, "unit": "nanoseconds",
                         "startValue": 0, "endValue": sum(weights), "samples": samples, "weights": weights})
    from .. import __version__  # here: the package imports this module before it sets it

    return {"$schema": SPEEDSCOPE_SCHEMA, "shared": {"frames": frames}, "profiles": profiles,
            "name": title, "activeProfileIndex": 0, "exporter": f"cassette_hook {__version__}"}


def dot(stats: dict[str, FunctionStats], trees: list[ThreadTree], title: str) -> str:
    """The call graph: nodes labelled with cumulative and self time and calls, coloured by
    cumulative time; edges labelled with calls and time, as wide as their time."""
    total = sum(t.total() for t in trees) or 1
    ids = {name: f"n{i}" for i, name in enumerate(sorted(stats))}
    lines = [f"digraph {_quote(title)} {{",
             '  graph [fontname="Helvetica", rankdir=TB];',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9, arrowsize=0.7];']
    for name in sorted(stats):
        s = stats[name]
        share = s.cumulative_ns / total
        label = (f"{name}\n{_percent(s.cumulative_ns, total)} cum ({_ms(s.cumulative_ns)} ms)\n"
                 f"{_percent(s.self_ns, total)} self\n{s.calls} call{'s' * (s.calls != 1)}")
        lines.append(f"  {ids[name]} [label={_quote(label)}, fillcolor=\"{_heat(share)}\"];")
    for (caller, callee), (calls, time) in sorted(edges(trees).items()):
        share = time / total
        label = f"{calls} call{'s' * (calls != 1)}\n{_ms(time)} ms"
        lines.append(f"  {ids[caller]} -> {ids[callee]} [label={_quote(label)}, weight={calls}, "
                     f"penwidth={0.5 + 4 * share:.2f}, color=\"{_heat(share, dark=True)}\"];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    """A DOT string: quoted, with ``"`` and ``\\`` escaped and newlines as ``\\n``."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _heat(share: float, dark: bool = False) -> str:
    """Pale yellow (no time) to red (all the time); darker for edges."""
    share = min(max(share, 0.0), 1.0)
    red, green, blue = 255, int(245 - 190 * share), int(200 - 200 * share)
    if dark:
        red, green, blue = int(red * 0.75), int(green * 0.55), int(blue * 0.5)
    return f"#{red:02x}{green:02x}{blue:02x}"
