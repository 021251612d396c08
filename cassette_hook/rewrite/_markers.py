"""Constants a pass may load that the rewriter treats specially (Cassette's ``:nooverdub``
and ``:contextslot``).

They are defined here, below the rewriter, so that it can recognise them; the public
names are ``cassette_hook.nooverdub`` and ``cassette_hook.contextslot`` (see
:mod:`cassette_hook.passes`).
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from typing import Any, Callable, final


@final
class nooverdub:  # Cassette's name, used like a function
    """``nooverdub(g)``: loaded as a constant in place of the callable ``g``, it makes that
    call plain -- never overdubbed: no hooks, no overloads, and ``g`` runs as it is.

    The rewriter leaves every call whose callee this constant is alone and loads ``g``
    itself in its place, so the plain call costs what it costs in plain code.
    """

    __slots__ = ("func",)

    def __init__(self, func: Callable[..., Any]) -> None:
        if not callable(func):
            raise TypeError(f"nooverdub() takes a callable, not {func!r}")
        self.func = func

    def __repr__(self) -> str:
        return f"nooverdub({getattr(self.func, '__qualname__', None) or self.func!r})"


@final
class ContextSlot:
    """The type of :data:`contextslot`: a constant that, where a pass loads it, loads the
    running context instead."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "contextslot"


contextslot = ContextSlot()
