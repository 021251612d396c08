"""Cached dispatch cost: cassette_hook's Generic (3 arguments) against functools.singledispatch
(1 argument) and, when installed, plum-dispatch, multipledispatch and ovld (3 arguments).

Usage: python benchmarks/bench_dispatch.py [--rounds N] [--number N]

The machines this runs on are noisy, so the candidates are timed interleaved: every
round times each of them once (in a rotating order), and the table reports medians
over the rounds. The ratio column is the median of the per-round ratios to
singledispatch, which cancels drift that affects all candidates of a round alike.
"""

from __future__ import annotations

import argparse
import functools
import math
import platform
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cassette_hook.dispatch import Generic, Is

Call = tuple[str, dict[str, object]]  # a statement to time, and the names it uses


def ours() -> Call:
    g = Generic("g")

    @g.register
    def _(x: int, y: int, z: int) -> int:
        return 1

    @g.register
    def _(x: float, y: float, z: float) -> int:
        return 2

    @g.register
    def _(x, y, z):  # type: ignore[no-untyped-def]
        return 3

    return "g(1, 2, 3)", {"g": g}


def ours_identity() -> Call:
    """The refined path: the middle argument's type is that of an Is[...] object."""
    g = Generic("g")

    @g.register
    def _(x: int, f: Is[math.sin], z: int) -> int:
        return 1

    @g.register
    def _(x, f, z):  # type: ignore[no-untyped-def]
        return 2

    return "g(1, cos, 3)", {"g": g, "cos": math.cos}


def singledispatch() -> Call:
    @functools.singledispatch
    def f(x: object) -> int:
        return 3

    @f.register
    def _(x: int) -> int:
        return 1

    @f.register
    def _(x: float) -> int:
        return 2

    return "f(1)", {"f": f}


def plum() -> Call:
    import plum as plum_dispatch

    dispatch = plum_dispatch.Dispatcher()

    @dispatch
    def f(x: int, y: int, z: int) -> int:
        return 1

    @dispatch  # type: ignore[no-redef]
    def f(x: float, y: float, z: float) -> int:  # noqa: F811 -- a second method of f
        return 2

    return "f(1, 2, 3)", {"f": f}


def multipledispatch() -> Call:
    from multipledispatch import Dispatcher

    f = Dispatcher("f")
    f.add((int, int, int), lambda x, y, z: 1)
    f.add((float, float, float), lambda x, y, z: 2)
    f.add((object, object, object), lambda x, y, z: 3)
    return "f(1, 2, 3)", {"f": f}


def ovld() -> Call:
    from ovld import ovld as overload

    @overload
    def f(x: int, y: int, z: int) -> int:
        return 1

    @overload  # type: ignore[no-redef]
    def f(x: float, y: float, z: float) -> int:  # noqa: F811 -- a second method of f
        return 2

    return "f(1, 2, 3)", {"f": f}


def direct() -> Call:
    def f(x: int, y: int, z: int) -> int:
        return 1

    return "f(1, 2, 3)", {"f": f}


CANDIDATES: dict[str, Callable[[], Call]] = {
    "functools.singledispatch, 1 arg": singledispatch,
    "cassette_hook Generic, 3 args": ours,
    "cassette_hook Generic, 3 args, Is-refined": ours_identity,
    "plum-dispatch, 3 args": plum,
    "multipledispatch, 3 args": multipledispatch,
    "ovld, 3 args": ovld,
    "no dispatch (direct call), 3 args": direct,
}
BASELINE = "functools.singledispatch, 1 arg"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--number", type=int, default=20_000, help="calls per candidate per round")
    options = parser.parse_args()

    timers: dict[str, timeit.Timer] = {}
    for name, make in CANDIDATES.items():
        try:
            statement, namespace = make()
        except ImportError as e:
            print(f"note: skipping {name}: {e} (pip install -r benchmarks/requirements.txt)")
            continue
        eval(statement, namespace)  # warm the caches: we time cached dispatch
        timers[name] = timeit.Timer(statement, globals=namespace)

    times: dict[str, list[float]] = {name: [] for name in timers}
    names = list(timers)
    for r in range(options.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(timers[name].timeit(options.number) / options.number * 1e9)

    print(f"Python {platform.python_version()} ({platform.python_implementation()}, {sys.platform}); "
          f"{options.rounds} interleaved rounds x {options.number} calls")
    print(f"{'candidate':44s} {'ns/call (median)':>17s} {'ratio to singledispatch':>24s}")
    for name in names:
        ratios = [t / b for t, b in zip(times[name], times[BASELINE])]
        print(f"{name:44s} {statistics.median(times[name]):17.1f} {statistics.median(ratios):24.2f}")


if __name__ == "__main__":
    main()
