"""Import cost of the import hook: a real package imported plainly and through the hook,
with warm caches and with none at all.

The package is either the standard library's ``email`` (29 modules, ~10,000 lines, pure
Python), copied into a temporary directory as ``chb_email`` -- its self-references renamed
token by token -- so that nothing has imported it yet; or, with ``--package NAME``, an
installed package used where it is (``networkx``, ``sympy``: the benchmark requirements
install networkx), imported the way a user does (``import NAME``). Every child runs with
``-X pycache_prefix=DIR``, so both caches -- CPython's ``.pyc`` and ours beside it -- live
in a directory under the benchmark's control: a warm one shared by the warm variants, and
for each cold run a new one holding the warm one's files of everything but the package
(cassette_hook's own ``.pyc``, ``bytecode``'s, the standard library's: an installed tool
has them; a cold import is one whose *package* has no cache of either kind). Each measurement is a fresh interpreter
(``sys.executable``) that

    imports cassette_hook, and the modules outside the package that the package imports
    (found by a probe run: the standard library modules it depends on), untimed;
    installs the hook (ch.install(include=[package]), lazy=False with --eager) unless plain;
    with --under-context, activates a context (every variant), as --context does;
    sets sys.dont_write_bytecode = False (CPython's cache and ours are written as usual);
    times importing the package's modules (perf_counter around the imports);
    then activates a context, and under it makes what the first calls of all the package's
    module-level functions and methods would make of them (``lazy_mode.first_call``). The CPU
    time of both is reported: unless --eager, that activation is where the functions of
    the light imports are switched, or with a function watcher (3.12+) armed, and then the
    first calls switch their modules: what a program that runs all of the package pays.

Variants, interleaved and rotated round by round (A B, B A, ...; every few rounds the
cold pair joins: A B C D, B C D A, ...):

    plain       no hook; CPython's .pyc files warm
    cached      the hook; CPython's and our .pyc files warm
    plain-cold  no hook; no cache: CPython compiles every module (and writes its .pyc)
    cold        the hook; no cache of either kind: compiled, switched (lazy: under the
                context), the caches written

Reported: median ms per variant (wall clock, and the child's CPU time -- less disturbed by
a busy machine), ratios (cached to plain, cold to plain-cold: median over rounds of the
ratio within the round, and the ratio of medians), the time to import cassette_hook and
install the hook, the bytes of both caches, where a cached import's extra time goes, and
a cached import against a plain one repeated inside one warm process (CHILD_WARM).
The parent checks that cached runs really read our cache (its files are not rewritten)
and that cold runs wrote it.

    PYTHONPATH=. python benchmarks/bench_import.py [--quick] [--package NAME] [--rounds N]
                                                   [--cold-rounds N] [--json F] [--eager] [--under-context]
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
OURS = ".cassette_hook"  # in the names of our cache files, of every kind
LAZY = True  # not --eager
UNDER = False  # --under-context
VARIANTS = ("plain", "cached", "plain-cold", "cold")
BASELINE = {"cached": "plain", "cold": "plain-cold"}

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import cassette_hook as ch
from cassette_hook.rewrite import _names
t1 = time.perf_counter()
root, package, mode, deps, modules, lazy, under = json.loads(sys.argv[1])
if root:
    sys.path.insert(0, root)
for name in deps:
    __import__(name)
t2 = time.perf_counter()
if mode in ("cached", "cold"):
    ch.install(include=[package], lazy=lazy)
if under:  # (--under-context: imported while a context is active, as under --context)
    ch.NullContext().__enter__()
t3 = time.perf_counter()
sys.dont_write_bytecode = False
c4, t4 = time.process_time(), time.perf_counter()
for name in modules:
    __import__(name)
t5, c5 = time.perf_counter(), time.process_time()
import types
from cassette_hook.importhook import lazy_mode
ours = sorted(m for m in sys.modules if m == package or m.startswith(package + "."))
found = []
for name in ours:
    for obj in list(vars(sys.modules[name]).values()):
        members = list(vars(obj).values()) if isinstance(obj, type) and obj.__module__ == name else [obj]
        found += [f for f in members if isinstance(f, types.FunctionType) and f.__module__ == name]
c_activation = time.process_time()
with ch.NullContext():  # the first activation: switches (with a function watcher: arms) what a lazy import left light
    c6 = time.process_time()
    for f in found:  # what the first calls of all of them switch, where the activation armed them
        lazy_mode.first_call(f)
    c7 = time.process_time()
    # (counted under the context: as it ends, the compiled code may come back)
    switched = sum(_names.is_switched(f.__code__) for f in found)
files = {name: getattr(sys.modules[name], "__file__", None) for name in ours}
print(json.dumps({"import_s": t5 - t4, "cpu_s": c5 - c4, "ch_s": (t1 - t0) + (t3 - t2),
                  "activate_cpu_s": c6 - c_activation, "first_calls_cpu_s": c7 - c6, "functions": len(found),
                  "switched": switched, "files": files,
                  "outside": sorted(m for m in sys.modules if m.split(".")[0] != package)}))
"""


# The same imports, again and again in one process (the package's modules removed from
# sys.modules between rounds, the deps kept), through the hook and plainly in turn: what
# a cached import costs once the process is warm, without what a fresh interpreter pays
# once (the first run of the hook's own code, the collector's timing).
CHILD_WARM = r"""
import gc, json, statistics, sys, time
import cassette_hook as ch
from cassette_hook.importhook import lazy_mode
root, package, deps, modules, lazy, rounds = json.loads(sys.argv[1])
if root:
    sys.path.insert(0, root)
for name in deps:
    __import__(name)

def once(hooked):
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]
    if hooked:
        ch.install(include=[package], lazy=lazy)
    gc.collect()
    t = time.perf_counter()
    for name in modules:
        __import__(name)
    elapsed = time.perf_counter() - t
    if hooked:
        ch.uninstall()
        lazy_mode.switched(lazy_mode.waiting())
    return elapsed

once(True), once(False)
times = {True: [], False: []}
for r in range(rounds):
    for hooked in ((True, False) if r % 2 else (False, True)):
        times[hooked].append(once(hooked))
print(json.dumps({"cached": statistics.median(times[True]), "plain": statistics.median(times[False])}))
"""


def warm_in_process(root: str, package: str, prefix: Path, deps: list[str], modules: list[str]) -> dict[str, float]:
    """Median s of a cached import through the hook and of a plain one, in one warm process."""
    return run_child(CHILD_WARM, "warm in-process", root, prefix, [root, package, deps, modules, LAZY, 40])


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


def cache_files(prefix: Path, ours: bool) -> dict[Path, int]:
    """Our cache files (or CPython's .pyc files) under a pycache prefix, with their mtime_ns."""
    out = {}
    for p in prefix.rglob("*.pyc"):
        if (OURS in p.name) == ours:
            out[p] = p.stat().st_mtime_ns
    return out


def child(root: str, package: str, prefix: Path, mode: str, deps: list[str], modules: list[str]) -> dict[str, Any]:
    return run_child(CHILD, mode, root, prefix, [root, package, mode, deps, modules, LAZY, UNDER])


def run_child(script: str, what: str, root: str, prefix: Path, args: list[Any]) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter with its own pycache ``prefix``; its last line of output, as JSON."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (the child also sets sys.dont_write_bytecode)
    env.pop("PYTHONPYCACHEPREFIX", None)
    proc = subprocess.run([sys.executable, "-X", f"pycache_prefix={prefix}", "-c", script, json.dumps(args)],
                          capture_output=True, text=True, env=env, cwd=root or None)
    if proc.returncode != 0:
        raise SystemExit(f"!! {what} run failed:\n{proc.stderr}")
    if proc.stderr.strip():
        print(f"{what} run said on stderr:\n{proc.stderr.strip()}", file=sys.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def breakdown(prefix: Path, files: dict[str, str | None], package: str) -> dict[str, float]:
    """Time, in this process, the pieces of work a cached import through the hook adds."""
    import marshal
    import time
    from importlib.util import MAGIC_NUMBER

    from cassette_hook.importhook import code_cache, finder

    def ms(fn: Any, n: int = 30) -> float:
        xs = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            xs.append(time.perf_counter() - t)
        return statistics.median(xs) * 1e3

    sources = {m: f for m, f in files.items() if f and f.endswith(".py")}
    modules = list(sources)
    # Our header ends with a line of text after MAGIC_NUMBER and FORMAT (its length varies).
    stamp_start = len(MAGIC_NUMBER + code_cache.FORMAT)
    kind = code_cache.LIGHT if LAZY and not UNDER else code_cache.SWITCHED  # the file a cached import reads
    ours = [memoryview(d)[d.index(b"\n", stamp_start) + 1:]
            for d in (p.read_bytes() for p in cache_files(prefix, True)
                      if p.name.endswith(f"{code_cache.suffix(kind)}.pyc"))]
    theirs = [p.read_bytes() for p in cache_files(prefix, False) if _in_package(p, prefix, files[package])]
    patterns = finder.Patterns([package])

    def timestamp_header(source: str) -> bytes:
        """The header CPython writes for ``source`` in a timestamp .pyc, which ours record."""
        st = os.stat(source)
        return (MAGIC_NUMBER + bytes(4) + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))

    headers = {m: timestamp_header(sources[m]) for m in modules}
    what_ours_is = "light: the compiled code" if LAZY and not UNDER else "two bodies per function"
    return {
        "unmarshal CPython's .pyc (plain does this too)":
            ms(lambda: [marshal.loads(memoryview(d)[16:]) for d in theirs]),
        f"unmarshal ours ({what_ours_is})": ms(lambda: [marshal.loads(d) for d in ours]),
        "Patterns.may_match, twice per module": ms(lambda: [patterns.may_match(m) for m in modules * 2]),
        "Patterns.matches(name, origin)": ms(lambda: [patterns.matches(m, sources[m]) for m in modules]),
        # (the source's stat standing in for that of CPython's .pyc, which is under the prefix)
        "code_cache.path_for + os.stat of CPython's .pyc + code_cache.trusted (a stat of the source)":
            ms(lambda: [(os.stat(sources[m]), code_cache.trusted(headers[m], sources[m]))
                        for m in modules if code_cache.path_for(sources[m])]),
    }


def cold_breakdown(sources: list[Path]) -> dict[str, float]:
    """Where a cold import's extra time goes, timed in this process (CPU ms, median of 3)
    over the package's sources, against compiling them: a bare walk over every instruction
    (``dis``: what any pure-Python pass costs at the least), ``bytecode``'s decoding, a
    decode-and-encode round trip with nothing changed, and the switched code the hook makes."""
    import dis
    import time
    import types

    from cassette_hook.importhook import switch
    from cassette_hook.importhook import dual_code
    from cassette_hook.rewrite._rewriter import decode

    texts = [(str(p), p.read_text(encoding="utf-8")) for p in sources]
    modules = [compile(text, path, "exec") for path, text in texts]

    def walk(code: types.CodeType) -> list[types.CodeType]:
        return [code, *(c for k in code.co_consts if isinstance(k, types.CodeType) for c in walk(k))]

    codes = [c for m in modules for c in walk(m)]
    switch.install_builtins()

    def ms(fn: Any) -> float:
        xs = []
        for _ in range(3):
            t = time.process_time()
            fn()
            xs.append(time.process_time() - t)
        return statistics.median(xs) * 1e3

    return {
        "compile the sources (a cold plain import does this)": ms(lambda: [compile(t, p, "exec") for p, t in texts]),
        "walk every instruction (dis.get_instructions)": ms(lambda: [list(dis.get_instructions(c)) for c in codes]),
        "decode every code object (bytecode)": ms(lambda: [decode(c) for c in codes]),
        "decode + encode, nothing changed (bytecode)": ms(lambda: [decode(c).to_code(
            stacksize=c.co_stacksize, compute_exception_stack_depths=False, check_pre_and_post=False) for c in codes]),
        "switched code, as the hook makes it (importhook.dual_code)":
            ms(lambda: [dual_code.switched(m, "m") for m in modules]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds (~1 min for email)")
    ap.add_argument("--package", metavar="NAME",
                    help="an installed package to import in place (import NAME) instead of the email copy")
    ap.add_argument("--rounds", type=int, help="rounds of plain and cached (default 60, quick 16)")
    ap.add_argument("--cold-rounds", type=int, help="of which with the cold pair too (default 12, quick 4)")
    ap.add_argument("--json", metavar="FILE", help="also write the raw samples (s) here")
    ap.add_argument("--eager", action="store_true",
                    help="install the hook with lazy=False: every module switched at import (by default, the "
                         "light imports' functions are switched at the first activation, which each child makes "
                         "after the timed import)")
    ap.add_argument("--under-context", action="store_true",
                    help="import while a context is active (as under --context): every module is switched at import")
    args = ap.parse_args()
    global LAZY, UNDER
    LAZY, UNDER = not args.eager, args.under_context
    rounds = args.rounds or (16 if args.quick else 60)
    colds = min(rounds, args.cold_rounds or (4 if args.quick else 12))
    from common import CH_ERROR, no_package_note
    if CH_ERROR is not None:
        raise SystemExit(no_package_note())

    tmp = Path(tempfile.mkdtemp(prefix="cassette_hook_bench_import_"))
    warm = tmp / "warm-cache"
    try:
        if args.package:
            root, package, modules = "", args.package, [args.package]
            what = f"{package} (installed, imported in place: import {package})"
        else:
            copied, lines = copy_package(tmp)
            root, package, modules = str(tmp), PACKAGE, copied
            what = f"{PACKAGE} = stdlib {SOURCE}: {len(copied)} modules, {lines:,} lines"
        # Probe (also warms CPython's .pyc files): what the package imports from outside.
        probe = child(root, package, warm, "plain", [], modules)
        baseline = set(child(root, package, warm, "plain", [], [])["outside"])
        deps = [m for m in probe["outside"] if m not in baseline]
        child(root, package, warm, "cold", deps, modules)  # writes our cache beside CPython's
        ours, theirs = cache_files(warm, True), cache_files(warm, False)
        files = probe["files"]
        print(f"Python {sys.version.split()[0]}; {what}; {len(files)} modules of it imported; {rounds} rounds "
              f"({colds} with the cold pair); outside modules it imports that importing cassette_hook "
              f"had not (imported untimed first): {len(deps)}")
        mine = [p for p in theirs if _in_package(p, warm, files[package])]
        print(f"cache bytes: CPython .pyc {sum(p.stat().st_size for p in mine):,} ({len(mine)} files of the package), "
              f"cassette_hook .pyc {sum(p.stat().st_size for p in ours):,} ({len(ours)} files)\n")

        samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
        cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
        pairs: dict[str, list[float]] = {v: [] for v in BASELINE}  # ratio to its baseline in the same round
        ch_s: list[float] = []
        activate: dict[str, list[float]] = {v: [] for v in VARIANTS}  # CPU s of the first activation
        first_calls: dict[str, list[float]] = {v: [] for v in VARIANTS}  # ... and of switching all after it
        counts: dict[str, tuple[int, int]] = {}
        every = rounds / colds
        for r in range(rounds):
            now = list(VARIANTS) if int(r / every) != int((r - 1) / every) or r == 0 else list(VARIANTS[:2])
            got: dict[str, float] = {}
            for mode in now[r % len(now):] + now[:r % len(now)]:
                prefix = warm if mode in ("plain", "cached") else cold_prefix(warm, tmp, files[package])
                before = cache_files(warm, True)
                out = child(root, package, prefix, mode, deps, modules)
                if mode == "cached" and cache_files(warm, True) != before:
                    raise SystemExit("!! a cached run rewrote the cache: it did not read it")
                if mode == "cold" and len(cache_files(prefix, True)) != len(ours):
                    raise SystemExit(f"!! a cold run wrote {len(cache_files(prefix, True))} cache files, "
                                     f"expected {len(ours)}")
                if prefix != warm:
                    shutil.rmtree(prefix.parent, ignore_errors=True)
                samples[mode].append(out["import_s"])
                cpu[mode].append(out["cpu_s"])
                activate[mode].append(out["activate_cpu_s"])
                first_calls[mode].append(out["first_calls_cpu_s"])
                got[mode] = out["import_s"]
                counts[mode] = (out["switched"], out["functions"])
                if mode in ("cached", "cold"):
                    ch_s.append(out["ch_s"])
            for mode, base in BASELINE.items():
                if mode in got:
                    pairs[mode].append(got[mode] / got[base])
            if sys.stderr.isatty():
                print(f"  round {r + 1}/{rounds}", file=sys.stderr, end="\r")
        if counts["plain"][0] or counts["plain-cold"][0] or not counts["cached"][0] or not counts["cold"][0]:
            raise SystemExit(f"!! switched functions (switched, all) per variant: {counts}")

        def iqr(v: str) -> float:
            if len(samples[v]) < 2:
                return float("nan")
            q1, _, q3 = statistics.quantiles(samples[v], n=4)
            return (q3 - q1) / statistics.median(samples[v])

        rows = []
        for v in VARIANTS:
            med, cpu_med = statistics.median(samples[v]), statistics.median(cpu[v])
            base = BASELINE.get(v, v)
            rows.append([v, len(samples[v]), f"{med * 1e3:.1f}", f"{min(samples[v]) * 1e3:.1f}",
                         f"{statistics.median(pairs[v]):.2f}" if v in pairs else "",
                         f"{med / statistics.median(samples[base]):.2f}",
                         f"{cpu_med * 1e3:.1f}", f"{cpu_med / statistics.median(cpu[base]):.2f}",
                         f"{iqr(v):.0%}", f"{statistics.median(activate[v]) * 1e3:.1f}",
                         f"{statistics.median(first_calls[v]) * 1e3:.1f}", f"{counts[v][0]}/{counts[v][1]}"])
        print(harness.table(["variant", "runs", "median ms", "min ms", "x base (paired)", "x base (medians)",
                             "CPU ms", "x base (CPU)", "IQR/med", "1st activation CPU ms",
                             "first calls of all CPU ms", "switched fns"], rows))
        print("(base: plain for cached, plain-cold for cold)")
        print(f"\nimport cassette_hook + ch.install (not in the times above): median "
              f"{statistics.median(ch_s) * 1e3:.0f} ms"
              "\ntargets (issue 12): cold <= 2x plain-cold; cached <= 1.05x plain")
        extra = statistics.median(cpu["cached"]) - statistics.median(cpu["plain"])
        print(f"\ncached - plain (CPU medians): {extra * 1e3:.1f} ms per import of the package; where it goes"
              " (timed in this process, all modules, median of 30):")
        print(harness.table(["piece", "ms"], [[k, f"{v:.2f}"] for k, v in breakdown(warm, files, package).items()]))
        inside = warm_in_process(root, package, warm, deps, modules)
        print(f"\nin one warm process (40 rounds, interleaved): cached {inside['cached'] * 1e3:.2f} ms, "
              f"plain {inside['plain'] * 1e3:.2f} ms: {inside['cached'] / inside['plain']:.3f}x")
        sources = [Path(f) for f in files.values() if f and f.endswith(".py")]
        pieces = cold_breakdown(sources)
        base = next(iter(pieces.values()))
        print(f"\nwhere a cold import's time goes (timed in this process, {len(sources)} modules, "
              "CPU ms, median of 3):")
        print(harness.table(["piece", "ms", "x compile"],
                            [[k, f"{v:.0f}", f"{v / base:.1f}"] for k, v in pieces.items()]))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"python": sys.version, "samples": samples, "cpu": cpu, "ch_s": ch_s}, fh)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cold_prefix(warm: Path, tmp: Path, init: str | None) -> Path:
    """A new pycache prefix with the warm one's files, except the package's."""
    prefix = Path(tempfile.mkdtemp(dir=tmp)) / "cache"
    package = None if init is None else warm / Path(init).parent.relative_to(Path(init).anchor)
    shutil.copytree(warm, prefix, ignore=lambda d, names: [n for n in names if Path(d, n) == package])
    return prefix


def _in_package(pyc: Path, prefix: Path, init: str | None) -> bool:
    """Is ``pyc`` (under a pycache prefix, which mirrors the sources' directories) the
    cache of one of the package's modules?"""
    return init is not None and pyc.is_relative_to(prefix / Path(init).parent.relative_to(Path(init).anchor))


if __name__ == "__main__":
    main()
