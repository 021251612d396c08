"""pyperformance ``bm_coroutines``: recursive ``async def`` Fibonacci driven by ``send``."""

from __future__ import annotations

from typing import Any

from ._pyperformance import load

NAME = "coroutines"
bm = load("coroutines")


def run() -> Any:
    coro = bm.fibonacci(21)  # bench_coroutines() uses 25; drive it the same way
    try:
        while True:
            coro.send(None)
    except StopIteration as stop:
        return stop.value
