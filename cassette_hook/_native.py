"""The optional C accelerator, ``_speedups``, or None.

It is built when the package is installed where a C compiler is at hand; without it, or
with ``CASSETTE_HOOK_PURE_PYTHON=1``, every module runs its pure-Python reference
version.  Read once, here, so that all of them agree (``PURE_PYTHON`` says so to the
profile's own extension, ``contexts/_recording.c``, loaded by ``contexts/_calltree.py``).
"""

from __future__ import annotations

import os
from typing import Any


PURE_PYTHON = bool(os.environ.get("CASSETTE_HOOK_PURE_PYTHON"))


def _load() -> Any:
    if PURE_PYTHON:
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    return _speedups


speedups = _load()
