"""bench_tools' rows on several Pythons against one of them, and what a cut would do.

Reads the ``--json`` files of ``bench_tools.py`` runs made on several Pythons (the same
runs, one version after the other in each), and prints per row the median over the runs
of its ratio to plain on each version, and the new versions' ratios divided by the base
version's (docs/performance.md, "3.14 and 3.15 against 3.13").

Then the two questions that decide whether cassette_hook can bring a row nearer the base
version's by making its own per-call work cheaper, answered from the same samples (each
workload's median time less ``d`` ns times its calls, the ratio to plain again, the
geometric mean over the workloads):

- a cut of ``d`` ns per call *on every version*, which is what a cut in cassette_hook's own
  C gives (it runs the same instructions on every version): the ratio of rows it leaves;
- the cut *on the new version alone* that would bring the row to ``--target`` times the
  base version's: what cassette_hook would have to save where only the new CPython is
  dearer.

    python benchmarks/tools_versions.py --base 3.13 3.13=/tmp/tools-3.13-*.json \
        3.14=/tmp/tools-3.14-*.json 3.15=/tmp/tools-3.15-*.json
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import statistics
from typing import Any

ROWS = ("null", "count", "recurse", "profile", "cprofile")
CUTS = (0.0, 10.0, 20.0, 40.0)


def ratio(run: dict[str, Any], row: str, cut: float = 0.0) -> float:
    """bench_tools' ratio of ``row`` in one run (geomean of median(tool) / median(plain)),
    with ``cut`` ns taken off every call of the workloads (ValueError: more than the row
    costs on some workload, where no cut of cassette_hook's could go)."""
    logs = []
    for name, samples in run["samples"].items():
        plain = statistics.median(samples["plain"])
        tool = statistics.median(samples[row]) - cut * run["calls"][name]
        if tool < plain:
            raise ValueError(f"a cut of {cut} ns per call is more than {name}'s {row} row costs")
        logs.append(math.log(tool / plain))
    return math.exp(sum(logs) / len(logs))


def median_ratio(runs: list[dict[str, Any]], row: str, cut: float = 0.0) -> float:
    return statistics.median(ratio(run, row, cut) for run in runs)


def cut_to_target(new: list[dict[str, Any]], row: str, goal: float) -> float:
    """The cut, on the new version's runs alone, that brings the row's ratio to ``goal``
    (bisection: the ratio falls as the cut grows)."""
    if median_ratio(new, row) <= goal:
        return 0.0
    low = 0.0
    high: float = min(
        (statistics.median(s[row]) - statistics.median(s["plain"])) / run["calls"][name]
        for run in new for name, s in run["samples"].items()
    )
    if median_ratio(new, row, high) > goal:
        return math.inf
    for _ in range(40):
        middle = (low + high) / 2
        if median_ratio(new, row, middle) > goal:
            low = middle
        else:
            high = middle
    return high


def load(spec: str) -> tuple[str, list[dict[str, Any]]]:
    version, sep, pattern = spec.partition("=")
    paths = sorted(glob.glob(pattern))
    if not sep or not paths:
        raise SystemExit(f"{spec!r}: expected VERSION=GLOB matching bench_tools --json files")
    runs = []
    for path in paths:
        with open(path, encoding="utf-8") as file:
            runs.append(json.load(file))
    return version, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the version the others are divided by")
    parser.add_argument("--target", type=float, default=1.10, help="the ratio of rows aimed at (default 1.10)")
    parser.add_argument("runs", nargs="+", metavar="VERSION=GLOB")
    args = parser.parse_args()
    data = dict(load(spec) for spec in args.runs)
    if args.base not in data:
        raise SystemExit(f"--base {args.base}: no runs given for it")
    base = data[args.base]
    others = [v for v in data if v != args.base]
    rows = [row for row in ROWS if all(row in run["summary"] for runs in data.values() for run in runs)]

    print("ratio to plain, the median of the runs (range); runs: "
          + ", ".join(f"{v}: {len(runs)}" for v, runs in data.items()))
    for row in rows:
        cells = []
        for runs in data.values():
            each = [ratio(run, row) for run in runs]
            cells.append(f"{statistics.median(each):5.2f} ({min(each):.2f}-{max(each):.2f})")
        against = [median_ratio(data[v], row) / median_ratio(base, row) for v in others]
        print(f"  {row:9s} " + "  ".join(cells) + "   ÷ " + args.base + ": " + "  ".join(f"{a:.3f}" for a in against))
    if "profile" in rows and "cprofile" in rows:
        by_version = {v: [ratio(run, "profile") / ratio(run, "cprofile") for run in runs] for v, runs in data.items()}
        medians = {v: statistics.median(xs) for v, xs in by_version.items()}
        print("  profile÷cProfile "
              + "  ".join(f"{medians[v]:.2f} ({min(xs):.2f}-{max(xs):.2f})" for v, xs in by_version.items())
              + "   ÷ " + args.base + ": " + "  ".join(f"{medians[v] / medians[args.base]:.3f}" for v in others))
    plain = {v: statistics.median(sum(statistics.median(s["plain"]) for s in run["samples"].values()) / 1e6
                                  for run in runs) for v, runs in data.items()}
    print("  plain: Σ of the workloads' median ms " + "  ".join(f"{v}: {ms:.1f}" for v, ms in plain.items()))

    print(f"\nthe same cut of d ns per call on every version: the row's ratio ÷ {args.base}'s")
    for row in rows:
        if row == "cprofile":
            continue
        cells = []
        for cut in CUTS:
            try:
                cells.append(f"d={cut:2.0f}: " + " ".join(
                    f"{median_ratio(data[v], row, cut) / median_ratio(base, row, cut):.3f}" for v in others))
            except ValueError:
                cells.append(f"d={cut:2.0f}: (more than the row costs)")
        print(f"  {row:9s} " + "   ".join(cells))

    print(f"\nthe cut on the new version alone that brings the row to {args.target:.2f} × {args.base}'s (ns per call)")
    for row in rows:
        if row == "cprofile":
            continue
        goal = args.target * median_ratio(base, row)
        print(f"  {row:9s} " + "  ".join(f"{v}: {cut_to_target(data[v], row, goal):.1f}" for v in others))


if __name__ == "__main__":
    main()
