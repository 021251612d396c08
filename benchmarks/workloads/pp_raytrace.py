"""pyperformance ``bm_raytrace``: ray tracer (vector classes, operator-free method calls)."""

from __future__ import annotations

from ._pyperformance import load

NAME = "raytrace"
bm = load("raytrace")


def run() -> None:
    bm.bench_raytrace(1, 12, 12, None)  # loops, width, height, filename
