"""What importing cassette_hook, and starting a program through it, adds to a start.

Five commands, each a fresh interpreter (``sys.executable``), run interleaved and
rotated round by round from an empty temporary directory:

    python -c pass                          the interpreter alone
    python -c "import cassette_hook"        the package, imported
    python -m cassette_hook -c pass         the command line: parse, install the hook, run
    ... --context null -c pass              and a built-in context named (issue 38, item 1)
    ... --context profile -c pass           (its report to os.devnull)

Reported: median ms of each, the ratio of each to ``python -c pass`` and the ms it adds
(medians over rounds of the per-round ratio and difference), and which of the modules
that used to be imported eagerly a plain ``import cassette_hook`` imports now (it should
import none of them: ``bytecode`` only when something is rewritten, ``importlib_metadata``
only when an entry point is looked up, the report writers only when a report is written,
the generics -- and ``typing`` with them -- only when something is overdubbed).
CPython's ``.pyc`` files are written by a warm-up run first (``PYTHONDONTWRITEBYTECODE`` is
dropped), so no run compiles anything.

    PYTHONPATH=. python benchmarks/bench_startup.py [--quick] [--rounds N]

With ``--cold-start PACKAGE`` (``networkx``, ``sympy``; repeatable), a program's first run
instead (issue 38, item 5): a short script importing and using the package (``COLD_SCRIPTS``),
run plainly (``python script.py``) and under ``python -m cassette_hook --include PACKAGE
--context null script.py``, each cold: ``PYTHONPYCACHEPREFIX`` a new directory holding the
``.pyc`` files of everything but the package (the standard library's, cassette_hook's,
``bytecode``'s: an installed tool has them), so the plain run compiles the package and the
hooked one compiles and rewrites it, with no cache of either kind.  Both ways again with
``PYTHONDONTWRITEBYTECODE=1`` (nothing written, as on many CI machines: every run is a
first run).  Reported: CPU and wall seconds of each, and the ratio of the hooked run to the
plain one (CPU medians; the target is <= 2x).

    PYTHONPATH=. python benchmarks/bench_startup.py --cold-start networkx --cold-start sympy [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
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
    "--context null -c pass": ["-m", "cassette_hook", "--context", "null", "-c", "pass"],  # (a built-in name)
    "--context profile -c pass": ["-m", "cassette_hook", "--context", "profile", "--output", os.devnull, "-c", "pass"],
}
HEAVY = ("bytecode", "importlib_metadata", "xml.sax.saxutils", "urllib.request", "inspect", "tempfile", "sysconfig",
         "importlib.abc", "cassette_hook.importhook.dual_code", "cassette_hook.contexts", "typing",
         "cassette_hook.generics")
COLD_SCRIPTS = {
    "networkx": (
        "import networkx as nx\n"
        "G = nx.karate_club_graph()\n"
        "print(nx.shortest_path_length(G, 0, 33), len(list(nx.connected_components(G))))\n"
        "print(len(list(nx.find_cliques(G))))\n"
        "print(round(max(nx.betweenness_centrality(G).values()), 4), nx.minimum_spanning_tree(G).number_of_edges())\n"
    ),
    "sympy": (
        "import sympy as sp\n"
        "x = sp.Symbol('x')\n"
        "print(sp.integrate(x**2 * sp.sin(x), x), sp.factor(x**4 - 1), sp.solve(x**2 - 2, x))\n"
    ),
}
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


def package_dir(package: str, cwd: str, env: dict[str, str]) -> str:
    """Where ``package``'s sources are (its ``__init__``'s directory)."""
    code = f"import importlib.util as u, os; print(os.path.dirname(u.find_spec({package!r}).origin))"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def cold_start(packages: list[str], rounds: int) -> None:
    """A program's first run under ``--context null`` against its plain first run (see the
    module's docstring)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="cassette_hook_bench_cold_") as tmp:
        warm = os.path.join(tmp, "warm")
        for package in packages:
            script = os.path.join(tmp, f"cold_{package}.py")
            with open(script, "w") as file:
                file.write(COLD_SCRIPTS[package])
            hooked = ["-m", "cassette_hook", "--include", package, "--context", "null", script]
            commands = {"plain": [script], "context": hooked}
            for cmd in commands.values():  # warm-up: everything's .pyc in the warm prefix
                run(cmd, tmp, {**env, "PYTHONPYCACHEPREFIX": warm})
            sources = package_dir(package, tmp, env)
            mirrored = os.path.join(warm, os.path.relpath(sources, os.path.sep))
            variants = [(f"{name}{', no .pyc written' if dont else ''}", cmd, dont)
                        for dont in (False, True) for name, cmd in commands.items()]
            cpu: dict[str, list[float]] = {name: [] for name, _, _ in variants}
            wall: dict[str, list[float]] = {name: [] for name, _, _ in variants}
            for r in range(rounds):
                for name, cmd, dont in variants[r % len(variants):] + variants[:r % len(variants)]:
                    prefix = os.path.join(tmp, f"cold-{r}-{len(cpu[name])}-{dont:d}-{name[:5]}")
                    shutil.copytree(warm, prefix, ignore=lambda d, names: [
                        n for n in names if os.path.join(d, n) == mirrored])  # (the package's .pyc left out)
                    child_env = {**env, "PYTHONPYCACHEPREFIX": prefix}
                    if dont:
                        child_env["PYTHONDONTWRITEBYTECODE"] = "1"
                    elapsed, used = run(cmd, tmp, child_env)
                    wall[name].append(elapsed)
                    cpu[name].append(used)
                    shutil.rmtree(prefix, ignore_errors=True)
            for name, _, dont in variants:
                base = variants[2 if dont else 0][0]
                used = statistics.median(cpu[name])
                rows.append([package, name, f"{used:.2f}", f"{statistics.median(wall[name]):.2f}",
                             f"{used / statistics.median(cpu[base]):.2f}"])
    print(f"Python {sys.version.split()[0]}; {rounds} rounds; first runs (no cache of the package's code)\n")
    print(harness.table(["package", "run", "CPU s", "wall s", "x plain (CPU)"], rows))
    print("\ntarget (issue 38, item 5): a first run under a context <= 2x a plain first run")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds (~10 s)")
    ap.add_argument("--rounds", type=int, help="rounds (default 60, quick 15; with --cold-start 3, quick 1)")
    ap.add_argument("--cold-start", metavar="PACKAGE", action="append", choices=sorted(COLD_SCRIPTS),
                    help="time a first run of a script using PACKAGE under --context null instead (repeatable)")
    args = ap.parse_args()
    if args.cold_start:
        cold_start(args.cold_start, args.rounds or (1 if args.quick else 3))
        return
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
