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

from ._base import ReportingContext, ReportPathError
from ._calltree import FunctionStats
from .null import NullContext
from .profile import ProfileContext
from .trace import TraceContext

__all__ = ["FunctionStats", "NullContext", "ProfileContext", "ReportPathError", "ReportingContext", "TraceContext"]
