"""pyperformance ``bm_chaos``: chaos-game fractal from B-splines (vector class, floats, random)."""

from __future__ import annotations

from typing import Any

from ._pyperformance import captured_bench_func, load

NAME = "chaos"
bm = load("chaos")
# The program's main() builds the splines and hands chaos.create_image_chaos to the runner.
_bench = captured_bench_func(bm.main, thickness=0.25, width=64, height=64, iterations=250,
                             filename=None, rng_seed=1234)


def run() -> Any:
    return _bench()
