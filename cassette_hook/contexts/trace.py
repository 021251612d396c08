"""``TraceContext``: an indented call tree with arguments, results and exceptions.

It is made of three hooks: ``prehook`` starts a call, and ``posthook`` or ``raisehook``
(exactly one of them follows each prehook) ends it with its result or its exception.
Hooks put no frame of ours between the program's, so a traced program's ``logging``
caller fields, ``inspect.stack()`` and tracebacks are its own.  The trace is
written as the program runs; to keep it short, a call that shows no call of its own is
written as one line when it ends, ``name(args) -> result``, and a call that does is
opened by its first shown callee and closed by ``name -> result``.

What it shows by default is meant to be read: the program's own calls -- into its own
functions, builtins and libraries -- but not the calls inside the standard library or
installed packages (those run as one call each: the class option ``libraries`` of
``Context``; ``libraries=yes`` shows their insides), operators only when asked
(``operators=yes``), and ten levels at most (``depth=all`` shows every level).  A whole
program's trace with everything in it runs to hundreds of thousands of lines, mostly of
import-time library internals; and even without them, a program's loops repeat the same
calls millions of times.  So a run of calls of one shape in one caller is one entry
(``fold``: each call holds the lines of its calls back, a bounded number, until it knows
whether they fold), and the text stops at ``lines`` lines, saying how many it left out.
The ``timeline`` (``_timeline``) keeps each call of a run: a timeline is read for time.

Tracing must not change what the program does: values are shown by
``_saferepr.SafeRepr``, which runs none of the program's code (no ``__repr__`` of its
unless ``reprs=user`` asks for them) and keeps no reference to them, a hook never
touches the call's result or exception, and a stream that cannot be written to stops
the trace, not the program.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import errno
import os
import sys
import threading
import time
from typing import Any, Sequence, TextIO, cast

from .._locks import held_levels, rlock
from .._own import PACKAGE
from .._saferepr import SafeRepr
from . import _timeline
from ._base import (Output, ReportingContext, choice, expand, path, patterns, per_process, positive_number,
                    running_thread, yes_no)
from ._names import ModuleFilter, module_and_qualname, name_of

DEFAULT_DEPTH = 10
DEFAULT_LINES = 10_000  # the default cap of the text trace: a long read, not a 300 MB file
DEFAULT_EVENTS = 100_000  # and of the timeline's calls (a viewer opens that many at ease)
DEFAULT_FOLD = 3  # a run of this many calls of one shape, in a row, is one entry
HOLD = 200  # the most lines a call holds back, to fold them (a bigger call is written as it runs)
_OWN_PREFIX = PACKAGE + "."  # a callee named so is a function of ours (a wrapper a call site calls): never shown
REPRS = ("safe", "user")  # the values of the option ``reprs``


def depth_or_all(text: str) -> int | None:
    """A number >= 1, or ``all`` (no limit)."""
    if text.strip().lower() == "all":
        return None
    try:
        return positive_number(text)
    except ValueError:
        raise ValueError("expected a number >= 1, or all") from None


def count_or_all(text: str) -> int | None:
    """A number >= 1, or ``all`` (no cap)."""
    return depth_or_all(text)


def yes_no_or_patterns(text: str) -> bool | tuple[str, ...]:
    """``yes`` or ``no`` (as :func:`yes_no`), or module patterns separated by ``+``."""
    try:
        return yes_no(text)
    except ValueError:
        pass
    try:
        return patterns(text)
    except ValueError:
        raise ValueError("expected yes, no, or module patterns separated by '+', such as mypkg+other.*") from None


def fold_count(text: str) -> int | None:
    """A number >= 2, or ``no`` (nothing is folded)."""
    if text.strip().lower() in ("no", "off", "false", "0"):
        return None
    if text.strip().isdigit() and int(text) >= 2:
        return int(text)
    raise ValueError("expected a number >= 2, or no")


class TraceContext(ReportingContext):
    """Write the call tree of the code it runs: one line per call, indented by depth.

    ``output``: a path, an open text stream, or ``None`` for ``sys.stderr`` (looked up at
    each line, so redirection works).  ``depth``: how many levels of calls to show
    (default 10; ``None``: all).  ``include`` / ``exclude``: module patterns (as for
    ``Context.include``) choosing the calls shown by their callee's module -- for
    instance ``exclude=("builtins",)`` hides builtins; hidden calls still run, and the
    calls inside them are shown in their place.  ``libraries``: ``False`` (the default)
    runs a Python function or class of the standard library or of an installed package
    as one call, shown with its result, without showing the calls inside it (but
    showing the program's own functions it calls back, where the import hook
    instrumented them); ``True`` traces inside them too, as does naming their module in
    ``include``, and a sequence of module patterns traces inside those libraries
    (showing the rest as usual).  ``width``: how many characters a value may take.
    ``operators``: operators are not calls unless ``True`` (see
    :class:`ReportingContext`): without them, the Python methods behind operators
    (``__add__``, ``__getitem__`` ...) and their calls are not seen either.

    What a long run writes stays readable: ``fold`` calls of one shape in a row in one
    caller (the same callee, ending the same way, with the same calls inside) are one
    entry, the first of them, marked ``(× N, the first shown)`` (``fold=None``: none
    are folded); and the text stops at ``lines`` lines (``None``: no cap), ending with a
    line that says how many were left out.  ``timeline``: a file to write the calls to
    as a timeline (:mod:`._timeline`), at most ``events`` of them (``None``: all).

    ``ctx.runcall(f, *args)`` traces the call of ``f`` too (``ch.overdub`` shows only the
    calls inside ``f``).  The trace streams as the program runs (a run of calls that may
    fold is held back until it ends, at most a few hundred lines); :meth:`write_report`
    writes what was held, flushes (and closes ``output`` if it is a file the context
    opened) and writes the timeline.  Each thread has its own indentation; lines from
    threads other than the one that made the context (for the command line's, the main
    thread) are prefixed ``[thread name]``.
    """

    operators = False  # a trace of a + b, x[i], x < y in every loop is mostly noise
    libraries = False  # nor of the thousands of calls inside json.dumps
    option_parsers = {"depth": depth_or_all, "include": patterns, "exclude": patterns,
                      "libraries": yes_no_or_patterns, "width": positive_number, "reprs": choice(*REPRS),
                      "operators": yes_no, "lines": count_or_all, "fold": fold_count, "timeline": path,
                      "events": count_or_all}

    def __init__(self, output: Output = None, *, depth: int | None = DEFAULT_DEPTH,
                 include: Sequence[str] | None = None, exclude: Sequence[str] = (),
                 libraries: bool | Sequence[str] = False, width: int = 60, reprs: str = "safe",
                 operators: bool | None = None, lines: int | None = DEFAULT_LINES,
                 fold: int | None = DEFAULT_FOLD, timeline: str | os.PathLike[str] | None = None,
                 events: int | None = DEFAULT_EVENTS, metadata: Any = None, pass_: Any = None) -> None:
        super().__init__(output, operators=operators, metadata=metadata, pass_=pass_)
        for name, value, least in (("depth", depth, 1), ("lines", lines, 1), ("events", events, 1),
                                   ("fold", fold, 2)):
            if value is not None and (not isinstance(value, int) or value < least):
                raise ValueError(f"TraceContext: {name} must be a number >= {least} (or None), not {value!r}")
        self.depth = depth
        self.lines = lines
        self.fold = fold
        self.events = events
        self.timeline = timeline
        self.filter = ModuleFilter(include, exclude)
        if reprs not in REPRS:
            raise ValueError(f"TraceContext: reprs must be one of {', '.join(REPRS)}, not {reprs!r}")
        self.reprs = reprs
        self.abbreviate = SafeRepr(width, user=reprs == "user")
        self._threads = threading.local()
        self._lock = rlock()  # re-entrant: a report written by a signal handler (_process._on_sigterm)
        self._home = threading.current_thread()  # (a thread object: idents are reused)
        self._owned = isinstance(output, (str, os.PathLike))
        self._closed = False
        self._ended_any = False  # a shown call ended (written, held or recorded)
        self._written = 0  # lines written
        self._left_out = 0  # lines not written, past the cap
        self._states: list[_Thread] = []  # every thread's (to write what they hold at the report)
        self._recorded: list[tuple[str, int, int, int, str, str, str]] = []  # the timeline's calls
        self._unrecorded = 0  # calls past its cap
        self._clock = _timeline.Clock()
        self._thread_names: dict[int, str] = {}
        self._process = ""  # what a forked child's lines start with on a stream it shares with its parent
        # a path: its file, opened at the first line (a process that traces nothing makes
        # none); None: sys.stderr, looked up at each line
        self._stream = None if self._owned else cast("TextIO | None", output)
        if self._owned and not os.path.isdir(os.path.dirname(os.path.abspath(expand(output)))):  # type: ignore[arg-type]
            # what opening it now would say (the command line then refuses to start)
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", os.fspath(output))  # type: ignore[arg-type]

    @classmethod
    def class_options(cls, *, libraries: bool | Sequence[str] = False, include: Sequence[str] | None = None,
                      **kwargs: Any) -> dict[str, Any]:
        """``libraries`` and ``include`` choose the libraries recursed into (the class
        option ``libraries``): all of them, or those ``include`` or ``libraries`` names
        (traced inside)."""
        entered: bool | tuple[str, ...]
        if libraries is True:
            entered = True
        else:
            named = (*(() if libraries is False else libraries), *(include if include is not None else ()))
            entered = tuple(dict.fromkeys(named)) if named else False
        return {**super().class_options(**kwargs), "libraries": entered}

    # -- the hooks -------------------------------------------------------------------

    def prehook(self, f: Any, /, *args: Any, **kwargs: Any) -> None:
        """A call starts: it is shown, unless the depth is reached or ``include`` /
        ``exclude`` hide it (then the calls inside it are shown in its place)."""
        try:
            state = self._threads.state
        except AttributeError:
            state = self._state()
        stack = state.stack
        if (self.depth is not None and len(stack) >= self.depth) or not (
                self.filter.everything or self.filter.shows(module_and_qualname(f)[0])):
            state.ends.append(False)
            return
        name = name_of(f)
        if name.startswith(_OWN_PREFIX):  # a wrapper of ours: the calls it makes are shown in its place
            state.ends.append(False)
            return
        # (past both caps, the values are not shown anywhere: not worth their reprs)
        arguments = "" if self._capped() else self._arguments(args, kwargs)
        stack.append(_Frame(name, arguments, time.perf_counter_ns()))
        state.ends.append(True)

    def posthook(self, out: Any, f: Any, /, *args: Any, **kwargs: Any) -> None:
        """The call returned: write it with its result."""
        self._ended("->", out)

    def raisehook(self, exc: BaseException, f: Any, /, *args: Any, **kwargs: Any) -> None:
        """The call raised: write it with its exception."""
        self._ended("!!", exc)

    def _capped(self) -> bool:
        return (self.lines is not None and self._written >= self.lines) and (
            self.timeline is None or (self.events is not None and len(self._recorded) >= self.events))

    def _ended(self, arrow: str, value: Any) -> None:
        """A shown call ended: fold it into its caller's run of calls, or write it."""
        end = time.perf_counter_ns()
        try:
            state = self._threads.state
        except AttributeError:  # (a call this thread's hooks did not see start)
            return
        if not state.ends.pop():
            return
        shown = "" if self._capped() else self.abbreviate(value)
        with self._lock:
            stack = state.stack
            if not stack:  # (its start was before a fork: separate() dropped it, the child's trace starts there)
                return
            frame = stack.pop()
            self._ended_any = True
            if self.timeline is not None:
                self._record(frame, end, arrow, shown, state)
            depth = len(stack)
            parent = stack[-1] if stack else state.root
            indent = "  " * depth
            if frame.streaming:  # (its opening line and its calls are written: so is its caller's)
                self._settle(frame, depth + 1, state)
                self._write([f"{indent}{frame.name} {arrow} {shown}"], state)
                return
            self._settle(frame, depth + 1, state)
            if frame.held:
                lines = [f"{indent}{frame.name}({frame.arguments})", *frame.held,
                         f"{indent}{frame.name} {arrow} {shown}"]
            else:
                lines = [f"{indent}{frame.name}({frame.arguments}) {arrow} {shown}"]
            if not stack:  # (the outermost calls have no caller to fold them in: written as they end)
                self._write(lines, state)
                return
            key = (frame.name, arrow, tuple(frame.shape)) if frame.shape is not None else None
            run = parent.run
            if run is not None and key is not None and run.key == key and self.fold is not None:
                run.count += 1
                if run.count < self.fold:
                    run.instances.append(lines)
                    parent.size += len(lines)
                elif run.count == self.fold:  # folded from now on: the first one stands for them
                    parent.size -= sum(map(len, run.instances[1:]))
                    del run.instances[1:]
            else:
                self._settle(parent, depth, state)
                parent.run = _Run(key, lines)
                parent.size += len(lines)
            if not parent.streaming and parent.size > HOLD:
                self._stream_from(state, depth - 1)

    def _settle(self, frame: _Frame, depth: int, state: _Thread) -> None:
        """The run of calls ``frame`` holds (at ``depth``) is over: write it, or, if
        ``frame`` is itself held, add it to ``frame``'s lines and shape."""
        run = frame.run
        if run is None:
            return
        frame.run = None
        if self.fold is not None and run.count >= self.fold:
            first = run.instances[0]
            lines = [f"{first[0]}  (× {run.count}, the first shown)", *first[1:]]
        else:
            lines = [line for instance in run.instances for line in instance]
        if frame.streaming:
            frame.size = 0
            self._write(lines, state)
        else:
            frame.held.extend(lines)
            frame.size = len(frame.held)
            if frame.shape is not None:
                frame.shape.append((run.key, run.count))
                if run.key is None:
                    frame.shape = None

    def _stream_from(self, state: _Thread, innermost: int) -> None:
        """Write what the calls up to ``state.stack[innermost]`` hold, outermost first:
        from now on they are written as they run (and do not fold)."""
        self._settle(state.root, 0, state)
        for depth, frame in enumerate(state.stack[:innermost + 1]):
            if frame.streaming:
                self._settle(frame, depth + 1, state)
                continue
            frame.streaming = True
            frame.shape = None
            held, frame.held = frame.held, []
            self._write([f"{'  ' * depth}{frame.name}({frame.arguments})", *held], state)
            self._settle(frame, depth + 1, state)

    def _record(self, frame: _Frame, end: int, arrow: str, shown: str, state: _Thread) -> None:
        if self.events is not None and len(self._recorded) >= self.events:
            self._unrecorded += 1
            return
        self._recorded.append((frame.name, frame.start, end, state.tid, frame.arguments,
                               "exception" if arrow == "!!" else "result", shown))

    # -- the report ------------------------------------------------------------------

    def write_report(self) -> None:
        """Write what the trace holds back (the runs of calls that may fold, in every
        thread, and the calls still running), the line that says what the cap left out,
        flush the trace and close ``output`` if the context opened it (later calls are
        then not written); and write the timeline."""
        with self._lock:
            for state in list(self._states):
                # (a call still running is written as far as it got: opened if calls of
                # its have ended, as when it streams, and not if none has)
                innermost = max((depth for depth, frame in enumerate(state.stack)
                                 if frame.streaming or frame.held or frame.run is not None), default=-1)
                self._stream_from(state, innermost)
            if self._left_out:
                self._write_line(f"... {self._left_out} more lines left out: the trace stops at {self.lines} "
                                 "lines (the option lines=all shows them all)\n")
                self._left_out = 0
            try:
                stream = self._destination()  # (an empty trace is still a file)
                stream.flush()
                if self._owned:
                    stream.close()
            except (OSError, ValueError):
                pass
            self._closed = self._owned
            if self.timeline is not None:
                self.write_timeline(self.timeline)

    def timeline_data(self) -> dict[str, Any]:
        """The timeline, a Chrome Trace Event format object (:mod:`._timeline`): a
        complete event per call (``args``: its arguments and its result or exception, as
        the trace shows them), and the names of the process and the threads."""
        with self._lock:
            recorded = list(self._recorded)
            unrecorded = self._unrecorded
            names = dict(self._thread_names)
        pid = os.getpid()
        us = self._clock.microseconds
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": _timeline.process_label()}}]
        events.extend({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
                      for tid, name in names.items())
        for name, start, end, tid, arguments, outcome, shown in recorded:
            ts = us(start)
            events.append({"name": name, "cat": "call", "ph": "X", "ts": ts, "dur": max(0.0, round(us(end) - ts, 3)),
                           "pid": pid, "tid": tid, "args": {"arguments": arguments, outcome: shown}})
        return _timeline.document(events, unrecorded, self.events)

    def write_timeline(self, file: str | os.PathLike[str]) -> None:
        """Write the timeline to ``file`` (``{pid}`` becomes the process id)."""
        try:
            _timeline.write(expand(file), self.timeline_data())
        except OSError as exc:  # (checked writable when made: the program's end is not ours to spoil)
            print(f"cassette_hook: cannot write the timeline {os.fspath(file)!r}: {exc}", file=sys.stderr)

    def separate(self) -> None:
        """A forked child's trace goes on in a file of its own (see
        :meth:`ReportingContext.separate`), as does its timeline; a stream is shared with
        the parent, and the child's lines there say its process id.  What the parent held
        back or recorded is the parent's to write.

        The child's trace starts at the fork, at the top, as a profile's records start
        afresh there: the calls running when the process forked (``os.fork``, the pool's
        or the ``Process``'s start, and their callers) are the parent's, shown in the
        parent's trace, and their ends are not shown in the child's.  So ``depth`` counts
        from the fork: a fork deeper than it (a pool's worker forked inside
        ``multiprocessing``'s code, traced under ``libraries=yes``) still shows the calls
        the child makes."""
        super().separate()
        self._lock = rlock()  # the fork may have copied it held by another thread
        if self.timeline is not None:
            self.timeline = per_process(self.timeline)
        self._recorded = []
        self._unrecorded = 0
        self._written = self._left_out = 0
        if not self._owned:
            self._process = f"[pid {os.getpid()}] "
        state = getattr(self._threads, "state", None)
        self._states = []
        self._thread_names = {}
        if state is not None:  # the forking thread, now the child's only one
            state.root.run = None
            del state.stack[:]  # (their ends: ``ends`` says they were shown, and _ended finds no frame)
            state.tid = threading.get_native_id()
            self._register(state)
        if self._owned and not self._closed and self._stream is not None:
            try:
                self._stream.close()  # line-buffered: nothing of the parent's is left in it
            except (OSError, ValueError):
                pass
            self._stream = None  # the child's file is opened at its first line

    def updating_here(self) -> bool:
        """This thread holds the lock of the trace's state: a call's end being folded or
        written, a line half-written to the file (see
        :meth:`ReportingContext.updating_here`)."""
        return held_levels(self._lock) > 0

    def observed_nothing(self) -> bool:
        """No call was shown (see :meth:`ReportingContext.observed_nothing`)."""
        return not self._ended_any

    def _destination(self) -> TextIO:
        """Where lines go (call it holding the lock): the file, opened at the first call,
        the stream, or ``sys.stderr``."""
        if self._stream is None:
            if not self._owned:
                return sys.stderr
            self._stream = self._open_file()
        return self._stream

    def _open_file(self) -> TextIO:
        """The trace file, line-buffered: a line is in the file once written, even if the
        process ends abruptly or forks."""
        return open(expand(cast("str | os.PathLike[str]", self.output)), "w", encoding="utf-8", buffering=1)

    # -- the tree --------------------------------------------------------------------

    def _state(self) -> _Thread:
        """This thread's calls being shown; made by its first call, and read where it is
        needed as ``self._threads.state``."""
        thread = running_thread()
        state = self._threads.state = _Thread(None if thread is self._home else thread)
        with self._lock:
            self._register(state)
        return state

    def _register(self, state: _Thread) -> None:
        self._states.append(state)
        self._thread_names[state.tid] = running_thread().name

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        abbreviate = self.abbreviate
        texts = [abbreviate(a) for a in args]
        if kwargs:
            # (a key may be a str subclass: its own text, not its __format__)
            texts.extend(f"{str.__str__(k)}={abbreviate(v)}" for k, v in kwargs.items())
        return ", ".join(texts)

    def _write(self, lines: list[str], state: _Thread) -> None:
        """Write lines of ``state``'s thread (call it holding the lock), up to the cap."""
        prefix = self._process if state.thread is None else f"{self._process}[{state.thread.name}] "
        for line in lines:
            if self.lines is not None and self._written >= self.lines:
                self._left_out += 1
            elif self._write_line(f"{prefix}{line}\n"):
                self._written += 1

    def _write_line(self, line: str) -> bool:
        """Write one line (call it holding the lock); whether it was."""
        if self._closed:
            return False
        try:
            stream = self._stream if self._stream is not None else self._destination()
            try:
                stream.write(line)
            except UnicodeEncodeError:  # a stream that cannot take some character of a value
                stream.write(line.encode("ascii", "backslashreplace").decode("ascii"))
            return True
        except (OSError, ValueError):  # closed, broken or not to be opened: stop tracing, not the program
            self._closed = True
            return False


class _Run:
    """Calls of one shape in a row in one caller: the lines of the first ones (of the
    first only, once there are enough of them to fold), and how many there were."""

    __slots__ = ("key", "instances", "count")

    def __init__(self, key: Any, lines: list[str]) -> None:
        self.key = key  # (name, arrow, shape of its calls), or None: never folded
        self.instances = [lines]
        self.count = 1


class _Frame:
    """A call being shown: its text and start, and what it holds back -- the lines of
    its calls that ended (``held``), their shape (``shape``: ``None`` once it cannot
    fold), and the run of calls of one shape that ended last (``run``) -- until it is
    ``streaming``: its opening line written, and its calls as they end."""

    __slots__ = ("name", "arguments", "start", "streaming", "held", "shape", "run", "size")

    def __init__(self, name: str, arguments: str, start: int, streaming: bool = False) -> None:
        self.name = name
        self.arguments = arguments
        self.start = start
        self.streaming = streaming
        self.held: list[str] = []
        self.shape: list[Any] | None = []
        self.run: _Run | None = None
        self.size = 0  # lines held, in held and run


class _Thread:
    """A thread's trace: its calls being shown (``stack``, outermost first; ``root``
    holds the run of its outermost calls), whether each call running was shown
    (``ends``), and the thread, unless it is the one that made the context (its lines are
    not prefixed)."""

    __slots__ = ("stack", "ends", "thread", "root", "tid")

    def __init__(self, thread: threading.Thread | None) -> None:
        self.stack: list[_Frame] = []
        self.ends: list[bool] = []
        self.thread = thread
        self.root = _Frame("", "", 0, streaming=True)
        self.tid = threading.get_native_id()
