"""The hot path's entry points, for the modules below it.

Calls go both ways between the hot path and what it runs: a call site runs a builtin
whose Python callback is a call site again (``primitives``), recurses into an operator
whose Python dunder is one (``operators``), constructs a class whose ``__init__`` is one
(``callees``), and the twins a plan makes have call sites that call it (``plan``).
Imports go one way: ``callsites``, the top of the runtime, imports those modules, and as
it loads it publishes here the functions they call back -- its own, or the C hot path's
(``_speedups``) where that is built.  They read them as attributes of this module at
each call, which costs what reading them off ``callsites`` did.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..rewrite import Hooks

resolve: Callable[[Any], Any]
"""What a rewritten call site calls in place of its callee."""
call: Callable[..., Any]
"""``call(f, *args, **kwargs)``: one call site, in one step."""
construct_by_ref: Callable[..., Any]
"""``construct_by_ref(ref, *args, **kwargs)``: construct the class ``ref()`` overdubbed."""
hooks: Hooks
"""What the twins' rewritten sites call (constants in their code)."""


def publish(*, resolve: Callable[[Any], Any], call: Callable[..., Any], construct_by_ref: Callable[..., Any],
            hooks: Hooks) -> None:
    """Make these the hot path's entry points (``callsites``, once, as it loads)."""
    namespace = globals()
    namespace.update(resolve=resolve, call=call, construct_by_ref=construct_by_ref, hooks=hooks)
