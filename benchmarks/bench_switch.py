"""The cost of a cold rewrite alone: switched code (``importhook.dual_code.switched``, what an
import under a context makes of each module it compiles) made of a package's sources, by
two checkouts of cassette_hook in turn, to compare a change to the rewriter with what it
changed.

Each round runs one fresh interpreter per checkout (``PYTHONPATH=TREE``), in turn, the
order alternating round by round (A B, B A, ...). A child compiles every module of the
packages (untimed), then switches them all twice and reports the CPU time of the faster
pass. Reported: each checkout's median, and the median over rounds of B's time divided by
A's in the same round. A checkout needs its C accelerators built in place (``python
setup.py build_ext --inplace``): without them switched code is made without method sites.

    python benchmarks/bench_switch.py --tree A_DIR --tree B_DIR [--package networkx] [--rounds 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CHILD = r"""
import importlib.util, pathlib, sys, time, warnings
from cassette_hook.importhook import dual_code, switch
from cassette_hook.rewrite import _names
sources = []
for package in sys.argv[1].split(","):
    sources += sorted(pathlib.Path(importlib.util.find_spec(package).origin).parent.rglob("*.py"))
modules = []
for path in sources:
    try:
        modules.append(compile(path.read_text(encoding="utf-8"), str(path), "exec"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        pass
switch.install_builtins()
warnings.simplefilter("ignore")
def once():
    t = time.process_time()
    for module in modules:
        try:
            dual_code.switched(module, "m")
        except Exception:
            pass
    return time.process_time() - t
print(min(once(), once()), len(modules), _names.variant())
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", required=True, help="a checkout of cassette_hook (twice: A, then B)")
    ap.add_argument("--package", default="networkx", help="installed packages whose sources to switch, comma-separated")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    if len(args.tree) != 2:
        raise SystemExit("give --tree twice: A, then B")
    times: dict[str, list[float]] = {tree: [] for tree in args.tree}
    ratios = []
    for round_ in range(args.rounds):
        order = args.tree if round_ % 2 == 0 else args.tree[::-1]
        got = {}
        for tree in order:
            env = {**os.environ, "PYTHONPATH": tree}
            out = subprocess.run([sys.executable, "-c", CHILD, args.package], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            if out[2] != "c":
                raise SystemExit(f"{tree}: switched code made without the C accelerators (build them in place)")
            got[tree] = float(out[0])
            times[tree].append(got[tree])
        ratios.append(got[args.tree[1]] / got[args.tree[0]])
        print(f"round {round_ + 1}: A {got[args.tree[0]]:.3f} s, B {got[args.tree[1]]:.3f} s, B/A {ratios[-1]:.3f}",
              flush=True)
    a, b = (statistics.median(times[tree]) for tree in args.tree)
    print(f"{args.package} ({out[1]} modules), {sys.version.split()[0]}: A {a:.3f} s, B {b:.3f} s CPU (medians); "
          f"B/A {statistics.median(ratios):.3f} (median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
