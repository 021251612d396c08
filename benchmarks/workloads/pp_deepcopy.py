"""pyperformance ``bm_deepcopy``: ``copy.deepcopy`` (pure-Python stdlib) of dicts and a dataclass."""

from __future__ import annotations

from ._pyperformance import load

NAME = "deepcopy"
bm = load("deepcopy")


def run() -> None:
    bm.benchmark(10)
