"""What the first context costs after a lazy import: switching every module at the
activation, against switching a module at the first call of one of its functions.

A program imports many modules and runs few of them: the script below imports networkx
(286 modules) and runs functions of about a dozen. Each child is a fresh interpreter that
installs the lazy hook for the package, imports it (untimed), and then times, in CPU
time, the first ``with`` block of a counting context around the script: the activation,
the switching it causes, and the script itself. Variants, interleaved and rotated:

    plain        no hook: the script itself (the context sees none of it)
    all          the hook, the activation switching every function of every module (as on
                 3.10, 3.11 and the pure-Python path: the function watcher turned off)
    first-call   the hook as this Python runs it (3.12+ with the C accelerators: the
                 activation arms the functions; a module is switched at its first call)

each with both caches warm (``cached``: a copy of a warm cache directory before every run),
and without the cache of switched functions (``made``: the hook's files of switched
functions removed from that copy, its light files kept), so that every switch is made with
``bytecode``. Needs networkx (the benchmark requirements).

    PYTHONPATH=.:benchmarks python benchmarks/bench_first_call.py [--rounds N]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import harness

OURS = ".cassette_hook"
FUNCTIONS_SUFFIX = ".functions."  # (the switched functions' cache files: code_cache.FUNCTIONS)

CHILD = r"""
import json, sys, time
import cassette_hook as ch
from cassette_hook.importhook import lazy_mode
mode = sys.argv[1]
if mode == "all":
    lazy_mode._watch = None  # (no function watcher: the activation switches every function)
if mode != "plain":
    ch.install(include=["networkx"])
import networkx as nx

class Counting(ch.Context):
    def prehook(self, f, *args, **kwargs):
        self.metadata[0] += 1

ctx = Counting(metadata=[0])
c0 = time.process_time()
with ctx:
    G = nx.karate_club_graph()
    nx.shortest_path_length(G, 0, 33)
    list(nx.connected_components(G))
    list(nx.find_cliques(G))
    nx.betweenness_centrality(G)
    nx.minimum_spanning_tree(G)
c1 = time.process_time()
files = {light.co_filename for _, light, _ in lazy_mode._switched_by_activations}  # (a wrapper's __module__ is
print(json.dumps({"cpu_s": c1 - c0, "calls": ctx.metadata[0],          # the function's it wraps)
                  "switched_modules": len({f for f in files if "networkx" in f})}))
"""


def child(variant: str, prefix: Path) -> dict[str, float]:
    how = variant.removesuffix("-cached").removesuffix("-made")  # plain, all, first-call
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # (both caches are written)
    out = subprocess.run([sys.executable, "-X", f"pycache_prefix={prefix}", "-c", CHILD, how],
                         env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"!! {variant} failed:\n{out.stderr}")
    return json.loads(out.stdout.splitlines()[-1])


def drop_switched_functions(prefix: Path) -> int:
    gone = 0
    for path in prefix.rglob(f"*{OURS}*"):
        if FUNCTIONS_SUFFIX in path.name and "networkx" in str(path):
            path.unlink()
            gone += 1
    return gone


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    rounds = ap.parse_args().rounds
    if importlib.util.find_spec("networkx") is None:
        raise SystemExit("bench_first_call needs networkx: pip install -r benchmarks/requirements.txt")
    variants = ["plain", "all-cached", "first-call-cached", "all-made", "first-call-made"]
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    last: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        prefix, warm = Path(tmp) / "pycache", Path(tmp) / "warm"
        child("all", warm)  # (both caches: every module's light file and switched functions)
        for r in range(rounds):
            for variant in variants[r % len(variants):] + variants[:r % len(variants)]:
                shutil.rmtree(prefix, ignore_errors=True)
                shutil.copytree(warm, prefix)
                if variant.endswith("-made") and not drop_switched_functions(prefix):
                    raise SystemExit("!! no cache of switched functions to remove")
                last[variant] = out = child(variant, prefix)
                cpu[variant].append(out["cpu_s"])
            if sys.stderr.isatty():
                print(f"  round {r + 1}/{rounds}", file=sys.stderr, end="\r")
    calls = {v: last[v]["calls"] for v in variants[1:]}
    if len(set(calls.values())) != 1:
        raise SystemExit(f"!! the context counted different calls: {calls}")
    base = statistics.median(cpu["plain"])
    rows = [[v, len(cpu[v]), f"{statistics.median(cpu[v]) * 1e3:.0f}", f"{statistics.median(cpu[v]) / base:.2f}",
             last[v]["switched_modules"]] for v in variants]
    print(f"Python {sys.version.split()[0]}; a counting context around a networkx script "
          f"({calls['all-cached']:,} calls seen), {rounds} rounds; CPU time of the first `with` block")
    print(harness.table(["variant", "runs", "CPU ms", "x plain", "networkx modules switched"], rows))


if __name__ == "__main__":
    main()
