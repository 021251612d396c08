"""Interleaved RATIO measurements for a noisy, shared machine.

All variants of one workload are timed in the same rounds, A B C, B C A, C A B, ... (the
order rotates so no variant always runs first after a gc.collect()). Each sample times one
call, or a calibrated inner loop for callables faster than ``min_sample_ns``, with
``time.perf_counter_ns``. Load changes hit all variants alike, so the ratio of medians
within one run is stable even when the absolute times are not. Never compare absolute
numbers across runs or machines, and never put timings in tests.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

Thunk = Callable[[], object]


@dataclass
class Result:
    """Samples in ns per call, one per measured round, for each variant of one workload."""

    name: str
    baseline: str
    samples: dict[str, list[float]] = field(default_factory=dict)

    def median(self, variant: str) -> float:
        return statistics.median(self.samples[variant])

    def ratio(self, variant: str) -> float:
        """Median of ``variant`` over median of the baseline."""
        return self.median(variant) / self.median(self.baseline)

    def spread(self, variant: str) -> float:
        """Interquartile range relative to the median: a noise indicator (0.05 = 5%)."""
        xs = self.samples[variant]
        if len(xs) < 2:
            return float("nan")
        q1, _, q3 = statistics.quantiles(xs, n=4)
        return (q3 - q1) / self.median(variant)


_clock = time.perf_counter_ns


def use_cpu_time() -> None:
    """Time samples by the process's CPU time rather than the wall clock: on a machine
    shared with other loads, time spent descheduled is then not counted (the samples of a
    busy 2-core machine varied by 100% by the wall clock)."""
    global _clock
    _clock = time.process_time_ns


def seconds() -> float:
    """The chosen clock in seconds, for ``timeit.Timer(timer=...)``: so that a row timed
    with ``timeit`` follows ``--cpu`` like the rows ``measure`` times."""
    return _clock() / 1e9


def _time(fn: Thunk, loops: int) -> int:
    t0 = _clock()
    for _ in range(loops):
        fn()
    return _clock() - t0


def measure(name: str, variants: Mapping[str, Thunk], *, baseline: str | None = None,
            rounds: int = 15, warmup: int = 2, min_sample_ns: int = 2_000_000,
            budget_s: float | None = None) -> Result:
    """Time ``variants`` interleaved; stop after ``rounds`` or ``budget_s`` (min. 3 rounds)."""
    names = list(variants)
    result = Result(name, baseline or names[0], {n: [] for n in names})
    last = {n: 0 for n in names}
    for _ in range(max(1, warmup)):  # first calls may compile, rewrite, fill caches
        gc.collect()
        for n in names:
            last[n] = _time(variants[n], 1)
    loops = {n: max(1, math.ceil(min_sample_ns / max(last[n], 1))) for n in names}
    deadline = None if budget_s is None else time.perf_counter() + budget_s
    for r in range(rounds):
        gc.collect()
        for n in names[r % len(names):] + names[:r % len(names)]:
            result.samples[n].append(_time(variants[n], loops[n]) / loops[n])
        if deadline is not None and r >= 2 and time.perf_counter() > deadline:
            break
    return result


def geomean(xs: Iterable[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Plain-text table: first column left-aligned, the others right-aligned."""
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)] + [fmt(r) for r in cells[1:]]
    return "\n".join(lines)


if __name__ == "__main__":  # self-check: two identical variants should give a ratio near 1
    def _work() -> int:
        return sum(i * i for i in range(20_000))

    res = measure("self-check", {"a": _work, "b": _work, "c": lambda: (_work(), _work())},
                  rounds=9)
    print(table(["variant", "median ns", "ratio", "IQR/med"],
                [[v, f"{res.median(v):,.0f}", f"{res.ratio(v):.3f}", f"{res.spread(v):.3f}"]
                 for v in res.samples]))
