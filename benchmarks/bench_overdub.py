"""Slowdown of overdubbed workloads: plain run() vs overdub(Null) vs overdub(Count), with
sys.monitoring (3.12+) and sys.setprofile tracers for scale. Ratios come from one
interleaved run (see harness.py).

    PYTHONPATH=. python benchmarks/bench_overdub.py [--quick] [--workloads fib,go] [--json F]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from types import ModuleType

import common
import harness
import workloads
from common import ch
from harness import Thunk


def variants(run: Thunk) -> dict[str, Thunk]:
    out: dict[str, Thunk] = {"plain": run}
    if ch is not None:
        out["null"] = lambda: ch.overdub(common.Null(), run)
        out["count"] = lambda: ch.overdub(common.Count(metadata=[0]), run)
    if sys.version_info >= (3, 12):
        out["monitoring"] = functools.partial(common.with_monitoring, run)
    out["setprofile"] = functools.partial(common.with_setprofile, run)
    return out


def check(mod: ModuleType, vs: dict[str, Thunk]) -> dict[str, str]:
    """Run each overdub variant once (drop the ones that fail, report wrong results) and
    collect call counts for the table."""
    notes: dict[str, str] = {}
    expected = mod.run()
    contexts = {"null": common.Null(), "count": common.Count(metadata=[0])} if ch is not None else {}
    for name, ctx in contexts.items():
        try:
            got = ch.overdub(ctx, mod.run)
        except Exception:  # report, then benchmark the rest
            common.report_failure(f"{mod.NAME}: overdub({name})")
            del vs[name]
            notes[name] = "FAIL"
            continue
        if got != expected:
            print(f"!! {mod.NAME}: overdub({name}) returned {got!r}, plain {expected!r}",
                  file=sys.stderr)
        if name == "count":
            notes["calls"] = f"{ctx.metadata[0]:,}"
    if "monitoring" in vs:
        box = [0]
        common.with_monitoring(mod.run, box)
        notes["CALL events"] = f"{box[0]:,}"
    return notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds, ~1 minute in all")
    ap.add_argument("--workloads", help="comma-separated names (default: all)")
    ap.add_argument("--rounds", type=int, help="measured rounds per workload")
    ap.add_argument("--json", metavar="FILE", help="also write the raw samples (ns) here")
    args = ap.parse_args()
    mods = workloads.load(args.workloads.split(",") if args.workloads else None)
    rounds = args.rounds or (5 if args.quick else 15)
    budget = (20.0 if args.quick else 130.0) / max(1, len(mods))  # seconds per workload
    if ch is None:
        print(common.no_package_note())
    print(f"Python {sys.version.split()[0]}, {rounds} rounds, <= {budget:.0f} s per workload\n")

    results: list[harness.Result] = []
    notes: dict[str, dict[str, str]] = {}
    for mod in mods:
        vs = variants(mod.run)
        before = common.code_snapshot(mod)
        notes[mod.NAME] = check(mod, vs)
        results.append(harness.measure(mod.NAME, vs, rounds=rounds, warmup=1 if args.quick else 2,
                                       budget_s=budget))
        changed = [k for k, c in common.code_snapshot(mod).items() if before.get(k) is not c]
        if changed:
            print(f"note: {mod.NAME}: overdub replaced __code__ of {len(changed)} functions "
                  f"(e.g. {changed[0]}); 'plain' then runs instrumented code", file=sys.stderr)
        print(f"  {mod.NAME}: {len(results[-1].samples['plain'])} rounds", file=sys.stderr)

    names = [v for v in variants(lambda: None) if v != "plain"]
    extra = [k for k in ("calls", "CALL events") if any(k in n for n in notes.values())]
    rows = []
    for res in results:
        note = notes[res.name]
        rows.append([res.name]
                    + [f"{res.median(v):,.0f}" if v in res.samples else note.get(v, "-") for v in ["plain", *names]]
                    + [f"{res.ratio(v):.2f}" if v in res.samples else "-" for v in names]
                    + [f"{max(map(res.spread, res.samples)):.0%}"]
                    + [note.get(k, "-") for k in extra])
    rows.append(["geomean"] + [""] * (1 + len(names))
                + [f"{harness.geomean(r.ratio(v) for r in results if v in r.samples):.2f}" for v in names]
                + [""] * (1 + len(extra)))
    print(harness.table(["workload", "plain ns"] + [f"{v} ns" for v in names]
                        + [f"{v}/plain" for v in names] + ["noise"] + extra, rows))
    print("\nns = median per run; x/plain = ratio of medians; noise = largest IQR/median;"
          "\ncalls = calls seen by Count (operators off); CALL events = sys.monitoring CALL count.")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"python": sys.version, "results": {r.name: r.samples for r in results}}, fh)


if __name__ == "__main__":
    main()
