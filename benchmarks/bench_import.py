"""Import cost of the import hook: a real package imported plainly, through the hook with
its code cache warm, and through the hook with the cache cold (rewriting at import).

The package is the standard library's ``email`` (29 modules, ~10,000 lines, pure Python),
copied into a temporary directory as ``chb_email`` -- its self-references renamed token by
token -- so that nothing has imported it yet and both caches are under our control. Each
measurement is a fresh interpreter (``sys.executable``) that

    imports cassette_hook, and the modules outside the package that the package imports
    (found by a probe run: the standard library modules it depends on), untimed;
    installs the hook (ch.install(include=["chb_email"])) unless plain;
    sets sys.dont_write_bytecode = False (CPython's cache and ours are written as usual);
    times importing every module of the package (perf_counter around the imports).

Variants, interleaved and rotated round by round (A B, B A, ...; every few rounds the
third joins: A B C, B C A, ...):

    plain   no hook; CPython's .pyc files warm
    cached  the hook; our __pycache__/*.cassette_hook.pyc files warm
    first   the hook; our cache files deleted before the run (CPython's .pyc warm): the
            cost of the first import, rewriting every module and writing the cache

Reported: median ms per variant (wall clock, and the child's CPU time -- less disturbed by
a busy machine), ratios to plain (median over rounds of the ratio to the plain run of the
same round, and the ratio of medians), the time to import cassette_hook and install the
hook, and the bytes of both caches. The parent checks that cached runs really read the cache
(its files are not rewritten) and that first runs rewrote it.

    PYTHONPATH=. python benchmarks/bench_import.py [--quick] [--rounds N] [--first-rounds N] [--json F]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import tokenize
from pathlib import Path
from typing import Any

import harness

SOURCE = "email"
PACKAGE = "chb_email"
OUR_SUFFIX = ".cassette_hook.pyc"

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import cassette_hook as ch
from cassette_hook.rewrite import _dual
t1 = time.perf_counter()
root, package, mode, deps, modules = json.loads(sys.argv[1])
sys.path.insert(0, root)
for name in deps:
    __import__(name)
t2 = time.perf_counter()
if mode != "plain":
    ch.install(include=[package])
t3 = time.perf_counter()
sys.dont_write_bytecode = False
c4, t4 = time.process_time(), time.perf_counter()
for name in modules:
    __import__(name)
t5, c5 = time.perf_counter(), time.process_time()
import types
switched = total = 0
for name in modules:
    for obj in list(vars(sys.modules[name]).values()):
        members = list(vars(obj).values()) if isinstance(obj, type) and obj.__module__ == name else [obj]
        for f in members:
            if isinstance(f, types.FunctionType) and f.__module__ == name:
                total += 1
                switched += _dual.is_switched(f.__code__)
print(json.dumps({"import_s": t5 - t4, "cpu_s": c5 - c4, "ch_s": (t1 - t0) + (t3 - t2),
                  "switched": switched, "functions": total,
                  "outside": sorted(m for m in sys.modules if m.split(".")[0] != package)}))
"""


# -- the package ------------------------------------------------------------------------

def renamed(source: str, old: str, new: str) -> str:
    """``source`` with every NAME token ``old`` replaced by ``new`` (strings untouched)."""
    lines = io.StringIO(source).readlines()  # as tokenize reads them (not str.splitlines: form feeds)
    hits = [tok.start for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.NAME and tok.string == old]
    for row, col in reversed(hits):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old):]
    return "".join(lines)


def copy_package(root: Path) -> tuple[list[str], int]:
    """Copy the stdlib package under its new name; return its module names and line count."""
    src = Path(sysconfig.get_paths()["stdlib"]) / SOURCE
    dst = root / PACKAGE
    modules, lines = [], 0
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts or "test" in rel.parts:
            continue
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        text = renamed(path.read_text(encoding="utf-8"), SOURCE, PACKAGE)
        compile(text, str(out), "exec")  # the renaming must leave valid Python
        out.write_text(text, encoding="utf-8")
        lines += text.count("\n")
        parts = [PACKAGE, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules.append(".".join(parts))
    return sorted(modules, key=lambda m: (m.count("."), m)), lines


def cache_files(root: Path, ours: bool) -> dict[Path, int]:
    """Our cache files (or CPython's .pyc files) under the copy, with their mtime_ns."""
    out = {}
    for p in (root / PACKAGE).rglob("*.pyc"):
        if p.name.endswith(OUR_SUFFIX) == ours:
            out[p] = p.stat().st_mtime_ns
    return out


# -- running ----------------------------------------------------------------------------

def child(root: Path, mode: str, deps: list[str], modules: list[str]) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (the child also sets sys.dont_write_bytecode)
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps([str(root), PACKAGE, mode, deps, modules])],
                          capture_output=True, text=True, env=env, cwd=root)
    if proc.returncode != 0:
        raise SystemExit(f"!! {mode} import failed:\n{proc.stderr}")
    if proc.stderr.strip():
        print(f"{mode} run said on stderr:\n{proc.stderr.strip()}", file=sys.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def breakdown(root: Path, modules: list[str]) -> dict[str, float]:
    """Time, in this process, the pieces of work a cached import through the hook adds."""
    import marshal
    import time
    from importlib.util import MAGIC_NUMBER

    import cassette_hook as ch
    from cassette_hook import _pyc, importhook

    def ms(fn: Any, n: int = 30) -> float:
        xs = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            xs.append(time.perf_counter() - t)
        return statistics.median(xs) * 1e3

    sources = {}
    for m in modules:
        rel = Path(*m.split(".")[1:])
        path = root / PACKAGE / rel / "__init__.py"
        sources[m] = path if path.exists() else (root / PACKAGE / rel).with_suffix(".py")
    # Our header ends with a line of text after MAGIC_NUMBER and FORMAT (its length varies).
    stamp_start = len(MAGIC_NUMBER + _pyc.FORMAT)
    ours = [memoryview(d)[d.index(b"\n", stamp_start) + 1:] for d in (p.read_bytes() for p in cache_files(root, True))]
    theirs = [p.read_bytes() for p in cache_files(root, False)]
    patterns = importhook.Patterns([PACKAGE])
    out = {
        "unmarshal CPython's .pyc (plain does this too)":
            ms(lambda: [marshal.loads(memoryview(d)[16:]) for d in theirs]),
        "unmarshal ours (two bodies per function)": ms(lambda: [marshal.loads(d) for d in ours]),
        "Patterns.may_match, twice per module": ms(lambda: [patterns.may_match(m) for m in modules * 2]),
        "Patterns.matches(name, origin)": ms(lambda: [patterns.matches(m, str(sources[m])) for m in modules]),
        "_pyc.path_for + os.stat + _pyc.key": ms(lambda: [_pyc.key(os.stat(sources[m]), m, importhook.OPTIONS)
                                                          for m in modules if _pyc.path_for(str(sources[m]))]),
    }
    del ch
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds (~40 s)")
    ap.add_argument("--rounds", type=int, help="rounds of plain and cached (default 120, quick 30)")
    ap.add_argument("--first-rounds", type=int, help="of which with a first import too (default 12, quick 4)")
    ap.add_argument("--json", metavar="FILE", help="also write the raw samples (s) here")
    args = ap.parse_args()
    rounds = args.rounds or (30 if args.quick else 120)
    firsts = min(rounds, args.first_rounds or (4 if args.quick else 12))
    from common import CH_ERROR, no_package_note
    if CH_ERROR is not None:
        raise SystemExit(no_package_note())

    root = Path(tempfile.mkdtemp(prefix="cassette_hook_bench_import_"))
    try:
        modules, lines = copy_package(root)
        # Probe (also warms CPython's .pyc files): what the package imports from outside.
        probe = child(root, "plain", [], modules)
        baseline = set(child(root, "plain", [], [])["outside"])
        deps = [m for m in probe["outside"] if m not in baseline]
        child(root, "first", deps, modules)  # writes our cache
        ours, theirs = cache_files(root, True), cache_files(root, False)
        print(f"Python {sys.version.split()[0]}; {PACKAGE} = stdlib {SOURCE}: {len(modules)} modules, "
              f"{lines:,} lines; {rounds} rounds ({firsts} with a first import); "
              "outside modules it imports that importing cassette_hook "
              f"had not (imported untimed first): {len(deps)}")
        print(f"cache bytes: CPython .pyc {sum(p.stat().st_size for p in theirs):,}, "
              f"cassette_hook .pyc {sum(p.stat().st_size for p in ours):,} ({len(ours)} files)\n")

        variants = ["plain", "cached", "first"]
        samples: dict[str, list[float]] = {v: [] for v in variants}
        cpu: dict[str, list[float]] = {v: [] for v in variants}
        pairs: dict[str, list[float]] = {v: [] for v in variants}  # ratio to the plain run of the round
        ch_s: list[float] = []
        counts: dict[str, tuple[int, int]] = {}
        every = rounds / firsts
        for r in range(rounds):
            now = variants if int(r / every) != int((r - 1) / every) or r == 0 else variants[:2]
            got: dict[str, float] = {}
            for mode in now[r % len(now):] + now[:r % len(now)]:
                if mode == "first":
                    for p in cache_files(root, True):
                        p.unlink()
                before = cache_files(root, True)
                out = child(root, mode, deps, modules)
                after = cache_files(root, True)
                if mode == "cached" and after != before:
                    raise SystemExit("!! a cached run rewrote the cache: it did not read it")
                if mode == "first" and len(after) != len(ours):
                    raise SystemExit(f"!! a first run wrote {len(after)} cache files, expected {len(ours)}")
                samples[mode].append(out["import_s"])
                cpu[mode].append(out["cpu_s"])
                got[mode] = out["import_s"]
                counts[mode] = (out["switched"], out["functions"])
                if mode != "plain":
                    ch_s.append(out["ch_s"])
            for mode, t in got.items():
                pairs[mode].append(t / got["plain"])
            if sys.stderr.isatty():
                print(f"  round {r + 1}/{rounds}", file=sys.stderr, end="\r")
        if counts["plain"][0] != 0 or counts["cached"][0] == 0 or counts["first"][0] == 0:
            raise SystemExit(f"!! switched functions (switched, all) per variant: {counts}")

        def iqr(v: str) -> float:
            q1, _, q3 = statistics.quantiles(samples[v], n=4)
            return (q3 - q1) / statistics.median(samples[v])

        rows = []
        for v in variants:
            med = statistics.median(samples[v])
            cpu_med = statistics.median(cpu[v])
            rows.append([v, len(samples[v]), f"{med * 1e3:.1f}", f"{min(samples[v]) * 1e3:.1f}",
                         f"{statistics.median(pairs[v]):.2f}", f"{med / statistics.median(samples['plain']):.2f}",
                         f"{cpu_med * 1e3:.1f}", f"{cpu_med / statistics.median(cpu['plain']):.2f}",
                         f"{iqr(v):.0%}", f"{counts[v][0]}/{counts[v][1]}"])
        print(harness.table(["variant", "runs", "median ms", "min ms", "x plain (paired)", "x plain (medians)",
                             "CPU ms", "x plain (CPU)", "IQR/med", "switched fns"], rows))
        print(f"\nimport cassette_hook + ch.install (not in the times above): median "
              f"{statistics.median(ch_s) * 1e3:.0f} ms"
              "\ntargets: cached <= 1.10x plain; first import reported")
        extra = statistics.median(cpu["cached"]) - statistics.median(cpu["plain"])
        print(f"\ncached - plain (CPU medians): {extra * 1e3:.1f} ms per import of the package; where it goes"
              " (timed in this process, all modules, median of 30):")
        print(harness.table(["piece", "ms"], [[k, f"{v:.2f}"] for k, v in breakdown(root, modules).items()]))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"python": sys.version, "samples": samples, "cpu": cpu, "ch_s": ch_s}, fh)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
