"""The built-in contexts, which the command line names ``null``, ``trace`` and ``profile``.

- :class:`NullContext` overloads nothing: it measures the machinery.
- :class:`TraceContext` writes an indented call tree with arguments, results and
  exceptions.
- :class:`ProfileContext` counts and times every call, and writes a table, speedscope
  JSON, collapsed stacks, a Graphviz call graph and an SVG flame graph.

All three are :class:`ReportingContext` subclasses: built from ``--context
NAME,key=value`` options by ``from_options`` and reporting at exit with ``write_report``.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from typing import TYPE_CHECKING, Any

from ._base import ReportingContext, ReportPathError

if TYPE_CHECKING:
    from ._calltree import FunctionStats
    from .null import NullContext
    from .profile import ProfileContext, ProfileMergeError
    from .trace import TraceContext

_LAZY = {"FunctionStats": "._calltree", "NullContext": ".null", "ProfileContext": ".profile",
         "ProfileMergeError": ".profile", "TraceContext": ".trace"}


def __getattr__(name: str) -> Any:
    """The contexts are imported when first named: ``import cassette_hook`` stays light."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value

__all__ = ["FunctionStats", "NullContext", "ProfileContext", "ProfileMergeError", "ReportPathError", "ReportingContext",
           "TraceContext"]
