"""The optional C accelerator, ``_speedups``, or None.

It is built when the package is installed where a C compiler is at hand; without it, or
with ``CASSETTE_HOOK_PURE_PYTHON=1``, every module runs its pure-Python reference
version.  Read once, here, so that all of them agree.
"""

from __future__ import annotations

import os
from typing import Any


def _load() -> Any:
    if os.environ.get("CASSETTE_HOOK_PURE_PYTHON"):
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    return _speedups


speedups = _load()
