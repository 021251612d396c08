"""Instrument a child process of ``python -m cassette_hook --subprocesses``.

This directory is put first on the children's ``PYTHONPATH``, so Python imports this file
at startup; it installs what the ``CASSETTE_HOOK_*`` variables say, then runs the
``sitecustomize`` it shadows, if there is one.
"""

import os
import sys


def _run_shadowed_sitecustomize() -> None:
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


try:
    import cassette_hook

    cassette_hook.install_from_env()
except Exception as exc:  # never keep a child from starting
    print(f"cassette_hook: cannot instrument this process: {type(exc).__name__}: {exc}", file=sys.stderr)
_run_shadowed_sitecustomize()
