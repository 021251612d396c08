"""What the stand-ins for what C calls of the program's classes cost (``standins``).

Three workloads made of calls that C makes, with no call site: property reads, the
``__hash__`` and ``__eq__`` of a set, the ``__lt__`` of a sort. Each runs with the
classes holding their own attributes ("own") and holding the stand-ins ("stand-ins"),
interleaved in one run:

- idle (no context): what a process pays between close activations, when ``lazy_mode``'s
  rule keeps the stand-ins in (``RESTORE_AFTER``);
- under ``ch.overdub(Null(), ...)`` and under a counting prehook (``operators = False``):
  "own" is what a context ran before the stand-ins (the method plain, unseen), "stand-ins"
  what it runs now (the method's twin, seen).

Prints the ratio of each variant to the idle "own" run and the extra ns per implicit
call that the stand-ins cost.

    PYTHONPATH=.:benchmarks python benchmarks/bench_implicit.py [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

import harness
from common import ch

from cassette_hook.runtime import standins
from cassette_hook.importhook import lazy_mode

N = 2_000


class Point:
    def __init__(self, x: int) -> None:
        self._x = x

    @property
    def x(self) -> int:
        return self._x


class Key:
    def __init__(self, k: int) -> None:
        self.k = k

    def __hash__(self) -> int:
        return self.k

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and self.k == other.k


class Version:
    def __init__(self, n: int) -> None:
        self.n = n

    def __lt__(self, other: Version) -> bool:
        return self.n < other.n


POINTS = [Point(i) for i in range(N)]
KEYS = [Key(i % (N // 2)) for i in range(N)]
VERSIONS = [Version((i * 7919) % N) for i in range(N)]


def read_properties() -> int:
    total = 0
    for point in POINTS:
        total += point.x
    return total


def fill_a_set() -> int:
    return len(set(KEYS))


def sort_versions() -> int:
    return sorted(VERSIONS)[0].n


def implicit_calls(work: Callable[[], object]) -> int:
    """The calls C makes of the classes' methods in one run of ``work`` (counted plainly)."""
    counts = {"n": 0}

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_name in ("x", "__hash__", "__eq__", "__lt__"):
            counts["n"] += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return counts["n"]


class Null(ch.Context):
    pass


class Count(ch.Context):
    operators = False

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.metadata[0] += 1


def with_stand_ins(put_in: bool, work: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        standins._give(stand_ins=put_in)
        return work()
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args()
    lazy_mode.RESTORE_AFTER = None  # (the variants put the stand-ins in or out themselves)
    for work in (read_properties, fill_a_set, sort_versions):  # the classes' stand-ins made: a twin of each
        ch.overdub(Null(), work)
    assert standins.tracked(), "no stand-ins were made"
    print(f"Python {sys.version.split()[0]}, {'C' if standins.Special is not standins._PureSpecial else 'pure'} "
          f"hot path, {args.rounds} rounds\n")
    rows = []
    for work in (read_properties, fill_a_set, sort_versions):
        calls = implicit_calls(work)
        variants = {
            "idle, own": with_stand_ins(False, work),
            "idle, stand-ins": with_stand_ins(True, work),
            "null, own": lambda work=work: ch.overdub(Null(), with_stand_ins(False, work)),
            "null, stand-ins": lambda work=work: ch.overdub(Null(), with_stand_ins(True, work)),
            "count, own": lambda work=work: ch.overdub(Count(metadata=[0]), with_stand_ins(False, work)),
            "count, stand-ins": lambda work=work: ch.overdub(Count(metadata=[0]), with_stand_ins(True, work)),
        }
        result = harness.measure(work.__name__, variants, rounds=args.rounds)
        extra = {mode: (result.median(f"{mode}, stand-ins") - result.median(f"{mode}, own")) / calls
                 for mode in ("idle", "null", "count")}
        rows.append([work.__name__, f"{calls:,}", *(f"{result.ratio(v):.2f}" for v in variants),
                     *(f"{extra[mode]:+.0f}" for mode in extra)])
    print(harness.table(["workload", "implicit calls", *variants, "ns/call idle", "ns/call null", "ns/call count"],
                        rows))
    print("\nratios to 'idle, own' (medians); ns/call: the stand-ins' extra time per implicit call, per mode")


if __name__ == "__main__":
    main()
