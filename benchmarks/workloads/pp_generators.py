"""pyperformance ``bm_generators``: build a binary tree and walk it with recursive ``yield from``."""

from __future__ import annotations

from ._pyperformance import load

NAME = "generators"
bm = load("generators")


def run() -> int:
    return sum(bm.tree(range(4000)))  # bench_generators() uses a 100,000-node tree
