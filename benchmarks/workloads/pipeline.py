"""Closures, generators (incl. ``yield from``), generator expressions and comprehensions."""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

NAME = "pipeline"


def make_affine(a: int, b: int) -> Callable[[int], int]:
    def affine(x: int) -> int:
        return a * x + b
    return affine


def compose(*fns: Callable[[int], int]) -> Callable[[int], int]:
    def composed(x: int) -> int:
        for fn in fns:
            x = fn(x)
        return x
    return composed


def numbers(n: int) -> Iterator[int]:
    for i in range(n):
        yield i


def chunks(items: Iterable[int], size: int) -> Iterator[list[int]]:
    chunk: list[int] = []
    for x in items:
        chunk.append(x)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def flatten(groups: Iterable[list[int]]) -> Iterator[int]:
    for group in groups:
        yield from group


def counter() -> Callable[[], int]:
    count = 0

    def bump() -> int:
        nonlocal count
        count += 1
        return count
    return bump


def run() -> int:
    f = compose(make_affine(3, 1), make_affine(1, -2), lambda x: x % 1009)
    bump = counter()
    total = 0
    for _ in range(16):
        values = (f(x) for x in numbers(600) if x % 7)
        sums = [sum(c) for c in chunks(values, 16)]
        table = {i: [bump() for _ in range(s % 3)] for i, s in enumerate(sums)}
        evens = {x for x in flatten(chunks((s for s in sums if s % 2 == 0), 4))}
        total += sum(len(v) for v in table.values()) + len(evens) + max(sums)
    return total + bump()
