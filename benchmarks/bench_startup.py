"""What importing cassette_hook, and starting a program through it, adds to a start.

Three commands, each a fresh interpreter (``sys.executable``), run interleaved and
rotated round by round from an empty temporary directory:

    python -c pass                          the interpreter alone
    python -c "import cassette_hook"        the package, imported
    python -m cassette_hook -c pass         the command line: parse, install the hook, run

Reported: median ms of each, the ratio of each to ``python -c pass`` and the ms it adds
(medians over rounds of the per-round ratio and difference), and which of the modules
that used to be imported eagerly a plain ``import cassette_hook`` imports now (it should
import none of them: ``bytecode`` only when something is rewritten, ``importlib_metadata``
only when an entry point is looked up, the report writers only when a report is written,
the generics -- and ``typing`` with them -- only when something is overdubbed).
CPython's ``.pyc`` files are written by a warm-up run first (``PYTHONDONTWRITEBYTECODE`` is
dropped), so no run compiles anything.

    PYTHONPATH=. python benchmarks/bench_startup.py [--quick] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import harness

COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "import cassette_hook": ["-c", "import cassette_hook"],
    "python -m cassette_hook -c pass": ["-m", "cassette_hook", "-c", "pass"],
}
HEAVY = ("bytecode", "importlib_metadata", "xml.sax.saxutils", "urllib.request", "inspect", "tempfile", "sysconfig",
         "importlib.abc", "cassette_hook.importhook.dual_code", "cassette_hook.contexts", "typing",
         "cassette_hook.generics")
PROBE = ("import sys, cassette_hook; print(' '.join(m for m in sys.argv[1:] if m in sys.modules))")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(args: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run (CPU time: less disturbed by a busy machine)."""
    cpu, start = _children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"!! {args} failed:\n{proc.stderr}")
    return elapsed, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds (~10 s)")
    ap.add_argument("--rounds", type=int, help="rounds (default 60, quick 15)")
    args = ap.parse_args()
    rounds = args.rounds or (15 if args.quick else 60)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    with tempfile.TemporaryDirectory(prefix="cassette_hook_bench_startup_") as cwd:
        for cmd in COMMANDS.values():  # warm-up: CPython's .pyc files written
            run(cmd, cwd, env)
        imported = subprocess.run([sys.executable, "-c", PROBE, *HEAVY], cwd=cwd, env=env,
                                  capture_output=True, text=True, check=True).stdout.split()
        names = list(COMMANDS)
        samples: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        ratios: dict[str, list[float]] = {n: [] for n in names}
        added: dict[str, list[float]] = {n: [] for n in names}
        added_cpu: dict[str, list[float]] = {n: [] for n in names}
        for r in range(rounds):
            got: dict[str, tuple[float, float]] = {}
            for name in names[r % len(names):] + names[:r % len(names)]:
                got[name] = run(COMMANDS[name], cwd, env)
                samples[name].append(got[name][0])
                cpu[name].append(got[name][1])
            base = got["python -c pass"]
            for name in names:
                ratios[name].append(got[name][0] / base[0])
                added[name].append(got[name][0] - base[0])
                added_cpu[name].append(got[name][1] - base[1])
    print(f"Python {sys.version.split()[0]}; {rounds} rounds\n")
    rows = [[name, f"{statistics.median(samples[name]) * 1e3:.1f}", f"{min(samples[name]) * 1e3:.1f}",
             f"{statistics.median(ratios[name]):.2f}", f"{statistics.median(added[name]) * 1e3:+.1f}",
             f"{statistics.median(cpu[name]) * 1e3:.1f}",
             f"{statistics.median(cpu[name]) / statistics.median(cpu['python -c pass']):.2f}",
             f"{statistics.median(added_cpu[name]) * 1e3:+.1f}"]
            for name in names]
    print(harness.table(["command", "median ms", "min ms", "x python -c pass", "ms added", "CPU ms",
                         "x (CPU)", "CPU ms added"], rows))
    print("\ntargets (issue 12): import cassette_hook adds <= 15 ms; python -m cassette_hook -c pass <= 1.5x")
    print(f"imported by a plain `import cassette_hook`, of {', '.join(HEAVY)}: {', '.join(imported) or 'none'}")


if __name__ == "__main__":
    main()
