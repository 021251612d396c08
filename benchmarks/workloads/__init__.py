"""Call-heavy workloads: each module has ``NAME`` and ``run()`` (one unit of work, ~5-50 ms plain).

``pp_*`` modules run programs shipped by the installed ``pyperformance`` package.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Sequence

OWN = ("fib", "interp", "oo_sim", "pipeline", "sorting")
PYPERFORMANCE = ("richards", "chaos", "deltablue", "go", "hexiom", "raytrace", "spectral_norm",
                 "generators", "coroutines", "deepcopy")
ALL = OWN + PYPERFORMANCE


def load(names: Sequence[str] | None = None) -> list[ModuleType]:
    """Import the named workloads (default: all). pyperformance ones that fail are skipped."""
    modules = []
    for name in names or ALL:
        if name not in ALL:
            raise SystemExit(f"unknown workload {name!r}; known: {', '.join(ALL)}")
        modname = f"{__name__}.{'pp_' if name in PYPERFORMANCE else ''}{name}"
        try:
            modules.append(importlib.import_module(modname))
        except ImportError as exc:  # pyperformance / pyperf not installed
            print(f"skipping workload {name}: {exc}", file=sys.stderr)
    return modules
