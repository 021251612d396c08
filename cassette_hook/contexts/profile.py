"""``ProfileContext``: how often each function is called and where the time goes.

It times each call from its ``prehook`` to its ``posthook``, or to its ``raisehook`` if
it raised: exactly one of the two follows each prehook, so the thread's stack of running
calls stays right through exceptions.  Hooks, unlike an ``overdub`` overload around
``recurse``, put no frame of ours between the program's (a profiled program's
``inspect.stack()`` and tracebacks are its own) and cost one call each; these are
``_calltree.Recording``'s, in C where it is built.  Every call site
the context sees is timed, C functions and builtin methods included, with
``time.perf_counter_ns``; the time of a call includes the cost of overdubbing the calls
inside it, so a profile measures the program as it runs under cassette_hook.

The calls are recorded in a call tree per thread (see ``_calltree``); the reports --
the table, speedscope JSON, collapsed stacks, a Graphviz call graph and an SVG flame
graph -- are all made from it.  ``dump`` and ``merge`` move it between processes.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import weakref
from time import perf_counter_ns
from typing import Any, Iterable, TextIO

from . import _reports
from .._locks import rlock
from ._base import Output, ReportingContext, choice, expand, path, per_process, text_output, whole_number, yes_no
from ._calltree import FunctionStats, Node, Recording, ThreadTree, dump, function_stats, load
from ._names import location_of, name_of


GARBAGE_COLLECTION = "<garbage collection>"
"""The row of the collector's pauses (see :meth:`ProfileContext._collection`)."""

_profiles: weakref.WeakSet[ProfileContext] = weakref.WeakSet()


def _on_collection(phase: str, info: dict[str, int]) -> None:
    """The collector's callback (``gc.callbacks``), registered with the first profile:
    each profile times a full collection's pause in the thread that collects.  (The
    young generations' collections, a few microseconds each, stay in the time of the
    function whose allocations set them off, as any cost of allocating does.)"""
    if info.get("generation") != 2:
        return
    for profile in list(_profiles):
        profile._collection(phase)


class ProfileContext(ReportingContext, Recording):
    """Count and time every call: per function, its calls, self time and cumulative time.

    ``output`` receives the table (a path, an open text stream, or ``None`` for
    ``sys.stderr``), sorted by ``sort`` (``"self"``, ``"cumulative"``, ``"calls"`` or
    ``"name"``), at most ``limit`` rows (``None``: all).  :meth:`write_report` also writes
    each of these files that is given a path (``{pid}`` in a path becomes the process id):
    ``speedscope`` (JSON for https://www.speedscope.app), ``collapsed`` (collapsed stacks
    for flamegraph.pl, inferno or speedscope), ``dot`` (a Graphviz call graph),
    ``flamegraph`` (an SVG flame graph) and ``raw`` (the data, for :meth:`merge`).
    ``operators``: operators are not calls unless ``True`` (see :class:`ReportingContext`),
    a function-level view, as a profiler gives: with them, every ``a + b``, ``x[i]`` and
    ``x < y`` is a row of its own and costs what a call does; without them, the Python
    methods behind operators (``__add__``, ``__getitem__`` ...) are not seen either, and
    their time is their caller's.

    Functions are named ``module.qualname`` (``builtins.len``; methods of builtin types
    as ``list.append``).  Each thread has its own call stack; the statistics add the
    threads up, and the files show each thread apart.  Only calls that have returned (or
    raised) are counted: a report written while a thread is inside a call does not count
    that call yet, except when the process ends (:meth:`process_ending`).

    A full collection of the garbage collector during a profiled call is a row of its own,
    ``<garbage collection>``, called by the function that was running: its time is not
    that function's self time (docs/contexts.md, "The profile and the garbage collector").
    """

    operators = False  # a profile of every a + b, x[i], x < y in every loop is mostly noise, and costs a call each
    option_parsers = {"sort": choice(*_reports.SORT_KEYS), "limit": whole_number, "speedscope": path,
                      "collapsed": path, "dot": path, "flamegraph": path, "raw": path, "operators": yes_no}

    def __init__(self, output: Output = None, *, sort: str = "self", limit: int | None = None,
                 speedscope: str | os.PathLike[str] | None = None, collapsed: str | os.PathLike[str] | None = None,
                 dot: str | os.PathLike[str] | None = None, flamegraph: str | os.PathLike[str] | None = None,
                 raw: str | os.PathLike[str] | None = None, operators: bool | None = None,
                 metadata: Any = None, pass_: Any = None) -> None:
        super().__init__(output, operators=operators, metadata=metadata, pass_=pass_)
        if sort not in _reports.SORT_KEYS:
            raise ValueError(f"ProfileContext: sort must be one of {', '.join(_reports.SORT_KEYS)}, not {sort!r}")
        self.sort, self.limit = sort, limit
        self.files = {"speedscope": speedscope, "collapsed": collapsed, "dot": dot,
                      "flamegraph": flamegraph, "raw": raw}
        self.title = "cassette_hook profile"
        self._trees: list[ThreadTree] = []
        self._locations: dict[str, tuple[str, int]] = {}
        self._threads = threading.local()
        self._lock = rlock()  # re-entrant: a report written by a signal handler (_process._on_sigterm)
        if _on_collection not in gc.callbacks:
            gc.callbacks.append(_on_collection)
        _profiles.add(self)

    prehook = Recording.prehook  # (named here, so that the class registers them as its hooks)
    posthook = Recording.posthook
    raisehook = Recording.raisehook

    def _thread_stack(self) -> list[Node]:
        """The running thread's stack of nodes; a thread's first call makes its tree."""
        try:
            return self._threads.stack  # type: ignore[no-any-return]
        except AttributeError:
            pass
        tree = ThreadTree(threading.current_thread().name)
        with self._lock:
            self._trees.append(tree)
        self._threads.stack = tree.stack
        return tree.stack

    def _child(self, parent: Node, f: Any, key: Any, module: str | None) -> Node:
        """``f``'s node under ``parent``, by its name; ``key`` finds it from now on, unless
        ``parent`` already keys another node by it, or the node keeps a qualname key of
        another module (see ``_recording.c``)."""
        name = name_of(f)
        node = parent.children.get(name)
        if node is None:
            node = parent.children[name] = Node(name)
            if name not in self._locations:
                location = location_of(f)
                if location is not None:
                    self._locations[name] = location
        if key is not None and key not in parent.keyed and (module is None or node.key_module in (None, module)):
            parent.keyed[key] = node
            if module is not None:
                node.key_module = module
        return node

    def _collection(self, phase: str) -> None:
        """A full collection starts or stops in this thread: inside a profiled call, its pause
        is timed as a call of :data:`GARBAGE_COLLECTION` by the running one, so that the
        function that happened to allocate last is not charged for it.  (What finalizers
        run during the pause is profiled as called by it.)"""
        threads = self._threads
        stack = getattr(threads, "stack", None)
        if phase == "start":
            if stack is not None and len(stack) > 1:  # (else no profiled call runs in this thread)
                parent = stack[-1]
                node = parent.children.get(GARBAGE_COLLECTION)
                if node is None:
                    node = parent.children[GARBAGE_COLLECTION] = Node(GARBAGE_COLLECTION)
                stack.append(node)
                threads.collecting = node
                node.start = perf_counter_ns()
            return
        node = getattr(threads, "collecting", None)
        if node is not None:
            threads.collecting = None
            if stack and stack[-1] is node:
                stack.pop()
                node.total += perf_counter_ns() - node.start
                node.calls += 1

    def separate(self) -> None:
        """A forked child's profile: its files get its process id too (see
        :meth:`ReportingContext.separate`), and it is a profile of the child alone.

        Its records start afresh at the fork, as its clock does: the parent's calls are the
        parent's report's, and a call still running at the fork (``os.fork`` itself and its
        callers) is not counted, since the child saw only its end -- its posthook then
        finds nothing of its own on the stack (``_calltree.PyRecording._ended``).  So the
        child's table adds up to the time of the calls it made."""
        super().separate()
        self.files = {key: None if file is None else per_process(file) for key, file in self.files.items()}
        self._lock = rlock()  # the fork may have copied it held by another thread
        stack = getattr(self._threads, "stack", None)
        self._trees = []
        self._threads = threading.local()
        if stack is not None:  # the forking thread, now the child's only one
            tree = ThreadTree(threading.current_thread().name)
            stack[:] = [tree.root]  # the same list: the C hooks keep it (_recording.c's stack_of)
            tree.stack = stack
            self._trees.append(tree)
            self._threads.stack = stack

    def process_ending(self) -> None:
        """The calls still running in this thread are counted as ending now, as cProfile
        counts the calls it has not seen return when it stops: a process that ends inside
        calls (a pool's worker ended by ``terminate()`` is inside its whole loop, a child
        that calls ``os._exit`` inside its caller's) then has a table that adds up to the
        time it ran.  Other threads' running calls are left as they are (see the class)."""
        stack = getattr(self._threads, "stack", None)
        end = perf_counter_ns()
        while stack is not None and len(stack) > 1:
            node = stack.pop()
            node.total += end - node.start
            node.calls += 1

    # -- the data --------------------------------------------------------------------

    def stats(self) -> dict[str, FunctionStats]:
        """Per function name: calls, self and cumulative time (ns), all threads added up."""
        return function_stats(self._trees_now(), self._locations)

    def observed_nothing(self) -> bool:
        """No call was made under the profile (see :meth:`ReportingContext.observed_nothing`)."""
        return not any(tree.root.children for tree in self._trees_now())

    def threads(self) -> list[str]:
        """The names of the threads that made calls, in the order they started."""
        return [t.name for t in self._trees_now()]

    def _trees_now(self) -> list[ThreadTree]:
        with self._lock:
            return list(self._trees)

    def dump(self, file: str | os.PathLike[str]) -> None:
        """Save the raw data as JSON, for :meth:`merge` (``{pid}`` becomes the process id)."""
        data = dump(self._trees_now(), dict(self._locations), os.getpid())  # a copy: threads add to it
        with open(expand(file), "w", encoding="utf-8") as stream:
            stream.write(json.dumps(data, separators=(",", ":")))

    @classmethod
    def merge(cls, files: Iterable[str | os.PathLike[str]], output: Output = None, *,
              remap: Iterable[tuple[str, str]] = (), **options: Any) -> ProfileContext:
        """A profile made of the dumps of several processes (:meth:`dump`, or the ``raw``
        option), to write their reports together; ``options`` are the constructor's.
        Threads are renamed ``name (pid N)`` when the dumps come from several processes.

        ``remap``: ``(old, new)`` directory prefixes of the functions' source files, for
        dumps of sources installed at different places (each file takes the first that
        applies).  Raises :class:`ProfileMergeError`, naming the file, for a file that is
        not a dump, and for dumps written by different versions of cassette_hook."""
        remap = [(os.path.join(old, ""), os.path.join(new, "")) for old, new in remap]
        loaded = []
        versions: dict[str, str] = {}
        for file in files:
            name = os.fspath(file)
            try:
                with open(file, encoding="utf-8") as stream:
                    data = json.load(stream)
                loaded.append(load(data))
            except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
                raise ProfileMergeError(f"{name}: cannot merge: {exc}") from None
            version = data.get("cassette_hook", "unknown")
            other = next(((f, v) for f, v in versions.items() if v != version), None)
            if other is not None:
                raise ProfileMergeError(f"dumps of different versions: {other[0]} was written by cassette_hook "
                                        f"{other[1]}, {name} by {version}; merge the dumps of one version")
            versions[name] = version
        merged = cls(output, **options)
        several = len({pid for _, _, pid in loaded}) > 1
        for trees, locations, pid in loaded:
            for tree in trees:
                if several:
                    tree.name = f"{tree.name} (pid {pid})"
                merged._trees.append(tree)
            for name, (source, line) in locations.items():
                merged._locations.setdefault(name, (_remapped(source, remap), line))
        return merged

    # -- reports ---------------------------------------------------------------------

    def write_report(self) -> None:
        """Write the table to ``output`` and each file given to the constructor."""
        self.write_table(self.output)
        writers = {"speedscope": self.write_speedscope, "collapsed": self.write_collapsed,
                   "dot": self.write_dot, "flamegraph": self.write_flamegraph, "raw": self.dump}
        for key, file in self.files.items():
            if file is not None:
                writers[key](file)

    def table(self, sort: str | None = None, limit: int | None = None) -> str:
        """The table as text: calls, self and cumulative time per function."""
        return _reports.table(self.stats(), self._trees_now(), sort or self.sort,
                              self.limit if limit is None else limit)

    def write_table(self, output: Output = None) -> None:
        """Write :meth:`table` to a path, a text stream or (``None``) ``sys.stderr``."""
        with text_output(output) as stream:
            stream.write(self.table())

    def collapsed(self) -> str:
        """Collapsed stacks: ``frame;frame;frame nanoseconds`` per line."""
        return _reports.collapsed(self._trees_now())

    def write_collapsed(self, file: str | os.PathLike[str] | TextIO) -> None:
        """Write :meth:`collapsed` to a path or a text stream."""
        with text_output(file) as stream:
            stream.write(self.collapsed())

    def speedscope(self) -> dict[str, Any]:
        """The profile in speedscope's file format (a JSON-able dict)."""
        return _reports.speedscope(self._trees_now(), self._locations, self.title)

    def write_speedscope(self, file: str | os.PathLike[str] | TextIO) -> None:
        """Write :meth:`speedscope` as JSON to a path or a text stream."""
        with text_output(file) as stream:
            stream.write(json.dumps(self.speedscope()))  # dumps: json.dump encodes in Python, slowly

    def dot(self) -> str:
        """The call graph in Graphviz's DOT language."""
        trees = self._trees_now()
        return _reports.dot(function_stats(trees, self._locations), trees, self.title)

    def write_dot(self, file: str | os.PathLike[str] | TextIO) -> None:
        """Write :meth:`dot` to a path or a text stream."""
        with text_output(file) as stream:
            stream.write(self.dot())

    def flamegraph(self) -> str:
        """An SVG flame graph, drawn by cassette_hook itself (no other tool needed)."""
        from . import _flamegraph  # (and ``xml.sax.saxutils``: only when one is drawn)

        return _flamegraph.render(_reports.stacks(self._trees_now()), self.title)

    def write_flamegraph(self, file: str | os.PathLike[str] | TextIO) -> None:
        """Write :meth:`flamegraph` to a path or a text stream."""
        with text_output(file) as stream:
            stream.write(self.flamegraph())


class ProfileMergeError(ValueError):
    """:meth:`ProfileContext.merge` was given a file it cannot merge; the message names it."""


def _remapped(source: str, remap: list[tuple[str, str]]) -> str:
    """``source`` with the first ``old`` directory prefix that it starts with made ``new``."""
    for old, new in remap:
        if source.startswith(old):
            return new + source[len(old):]
    return source
