"""pyperformance ``bm_hexiom``: Hexiom puzzle solver (search, small classes, StringIO output)."""

from __future__ import annotations

from ._pyperformance import load

NAME = "hexiom"
bm = load("hexiom")


def run() -> None:
    bm.main(1, 25)  # one loop of the default level; main() checks the answer
