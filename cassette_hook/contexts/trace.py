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
import-time library internals.

Tracing must not change what the program does: values are shown by
``_saferepr.SafeRepr``, which runs none of the program's code (no ``__repr__`` of its
unless ``reprs=user`` asks for them) and keeps no reference to them, a hook never
touches the call's result or exception, and a stream that cannot be written to stops
the trace, not the program.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from typing import Any, Sequence, TextIO, cast

from .._saferepr import SafeRepr
from .._locks import rlock
from ._base import Output, ReportingContext, choice, expand, patterns, positive_number, yes_no
from ._names import ModuleFilter, module_and_qualname, name_of

DEFAULT_DEPTH = 10
REPRS = ("safe", "user")  # the values of the option ``reprs``


def depth_or_all(text: str) -> int | None:
    """A number >= 1, or ``all`` (no limit)."""
    if text.strip().lower() == "all":
        return None
    try:
        return positive_number(text)
    except ValueError:
        raise ValueError("expected a number >= 1, or all") from None


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
    ``include``.  ``width``: how many characters a value may take.  ``operators``:
    operators are not calls unless ``True`` (see :class:`ReportingContext`): without
    them, the Python methods behind operators (``__add__``, ``__getitem__`` ...) and
    their calls are not seen either.

    ``ctx.runcall(f, *args)`` traces the call of ``f`` too (``ch.overdub`` shows only the
    calls inside ``f``).  The trace streams as the program runs; :meth:`write_report`
    flushes it (and closes ``output`` if it is a file the context opened).  Each thread
    has its own indentation; lines from threads other than the one that made the context
    (for the command line's, the main thread) are prefixed ``[thread name]``.
    """

    operators = False  # a trace of a + b, x[i], x < y in every loop is mostly noise
    libraries = False  # nor of the thousands of calls inside json.dumps
    option_parsers = {"depth": depth_or_all, "include": patterns, "exclude": patterns,
                      "libraries": yes_no, "width": positive_number, "reprs": choice(*REPRS),
                      "operators": yes_no}

    def __init__(self, output: Output = None, *, depth: int | None = DEFAULT_DEPTH,
                 include: Sequence[str] | None = None, exclude: Sequence[str] = (),
                 libraries: bool = False, width: int = 60, reprs: str = "safe", operators: bool | None = None,
                 metadata: Any = None, pass_: Any = None) -> None:
        super().__init__(output, operators=operators, metadata=metadata, pass_=pass_)
        if depth is not None and depth < 1:
            raise ValueError(f"TraceContext: depth must be at least 1 (or None), not {depth!r}")
        self.depth = depth
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
        self._wrote = False
        # a path: its file, opened at the first line (a process that traces nothing makes
        # none); None: sys.stderr, looked up at each line
        self._stream = None if self._owned else cast("TextIO | None", output)
        if self._owned and not os.path.isdir(os.path.dirname(os.path.abspath(expand(output)))):  # type: ignore[arg-type]
            # what opening it now would say (the command line then refuses to start)
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", os.fspath(output))  # type: ignore[arg-type]

    @classmethod
    def class_options(cls, *, libraries: bool = False, include: Sequence[str] | None = None,
                      **kwargs: Any) -> dict[str, Any]:
        """``libraries`` and ``include`` choose the libraries recursed into (the class
        option ``libraries``): all of them, or those ``include`` names (traced inside)."""
        entered: bool | tuple[str, ...] = True if libraries else tuple(include) if include is not None else False
        return {**super().class_options(**kwargs), "libraries": entered}

    def prehook(self, f: Any, /, *args: Any, **kwargs: Any) -> None:
        """A call starts: it is shown, unless the depth is reached or ``include`` /
        ``exclude`` hide it (then the calls inside it are shown in its place)."""
        try:
            shown, ends, _ = self._threads.stacks
        except AttributeError:
            shown, ends, _ = self._stacks()
        if (self.depth is not None and len(shown) >= self.depth) or not (
                self.filter.everything or self.filter.shows(module_and_qualname(f)[0])):
            ends.append(False)
            return
        shown.append(_Call(name_of(f), self._arguments(args, kwargs)))
        ends.append(True)

    def posthook(self, out: Any, f: Any, /, *args: Any, **kwargs: Any) -> None:
        """The call returned: write it with its result."""
        self._ended("->", out)

    def raisehook(self, exc: BaseException, f: Any, /, *args: Any, **kwargs: Any) -> None:
        """The call raised: write it with its exception."""
        self._ended("!!", exc)

    def _ended(self, arrow: str, value: Any) -> None:
        """Write a call that ended, opening its outer calls first if they are not yet."""
        try:
            shown, ends, thread = self._threads.stacks
        except AttributeError:  # (a call this thread's hooks did not see start)
            return
        if ends.pop():
            call = shown.pop()
            if call.opened:
                self._line(len(shown), f"{call.name} {arrow} {self.abbreviate(value)}", thread)
            else:
                if shown and not shown[-1].opened:  # (opened calls are a prefix of the stack)
                    self._open(shown, thread)
                self._line(len(shown), f"{call.name}({call.arguments}) {arrow} {self.abbreviate(value)}", thread)

    def write_report(self) -> None:
        """Flush the trace; close ``output`` if the context opened it (later calls are
        then not written)."""
        with self._lock:
            try:
                stream = self._destination()  # (an empty trace is still a file)
                stream.flush()
                if self._owned:
                    stream.close()
            except (OSError, ValueError):
                pass
            self._closed = self._owned

    def separate(self) -> None:
        """A forked child's trace goes on in a file of its own (see
        :meth:`ReportingContext.separate`); a stream is shared with the parent."""
        super().separate()
        self._lock = rlock()  # the fork may have copied it held by another thread
        if self._owned and not self._closed and self._stream is not None:
            try:
                self._stream.close()  # line-buffered: nothing of the parent's is left in it
            except (OSError, ValueError):
                pass
            self._stream = None  # the child's file is opened at its first line

    def observed_nothing(self) -> bool:
        """No line was written (see :meth:`ReportingContext.observed_nothing`)."""
        return not self._wrote

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

    def _stacks(self) -> tuple[list[_Call], list[bool], threading.Thread | None]:
        """This thread's calls being shown, outermost first; for each call running (shown
        or not), whether it was shown; and the thread, unless it is the one that made the
        context (its lines are not prefixed).  Made by its first call, and read where
        they are needed, as ``self._threads.stacks``."""
        thread = threading.current_thread()
        self._threads.stacks = ([], [], None if thread is self._home else thread)
        return self._threads.stacks  # type: ignore[no-any-return]  # threading.local is untyped

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        abbreviate = self.abbreviate
        texts = [abbreviate(a) for a in args]
        if kwargs:
            # (a key may be a str subclass: its own text, not its __format__)
            texts.extend(f"{str.__str__(k)}={abbreviate(v)}" for k, v in kwargs.items())
        return ", ".join(texts)

    def _open(self, outer: list[_Call], thread: threading.Thread | None) -> None:
        for depth, call in enumerate(outer):
            if not call.opened:
                call.opened = True
                self._line(depth, f"{call.name}({call.arguments})", thread)

    def _line(self, depth: int, text: str, thread: threading.Thread | None) -> None:
        """Write a line of ``thread`` (None: the thread that made the context)."""
        line = "  " * depth + text + "\n"
        if thread is not None:
            line = f"[{thread.name}] {line}"
        with self._lock:
            if self._closed:
                return
            try:
                stream = self._stream if self._stream is not None else self._destination()
                try:
                    stream.write(line)
                except UnicodeEncodeError:  # a stream that cannot take some character of a value
                    stream.write(line.encode("ascii", "backslashreplace").decode("ascii"))
                self._wrote = True
            except (OSError, ValueError):  # closed, broken or not to be opened: stop tracing, not the program
                self._closed = True


class _Call:
    """A call being shown: its text, and whether its opening line was written."""

    __slots__ = ("name", "arguments", "opened")

    def __init__(self, name: str, arguments: str) -> None:
        self.name = name
        self.arguments = arguments
        self.opened = False
