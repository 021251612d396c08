"""The C hot path (``cassette_hook/_speedups/``) against the pure-Python one it replaces.

Which one runs is fixed when ``cassette_hook`` is imported (``CASSETTE_HOOK_PURE_PYTHON=1``
keeps the Python one), so each round runs two fresh interpreters, one of each, in
alternating order.  Each child times every workload plain and under each row's context,
interleaved (harness.py), and reports the ratios to plain; the table gives, per row and
hot path, the geometric mean over the workloads of the median ratio over rounds, and the
C path's ratio over the Python one's.

    PYTHONPATH=. python benchmarks/bench_speedups.py [--quick] [--rounds N]
        [--workloads fib,go] [--rows null,count] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import bench_tools
import harness

ROWS = ("null", "count", "count-ops", "recurse")
VARIANTS = ("python", "c")


def child(rows: list[str], names: list[str], rounds: int) -> dict[str, dict[str, float]]:
    """Ratios to plain, per row and workload, measured in this interpreter."""
    import workloads
    from cassette_hook.runtime import callsites

    expected = "python" if os.environ.get("CASSETTE_HOOK_PURE_PYTHON") else "c"
    actual = "python" if callsites._speedups is None else "c"
    if actual != expected:
        raise SystemExit(f"bench_speedups: wanted the {expected} hot path, got the {actual} one "
                         "(is the extension built? pip install -e . builds it)")
    ratios: dict[str, dict[str, float]] = {row: {} for row in rows}
    for mod in workloads.load(names):  # (a pyperformance program is skipped if the package is missing)
        name = mod.__name__.rsplit(".", 1)[-1].removeprefix("pp_")
        variants = {"plain": mod.run, **{row: bench_tools.ROWS[row].make(mod) for row in rows}}
        result = harness.measure(name, variants, baseline="plain", rounds=rounds, budget_s=20)
        for row in rows:
            ratios[row][name] = result.ratio(row)
    return ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 rounds of each, 3 workloads")
    ap.add_argument("--rounds", type=int, help="rounds of child pairs (default 5; --quick 3)")
    ap.add_argument("--workloads", help="comma-separated names (default: bench_tools' workloads)")
    ap.add_argument("--rows", help=f"comma-separated rows of bench_tools (default: {','.join(ROWS)})")
    ap.add_argument("--json", metavar="FILE", help="also write every ratio here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    rows = args.rows.split(",") if args.rows else list(ROWS)
    names = (args.workloads.split(",") if args.workloads
             else ["fib", "oo_sim", "interp"] if args.quick else list(bench_tools.WORKLOADS))
    inner = 3 if args.quick else 5
    if args.child:
        json.dump(child(rows, names, inner), sys.stdout)
        return
    samples: dict[str, dict[str, dict[str, list[float]]]] = {v: {row: {} for row in rows} for v in VARIANTS}
    for r in range(args.rounds or (3 if args.quick else 5)):
        for variant in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
            env = dict(os.environ)
            env.pop("CASSETTE_HOOK_PURE_PYTHON", None)
            if variant == "python":
                env["CASSETTE_HOOK_PURE_PYTHON"] = "1"
            command = [sys.executable, __file__, "--child", "--rows", ",".join(rows), "--workloads", ",".join(names)]
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            for row, by_name in json.loads(out.stdout).items():
                for name, ratio in by_name.items():
                    samples[variant][row].setdefault(name, []).append(ratio)
        print(f"round {r + 1} done", file=sys.stderr)
    names = [n for n in names if all(n in samples[v][rows[0]] for v in VARIANTS)]  # the ones measured
    print(f"Python {sys.version.split()[0]}; ratio to plain, geometric mean over {len(names)} workloads "
          f"({', '.join(names)}) of the median over rounds")
    table = []
    for row in rows:
        means = {v: harness.geomean(statistics.median(samples[v][row][n]) for n in names) for v in VARIANTS}
        table.append([bench_tools.label(row), f"{means['python']:.2f}x", f"{means['c']:.2f}x",
                      f"{means['c'] / means['python']:.2f}"])
    print(harness.table(["row", "Python hot path", "C hot path", "C / Python"], table))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(samples, fh, indent=1)


if __name__ == "__main__":
    main()
