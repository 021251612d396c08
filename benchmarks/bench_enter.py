"""A counting prehook: entering call sites against hooked ones (``Site``s), interleaved.

A context whose only hook is a prehook (``Plan.enters``) gets twins whose call sites hand
``callsites.enter`` the callee and its positional arguments: the prehook runs there, and
the site's own frame then calls the twin, inlined.  Any other hook makes the plan's call
sites resolve to a ``Site``, which runs the prehook and calls the twin from C.  The same
counting prehook, with and without a raisehook that never runs (no workload raises), so
the two differ only in that shape; with ``sys.monitoring`` counting CALL events (3.12+)
and plain, for scale, over the workloads of ``bench_tools.py``:

    PYTHONPATH=.:benchmarks python benchmarks/bench_enter.py [--quick] [--workloads fib,oo_sim]
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

import common
import harness
import workloads
from common import ch


class Entering(ch.Context):
    """A counting prehook alone: its plan enters."""

    operators = False

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.metadata[0] += 1


class Hooked(Entering):
    """The same prehook, and a raisehook no workload reaches: its call sites are Sites."""

    def raisehook(self, exc: BaseException, f: Any, *args: Any, **kwargs: Any) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="5 rounds")
    ap.add_argument("--workloads", help="comma-separated names (default: bench_tools.py's)")
    ap.add_argument("--rounds", type=int)
    args = ap.parse_args()
    names = args.workloads.split(",") if args.workloads else ("fib", "oo_sim", "interp", *workloads.PYPERFORMANCE)
    rounds = args.rounds or (5 if args.quick else 15)
    print(f"Python {sys.version.split()[0]}, {rounds} rounds")
    rows = []
    ratios: dict[str, list[float]] = {"entering": [], "hooked": [], "monitoring": []}
    for module in workloads.load(names):
        name, run = module.NAME, module.run
        entering, hooked = Entering(metadata=[0]), Hooked(metadata=[0])
        variants = {"plain": run, "entering": functools.partial(ch.overdub, entering, run),
                    "hooked": functools.partial(ch.overdub, hooked, run)}
        if sys.version_info >= (3, 12):
            variants["monitoring"] = functools.partial(common.with_monitoring, run)
        res = harness.measure(name, variants, rounds=rounds, warmup=2)
        for variant in ratios:
            if variant in variants:
                ratios[variant].append(res.ratio(variant))
        rows.append([name, *(f"{res.ratio(v):.2f}" for v in variants if v != "plain"),
                     f"{res.median('hooked') / res.median('entering'):.2f}"])
    headers = ["workload", *(v for v in ratios if ratios[v]), "hooked / entering"]
    shape = [h / e for e, h in zip(ratios["entering"], ratios["hooked"])]
    rows.append(["geomean", *(f"{harness.geomean(r):.2f}" for r in ratios.values() if r),
                 f"{harness.geomean(shape):.2f}"])
    print(harness.table(headers, rows))


if __name__ == "__main__":
    main()
