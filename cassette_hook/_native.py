"""The optional C accelerators: ``_speedups`` (the hot path), or None.

They are built when the package is installed where a C compiler is at hand; without
them, or with ``CASSETTE_HOOK_PURE_PYTHON=1``, every module runs its pure-Python
reference version.  The variable is read once, here, so that all of them agree; the
profile's own extension (``contexts/_recording.c``) is loaded through :func:`optional`
too, by ``contexts/_calltree.py``, when the built-in contexts are first imported.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

PURE_PYTHON = bool(os.environ.get("CASSETTE_HOOK_PURE_PYTHON"))


def optional(name: str) -> Any:
    """The extension module ``name`` (relative to the package), or None where it is not
    built or the pure-Python versions are asked for."""
    if PURE_PYTHON:
        return None
    try:
        return importlib.import_module(name, __package__)
    except ImportError:
        return None


speedups = optional("._speedups")
