"""The command line, ``python -m cassette_hook``: run a program as ``python`` would, instrumented.

    python -m cassette_hook [--include P]... [--exclude P]... [--context SPEC]...
                            [--output FILE] [--subprocesses] [--debug CATEGORY[,CATEGORY]]
                            (script.py | dir | app.zip | -m module | -c code) [args...]
    python -m cassette_hook combine FILE... [options]      (see ``combine``)
    python -m cassette_hook attach PID --context SPEC... [options]   (see ``attach``)

The program sees what it would see under ``python``: ``sys.argv``, ``sys.path[0]``,
``__main__``, ``__file__``, the frames below its first one; its exit status,
``sys.exit``, uncaught exceptions and ``KeyboardInterrupt`` are ``python``'s.  The
contexts are active for the whole run; their reports are written at exit.

The command line checks its options, then ``exec``s ``python`` on the program, which
sets up the hook and the contexts at start-up (``reexec``).  Where it cannot (``-E``,
``-I``, ``-S``, ``main`` called by other code), it runs the program in its own process
(:func:`_run_here`): the same, but with its own frames below the program's (and trimmed from
an uncaught exception's traceback).
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import os
import sys
import types

from .. import __version__, _debug
from . import reexec
from .options import trace_inside

# (What the program's run needs is imported where it runs: in the interpreter this one is
# replaced by, or, where it is not, in _run_here.  This one only reads the command line.)

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    import argparse
    from typing import NoReturn, Sequence

_WITH_VALUE = {"--include", "--exclude", "--context", "--output", "--debug"}


class _Options:
    """What the command line asks for, with the defaults of the options not given (the
    parser keeps none of its own: it fills this in)."""

    def __init__(self) -> None:
        self.include: list[str] = []
        self.exclude: list[str] = []
        self.context: list[str] = []
        self.output: str | None = None
        self.eager = False
        self.subprocesses = False
        self.debug: list[str] = []
        self.list_contexts = False
        self.version = False
        self.module: str | None = None
        self.code: str | None = None
        self.script: str | None = None


def _parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog=reexec.PROG,
        usage=reexec.USAGE,
        description="Run a Python program with its modules instrumented and contexts active.",
        epilog="By default the script's directory (for -m, the module's top package; for -c, the current "
               "directory) is instrumented. Standard library and site-packages modules are instrumented "
               "only when named by --include.",
    )
    parser.add_argument("--include", action="append", metavar="P",
                        help="instrument modules matching P: a module name (with its submodules), "
                             "a glob over module names, or a directory (repeatable); the trace context "
                             "then shows the calls inside the libraries P names too (unless given its own "
                             "libraries= option)")
    parser.add_argument("--exclude", action="append", metavar="P",
                        help="do not instrument modules matching P (repeatable)")
    parser.add_argument("--context", action="append", metavar="SPEC",
                        help="activate a context for the whole run: NAME (see --list-contexts) or "
                             "module:attr, optionally followed by ,key=value options (repeatable; "
                             "the last is innermost)")
    parser.add_argument("--output", metavar="FILE", help="where the contexts write their reports (default: stderr)")
    parser.add_argument("--eager", action="store_true",
                        help="switch every instrumented module's functions as it is imported, even while no "
                             "context is active (by default they are switched when a context is first "
                             "activated: a fast start for a run that activates one late, or never)")
    parser.add_argument("--subprocesses", action="store_true",
                        help="instrument child Python processes the same way (subprocess, multiprocessing)")
    parser.add_argument("--debug", action="append", metavar="CATEGORY[,CATEGORY]",
                        help="say on stderr what cassette_hook decides; 'import': for each import, whether "
                             "it was rewritten, why, and what the code cache did (repeatable)")
    parser.add_argument("--list-contexts", action="store_true", help="list the contexts --context can name and exit")
    parser.add_argument("--version", action="store_true",
                        help="show the version, the Python, and which C accelerators load (or why the "
                             "pure-Python runtime runs), and exit")
    parser.add_argument("-m", dest="module", metavar="module", help="run a library module as a script")
    parser.add_argument("-c", dest="code", metavar="code", help="run a program passed in as a string")
    parser.add_argument("script", nargs="?",
                        help="the program to run: a script, or a directory or zip file with a __main__.py")
    return parser


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Our options and the program's target, then the program's own arguments.

    Like ``python``, everything after the script, ``-m module`` or ``-c code`` belongs to
    the program, even if it looks like one of our options.
    """
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg in ("-m", "-c"):
            return list(argv[: index + 2]), list(argv[index + 2:])
        if arg == "--":
            return list(argv[:index]) + list(argv[index + 1: index + 2]), list(argv[index + 2:])
        if not arg.startswith("-"):
            return list(argv[: index + 1]), list(argv[index + 1:])
        index += 2 if arg in _WITH_VALUE else 1
    return list(argv), []


def _parse(own: list[str]) -> _Options:
    """``own`` read as the parser reads it.  A bare ``-c code``, ``-m module`` or script,
    which the parser could only read one way, is read without it: building it imports
    ``argparse`` with ``gettext`` and ``locale`` (and, from 3.12, ``shutil`` to size the
    help), a fifth of ``python -c pass``.  (A value starting with ``-`` is the parser's to
    accept or refuse.)"""
    options = _Options()
    if len(own) == 2 and own[0] in ("-c", "-m") and not own[1].startswith("-"):
        if own[0] == "-c":
            options.code = own[1]
        else:
            options.module = own[1]
    elif len(own) == 1 and not own[0].startswith("-"):
        options.script = own[0]
    else:
        _parser().parse_args(own, namespace=options)
    return options


def _version() -> str:
    """``cassette_hook 0.1.0 (CPython 3.14.10; C accelerators: _speedups, _recording, _watch,
    _assembly, _decoding, _stacking)``: the accelerators that load, or why the pure-Python runtime runs
    (``_native.accelerators``), which a user cannot otherwise tell (the fallback is silent:
    docs/cli.md)."""
    import platform

    from .. import _native

    python = f"{platform.python_implementation()} {platform.python_version()}"
    return f"cassette_hook {__version__} ({python}; {_native.accelerators()})"


def _usage_error(message: str) -> NoReturn:
    """Usage, then ``message``, on stderr; exit status 2 (the parser's own errors)."""
    _parser().error(message)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "combine":  # (a script named combine: python -m cassette_hook -- combine)
        from . import combine

        return combine.main(args[1:])
    if args and args[0] == "attach":  # (likewise: python -m cassette_hook -- attach)
        from . import attach

        return attach.main(args[1:])
    own, program_args = _split(args)
    options = _parse(own)
    if options.version:
        print(_version())
        return 0
    if options.list_contexts:
        _list_contexts()
        return 0
    targets = [t for t in (options.script, options.module, options.code) if t is not None]
    if len(targets) != 1:
        _usage_error("give exactly one of: a script, -m module, -c code")
    for patterns, option in ((options.include, "--include"), (options.exclude, "--exclude")):
        if "" in patterns:  # (what ch.install refuses: the only pattern a command line can give it)
            _usage_error(f"{option}: a pattern must be a non-empty string, not ''")
    try:
        _debug.enable(options.debug)
    except ValueError as exc:
        _usage_error(f"--debug: {exc}")
    include = options.include or [_default_include(options)]
    options.context = [trace_inside(spec, options.include) for spec in options.context]
    interpreter = reexec.interpreter_options() if argv is None else None
    if interpreter is not None:
        _exec_program(options, include, program_args, interpreter)  # (returns only if exec failed)
    return _run_here(options, include, program_args)


def _run_here(options: _Options, include: list[str], program_args: list[str]) -> int:
    """Run the program in this process: where it cannot be ``exec``ed (``reexec``)."""
    from .. import _process, _specs
    from ..importhook import unmatched, finder

    try:
        contexts = _specs.make_all(options.context, options.output)
    except Exception as exc:  # a bad name, option, report file or constructor: the error, not our traceback
        _usage_error(_specs.describe_error(exc, "--context", "--output"))
    if options.subprocesses:
        from . import subprocesses

        subprocesses.propagate(include, options.exclude, options.context, options.output, options.debug,
                                options.eager)
    elif options.include:  # (children may import what the parent does not)
        unmatched.warn_at_exit(options.include, "--include")
    finder.install(include, options.exclude, lazy=not options.eager)
    _process.activate(contexts)
    return _run(options, program_args)


def _exec_program(options: _Options, include: list[str], args: list[str], interpreter: list[str]) -> None:
    """Run the program as ``python`` (with the ``interpreter`` options this one has) runs
    it, in this process, replaced by it (``reexec``).  A script that cannot be read is
    ``python``'s message and status 2, here.  Returns where ``exec`` fails, as it was.
    """
    environ = dict(os.environ)
    if options.subprocesses:
        from . import subprocesses

        subprocesses.propagate(include, options.exclude, options.context, options.output, options.debug,
                                options.eager)
    run = {"include": include, "exclude": options.exclude, "context": options.context, "output": options.output,
           "debug": options.debug, "eager": options.eager, "subprocesses": options.subprocesses,
           # (with --subprocesses, children may import what this process does not: no warning)
           "warn_include": [] if options.subprocesses else options.include}
    if options.module is not None:
        kind, target = reexec.MODULE, options.module
    elif options.code is not None:
        kind, target = reexec.CODE, options.code
    else:
        assert options.script is not None  # (main checked: exactly one target)
        kind, target = reexec.SCRIPT, options.script
        path = reexec.absolute(target)
        if _runs_as_main_module(path):
            kind = reexec.MAIN_MODULE
        else:
            _read_script(path)  # (python is given another file: it would not say this one is missing)
    reexec.exec_program(kind, target, args, interpreter, run)
    os.environ.clear()  # (what --subprocesses set: the caller sets it again)
    os.environ.update(environ)


def _read_script(path: str) -> bytes:
    """The source of the script at ``path``; if there is none, ``python``'s message, status 2."""
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        print(f"{sys.executable}: can't open file {path!r}: [Errno {exc.errno}] {exc.strerror}", file=sys.stderr)
        sys.exit(2)


def _default_include(options: _Options) -> str:
    if options.module is not None:
        return options.module.partition(".")[0]
    if options.code is not None:
        return os.getcwd()
    assert options.script is not None  # (main checked: exactly one target)
    if _runs_as_main_module(reexec.absolute(options.script)):
        return os.path.realpath(options.script)  # the directory or zip file is the program
    return os.path.dirname(os.path.realpath(options.script))


def _list_contexts() -> None:
    from .. import _specs

    for name, reference in sorted(_specs.available().items()):
        try:
            doc = (_specs.load(name).__doc__ or "").strip().splitlines()[0]
        except Exception as exc:  # a broken third-party entry point: say so, list the rest
            doc = f"(cannot load {reference}: {exc})"
        print(f"{name:12} {doc}")
    for entry_point in _specs.shadowing():  # (a clash is the declaring package's to fix: say so, on stderr)
        package = getattr(entry_point.dist, "name", "an installed package")
        print(f"python -m cassette_hook: entry point {entry_point.name!r} of {package} ignored: {entry_point.name!r} "
              f"names the built-in context; name that one as {entry_point.value!r}", file=sys.stderr)


def _run(options: _Options, args: list[str]) -> int:
    from ..importhook import finder

    try:
        if options.module is not None:
            import runpy

            # (switched at import, even lazy: see MAIN_MODULES; a package runs its __main__)
            finder.MAIN_MODULES.update((options.module, options.module + ".__main__"))
            sys.argv = [options.module, *args]  # runpy puts the module's file in argv[0]
            sys.modules["__main__"] = _fresh_main()  # what runpy runs the module in
            runpy._run_module_as_main(options.module, alter_argv=True)  # type: ignore[attr-defined]  # private: what -m uses
        elif options.code is not None:
            sys.argv = ["-c", *args]
            _set_path0("")
            _exec_main(compile(options.code, "<string>", "exec", dont_inherit=True), None)
        else:
            assert options.script is not None  # (main checked: exactly one target)
            _run_script(options.script, args)
    except SystemExit:
        raise
    except BaseException as exc:  # what python would print, then its exit status
        _print_uncaught(exc)
        if isinstance(exc, KeyboardInterrupt):
            _die_of_sigint()
        return 1
    return 0


def _runs_as_main_module(path: str) -> bool:
    """Does ``python path`` run ``path``'s ``__main__`` module rather than ``path`` itself?

    It does when an import hook of ``sys.path_hooks`` takes ``path`` -- a directory, or a
    zip file whatever its name -- as ``runpy.run_path`` and ``python``'s own start-up
    decide.  Anything else is read as a script.
    """
    import pkgutil

    return pkgutil.get_importer(path) is not None


def _run_main_module(path: str, script: str, args: list[str]) -> None:
    """Run a directory or zip file as ``python`` does: ``path`` first on ``sys.path``, then
    its ``__main__`` module through ``runpy`` (found by the import hook, so instrumented
    when the include patterns cover it, as they do by default).  ``runpy`` itself prints
    "can't find '__main__' module in ..." and exits with status 1."""
    import runpy

    sys.argv = [script, *args]
    if reexec.path0_inserted():
        sys.path[0] = path
    else:
        sys.path.insert(0, path)  # (python puts it there even under -I)
    sys.modules["__main__"] = _fresh_main()  # what runpy runs the module in
    runpy._run_module_as_main("__main__", alter_argv=False)  # type: ignore[attr-defined]


def _run_script(script: str, args: list[str]) -> None:
    path = reexec.absolute(script)
    if _runs_as_main_module(path):
        _run_main_module(path, script, args)
        return
    source = _read_script(path)
    sys.argv = [script, *args]
    _set_path0(os.path.dirname(os.path.realpath(script)))
    _exec_main(compile(source, path, "exec", dont_inherit=True), path)


def _set_path0(path: str) -> None:
    """Make ``sys.path[0]`` what ``python`` makes it for a script or ``-c`` code: ``path``,
    or, where it puts none (``reexec.path0_inserted``), none."""
    if reexec.path0_inserted():
        sys.path[0] = path


def _fresh_main() -> types.ModuleType:
    import builtins

    from ..importhook import switch

    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=builtins, __spec__=None, __package__=None)
    if sys.version_info < (3, 15):  # (3.15 gives a script's __main__ no __cached__)
        main.__dict__["__cached__"] = None
    switch.keep_at_shutdown(main)  # it runs switched code
    return main


def _exec_main(code: types.CodeType, path: str | None) -> None:
    from ..importhook import finder

    main = _fresh_main()
    if path is not None:
        from importlib.machinery import SourceFileLoader

        main.__file__ = path
        main.__loader__ = SourceFileLoader("__main__", path)  # type: ignore[assignment,unused-ignore]  # (3.15 typeshed)
    sys.modules["__main__"] = main
    exec(finder.switch_or_warn(code, "__main__"), main.__dict__)


def _print_uncaught(exc: BaseException) -> None:
    """Print ``exc`` as Python would at exit, starting at the program's first frame.  (The
    ``runpy`` frames of ``-m`` and of a directory stay: ``python`` shows them too.)"""
    from .._own import is_own_frame

    tb = exc.__traceback__
    while tb is not None and is_own_frame(tb.tb_frame):
        tb = tb.tb_next
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # 3.12 prints exc.__traceback__


def _die_of_sigint() -> NoReturn:
    """End as python does after an uncaught ``KeyboardInterrupt``: killed by SIGINT."""
    import signal

    from .. import _process

    _process.write_reports()
    sys.stdout.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    sys.exit(130)  # not reached where SIGINT kills
