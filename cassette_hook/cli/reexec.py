"""The command line runs the program in a fresh interpreter: ``python -m cassette_hook``
``exec``s ``python`` on the program, with the interpreter options it was given.

Why: a program run by the command line in its own process would have the command
line's frames (and ``runpy``'s) below its first frame, where ``python script.py`` has
none.  Code that counts its stack sees the difference (Python-Markdown bounds its
nesting by the depth it counts along ``f_back``).  After the ``exec``, ``python`` itself
starts the program, so the program's first frame has below it exactly what ``python``
gives it: nothing for a script or ``-c`` code, ``runpy``'s two frames for ``-m``, a
directory or a zip file; and its exit status, tracebacks and ``KeyboardInterrupt`` are
``python``'s own.

How: the parent (``__main__.main``) puts a description of the run in the private
variable :data:`VARIABLE` and ``_site`` first on ``PYTHONPATH``; in the new interpreter
``_site/sitecustomize.py`` takes the variable out of the environment (so the program and
its children never see it, and the ``exec`` happens once), puts ``PYTHONPATH`` and
``sys.path`` back as they were, runs the ``sitecustomize`` (and ``usercustomize``) it
shadows, and calls :func:`start`, which makes the contexts, installs the hook and
activates them: everything the command line did in its own process before.

The program's own module must be switched, but ``python`` compiles a script or ``-c``
code itself, with no import hook to ask.  So the parent compiles and switches it and
writes it to a ``.pyc`` file of its own, which ``python`` runs as it runs any ``.pyc``
named on its command line (``python prog.pyc``: no frame of anyone's below it).  What
that would show of the ``.pyc`` -- ``sys.argv[0]``, ``sys.path[0]``, ``__main__``'s
``__file__`` and ``__loader__`` -- is put back to what ``python prog.py`` (or ``-c``)
gives, at the one moment between ``python`` setting them and the program's first
instruction: when ``python`` makes ``__main__``'s loader, by calling
``importlib._bootstrap_external.SourcelessFileLoader`` (:func:`_at_main_loader`).  The
``.pyc`` and its directory are removed then (``python`` has the file open).

Not done (the command line then runs the program in its own process, as before, with
its frames below the program's): under ``-E``, ``-I`` and ``-S`` (``python`` would not
read ``PYTHONPATH``, or not import ``sitecustomize``, and changing those options would
change what the program sees), where the interpreter's command line cannot be read back
from ``sys.orig_argv`` (``main`` called by other code), and on Windows (no ``exec``).
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import json
import os
import sys

from .. import _debug

# (The command line's interpreter needs none of what the run needs: that is imported by
# start, in the interpreter that runs the program.)

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from types import CodeType
    from typing import Any, Sequence

PROG = "python -m cassette_hook"
USAGE = f"{PROG} [options] (script.py | dir | app.zip | -m module | -c code) [args...]"
VARIABLE = "_CASSETTE_HOOK_CLI"  # private: the command line's run, for its exec'd interpreter
SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")
SCRIPT, CODE, MODULE, MAIN_MODULE = "script", "code", "module", "main module"  # the kinds of program


def interpreter_options() -> list[str] | None:
    """The options this interpreter was started with, before ``-m cassette_hook``, as
    typed (``sys.orig_argv``); ``None`` where the program cannot be run by ``exec`` (see
    the module's docstring)."""
    if (os.name != "posix" or not sys.executable or sys.flags.no_site or sys.flags.ignore_environment
            or sys.flags.isolated or _started):
        return None
    program_args = sys.argv[1:]
    if sys.orig_argv[len(sys.orig_argv) - len(program_args):] != program_args:
        return None  # (sys.argv is not the interpreter's: main was not started by python -m)
    return _options_before_module(sys.orig_argv[:len(sys.orig_argv) - len(program_args)],
                                  ("cassette_hook", "cassette_hook.__main__"))


def path0_inserted() -> bool:
    """Did ``python`` put a directory first on ``sys.path`` for this process (for ``-m
    cassette_hook``, the current one)?  Not under ``-I`` nor, from 3.11, ``-P``."""
    return not (sys.flags.isolated or getattr(sys.flags, "safe_path", False))


# Has start run in this process (the program's interpreter)?  The command line is then
# run by the program (``runpy.run_module("cassette_hook")``): never exec'd from there.
_started = False


def _options_before_module(orig_argv: Sequence[str], modules: Sequence[str]) -> list[str] | None:
    """The interpreter options of ``orig_argv`` before ``-m M`` (``M`` one of ``modules``),
    read as ``python`` reads them: flags may be grouped (``-Bu``), ``-W`` and ``-X`` take
    a value, joined or next, and ``-m``'s module may be joined too (``-Im mod``,
    ``-mmod``).  ``None`` if ``orig_argv`` is not a run of one of ``modules``."""
    options: list[str] = []
    index = 1
    while index < len(orig_argv):
        arg = orig_argv[index]
        if arg == "--check-hash-based-pycs":
            options += orig_argv[index: index + 2]
            index += 2
            continue
        if not arg.startswith("-") or arg.startswith("--") or arg == "-":
            return None  # a script, stdin, or an option that ends python's start (--help)
        for position in range(1, len(arg)):
            letter = arg[position]
            if letter in "WX":  # the rest of the argument, or the next one, is its value
                options.append(arg)
                if position == len(arg) - 1:
                    options += orig_argv[index + 1: index + 2]
                    index += 1
                break
            if letter == "m":
                module = arg[position + 1:] or (orig_argv[index + 1] if index + 1 < len(orig_argv) else "")
                if module not in modules:
                    return None
                if position > 1:
                    options.append(arg[:position])
                return options
            if letter == "c":
                return None
        else:
            options.append(arg)
        index += 1
    return None


def exec_program(kind: str, target: str, args: Sequence[str], options: Sequence[str],
                 run: dict[str, Any]) -> None:
    """Replace this process by ``python`` (with ``options``) running the program.

    ``kind`` and ``target`` name it (a script or the ``-c`` code as given, a module, a
    directory or zip file); ``run`` holds what :func:`start` needs in the new
    interpreter.  A script or ``-c`` code is compiled there, not here: the rewriter is
    imported by one interpreter, not two.  Returns only if the ``exec`` fails (the
    command line is then too long, say), having removed what it made."""
    main: dict[str, Any] = {"kind": kind}
    if kind == MODULE:
        command = ["-m", target]
        main.update(module=target)
    elif kind == MAIN_MODULE:
        command = [target]
    else:
        pyc = os.path.join(_private_directory(), "__main__.pyc")
        command = [pyc]
        if kind == SCRIPT:
            main.update(argv0=target, file=absolute(target), path0=os.path.dirname(os.path.realpath(target)))
        else:
            main.update(argv0="-c", source=target, path0="")
        main.update(pyc=pyc)
    pythonpath = os.environ.get("PYTHONPATH")
    run = {**run, "main": main, "orig_argv": list(sys.orig_argv), "pythonpath": pythonpath,
           "path0": sys.path[0] if sys.path and path0_inserted() and not run.get("child") else None}
    environ = dict(os.environ)
    environ[VARIABLE] = json.dumps(run)
    if (pythonpath or "").split(os.pathsep)[0] != SITE:  # (--subprocesses put it there already)
        environ["PYTHONPATH"] = os.pathsep.join([SITE, *filter(None, [pythonpath])])
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        os.execve(sys.executable, [sys.executable, *options, *command, *args], environ)
    except OSError:
        _remove_pyc(main.get("pyc"))


def exec_script_child(environ: dict[str, str]) -> None:
    """In a child Python process of ``--subprocesses`` running a script of the program
    (``subprocess.run([sys.executable, "child.py"])``): ``exec`` ``python`` on it as the
    command line runs its own script, switched, with the contexts ``install_from_env``
    would make (``environ``'s ``CASSETTE_HOOK_*``), so that the child's ``__main__`` is
    instrumented as the command line's is.  Called by ``_site/sitecustomize.py`` before
    anything else runs in the child (the ``sitecustomize`` it shadows runs once, after
    the ``exec``).  Returns where it does not apply (not a script, one the patterns leave
    out, ``-E``/``-I``/``-S``, not POSIX) or where the ``exec`` fails: the child then
    goes on as before, its modules instrumented and its script not."""
    from .. import _process
    from .._process import split

    include = split(environ.get(_process.INCLUDE))
    if (os.name != "posix" or not sys.executable or sys.flags.no_site or sys.flags.ignore_environment
            or sys.flags.isolated or _started or not environ.get(_process.SEPARATE) or not include):
        return
    argv = list(sys.orig_argv)
    index = next((i for i in range(1, len(argv)) if not argv[i].startswith("-")
                  and _options_before_module([*argv[:i], "-m", "_"], ("_",)) is not None), None)
    if index is None or not os.path.isfile(argv[index]) or argv[index].endswith((".pyc", ".zip")):
        return  # (-c, -m, stdin, a directory or zip file, a .pyc: left as they were)
    from ..importhook.finder import Patterns

    script = absolute(argv[index])
    if not Patterns(include, split(environ.get(_process.EXCLUDE))).matches("__main__", script):
        return
    specs = split(environ.get(_process.CONTEXT), ";")
    run = {"include": include, "exclude": split(environ.get(_process.EXCLUDE)), "context": specs,
           "output": environ.get(_process.OUTPUT) or None, "debug": split(environ.get(_process.DEBUG)),
           "eager": bool(environ.get(_process.EAGER)), "subprocesses": True, "warn_include": [], "child": True}
    exec_program(SCRIPT, argv[index], argv[index + 1:], argv[1:index], run)


def _private_directory() -> str:
    """A new directory only this user can use, for the ``.pyc``: made in ``$TMPDIR`` or
    ``/tmp`` without importing ``tempfile`` (with ``shutil``, ``random`` and the
    compression modules, a tenth of the command line's start), else by it."""
    name = f"cassette_hook-{os.getpid()}-{os.urandom(6).hex()}"
    try:
        path = os.path.abspath(os.path.join(os.environ.get("TMPDIR") or "/tmp", name))
        os.mkdir(path, 0o700)
        return path
    except OSError:
        import tempfile

        return tempfile.mkdtemp(prefix="cassette_hook-")


def absolute(path: str) -> str:
    """``path`` made absolute as ``python`` makes its script's: joined to the current
    directory, not normalized (``./prog.py`` stays ``/cwd/./prog.py``)."""
    if path in ("", "."):
        return os.getcwd()
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


# -- in the new interpreter ---------------------------------------------------------------

def start(description: str) -> None:
    """Called by ``_site/sitecustomize.py`` with :data:`VARIABLE`'s value: set up what the
    command line set up in its own process, before the program starts.  A context that
    cannot be made is the command line's usage error (status 2): the program does not
    start.  Whatever else fails, the ``.pyc`` is removed and the error raised."""
    global _started
    from .. import _process
    from ..importhook import switch, unmatched, finder

    _started = True
    run = json.loads(description)
    main = run["main"]
    try:
        code = None if "pyc" not in main else _compile(main)
        sys.orig_argv = run["orig_argv"]  # what was typed: a program restarting itself restarts the command line
        if not run["subprocesses"]:  # (with --subprocesses, children find the hook on PYTHONPATH: it stays)
            if run["pythonpath"] is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = run["pythonpath"]
        _debug.enable(run["debug"])
        contexts = _make_contexts(run["context"], run["output"], run["path0"], main.get("pyc"))
        if run["warn_include"]:
            unmatched.warn_at_exit(run["warn_include"], "--include")
        if main["kind"] == MODULE:  # (switched at import, even lazy: see MAIN_MODULES; a package runs its __main__)
            finder.MAIN_MODULES.update((main["module"], main["module"] + ".__main__"))
        finder.install(run["include"], run["exclude"], lazy=not run["eager"])
        switch.keep_at_shutdown(sys.modules["__main__"])  # it runs switched code
        if code is not None:
            _write_pyc(finder.switch_or_warn(code, "__main__"), main["pyc"])
            _at_main_loader(main)
        if run.get("child"):  # (a child of --subprocesses: as install_from_env would have it)
            _process.separate(contexts)
            _process.reports_only_if_observed()
        _process.activate(contexts)
    except BaseException:
        _remove_pyc(main.get("pyc"))
        raise


def _compile(main: dict[str, Any]) -> CodeType:
    """The program's module code, compiled as ``python`` compiles it; if it does not
    compile, ``python``'s traceback and status 1, before anything else is done."""
    try:
        if main["kind"] == CODE:
            return compile(main["source"], "<string>", "exec", dont_inherit=True)
        with open(main["file"], "rb") as file:
            return compile(file.read(), main["file"], "exec", dont_inherit=True)
    except Exception as exc:  # (a SyntaxError, or a file gone since the command line read it)
        sys.excepthook(type(exc), exc.with_traceback(None), None)  # (no frame of ours: python shows none)
        sys.stderr.flush()
        _remove_pyc(main["pyc"])
        os._exit(1)


def _write_pyc(code: CodeType, path: str) -> None:
    """``code`` as a ``.pyc`` file at ``path``, for ``python`` to run: the header (the magic
    number, then flags, modification time and size, left 0: nothing checks them), then the
    code."""
    import marshal
    from importlib.util import MAGIC_NUMBER

    with open(path, "wb") as file:
        file.write(MAGIC_NUMBER + bytes(12) + marshal.dumps(code))


def _make_contexts(specs: Sequence[str], output: str | None, path0: str | None, pyc: str | None) -> list[Any]:
    """The contexts ``specs`` name, made as the command line made them in its own process,
    where ``sys.path[0]`` was its current directory (``path0``): a ``module:attr`` spec
    finds its module there."""
    from .. import _specs

    if path0 is not None:
        sys.path.insert(0, path0)
    try:
        return _specs.make_all(specs, output)
    except Exception as exc:  # a bad name, option, report file or constructor: the command line's usage error
        message = _specs.describe_error(exc, "--context", "--output")
        print(f"usage: {USAGE}\n{PROG}: error: {message}", file=sys.stderr, flush=True)  # (as argparse says it)
        _remove_pyc(pyc)
        os._exit(2)
    finally:
        if path0 is not None and path0 in sys.path:
            sys.path.remove(path0)


def _remove_pyc(path: str | None) -> None:
    """Remove the ``.pyc`` :func:`exec_program` wrote, and its directory, if they are there."""
    if path is not None:
        for remove, name in ((os.unlink, path), (os.rmdir, os.path.dirname(path))):
            try:
                remove(name)
            except OSError:
                pass


def _at_main_loader(main: dict[str, Any]) -> None:
    """When ``python`` makes ``__main__``'s loader for the ``.pyc`` (after setting
    ``sys.path[0]`` and ``__file__``, just before the code's first instruction), make
    ``__main__``, ``sys.argv[0]`` and ``sys.path[0]`` what ``python`` gives a script
    or ``-c`` code, and remove the ``.pyc``."""
    from importlib import _bootstrap_external as loaders  # where python looks the loader up

    bootstrap: Any = loaders  # (its loader classes are replaced, and put back)
    sourceless = bootstrap.SourcelessFileLoader
    module = sys.modules["__main__"]
    before = module.__dict__.get("__loader__")  # what -c code keeps (python sets none for it)
    pyc = main["pyc"]
    sys.argv[0] = main["argv0"]

    def make_loader(name: str, path: str) -> Any:
        bootstrap.SourcelessFileLoader = sourceless
        _remove_pyc(pyc)
        if sys.path and sys.path[0] == os.path.dirname(os.path.realpath(pyc)):  # (none under -P)
            sys.path[0] = main["path0"]
        if main["kind"] == CODE:
            module.__dict__.pop("__file__", None)
            module.__dict__.pop("__cached__", None)
            return before
        module.__file__ = main["file"]
        return bootstrap.SourceFileLoader(name, main["file"])

    bootstrap.SourcelessFileLoader = make_loader
