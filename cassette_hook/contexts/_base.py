"""``ReportingContext``: how the command line builds a context and collects its report.

``python -m cassette_hook --context 'NAME,key=value,...' --output FILE`` knows nothing
about the context it runs except this protocol, so a third-party context that follows
it is as usable from the command line as the built-in ones.  The option values arrive as
strings; each context says how to parse its own, and a bad one is refused before the
program starts, with a message that names it and lists the valid keys.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import contextlib
import os
import sys
import threading
from typing import Any, Callable, ClassVar, Mapping, TextIO, TypeVar, Union

from ..context_stack import Context

Output = Union[str, "os.PathLike[str]", TextIO, None]
"""Where a report goes: a path, an open text stream, or ``None`` for ``sys.stderr``."""

R = TypeVar("R", bound="ReportingContext")


class ReportingContext(Context):
    """A context that can be built from command-line options and writes a report at exit.

    The command line (and anything else driving a whole run) does::

        ctx = cls.from_options({"key": "value", ...}, output)   # output: a path or None
        with ctx:
            ...                                                   # run the program
        ctx.write_report()                                        # even after an error

    A subclass lists its options in :attr:`option_parsers`, one constructor keyword
    argument each, and overrides :meth:`write_report`.  Its constructor takes the report's
    destination as its first argument, ``output``.

    The constructor also takes ``operators=True`` or ``False``, overriding the class option
    ``operators`` (are operators call sites?) for this context.  That option belongs to
    the class, because the rewritten code is shared per class, so such a context is an
    instance of a subclass made for it (its name is the same; ``isinstance`` holds).
    Subclasses turn more constructor options into class options the same way
    (:meth:`class_options`).
    """

    option_parsers: ClassVar[Mapping[str, Callable[[str], Any]]] = {}
    """Option key -> a function parsing its string value (raising ``ValueError`` if it is
    bad).  Each key is also the name of a keyword argument of the constructor."""

    def __new__(cls, *args: Any, **kwargs: Any) -> ReportingContext:
        options = {key: value for key, value in cls.class_options(**kwargs).items() if getattr(cls, key) != value}
        return super().__new__(_variant(cls, options) if options else cls)

    @classmethod
    def class_options(cls, *, operators: bool | None = None, **kwargs: Any) -> dict[str, Any]:
        """The class options that the constructor's keyword arguments ``kwargs`` ask for
        (``operators``; subclasses add theirs)."""
        return {} if operators is None else {"operators": bool(operators)}

    def runcall(self, f: Any, /, *args: Any, **kwargs: Any) -> Any:
        """``ch.overdub(self, f, *args, **kwargs)`` with the call of ``f`` itself hooked
        too -- its ``prehook``, then ``posthook`` or ``raisehook`` -- as
        ``cProfile.Profile.runcall`` profiles it: ``f`` is then the root of a trace or a
        profile.  (``overdub`` alone hooks only the calls inside ``f``, for every context.)
        The hooks run with the context popped, as at any call site."""
        from .. import context_stack, generics
        from ..runtime import callees

        top = context_stack.top()
        with self if top is None or top.ctx is not self else contextlib.nullcontext():  # (active: once)
            entry = context_stack.top()
            assert entry is not None
            hooked = self.hooks_enabled
            if hooked:
                callees.run_popped(entry, generics.prehook, (self, f, *args), kwargs)
            try:
                out = generics.overdub(self, f, *args, **kwargs)
            except BaseException as exc:
                if hooked:
                    callees.run_popped(entry, generics.raisehook, (self, exc, f, *args), kwargs)
                raise
            if hooked:
                callees.run_popped(entry, generics.posthook, (self, out, f, *args), kwargs)
        return out

    def __init__(self, output: Output = None, *, operators: bool | None = None, metadata: Any = None,
                 pass_: Any = None) -> None:
        super().__init__(metadata, pass_)  # operators: taken by __new__
        self.output = output

    @classmethod
    def from_options(cls: type[R], options: Mapping[str, str], output: str | None = None) -> R:
        """Build a context from ``--context NAME,key=value,...`` options (all strings) and
        ``--output`` (``None``: standard error).  Raises ``ValueError`` naming the bad key
        or value and listing the valid keys, and :class:`ReportPathError` if ``output`` or
        an option parsed by :func:`path` names a file that cannot be written -- before the
        program runs, rather than after it, when the report would be lost."""
        valid = ", ".join(sorted(cls.option_parsers)) or "none"
        kwargs: dict[str, Any] = {}
        for key, value in options.items():
            parse = cls.option_parsers.get(key)
            if parse is None:
                raise ValueError(f"{cls.__name__}: unknown option {key!r} (valid options: {valid})")
            try:
                kwargs[key] = parse(value)
            except ValueError as exc:
                raise ValueError(f"{cls.__name__}: bad value for option {key}={value!r}: {exc} "
                                 f"(valid options: {valid})") from None
            if parse is path:
                check_writable(value, f"{cls.__name__}: cannot write {key}={value!r}", key)
        if isinstance(output, (str, os.PathLike)):  # (not a stream, nor None: standard error)
            check_writable(output, f"{cls.__name__}: cannot write its report to {output!r}", None)
        return cls(output, **kwargs)

    def write_report(self) -> None:
        """Write what the context gathered to :attr:`output`.  Nothing, by default."""

    def observed_nothing(self) -> bool:
        """Whether the report would be empty: then a process that ``install_from_env``
        instrumented (multiprocessing's resource tracker, say) does not write it.
        ``False`` by default: the report is always written."""
        return False

    def updating_here(self) -> bool:
        """Whether this thread is in the middle of updating what the report is written
        from (a signal handler interrupted it there): SIGTERM's handler then writes the
        report later, from a whole state, rather than from a half-made one.  ``False`` by
        default."""
        return False

    def process_ending(self) -> None:
        """Called before :meth:`write_report` when the process is about to end (at exit, in
        ``os._exit``, on SIGTERM), in the thread that ends it: the calls running in that
        thread will never return.  Nothing, by default."""

    def open_output(self) -> contextlib.AbstractContextManager[TextIO]:
        """``with self.open_output() as stream:`` -- a text stream for :attr:`output`: the
        stream itself, ``sys.stderr`` for ``None``, or the named file, opened for writing
        (UTF-8, ``{pid}`` replaced by the process id) and closed at the end of the block."""
        return text_output(self.output)

    def separate(self) -> None:
        """Make this process's reports go to files of its own: called in a child process
        that has a copy of its parent's context (after a fork), so that the child does not
        overwrite the parent's reports.  Each report file ``name.ext`` becomes
        ``name.{pid}.ext`` (a name that has ``{pid}`` already is left as it is); a stream
        stays as it is.  Subclasses that write files or hold locks extend it."""
        if isinstance(self.output, (str, os.PathLike)):
            self.output = per_process(self.output)


_variants: dict[tuple[type, frozenset[tuple[str, Any]]], type] = {}


def _variant(cls: type[R], options: dict[str, Any]) -> type[R]:
    """``cls`` with these class options set (made once per class and values)."""
    key = (cls, frozenset(options.items()))
    variant = _variants.get(key)
    if variant is None:
        namespace = {**options, "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
        variant = _variants.setdefault(key, type(cls.__name__, (cls,), namespace))
    return variant


# -- parsing option values -------------------------------------------------------------

def whole_number(text: str) -> int:
    """An integer >= 0."""
    if not text.strip().isdigit():
        raise ValueError("expected a whole number (0, 1, 2 ...)")
    return int(text)


def positive_number(text: str) -> int:
    """An integer >= 1."""
    number = whole_number(text)
    if number < 1:
        raise ValueError("expected a number >= 1")
    return number


def yes_no(text: str) -> bool:
    """``yes``/``no`` (or ``true``/``false``, ``on``/``off``, ``1``/``0``)."""
    answer = {"yes": True, "true": True, "on": True, "1": True,
              "no": False, "false": False, "off": False, "0": False}.get(text.strip().lower())
    if answer is None:
        raise ValueError("expected yes or no")
    return answer


def patterns(text: str) -> tuple[str, ...]:
    """Module patterns separated by ``+`` (a character shells leave alone and module names
    never contain), for instance ``mypkg+other.sub+tests.*``."""
    found = tuple(p.strip() for p in text.split("+"))
    if not all(found):
        raise ValueError("expected module patterns separated by '+', such as mypkg+other.*")
    return found


def path(text: str) -> str:
    """A file name (``{pid}`` in it becomes the process id)."""
    if not text.strip():
        raise ValueError("expected a file name")
    return text


def choice(*names: str) -> Callable[[str], str]:
    """One of ``names``."""

    def parse(text: str) -> str:
        if text not in names:
            raise ValueError(f"expected one of {', '.join(names)}")
        return text

    return parse


# -- writing reports -------------------------------------------------------------------

class ReportPathError(ValueError):
    """A report would go to a file that cannot be written.  ``option`` is the context
    option naming the file, or ``None`` for the report's ``output``."""

    def __init__(self, message: str, option: str | None) -> None:
        super().__init__(message)
        self.option = option


def check_writable(file: str | os.PathLike[str], what: str, option: str | None) -> None:
    """Raise :class:`ReportPathError` (``what: why``) unless ``file`` (``{pid}`` expanded)
    could be written now: its directory exists and is writable, and it is not a directory
    nor a file we may not write.  Nothing is created or truncated."""
    name = os.path.abspath(expand(file))
    directory = os.path.dirname(name)
    if os.path.isdir(name):
        why = f"{name!r} is a directory"
    elif not os.path.exists(directory):
        why = f"no such directory {directory!r}"
    elif not os.path.isdir(directory):
        why = f"{directory!r} is not a directory"
    elif os.path.exists(name):
        why = "" if os.access(name, os.W_OK) else f"no permission to write {name!r}"
    else:
        why = "" if os.access(directory, os.W_OK | os.X_OK) else f"no permission to create files in {directory!r}"
    if why:
        raise ReportPathError(f"{what}: {why}", option)


def expand(file: str | os.PathLike[str]) -> str:
    """A report's file name, with ``{pid}`` replaced by this process's id: the processes of
    one run (a parent and its children, each with the same options) write apart."""
    return os.fspath(file).replace("{pid}", str(os.getpid()))


def per_process(file: str | os.PathLike[str]) -> str:
    """``name.ext`` -> ``name.{pid}.ext``, unless the name has ``{pid}`` already."""
    name = os.fspath(file)
    if "{pid}" in name:
        return name
    stem, suffix = os.path.splitext(name)
    return f"{stem}.{{pid}}{suffix}"


class text_output:
    """A text stream for ``output`` (``with``): the stream itself, ``sys.stderr`` for ``None``,
    or the named file, opened for writing (UTF-8) and closed afterwards.  A class, not a
    ``contextlib.contextmanager``, whose Python code would look ``next`` and ``getattr`` up
    in the program's builtins (``_builtins``)."""

    def __init__(self, output: Output) -> None:
        self._output = output
        self._file: TextIO | None = None

    def __enter__(self) -> TextIO:
        output = self._output
        if output is None:
            return sys.stderr
        if isinstance(output, (str, os.PathLike)):
            self._file = open(expand(output), "w", encoding="utf-8")
            return self._file
        return output

    def __exit__(self, *exc_info: object) -> None:
        if self._file is not None:
            self._file.close()


def running_thread() -> threading.Thread:
    """``threading.current_thread()``, without making a dummy thread of one that
    ``threading`` is still starting.

    A thread the program starts under a context whose plan reaches into ``threading``
    runs its bootstrap overdubbed (docs/contexts.md, "Threads"): its first call is seen
    before ``Thread._bootstrap_inner`` has registered it, where ``current_thread()`` would
    register a ``_DummyThread`` in its place.  It is then in ``threading._limbo``, and
    the thread that starts it waits until it is registered; of several threads started
    at once, the first is taken (the name may then be another's of them).
    """
    thread = getattr(threading, "_active", {}).get(threading.get_ident())
    if isinstance(thread, threading.Thread):
        return thread
    starting = [t for t in list(getattr(threading, "_limbo", {})) if isinstance(t, threading.Thread)]
    return starting[0] if starting else threading.current_thread()
