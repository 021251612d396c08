"""pyperformance ``bm_go``: Monte-Carlo tree search for Go (seeded ``random``, many small methods)."""

from __future__ import annotations

from ._pyperformance import load

NAME = "go"
bm = load("go")
bm.GAMES = 5  # playouts per move; the program's default is 200


def run() -> int:
    return bm.versus_cpu()
