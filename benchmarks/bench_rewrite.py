"""First-entry cost: what the first ``overdub`` of a function costs (bytecode rewriting,
caches) compared with later calls.

1. Fresh functions: many distinct functions made with exec (each has its own code object);
   time ch.overdub(Null(), f, 1) on the first call and on the next calls.
2. Workloads: time the first overdub(Null(), run) in this process against later runs,
   and divide the one-time cost by the number of distinct Python functions the run enters
   (functions shared with a workload measured earlier are already rewritten).
"amortized after" = calls (or runs) after which the one-time cost is < 5% of the time spent.

    PYTHONPATH=. python benchmarks/bench_rewrite.py [--quick] [--workloads fib,go]
"""

from __future__ import annotations

import argparse
import dis
import math
import statistics
import sys
import time
from types import FunctionType
from typing import Callable

import common
import harness
import workloads
from bench_reach import frames
from common import ch

BODIES = {
    "small": """
def f_{i}(x):
    y = helper(x) + {i}
    return [y, len(str(y))]
""",
    "medium": """
def f_{i}(x):
    total = 0
    for k in range(3):
        total += helper(x + k) * {i}
        if total % 2:
            total = abs(total) - 1
    items = [helper(v) for v in range(2)]
    d = dict(a=total, b=items)
    try:
        s = sorted(d)
    except TypeError:
        s = []
    return total + len(s) + max(items) + sum(d["b"])
""",
}
LATER_CALLS = 5


def helper(x: int) -> int:
    return x * 2 + 1


def fresh_functions(body: str, n: int, tag: str) -> list[FunctionType]:
    """``n`` functions, each compiled separately so each has its own code object."""
    ns: dict[str, object] = {"helper": helper}
    out = []
    for i in range(n):
        exec(compile(body.format(i=i), f"<fresh-{tag}-{i}>", "exec"), ns)
        out.append(ns[f"f_{i}"])
    return out  # type: ignore[return-value]


def ns_call(fn: Callable[[], object]) -> int:
    t0 = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t0


def amortized_after(one_time: float, per_call: float) -> str:
    """Smallest n with one_time <= 5% of (one_time + n * per_call)."""
    return f"{math.ceil(max(one_time, 0) * 19 / per_call):,}"


def bench_functions(n: int) -> list[list[object]]:
    rows = []
    for name, body in BODIES.items():
        ch.overdub(common.Null(), fresh_functions(body, 1, "warm-" + name)[0], 1)  # helper etc.
        plain, first, later = [], [], []
        for f in fresh_functions(body, n, name):
            plain.append(statistics.median(ns_call(lambda: f(1)) for _ in range(LATER_CALLS)))
            first.append(ns_call(lambda: ch.overdub(common.Null(), f, 1)))
            later.append(statistics.median(ns_call(lambda: ch.overdub(common.Null(), f, 1))
                                           for _ in range(LATER_CALLS)))
        p, a, b = (statistics.median(xs) / 1e3 for xs in (plain, first, later))
        size = sum(1 for _ in dis.get_instructions(f))
        rows.append([name, size, n, f"{p:.2f}", f"{a:.1f}", f"{b:.1f}", f"{a - b:.1f}",
                     amortized_after(a - b, b)])
    return rows


def bench_workloads(names: list[str] | None) -> list[list[object]]:
    rows = []
    for mod in workloads.load(names):
        mod.run()
        distinct = len(frames(mod.run))
        run = lambda: ch.overdub(common.Null(), mod.run)  # noqa: E731
        try:
            first = ns_call(run)
        except Exception:
            common.report_failure(f"{mod.NAME}: overdub")
            rows.append([mod.NAME, distinct, "FAIL", "", "", "", ""])
            continue
        later = statistics.median(ns_call(run) for _ in range(3))
        one_time = first - later
        if one_time <= 0:  # lost in the noise
            rows.append([mod.NAME, distinct, f"{first / 1e6:.1f}", f"{later / 1e6:.1f}", "~0", "~0", "0"])
            continue
        rows.append([mod.NAME, distinct, f"{first / 1e6:.1f}", f"{later / 1e6:.1f}",
                     f"{one_time / 1e6:.1f}", f"{one_time / 1e3 / max(distinct, 1):.0f}",
                     amortized_after(one_time, later)])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer fresh functions")
    ap.add_argument("--workloads", help="comma-separated names (default: all)")
    ap.add_argument("-n", type=int, help="fresh functions per body size (default 300, quick 60)")
    args = ap.parse_args()
    print(f"Python {sys.version.split()[0]}\n")
    if ch is None:
        print(f"cassette_hook not usable yet ({common.CH_ERROR}): nothing to measure")
        return
    print(harness.table(
        ["body", "instrs", "functions", "plain µs", "first µs", "later µs", "rewrite µs",
         "amortized after (calls)"],
        bench_functions(args.n or (60 if args.quick else 300))))
    print("\nfirst = first overdub(Null(), f, 1) of a fresh function; later = median of the next"
          f" {LATER_CALLS};\nrewrite = first - later (medians over the functions).\n")
    print(harness.table(
        ["workload", "functions", "first ms", "later ms", "one-time ms", "µs/function",
         "amortized after (runs)"],
        bench_workloads(args.workloads.split(",") if args.workloads else None)))
    print("\nfunctions = distinct Python functions a plain run enters; one-time = first - later"
          "\n(first overdub of the workload in this process; later = median of the next 3).")


if __name__ == "__main__":
    main()
