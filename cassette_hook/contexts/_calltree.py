"""The data a profile gathers: one call tree per thread, and what is derived from it.

A node is a function *at a place in the tree* (its path of callers from the thread's
root), with its number of calls and their total time.  Aggregating by path keeps enough
to build every report -- per-function statistics, collapsed stacks, flame graphs, the
call graph -- while the memory stays bounded by the program's distinct call paths, not
by its running time.  (Recursion deepens the tree as deep as the recursion goes, one
node per level.)

The tree is grown by ``ProfileContext``'s hooks, ``Recording``: in C where
``_recording.c`` is built (no Python frame and no allocation per call), else by
``PyRecording``, its reference.  ``Node``'s fields are the C type's in the first case.

Every traversal here is iterative: a profile of deep recursion must not hit the
recursion limit when it is reported.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import collections
from dataclasses import dataclass
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Iterator

from .._native import optional


class PyNodeFields:
    """A node's fields: the reference version of ``_recording.Node``, whose C hooks read
    and write them without a Python frame.

    ``keyed`` finds a child by a key that costs nothing to compute, and ``key_module`` is
    the module of the qualname key that names this node (see ``_recording.c``); the
    pure-Python hooks name every callee instead.  ``start`` is when the running call of
    this node began: a node is on its thread's stack at most once, since the stack is
    its path.
    """

    __slots__ = ("name", "calls", "total", "children", "keyed", "key_module", "start")

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0
        self.total = 0
        self.children: dict[str, Node] = {}
        self.keyed: dict[Any, Node] = {}
        self.key_module: str | None = None
        self.start = 0


class PyRecording:
    """The hooks of ``ProfileContext``: the reference version of ``_recording.Recording``.

    A call's node -- ``f`` under the running call, made by ``_child`` -- joins its
    thread's stack (``_thread_stack``) in ``prehook``, and leaves it counted and timed in
    ``posthook`` or ``raisehook``, exactly one of which follows each prehook.
    """

    __slots__ = ()

    def prehook(self, f: Any, /, *args: Any, **kwargs: Any) -> None:
        """A call starts: its node (``f`` under the running call) joins this thread's stack."""
        stack = self._thread_stack()
        node = self._child(stack[-1], f, None, None)
        stack.append(node)
        node.start = perf_counter_ns()

    def posthook(self, out: Any, f: Any, /, *args: Any, **kwargs: Any) -> None:
        """The call returned: it is counted and timed."""
        self._ended(perf_counter_ns())

    def raisehook(self, exc: BaseException, f: Any, /, *args: Any, **kwargs: Any) -> None:
        """The call raised: it is counted and timed all the same."""
        self._ended(perf_counter_ns())

    def _ended(self, end: int) -> None:
        stack = self._thread_stack()
        if len(stack) > 1:  # else hooks that see a call end did not see it start: nothing to count
            node = stack.pop()
            node.total += end - node.start
            node.calls += 1

    def _thread_stack(self) -> list[Node]:
        """The running thread's stack of nodes, its tree's root first (the subclass's)."""
        raise NotImplementedError

    def _child(self, parent: Node, f: Any, key: Any, module: str | None) -> Node:
        """``f``'s node under ``parent``; ``key`` (with its ``module``) finds it from now on,
        if not None (the subclass's)."""
        raise NotImplementedError


_recording = optional(".contexts._recording")
if TYPE_CHECKING:
    NodeFields = PyNodeFields
    Recording = PyRecording
else:
    NodeFields = PyNodeFields if _recording is None else _recording.Node
    Recording = PyRecording if _recording is None else _recording.Recording
ImportTimer = None if _recording is None else _recording.ImportTimer
"""The C wrapper of importlib's ``_find_and_load`` that times imports with no frame, or
None, where ``profile._watch_imports`` makes its Python one."""


Node = NodeFields
"""Calls of ``name`` at one path of the tree: how many, and their total time (ns).  The
fields' class itself, not a subclass: a Python subclass would make every node an object
the garbage collector tracks (see ``_recording.c``'s ``node_dealloc``)."""


def self_time(node: Node) -> int:
    """Time in the node's calls themselves, not in their callees.  A call still running
    when a report is made has no total yet, so this is clamped at zero."""
    return max(0, node.total - sum(c.total for c in list(node.children.values())))


class ThreadTree:
    """One thread's call tree, and the path of the calls running in it now (its stack)."""

    __slots__ = ("name", "root", "stack")

    def __init__(self, name: str) -> None:
        self.name = name
        self.root = Node("")
        self.stack = [self.root]

    def total(self) -> int:
        return sum(c.total for c in list(self.root.children.values()))


OWN = "<cassette_hook>"
"""The name of the node of a call of cassette_hook's own functions (the import hook's
loader, a wrapper of ours that a call site calls): a placeholder that :func:`without_own`
takes out of the tree, so that no report has a row of ours (docs/contexts.md, "What the
times include")."""


def without_own(trees: list[ThreadTree]) -> list[ThreadTree]:
    """Copies of ``trees`` with each :data:`OWN` node replaced by its children, merged into
    its parent's (same name, same node: calls and times added).  Its own time becomes
    its caller's self time, as the time of a C function that makes no call site is."""
    copies = []
    for tree in trees:
        copy = ThreadTree(tree.name)
        _merge_children(tree.root, copy.root)
        copies.append(copy)
    return copies


def _merge_children(source: Node, target: Node) -> None:
    """Add copies of ``source``'s children (an :data:`OWN` one's children in its place) to
    ``target``'s, iteratively: a tree as deep as a recursion must not hit the limit."""
    work = [(source, target)]
    while work:
        old, new = work.pop()
        for child in list(old.children.values()):
            if child.name == OWN:
                work.append((child, new))
                continue
            into = new.children.get(child.name)
            if into is None:
                into = new.children[child.name] = Node(child.name)
            into.calls += child.calls
            into.total += child.total
            work.append((child, into))


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
            own[node.name] += self_time(node)
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
VERSION = 1  # of the format: what load reads


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
    from .. import __version__  # here: the package imports this module before it sets it

    return {"format": FORMAT, "version": VERSION, "cassette_hook": __version__, "pid": pid, "names": list(names),
            "locations": {n: list(loc) for n, loc in locations.items()}, "threads": threads}


def load(data: dict[str, Any]) -> tuple[list[ThreadTree], dict[str, tuple[str, int]], int]:
    """The trees, locations and process id of :func:`dump`'s output."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a cassette_hook profile dump (no \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise ValueError(f"a profile dump of format version {data.get('version')!r} (written by cassette_hook "
                         f"{data.get('cassette_hook', 'of an unknown version')}), which this cassette_hook "
                         f"does not read: it reads version {VERSION}")
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
