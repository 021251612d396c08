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

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import gc
import json
import os
import sys
import threading
import weakref
from time import perf_counter_ns
from types import FrameType, FunctionType
from typing import Any, Callable, Iterable, TextIO

from . import _reports, _resumes
from .._locks import rlock
from .. import context_stack
from .._own import PACKAGE, RUNS_ON, is_own_frame, is_own_module
from ._base import (Output, ReportingContext, choice, expand, path, per_process, running_thread, text_output,
                    whole_number, yes_no)
from ._calltree import (OWN, FunctionStats, ImportTimer, Node, Recording, ThreadTree, dump, function_stats, load,
                        without_own)
from ._names import location_of, name_of


GENERATOR_VIEWS = ("generator", "caller")
"""The values of ``ProfileContext``'s ``generators``: whose time a generator's is."""

GARBAGE_COLLECTION = "<garbage collection>"
"""The row of the collector's pauses (see :meth:`ProfileContext._collection`)."""

_profiles: weakref.WeakSet[ProfileContext] = weakref.WeakSet()
_OWN_PREFIX = PACKAGE + "."


def _on_collection(phase: str, info: dict[str, int]) -> None:
    """The collector's callback (``gc.callbacks``), registered with the first profile:
    each profile times a full collection's pause in the thread that collects.  (The
    young generations' collections, a few microseconds each, stay in the time of the
    function whose allocations set them off, as any cost of allocating does.)"""
    if info.get("generation") != 2:
        return
    for profile in list(_profiles):
        profile._collection(phase)


def _import_started(module: Any, frame: FrameType | None) -> list[tuple[ProfileContext, Node]] | None:
    """An import of ``module`` starts in this thread (``importlib._bootstrap._find_and_load``,
    see :func:`_watch_imports`), made by code whose frame is ``frame``: each profile that
    is timing calls here starts a call of ``<import module>``.  The imports cassette_hook's
    own code makes (to rewrite, to write a report) are not the program's, and have no row."""
    if type(module) is not str or is_own_module(module) or module.partition(".")[0] in RUNS_ON:
        return None
    while frame is not None and frame.f_code.co_filename.startswith(_IMPORTLIB):
        frame = frame.f_back  # (to the importer: importlib's own functions import parents, fromlists)
    if _made_by_us(frame):
        return None
    started = None
    for profile in list(_profiles):
        node = profile._import_started(module, frame)
        if node is not None:
            if started is None:
                started = []
            started.append((profile, node))
    return started


def _made_by_us(frame: FrameType | None) -> bool:
    """Is the first frame at or above ``frame`` (an importer's) that is neither the
    standard library's (importlib's included) nor of a package cassette_hook runs on
    (``_own.RUNS_ON``) one of ours?  (Our code imports through those too: ``sysconfig`` when it asks where libraries
    live, ``xml.sax.saxutils``'s own imports when a flame graph is drawn, ``bytecode``'s
    submodules.)  A program's script is ``__main__``, not the standard library's, even
    when ``-m`` runs a module of it."""
    while frame is not None and _passed_through(frame):
        frame = frame.f_back
    return frame is not None and is_own_frame(frame)


def _passed_through(frame: FrameType) -> bool:
    if frame.f_code.co_filename.startswith(_IMPORTLIB):
        return True
    name = frame.f_globals.get("__name__")
    return type(name) is str and name.partition(".")[0] in _PASSED_THROUGH


_PASSED_THROUGH = frozenset(sys.stdlib_module_names) | frozenset(RUNS_ON)


def _instrumented(frame: FrameType | None) -> bool:
    """Is ``frame``'s code of a module the import hook instruments?"""
    from ..importhook.finder import installed

    patterns = installed()
    if frame is None or patterns is None:
        return False
    name, file = frame.f_globals.get("__name__"), frame.f_code.co_filename
    return type(name) is str and patterns.matches(name, None if file.startswith("<") else file)  # ("<string>": -c)


def _holds_a_call(node: Node) -> bool:
    """Is there a call of a function under ``node``, not only rows of the profile's own
    (``<import module>``, ``<garbage collection>``)?"""
    pending = list(node.children.values())
    while pending:
        child = pending.pop()
        if child.name != GARBAGE_COLLECTION and not child.name.startswith("<import "):
            return True
        pending.extend(child.children.values())
    return False


def _import_ended(started: list[tuple[ProfileContext, Node]]) -> None:
    """The import that :func:`_import_started` timed has ended (or failed)."""
    for profile, node in started:
        profile._import_ended(node)


_IMPORTLIB = "<frozen importlib._bootstrap"  # (and _bootstrap_external)


def _watch_imports() -> None:
    """Make ``importlib._bootstrap._find_and_load`` tell the profiles when an import starts
    and ends, once per process (docs/contexts.md, "Imports").

    Every import of a module not yet in ``sys.modules`` goes through it, by name: CPython's
    ``import`` statement looks it up on the module at each import (where ``-X importtime``
    times it), and importlib's Python functions (``import_module``, ``__import__``, the
    import of a parent package) through the module's globals.

    Where the profile's C hooks are built, the wrapper is C (``_calltree.ImportTimer``),
    which makes no frame.  The pure-Python one is a frame among importlib's while a
    module's body runs, made to sit there as one of them: its code's file name is
    importlib's, so that CPython takes it out of an import error's traceback with
    importlib's own frames, and ``warnings`` skips it, with them, to find a warning's
    ``stacklevel`` (else a warning of a module's body would be the wrapper's, and not
    shown where the importer's is).  Its ``__module__`` stays ours: cassette_hook never
    instruments it, and a call site that calls it (a rewritten ``importlib.import_module``)
    sees a call of ours (``_calltree.OWN``), the import's row then under the caller."""
    bootstrap: Any = sys.modules["_frozen_importlib"]  # (the module CPython's import statement calls)
    original = bootstrap._find_and_load
    if hasattr(original, "__cassette_hook_wraps__"):
        return
    if ImportTimer is not None:
        bootstrap._find_and_load = ImportTimer(original, _import_started, _import_ended)
        return
    wrapper = _timing_imports(original, sys._getframe)
    code = wrapper.__code__.replace(co_filename=original.__code__.co_filename)
    disguised = FunctionType(code, wrapper.__globals__, original.__name__, None, wrapper.__closure__)
    disguised.__qualname__ = original.__qualname__
    disguised.__doc__ = original.__doc__
    disguised.__wrapped__ = disguised.__cassette_hook_wraps__ = original  # type: ignore[attr-defined]
    bootstrap._find_and_load = disguised


def _timing_imports(original: Callable[..., Any], getframe: Callable[[int], FrameType]) -> Callable[..., Any]:
    """``original`` (importlib's ``_find_and_load``), timed as ``<import name>``; see
    :func:`_watch_imports`.  (The frame below the wrapper's is the importer's: CPython's
    ``import`` statement calls it from C, which makes no frame; there is none when the
    interpreter itself imports with no Python code running, as it imports ``runpy`` for
    ``-m``, where ``sys._getframe(1)`` would raise.)"""

    def _find_and_load(*args: Any, **kwargs: Any) -> Any:
        started = None
        try:  # (started inside: an interrupt as it returns leaves no call of an import running)
            started = _import_started(args[0] if args else kwargs.get("name"), getframe(0).f_back)
            return original(*args, **kwargs)
        finally:
            if started is not None:
                _import_ended(started)

    return _find_and_load


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

    ``generators``: where a generator's or coroutine's time goes.  ``"generator"`` (the
    default, cProfile's accounting): each resume of its frame (``next()``, a ``for``
    loop's step, ``send``, ``throw``, ``await``) is a call of its function, by the call
    that resumes it, and the calls its body makes are that function's callees.
    ``"caller"``: only the call that makes it is seen, and its body runs as part of
    whatever iterates it.  3.10 and 3.11 give the caller's view either way (the other
    needs ``sys.monitoring``): docs/contexts.md, "Generators and coroutines".
    """

    operators = False  # a profile of every a + b, x[i], x < y in every loop is mostly noise, and costs a call each
    option_parsers = {"sort": choice(*_reports.SORT_KEYS), "limit": whole_number, "speedscope": path,
                      "collapsed": path, "dot": path, "flamegraph": path, "raw": path, "operators": yes_no,
                      "generators": choice(*GENERATOR_VIEWS)}

    def __init__(self, output: Output = None, *, sort: str = "self", limit: int | None = None,
                 speedscope: str | os.PathLike[str] | None = None, collapsed: str | os.PathLike[str] | None = None,
                 dot: str | os.PathLike[str] | None = None, flamegraph: str | os.PathLike[str] | None = None,
                 raw: str | os.PathLike[str] | None = None, operators: bool | None = None,
                 generators: str = "generator", metadata: Any = None, pass_: Any = None) -> None:
        super().__init__(output, operators=operators, metadata=metadata, pass_=pass_)
        if sort not in _reports.SORT_KEYS:
            raise ValueError(f"ProfileContext: sort must be one of {', '.join(_reports.SORT_KEYS)}, not {sort!r}")
        if generators not in GENERATOR_VIEWS:
            raise ValueError(f"ProfileContext: generators must be one of {', '.join(GENERATOR_VIEWS)}, "
                             f"not {generators!r}")
        self.sort, self.limit, self.generators = sort, limit, generators
        self.files = {"speedscope": speedscope, "collapsed": collapsed, "dot": dot,
                      "flamegraph": flamegraph, "raw": raw}
        self.title = "cassette_hook profile"
        self._trees: list[ThreadTree] = []
        self._locations: dict[str, tuple[str, int]] = {}
        self._own_calls = False  # a call of a function of ours was seen (see _calltree.OWN)
        self._threads = threading.local()
        self._lock = rlock()  # re-entrant: a report written by a signal handler (_process._on_sigterm)
        if _on_collection not in gc.callbacks:
            gc.callbacks.append(_on_collection)
        _watch_imports()
        _profiles.add(self)
        if generators == "generator":
            _resumes.watch(self)

    prehook = Recording.prehook  # (named here, so that the class registers them as its hooks)
    posthook = Recording.posthook
    raisehook = Recording.raisehook

    def _thread_stack(self) -> list[Node]:
        """The running thread's stack of nodes; a thread's first call makes its tree."""
        try:
            return self._threads.stack  # type: ignore[no-any-return]
        except AttributeError:
            pass
        tree = ThreadTree(running_thread().name)
        with self._lock:
            self._trees.append(tree)
        self._threads.stack = tree.stack
        return tree.stack

    def _child(self, parent: Node, f: Any, key: Any, module: str | None) -> Node:
        """``f``'s node under ``parent``, by its name; ``key`` finds it from now on, unless
        ``parent`` already keys another node by it, or the node keeps a qualname key of
        another module (see ``_recording.c``)."""
        name = name_of(f)
        if name.startswith(_OWN_PREFIX):  # (a function of ours: see _calltree.OWN)
            name = OWN
            self._own_calls = True
        node = parent.children.get(name)
        if node is None:
            node = parent.children[name] = Node(name)
            if name not in self._locations and name != OWN:
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

    def _resuming_stack(self) -> list[Node] | None:
        """The running thread's stack, if this profile times calls here (as for an import:
        see :meth:`_import_started`), for the call of a generator that resumes
        (``_resumes``); else None."""
        stack = getattr(self._threads, "stack", None)
        if stack is None or len(stack) == 1:
            if not self._active_here():
                return None
            stack = self._thread_stack()
        return stack

    def _generator_node(self, parent: Node, name: str, code: Any, key: str | None = None,
                        module: str | None = None) -> Node:
        """The node of the generator function ``name`` (of ``code``) under ``parent``: the
        node of the call that made it, if ``parent`` made it (see ``_resumes``).  ``key``
        (the code's qualname) and its ``module`` find it from now on, as a function's
        qualname finds its node (``_child``), for the C callbacks (``_recording.c``)."""
        node = parent.children.get(name)
        if node is None:
            node = parent.children[name] = Node(name)
            if name not in self._locations:
                self._locations[name] = (code.co_filename, code.co_firstlineno)
        if key is not None and key not in parent.keyed and node.key_module in (None, module):
            parent.keyed[key] = node
            node.key_module = module
        return node

    def _import_started(self, module: str, importer: FrameType | None) -> Node | None:
        """An import of ``module`` starts in this thread, made by the code of ``importer``:
        if this profile times calls here, a call of ``<import module>`` starts, by the
        running call, and is returned, so that its module's body and the imports it makes
        are its calls and not the importer's (docs/contexts.md, "Imports").  It times
        calls inside a profiled call, and at the top of a thread where it is active for
        the imports of code the import hook instruments (a script's body run by the
        command line; not ``multiprocessing``'s resource tracker, which runs none of the
        program's code and must observe nothing)."""
        stack = getattr(self._threads, "stack", None)
        if stack is None or len(stack) == 1:
            if not (_instrumented(importer) and self._active_here()):
                return None
            stack = self._thread_stack()
        name = f"<import {module}>"
        parent = stack[-1]
        node = parent.children.get(name)
        if node is None:
            node = parent.children[name] = Node(name)
        stack.append(node)
        node.start = perf_counter_ns()
        return node

    def _import_ended(self, node: Node) -> None:
        """The import whose call :meth:`_import_started` started has ended: counted and
        timed, if it is still the running call (a fork meanwhile starts the child's records
        afresh: see :meth:`separate`)."""
        end = perf_counter_ns()
        stack = getattr(self._threads, "stack", None)
        if stack and stack[-1] is node:
            stack.pop()
            node.total += end - node.start
            node.calls += 1

    def _active_here(self) -> bool:
        """Is this profile on the running thread's (or task's) stack of contexts?"""
        entry = context_stack.top()
        while entry is not None:
            if entry.ctx is self or getattr(entry.ctx, "_threads", None) is self._threads:  # (or a copy)
                return True
            entry = entry.below
        return False

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
            tree = ThreadTree(running_thread().name)
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
        """No call was made under the profile (see :meth:`ReportingContext.observed_nothing`):
        its rows are at most imports (and collections during them) that made no call, as in
        a ``forkserver`` that preloads the program's main module (docs/contexts.md, "Imports")."""
        return not any(_holds_a_call(tree.root) for tree in self._trees_now())

    def threads(self) -> list[str]:
        """The names of the threads that made calls, in the order they started."""
        return [t.name for t in self._trees_now()]

    def _trees_now(self) -> list[ThreadTree]:
        """The trees, without the nodes of calls of cassette_hook's own functions (a copy
        of them, if there are any: see ``_calltree.OWN``)."""
        with self._lock:
            trees = list(self._trees)
        return without_own(trees) if self._own_calls else trees

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
