"""Load benchmark programs shipped as data files by the installed ``pyperformance``.

``pyperformance`` keeps each benchmark as ``data-files/benchmarks/bm_NAME/run_benchmark.py``
inside its package directory. We import that file as a module (it imports ``pyperf``, which
must be installed too) and call its inner functions directly, without ``pyperf.Runner``.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.resources import files
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable


def benchmark_path(name: str) -> Path:
    """Path of ``bm_<name>/run_benchmark.py`` inside the installed pyperformance."""
    root = files("pyperformance") / "data-files" / "benchmarks" / f"bm_{name}" / "run_benchmark.py"
    path = Path(str(root))
    if not path.is_file():
        raise FileNotFoundError(f"pyperformance has no benchmark {name!r} (looked at {path})")
    return path


def load(name: str) -> Any:
    """Import pyperformance's ``bm_<name>`` program once, as module ``pyperformance_bm_<name>``.

    Typed ``Any``: the program's names are only known at run time.
    """
    modname = f"pyperformance_bm_{name}"
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, benchmark_path(name))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module  # dataclasses and pickling look modules up here
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[modname]
        raise
    return module


class StubRunner:
    """Stands in for ``pyperf.Runner`` in a program's ``main(runner, args)``: records the call."""

    def __init__(self) -> None:
        self.metadata: dict[str, Any] = {}
        self.func: Callable[[], Any] | None = None

    def bench_func(self, name: str, func: Callable[..., Any], *args: Any) -> None:
        self.func = lambda: func(*args)


def captured_bench_func(main: Callable[[StubRunner, SimpleNamespace], Any], **args: Any) -> Callable[[], Any]:
    """Run a program's ``main(runner, args)`` against a stub runner; return what it would benchmark."""
    runner = StubRunner()
    main(runner, SimpleNamespace(**args))
    assert runner.func is not None, "main() did not call runner.bench_func"
    return runner.func
