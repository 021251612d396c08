"""pyperformance ``bm_spectral_norm``: eigenvalue by power method (``map`` with Python callbacks)."""

from __future__ import annotations

from ._pyperformance import load

NAME = "spectral_norm"
bm = load("spectral_norm")
bm.DEFAULT_N = 25  # matrix size; the program's default is 130


def run() -> None:
    bm.bench_spectral_norm(1)
