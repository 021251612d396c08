"""A pass that changes nothing: do twins cost the same as without a pass?

For each workload, ``overdub(ctx, run)`` with and without an identity pass, for a context
that overloads nothing (``Null``, the fast path) and one with a prehook (``Count``), all
timed in one interleaved run (see harness.py); the first calls (when the pass runs and
twins are made) are warm-up.  Also counts how often the pass ran against the number of
distinct code objects it was given: once per code object.  Then the one-time cost: making
the twin code of the functions of a few stdlib modules with the identity pass (decoding
for the pass, checking its result, rewriting) against without a pass.

    PYTHONPATH=. python benchmarks/bench_passes.py [--quick] [--workloads fib,go] [--json F]
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import textwrap
from types import CodeType, FunctionType
from typing import Any

import common
import harness
import workloads
from common import ch

RUNS: list[tuple[CodeType, str, int]] = []  # what the pass was given: (function's code, body's name, line)


def identity(ctx_type: type, func: Any, code: Any) -> Any:
    RUNS.append((func.__code__, code.name, code.first_lineno))  # a comprehension is part of func
    return code


def first_entry(rounds: int) -> str:
    from cassette_hook import passes, rewrite
    from cassette_hook.runtime.callsites import HOOKS

    funcs = [f for module in (textwrap, difflib) for value in vars(module).values()
             for f in ([value] if isinstance(value, FunctionType) else vars(value).values() if isinstance(value, type)
                       else []) if isinstance(f, FunctionType)]

    def without() -> None:
        for f in funcs:
            rewrite.rewrite_code(f.__code__, HOOKS, operators=True)

    def with_pass() -> None:
        fresh = ch.Pass(lambda ctx_type, func, code: code)  # nothing memoized yet
        for f in funcs:
            passes.rewrite_with_pass(fresh, common.Null, f, f.__code__, HOOKS, operators=True)

    result = harness.measure("first entry", {"no pass": without, "identity pass": with_pass}, rounds=rounds)
    return harness.table(["twin code of", "functions", "no pass, ms each", "identity pass, ms each", "ratio"],
                         [["textwrap + difflib", len(funcs), f"{result.median('no pass') / 1e6 / len(funcs):.2f}",
                           f"{result.median('identity pass') / 1e6 / len(funcs):.2f}",
                           f"{result.ratio('identity pass'):.2f}"]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--workloads", help="comma-separated names (default: the own ones)")
    ap.add_argument("--rounds", type=int, help="measured rounds per workload")
    ap.add_argument("--json", metavar="FILE", help="also write the raw samples (ns) here")
    args = ap.parse_args()
    if ch is None:
        raise SystemExit(common.no_package_note())
    mods = workloads.load(args.workloads.split(",") if args.workloads else list(workloads.OWN))
    rounds = args.rounds or (5 if args.quick else 15)
    print(f"Python {sys.version.split()[0]}, {rounds} rounds\n")
    pass_ = ch.Pass(identity)
    rows, raw = [], {}
    for mod in mods:
        expected = mod.run()
        RUNS.clear()
        contexts = {"null": common.Null(), "null+pass": common.Null(pass_=pass_),
                    "count": common.Count(metadata=[0]), "count+pass": common.Count(metadata=[0], pass_=pass_),
                    "count again": common.Count(metadata=[0])}  # an A/A control: the noise of this run
        for name, ctx in contexts.items():
            got = ch.overdub(ctx, mod.run)
            if got != expected:
                print(f"!! {mod.NAME}: overdub({name}) returned {got!r}, plain {expected!r}", file=sys.stderr)
        variants = {name: (lambda ctx=ctx: ch.overdub(ctx, mod.run)) for name, ctx in contexts.items()}
        result = harness.measure(mod.NAME, variants, rounds=rounds, warmup=1 if args.quick else 2)
        raw[mod.NAME] = result.samples
        runs, codes = len(RUNS), len({(id(code), name, line) for code, name, line in RUNS})
        rows.append([mod.NAME, f"{result.median('null') / 1e6:.2f}",
                     f"{result.median('null+pass') / result.median('null'):.3f}",
                     f"{result.median('count+pass') / result.median('count'):.3f}",
                     f"{result.median('count again') / result.median('count'):.3f}",
                     f"{max(result.spread(v) for v in variants):.3f}", f"{runs} / {codes}"])
    print(harness.table(["workload", "null ms", "null+pass / null", "count+pass / count", "A/A: count / count",
                         "max IQR/med", "pass runs / code objects"], rows))
    ratios = [float(r[2]) for r in rows] + [float(r[3]) for r in rows]
    control = [float(r[4]) for r in rows]
    print(f"\ngeometric mean of the pass ratios: {harness.geomean(ratios):.3f}; "
          f"of the A/A control: {harness.geomean(control):.3f}\n")
    print(first_entry(rounds))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(raw, out)


if __name__ == "__main__":
    main()
