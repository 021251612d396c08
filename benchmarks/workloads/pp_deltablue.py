"""pyperformance ``bm_deltablue``: incremental constraint solver (deep class hierarchies)."""

from __future__ import annotations

from ._pyperformance import load

NAME = "deltablue"
bm = load("deltablue")


def run() -> None:
    bm.delta_blue(60)
