"""The optional C accelerators: ``_speedups`` (the hot path), or None.

They are built when the package is installed where a C compiler is at hand; without
them, or with ``CASSETTE_HOOK_PURE_PYTHON=1``, every module runs its pure-Python
reference version.  The variable is read once, here, so that all of them agree; the
profile's own extension (``contexts/_recording.c``) is loaded through :func:`optional`
too, by ``contexts/_calltree.py``, when the built-in contexts are first imported, and so
is the lazy import hook's function watcher (``importhook/_watch.c``, 3.12+), by
``importhook.lazy_mode``.
"""

from __future__ import annotations

import importlib
import os

TYPE_CHECKING = False  # (not typing's: the lazy hook's first import loads this module, and typing is slow to import)
if TYPE_CHECKING:
    from typing import Any

PURE_PYTHON = bool(os.environ.get("CASSETTE_HOOK_PURE_PYTHON"))


def optional(name: str) -> Any:
    """The extension module ``name`` (relative to the package), or None where it is not
    built or the pure-Python versions are asked for.  In a source checkout where
    ``_speedups`` is not built, the directory of its C sources (``cassette_hook/_speedups/``)
    imports as a namespace package of the same name: that is not the extension either."""
    if PURE_PYTHON:
        return None
    try:
        module = importlib.import_module(name, __package__)
    except ImportError:
        return None
    return None if getattr(module, "__file__", None) is None else module


speedups: Any  # ``_speedups``, or None: loaded when first asked for (by :func:`__getattr__`)


def __getattr__(name: str) -> Any:
    """``speedups``, loaded when a module of the runtime first imports it; not before, since
    the import hook loads this module for its function watcher alone (``lazy_mode``)."""
    if name != "speedups":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    global speedups
    speedups = optional("._speedups")
    return speedups
