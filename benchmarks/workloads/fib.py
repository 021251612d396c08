"""Naive recursive Fibonacci: nothing but small Python-to-Python calls."""

from __future__ import annotations

NAME = "fib"


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def run() -> int:
    return fib(23)
