"""Sorting with key functions and comparators; map/filter/min/max with Python callbacks.

Most Python calls here are made *from C* (``sorted``, ``map``, ``filter``, ``list.sort``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

NAME = "sorting"


class Record(NamedTuple):
    name: str
    age: int
    score: float


class Version:
    def __init__(self, text: str) -> None:
        self.parts = tuple(int(p) for p in text.split("."))

    def __lt__(self, other: Version) -> bool:
        return self.parts < other.parts


def records(n: int) -> list[Record]:
    state, out = 7, []
    for i in range(n):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(Record(f"n{state % 997:03d}", state % 90, (state % 1000) / 10))
    return out


def by_age_then_name(a: Record, b: Record) -> int:
    return (a.age - b.age) or ((a.name > b.name) - (a.name < b.name))


def score_key(r: Record) -> tuple[float, str]:
    return (-r.score, r.name)


def is_adult(r: Record) -> bool:
    return r.age >= 18


def run() -> int:
    data = records(1000)
    a = sorted(data, key=score_key)
    b = sorted(data, key=functools.cmp_to_key(by_age_then_name))
    c = sorted(data, key=lambda r: r.name[::-1])
    adults = list(filter(is_adult, data))
    names = list(map(lambda r: r.name.upper(), adults))
    versions = sorted(Version(f"{r.age % 5}.{r.age}.{int(r.score)}") for r in data[:200])
    oldest = max(data, key=lambda r: r.age)
    firsts = (a[0].age, b[0].age, c[0].age, oldest.age, len(names), len(versions[-1].parts))
    return sum(x * 100**i for i, x in enumerate(firsts))
