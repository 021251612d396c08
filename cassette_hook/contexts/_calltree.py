"""The data a profile gathers: one call tree per thread, and what is derived from it.

A node is a function *at a place in the tree* (its path of callers from the thread's
root), with its number of calls and their total time.  Aggregating by path keeps enough
to build every report -- per-function statistics, collapsed stacks, flame graphs, the
call graph -- while the memory stays bounded by the program's distinct call paths, not
by its running time.  (Recursion deepens the tree as deep as the recursion goes, one
node per level.)

Every traversal here is iterative: a profile of deep recursion must not hit the
recursion limit when it is reported.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Iterator


class Node:
    """Calls of ``name`` at one path of the tree: how many, and their total time (ns)."""

    __slots__ = ("name", "calls", "total", "children")

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0
        self.total = 0
        self.children: dict[str, Node] = {}

    def self_time(self) -> int:
        """Time in the calls themselves, not in their callees.  A call still running when a
        report is made has no total yet, so this is clamped at zero."""
        return max(0, self.total - sum(c.total for c in list(self.children.values())))


class ThreadTree:
    """One thread's call tree, the path of the calls running in it now, and when each of
    them started (``perf_counter_ns``; the root has none)."""

    __slots__ = ("name", "root", "stack", "starts")

    def __init__(self, name: str) -> None:
        self.name = name
        self.root = Node("")
        self.stack = [self.root]
        self.starts: list[int] = []

    def total(self) -> int:
        return sum(c.total for c in list(self.root.children.values()))


def events(root: Node) -> Iterator[tuple[bool, Node]]:
    """Depth-first ``(True, node)`` on entering each node below ``root`` and ``(False,
    node)`` on leaving it.  Children are listed when entered, so a thread still adding
    calls does not break the walk."""
    stack = [iter(list(root.children.values()))]
    path: list[Node] = []
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            if path:
                yield False, path.pop()
        else:
            yield True, child
            path.append(child)
            stack.append(iter(list(child.children.values())))


def paths(root: Node) -> Iterator[tuple[list[str], Node]]:
    """Each node below ``root`` with the names on its path (the list is reused: copy it)."""
    names: list[str] = []
    for entering, node in events(root):
        if entering:
            names.append(node.name)
            yield names, node
        else:
            names.pop()


@dataclass(frozen=True)
class FunctionStats:
    """What a profile knows about one function, all threads together (times in ns).

    ``cumulative_ns`` is the time from entering the function to leaving it, counted once
    for recursive calls (a call inside another call of the same function is already in
    the outer call's time).  ``location`` is ``(file, line)`` for Python code.
    """

    name: str
    calls: int
    self_ns: int
    cumulative_ns: int
    location: tuple[str, int] | None


def function_stats(trees: list[ThreadTree], locations: dict[str, tuple[str, int]]) -> dict[str, FunctionStats]:
    calls: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    cumulative: collections.Counter[str] = collections.Counter()
    for tree in trees:
        running: collections.Counter[str] = collections.Counter()  # calls of each name on the path
        for entering, node in events(tree.root):
            if not entering:
                running[node.name] -= 1
                continue
            calls[node.name] += node.calls
            own[node.name] += node.self_time()
            if not running[node.name]:
                cumulative[node.name] += node.total
            running[node.name] += 1
    return {name: FunctionStats(name, calls[name], own[name], cumulative[name], locations.get(name))
            for name in calls}


def edges(trees: list[ThreadTree]) -> dict[tuple[str, str], tuple[int, int]]:
    """``(caller, callee) -> (calls, time in the callee)``; time in calls through an
    edge that are inside calls through the same edge (recursion) is counted once, as in
    :class:`FunctionStats`."""
    found: dict[tuple[str, str], tuple[int, int]] = {}
    for tree in trees:
        path: list[tuple[str, str]] = []  # the edges that led to the node being visited
        running: collections.Counter[tuple[str, str]] = collections.Counter()
        for entering, node in events(tree.root):
            if not entering:
                running[path.pop()] -= 1
                continue
            edge = (path[-1][1] if path else "", node.name)
            if path:
                calls, time = found.get(edge, (0, 0))
                found[edge] = (calls + node.calls, time + (0 if running[edge] else node.total))
            path.append(edge)
            running[edge] += 1
    return found


# -- raw data, for merging the profiles of several processes -----------------------------

FORMAT = "cassette_hook-profile"


def dump(trees: list[ThreadTree], locations: dict[str, tuple[str, int]], pid: int) -> dict[str, Any]:
    """A JSON-able copy: per thread, the nodes in depth-first order as ``[parent index
    (-1 for the root), name index, calls, total ns]``; names are listed once."""
    names: dict[str, int] = {}
    threads = []
    for tree in trees:
        rows: list[list[int]] = []
        parents = [-1]
        for entering, node in events(tree.root):
            if entering:
                rows.append([parents[-1], names.setdefault(node.name, len(names)), node.calls, node.total])
                parents.append(len(rows) - 1)
            else:
                parents.pop()
        threads.append({"name": tree.name, "nodes": rows})
    return {"format": FORMAT, "version": 1, "pid": pid, "names": list(names),
            "locations": {n: list(loc) for n, loc in locations.items()}, "threads": threads}


def load(data: dict[str, Any]) -> tuple[list[ThreadTree], dict[str, tuple[str, int]], int]:
    """The trees, locations and process id of :func:`dump`'s output."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a cassette_hook profile dump (no \"format\": \"{FORMAT}\")")
    names = data["names"]
    trees = []
    for thread in data["threads"]:
        tree = ThreadTree(thread["name"])
        nodes: list[Node] = []
        for parent, name, calls, total in thread["nodes"]:
            node = Node(names[name])
            node.calls, node.total = calls, total
            (tree.root if parent < 0 else nodes[parent]).children[node.name] = node
            nodes.append(node)
        trees.append(tree)
    locations = {n: (loc[0], loc[1]) for n, loc in data["locations"].items()}
    return trees, locations, data["pid"]
