"""``NullContext``: a context that overloads nothing.

Running a program under it costs only what cassette_hook's machinery costs -- the
rewritten call sites, the twins, recursing into every call -- with no hook to call, so it
is the baseline that the price of any other context is measured against.  It also checks
the contract that a context that overloads nothing leaves the results unchanged.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from ._base import ReportingContext


class NullContext(ReportingContext):
    """Overloads nothing: calls are recursed into and otherwise run as they are.

    It takes no options and has no report (``write_report`` writes nothing, not even to
    ``output``).
    """
