"""Instrument a Python process at start-up: the program ``python -m cassette_hook`` runs,
and the child processes of ``python -m cassette_hook --subprocesses``.

This directory is put first on ``PYTHONPATH``, so Python imports this file at startup.
In the interpreter the command line ``exec``s to run its program (``reexec``, named by
the private variable it sets), this file takes itself off ``sys.path``, runs the
``sitecustomize`` and ``usercustomize`` it shadows (before the hook, as under ``python``),
then sets up the command line's run.  Anywhere else, it installs what the
``CASSETTE_HOOK_*`` variables say, then runs the ``sitecustomize`` it shadows, if there
is one.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_CLI = "_CASSETTE_HOOK_CLI"  # (cassette_hook.cli.reexec.VARIABLE: not imported before it is needed)


def _run_shadowed_sitecustomize() -> None:
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


def _start_command_line_run(description: str) -> None:
    """Set up the run of ``python -m cassette_hook`` that ``exec``ed this interpreter.

    ``cassette_hook`` is imported from the directory this file's package is in: the
    command line found it there, perhaps through a ``sys.path[0]`` the program does not
    have.  A failure ends the process: the program must not run uninstrumented."""
    import site

    while _HERE in sys.path:
        sys.path.remove(_HERE)
    sys.path_importer_cache.pop(_HERE, None)
    try:
        _run_shadowed_sitecustomize()
    except Exception as err:  # as site itself says it
        sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(err).__name__}: {err}\n")
    if site.ENABLE_USER_SITE:  # (site runs it after this file: it is then imported already)
        site.execusercustomize()
    packages = os.path.dirname(os.path.dirname(_HERE))
    sys.path.insert(0, packages)
    try:
        from cassette_hook.cli import reexec
    finally:
        sys.path.remove(packages)
    reexec.start(description)


if _CLI in os.environ:
    try:
        _start_command_line_run(os.environ.pop(_CLI))
    except BaseException as exc:
        print(f"cassette_hook: cannot run the program: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        os._exit(1)
else:
    try:
        import cassette_hook

        if os.environ.get("CASSETTE_HOOK_SEPARATE"):  # a child of --subprocesses: a script of it runs switched
            from cassette_hook.cli import reexec

            reexec.exec_script_child(dict(os.environ))  # (returns only where it does not apply)
        cassette_hook.install_from_env()
    except Exception as exc:  # never keep a child from starting
        print(f"cassette_hook: cannot instrument this process: {type(exc).__name__}: {exc}", file=sys.stderr)
    _run_shadowed_sitecustomize()
