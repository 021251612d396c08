"""Context classes made and dropped in a loop, as a server does per request or a test suite
per test: does each cost the same, however many were made before, and is memory flat?

Each class defines a prehook (a method that refers to its class through ``super()``),
gets an explicit overload (``@ch.overdub.register def _(ctx: Cls, f: ch.Is[g], x)``), and
is used: overdubbed, entered, and tagged.  The loop prints, at 1k, 10k and (by default)
100k classes, the mean cost per class over the last stretch, the number of objects the
garbage collector tracks and the memory blocks allocated (``sys.getallocatedblocks()``),
both after a ``gc.collect()``, and the methods left on the generics:

    PYTHONPATH=. python benchmarks/bench_context_classes.py [--classes 100000] [--quick]

(``--quick``: 10k classes.)  Before classes were collected (docs/api.md, "Lifetime of
context classes and their overloads"), each class stayed, with its methods, and making one
cost time proportional to those made before: 0.9 ms at 1,000 classes, 4.3 ms at 4,000.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from typing import Any

import cassette_hook as ch
from cassette_hook import _native


def g(x: int) -> int:
    return x + 1


def f(x: int) -> int:
    return g(x) * 2


def one() -> None:
    """Make a context class, use it every way, and drop it."""

    class PerRequest(ch.Context):
        def prehook(self, fn: Any, *args: Any) -> None:
            super().__init__  # noqa: B018 -- a ``__class__`` cell: the method refers to its class

    @ch.overdub.register
    def _(ctx: PerRequest, fn: ch.Is[g], x: int) -> int:  # type: ignore[valid-type]
        return -x

    assert ch.overdub(PerRequest(), f, 1) == -2
    with PerRequest():
        pass
    ch.overdub(ch.enabletagging(PerRequest(), f), f, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--classes", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="10k classes")
    args = ap.parse_args()
    total = 10_000 if args.quick else args.classes
    marks = sorted({m for m in (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, total) if m <= total})
    print(f"Python {sys.version.split()[0]}, {'C' if _native.runtime.name == 'C' else 'pure-Python'} path,"
          f" {total} classes")
    print(f"{'classes':>8} {'us/class':>9} {'gc objects':>11} {'blocks':>9} {'prehook methods':>16}")
    made, start = 0, time.perf_counter()
    for mark in marks:
        while made < mark:
            one()
            made += 1
        elapsed = time.perf_counter() - start
        stretch = mark - (marks[marks.index(mark) - 1] if marks.index(mark) else 0)
        gc.collect()
        blocks = sys.getallocatedblocks()
        print(f"{mark:>8} {elapsed / stretch * 1e6:>9.0f} {len(gc.get_objects()):>11} {blocks:>9}"
              f" {len(ch.prehook.methods()):>16}")
        start = time.perf_counter()


if __name__ == "__main__":
    main()
