"""Real programs from PyPI, run as their users run them: plain, under ``--context null``,
``--context profile`` and ``cProfile`` (issue 38's targets).

Each program is a pure-Python package of PyPI (pinned in
``benchmarks/requirements-programs.txt``) that neither the other benchmarks, the peer
suites (``peers/``) nor the fuzzer use as a subject, run on a real or deterministically
generated input (no network):

    sympy        integrate, simplify, solve, series and limit (a script)
    pygments     python -m pygments -f html -O full on ~10k lines of pygments' own source
    sqlparse     python -m sqlparse -r -k upper on a generated SQL file
    docutils     python -m docutils (rst to html) on a generated reST document
    pyflakes     python -m pyflakes on six packages of the standard library (email, http ...)
    pycodestyle  python -m pycodestyle on three packages of the standard library (email ...)
    pycparser    parse a generated (preprocessed) C file and write it back (a script)
    yaml         yaml.load(..., Loader=yaml.Loader), the pure-Python loader, on a large document
    markdown     python -m markdown -x extra -x toc on a generated document

Each is a fresh interpreter (``sys.executable``), four ways, interleaved and rotated round
by round after a first round that is not counted (it also writes CPython's ``.pyc`` and
cassette_hook's code cache, so the counted runs are warm):

    plain     python PROG
    null      python -m cassette_hook --include PKG [--include DIR] --context null PROG
    profile   python -m cassette_hook --include PKG [--include DIR] --context profile --output /dev/null PROG
    cProfile  python -m cProfile -o /dev/null PROG

``PROG`` is a script (in a temporary directory ``DIR``, with its input) or ``-m module``
with its arguments. ``--include`` names the package that does the work (and the script's
directory): without it the command line instruments only the script's directory or the
``-m`` module's top package at import (docs/cli.md, "What is instrumented"), and the
library's functions, which the context still enters, would be rewritten at every run
rather than read from the code cache. Times are the CPU time of the child (``getrusage(RUSAGE_CHILDREN)``
deltas), best of ``--rounds``. Every run's standard output and exit status are compared
with the plain run's: a program that behaves differently under a context is reported.

The cold first run, once per program: plain (``PYTHONDONTWRITEBYTECODE=1`` and a
``PYTHONPYCACHEPREFIX`` directory holding only the ``.pyc`` that ``python -m
cassette_hook --context null -c pass`` writes: the program's package and the standard
library modules cassette_hook does not import are compiled from source, nothing is
written) against ``--context null`` under the same settings (cassette_hook's code cache
goes under that prefix: docs/importhook.md, "The code cache"; so nothing of the program
is cached either).

Reported per program: the best CPU seconds plain, null/plain, profile/plain,
cProfile/plain, profile/cProfile, and cold null/cold plain; geometric means of each.

    python benchmarks/bench_programs.py [--quick] [--rounds N] [--programs a,b] [--no-cold] [--json out.json]

``--quick``: smaller inputs, 2 counted rounds (default: 5).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import random
import resource
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import harness

VARIANTS = ("plain", "null", "profile", "cProfile")


@dataclass(frozen=True)
class Program:
    name: str
    packages: tuple[str, ...]  # import names: what must be installed, and --include
    # Writes the program's input (and script) into the directory; returns the arguments
    # after ``python`` (a script's path, or ``-m module ...``).
    make: Callable[[Path, bool], list[str]]


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations is not None
    return Path(next(iter(spec.submodule_search_locations)))


def _stdlib(*names: str) -> list[Path]:
    return [Path(sysconfig.get_paths()["stdlib"], name) for name in names]


# ---------------------------------------------------------------- the programs

SYMPY = '''\
from sympy import (Rational, cos, exp, limit, log, oo, series, simplify, sin, solve,
                   sqrt, symbols, integrate, factor, expand, trigsimp)

x, y, z = symbols("x y z")
results = [
    integrate(x**2 * sin(x) * exp(x), x),
    integrate(1 / (x**4 + 1), x),
    integrate(log(x) ** 2 * x**3, (x, 1, 2)),
    simplify((x**3 + x**2 - x - 1) / (x**2 + 2*x + 1)),
    trigsimp(sin(x)**4 - 2*cos(x)**2*sin(x)**2 + cos(x)**4),
    factor(expand((x + y + z) ** 6 - (x - y) ** 6)),
    solve([x**2 + y**2 - 4, x - y - 1], [x, y]),
    series(exp(sin(x)), x, 0, 10),
    limit((1 + 1/x) ** x, x, oo),
    limit((sqrt(x + 1) - 1) / x, x, 0),
]
if not QUICK:
    results += [
        simplify(sin(x)**2 / (1 - cos(x)) - cos(x)),
        solve(x**4 - 10*x**2 + 1, x),
        series(log(1 + sin(x)) / cos(x), x, 0, 8),
        integrate(sqrt(1 - x**2), (x, 0, 1)),
    ]
for r in results:
    print(r)
'''


def make_sympy(d: Path, quick: bool) -> list[str]:
    (d / "prog_sympy.py").write_text(f"QUICK = {quick}\n" + SYMPY)
    return [str(d / "prog_sympy.py")]


def make_pygments(d: Path, quick: bool) -> list[str]:
    """~10k lines (2.5k quick) of pygments' own source, highlighted to a full HTML page."""
    want, lines = (2_500 if quick else 10_000), []
    for f in sorted(_package_dir("pygments").rglob("*.py")):
        if len(lines) >= want:
            break
        lines += f.read_text(encoding="utf-8").splitlines()
    (d / "input.py").write_text("\n".join(lines[:want]) + "\n", encoding="utf-8")
    return ["-m", "pygments", "-l", "python", "-f", "html", "-O", "full", str(d / "input.py")]


def make_sqlparse(d: Path, quick: bool) -> list[str]:
    rnd = random.Random(38)
    cols = [f"col_{i}" for i in range(12)]
    tables = ["orders", "customers", "items", "invoices", "shipments", "payments"]
    out = []
    for i in range(150 if quick else 600):
        t, u = rnd.sample(tables, 2)
        cs = ", ".join(f"{t[0]}.{c}" for c in rnd.sample(cols, 4))
        kind = i % 4
        if kind == 0:
            out.append(f"select {cs}, count(*) as n, sum({u[0]}.amount) total from {t} {t[0]} "
                       f"left join {u} {u[0]} on {t[0]}.id = {u[0]}.{t}_id where {t[0]}.{cols[i % 12]} > {i} "
                       f"and ({u[0]}.status = 'open' or {u[0]}.status in ('a', 'b', 'c')) "
                       f"group by {cs} having count(*) > 2 order by total desc limit {i % 50 + 1};")
        elif kind == 1:
            out.append(f"insert into {t} ({', '.join(cols[:5])}) values "
                       + ", ".join(f"({j}, 'name {j}', {j * 1.5}, null, current_timestamp)" for j in range(5))
                       + ";")
        elif kind == 2:
            out.append(f"update {t} set {cols[1]} = {cols[1]} + 1, {cols[2]} = 'x''y' where id in "
                       f"(select {t}_id from {u} where {cols[3]} between {i} and {i + 10});")
        else:
            out.append(f"create table {t}_{i} (id integer primary key, {cols[1]} varchar(40) not null, "
                       f"{cols[2]} numeric(10, 2) default 0, foreign key ({cols[1]}) references {u}(id));")
    (d / "input.sql").write_text("\n".join(out) + "\n")
    return ["-m", "sqlparse", "-r", "-k", "upper", str(d / "input.sql")]


def make_docutils(d: Path, quick: bool) -> list[str]:
    rnd = random.Random(38)
    words = ("cassette context call site twin hook profile trace program module function "
             "package import cache rewrite bytecode frame thread report").split()

    def para(n: int) -> str:
        ws = [rnd.choice(words) for _ in range(n)]
        for k in range(0, n - 3, 9):
            ws[k] = rnd.choice(["*" + ws[k] + "*", "**" + ws[k] + "**", "``" + ws[k] + "``",
                                f"`{ws[k]} <https://example.org/{ws[k]}>`__", ws[k] + " [#]_"])
        return " ".join(ws).capitalize() + "."

    out = ["=" * 20, "A generated document", "=" * 20, "", ".. contents::", ""]
    for s in range(15 if quick else 60):
        title = f"Section {s}: {rnd.choice(words)}"
        out += [title, "-" * len(title), "", para(60), "", para(40), ""]
        out += [f"- {para(8)}" for _ in range(5)] + [""]
        out += [f"#. {para(6)}" for _ in range(4)] + [""]
        out += [f"term {k}\n    {para(12)}" for k in range(3)] + [""]
        out += [".. note::", "", "   " + para(20), "", "::", ""]
        out += [f"    def f{s}_{k}(x):\n        return x + {k}" for k in range(3)] + [""]
        out += ["=====  =====  ======", "a      b      result", "=====  =====  ======"]
        out += [f"{k:<5}  {k * s:<5}  {rnd.choice(words)}" for k in range(6)]
        out += ["=====  =====  ======", ""]
    n_foot = sum(line.count("[#]_") for line in out)
    out += [""] + [f".. [#] Footnote {k}." for k in range(n_foot)]
    (d / "input.rst").write_text("\n".join(out) + "\n")
    return ["-m", "docutils", str(d / "input.rst")]


def make_pyflakes(d: Path, quick: bool) -> list[str]:
    targets = _stdlib("email") if quick else _stdlib("email", "http", "json", "logging", "urllib", "xml")
    return ["-m", "pyflakes", *map(str, targets)]


def make_pycodestyle(d: Path, quick: bool) -> list[str]:
    targets = _stdlib("email/_header_value_parser.py") if quick else _stdlib("email", "json", "logging")
    return ["-m", "pycodestyle", *map(str, targets)]


PYCPARSER = '''\
import hashlib, sys
from pycparser import c_generator, c_parser

text = open(sys.argv[1]).read()
ast = c_parser.CParser().parse(text, "input.c")
code = c_generator.CGenerator().visit(ast)
print(len(ast.ext), len(code), hashlib.sha256(code.encode()).hexdigest())
'''


def make_pycparser(d: Path, quick: bool) -> list[str]:
    """A preprocessed C file: typedefs, structs, functions with loops, switches, pointers."""
    rnd = random.Random(38)
    out = ["typedef unsigned long size_t;", "typedef struct node { int key; double w; struct node *next; } node_t;",
           "typedef int (*cmp_fn)(const void *, const void *);", "extern int printf(const char *, ...);",
           "extern void *malloc(size_t);", "enum color { RED, GREEN = 4, BLUE };"]
    for i in range(120 if quick else 500):
        v = [f"v{k}" for k in range(4)]
        ops = ["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^"]
        expr = " ".join(f"{rnd.choice(v)} {rnd.choice(ops)}" for _ in range(5)) + f" {i}"
        out.append(
            f"static int f{i}(node_t *head, int n, const char *s) {{\n"
            f"    int {', '.join(f'{x} = {k}' for k, x in enumerate(v))};\n"
            f"    node_t *p;\n"
            f"    for (p = head; p != 0 && n > 0; p = p->next, --n) {{\n"
            f"        v0 += p->key * {i % 7 + 1};\n"
            f"        if (p->w > {i}.5) {{ v1 = ({expr}); }} else if (s[n] == 'x') v2++; else v3 ^= v0;\n"
            f"    }}\n"
            f"    switch (v0 & 3) {{ case 0: v1 += sizeof(node_t); break; case 1: v2 = v1 ? v2 : -v2; break;"
            f" default: while (v3 > 0) v3 >>= 1; }}\n"
            f"    do {{ v0 = (v0 * 31 + v1) % 1000003; }} while (v0 < {i * 3});\n"
            f"    return v0 + v1 + v2 + v3 + (int)(head ? head->w : 0.0);\n"
            f"}}")
    (d / "input.c").write_text("\n".join(out) + "\n")
    (d / "prog_pycparser.py").write_text(PYCPARSER)
    return [str(d / "prog_pycparser.py"), str(d / "input.c")]


YAML = '''\
import sys, yaml

with open(sys.argv[1]) as f:
    data = yaml.load(f, Loader=yaml.Loader)
print(len(data["records"]), sum(len(r["tags"]) for r in data["records"]), data["defaults"])
'''


def make_yaml(d: Path, quick: bool) -> list[str]:
    rnd = random.Random(38)
    out = ["defaults: &defaults", "  retries: 3", "  timeout: 2.5", "  enabled: yes", "records:"]
    for i in range(400 if quick else 1_600):
        out += [f"  - id: {i}", f"    name: \"record {i}\"", "    <<: *defaults",
                f"    owner: {{name: user{i % 37}, email: 'user{i % 37}@example.org', "
                f"admin: {str(i % 5 == 0).lower()}}}",
                f"    tags: [{', '.join(rnd.choice(['a', 'b', 'ccc', 'dd', 'e-f']) for _ in range(i % 6 + 1))}]",
                f"    created: 2026-11-{i % 28 + 1:02d}", f"    ratio: {rnd.random():.6f}",
                "    notes: |", f"      line one of record {i}", "      line two: with a colon", ""]
    (d / "input.yaml").write_text("\n".join(out))
    (d / "prog_yaml.py").write_text(YAML)
    return [str(d / "prog_yaml.py"), str(d / "input.yaml")]


def make_markdown(d: Path, quick: bool) -> list[str]:
    rnd = random.Random(38)
    words = "the quick brown fox jumps over a lazy dog while cassette hook traces every call".split()

    def text(n: int) -> str:
        ws = [rnd.choice(words) for _ in range(n)]
        for k in range(0, n - 2, 7):
            ws[k] = rnd.choice([f"*{ws[k]}*", f"**{ws[k]}**", f"`{ws[k]}`", f"[{ws[k]}](https://example.org/{k})",
                                ws[k]])
        return " ".join(ws)

    out = []
    for s in range(60 if quick else 250):
        out += [f"## Section {s} {{#s{s}}}", "", text(50), "", text(30), ""]
        out += [f"- {text(8)}" for _ in range(4)] + [""]
        out += [f"{k + 1}. {text(6)}" for k in range(3)] + [""]
        out += ["> " + text(20), "", "```python", f"def f{s}(x):", "    return x * 2", "```", ""]
        out += ["| a | b | c |", "|---|---|---|"] + [f"| {k} | {text(2)} | {k * s} |" for k in range(4)] + [""]
        out += [f"Term {s}", f":   {text(10)}", "", f"Abbreviated HTML here[^{s}].", "", f"[^{s}]: {text(6)}", ""]
    (d / "input.md").write_text("\n".join(out) + "\n")
    return ["-m", "markdown", "-x", "extra", "-x", "toc", str(d / "input.md")]


PROGRAMS = [
    Program("sympy", ("sympy",), make_sympy),
    Program("pygments", ("pygments",), make_pygments),
    Program("sqlparse", ("sqlparse",), make_sqlparse),
    Program("docutils", ("docutils",), make_docutils),
    Program("pyflakes", ("pyflakes",), make_pyflakes),
    Program("pycodestyle", ("pycodestyle",), make_pycodestyle),
    Program("pycparser", ("pycparser",), make_pycparser),
    Program("yaml", ("yaml",), make_yaml),
    Program("markdown", ("markdown",), make_markdown),
]


# ---------------------------------------------------------------- running them

def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Outcome:
    cpu: float
    status: int
    digest: str
    stderr: str


def run(args: list[str], cwd: Path, env: dict[str, str]) -> Outcome:
    """One fresh interpreter: its CPU time, exit status and a digest of its stdout."""
    before = _children_cpu()
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True)
    cpu = _children_cpu() - before
    return Outcome(cpu, proc.returncode, hashlib.sha256(proc.stdout).hexdigest()[:16],
                   proc.stderr.decode(errors="replace"))


def same(variant: str, o: Outcome, status: object, digest: object) -> bool:
    """Whether a run printed what the plain run printed, and (but under ``cProfile``, which
    exits 0 whatever the program's status: pycodestyle's 1 for its findings) ended alike."""
    return o.digest == digest and (variant == "cProfile" or o.status == status)


def commands(prog: Program, argv: list[str], d: Path) -> dict[str, list[str]]:
    includes: list[str] = []
    for p in prog.packages:
        includes += ["--include", p]
    if argv[0] != "-m":  # a script: its directory too, as the default would have it
        includes += ["--include", str(d)]
    ch = ["-m", "cassette_hook", *includes]
    return {
        "plain": argv,
        "null": [*ch, "--context", "null", *argv],
        "profile": [*ch, "--context", "profile", "--output", os.devnull, *argv],
        "cProfile": ["-m", "cProfile", "-o", os.devnull, *argv],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller inputs, 2 rounds")
    ap.add_argument("--rounds", type=int, default=None, help="counted rounds (default 5, --quick 2)")
    ap.add_argument("--programs", default="", help="comma-separated names (default: all)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold first runs")
    ap.add_argument("--json", default=None, help="write the results to this file")
    opts = ap.parse_args()
    rounds = opts.rounds or (2 if opts.quick else 5)
    chosen = [p for p in PROGRAMS if not opts.programs or p.name in opts.programs.split(",")]
    unknown = set(filter(None, opts.programs.split(","))) - {p.name for p in PROGRAMS}
    if unknown:
        raise SystemExit(f"unknown program(s) {sorted(unknown)}; known: {[p.name for p in PROGRAMS]}")

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "CASSETTE_HOOK_DEBUG")}
    env["PYTHONHASHSEED"] = "0"  # the same set and dict orders, and so output, in every run
    base = Path(tempfile.mkdtemp(prefix="bench_programs_"))
    # Asked where the programs run: ``-m`` puts the working directory first on sys.path, so
    # asked from a checkout it would describe the checkout's sources (a pure-Python runtime
    # with no built accelerator), not the installed package that the programs run under.
    version = subprocess.run([sys.executable, "-m", "cassette_hook", "--version"],
                             cwd=base, env=env, capture_output=True, text=True)
    if version.returncode != 0:
        raise SystemExit(f"python -m cassette_hook --version failed: {version.stderr}")
    print(version.stdout.strip())
    ready: list[tuple[Program, Path, dict[str, list[str]]]] = []
    for prog in chosen:
        missing = [p for p in prog.packages if importlib.util.find_spec(p) is None]
        if missing:
            print(f"-- {prog.name}: skipped, {', '.join(missing)} not installed "
                  "(pip install -r benchmarks/requirements-programs.txt)")
            continue
        d = base / prog.name
        d.mkdir()
        ready.append((prog, d, commands(prog, prog.make(d, opts.quick), d)))

    results: dict[str, dict[str, object]] = {}
    mismatches: list[str] = []
    best: dict[str, dict[str, float]] = {p.name: {} for p, _, _ in ready}
    for prog, d, cmds in ready:
        # The discarded first round: writes the caches; what each variant prints is checked.
        ref = run(cmds["plain"], d, env)
        for v in VARIANTS[1:]:
            o = run(cmds[v], d, env)
            if not same(v, o, ref.status, ref.digest):
                mismatches.append(f"{prog.name} {v}: status {o.status} stdout {o.digest} against plain's "
                                  f"{ref.status} {ref.digest}\n{o.stderr[-2000:]}")
        results[prog.name] = {"status": ref.status, "stdout": ref.digest}
        print(f"-- {prog.name}: warm-up done (plain {ref.cpu:.2f} s, status {ref.status})", flush=True)

    for r in range(rounds):
        for prog, d, cmds in ready:
            order = VARIANTS[r % 4:] + VARIANTS[:r % 4]
            for v in order:
                o = run(cmds[v], d, env)
                if not same(v, o, results[prog.name]["status"], results[prog.name]["stdout"]):
                    mismatches.append(f"{prog.name} {v} (round {r}): status {o.status} stdout {o.digest}")
                best[prog.name][v] = min(best[prog.name].get(v, float("inf")), o.cpu)
        print(f"-- round {r + 1}/{rounds} done", flush=True)

    cold: dict[str, dict[str, float]] = {}
    if not opts.no_cold and ready:
        prefix = base / "pycache-base"
        subprocess.run([sys.executable, "-m", "cassette_hook", "--context", "null", "-c", "pass"], cwd=base,
                       env={**env, "PYTHONPYCACHEPREFIX": str(prefix)}, check=True)
        cold_env = {**env, "PYTHONPYCACHEPREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE": "1"}
        for prog, d, cmds in ready:
            cold[prog.name] = {v: run(cmds[v], d, cold_env).cpu for v in ("plain", "null")}
            print(f"-- {prog.name}: cold plain {cold[prog.name]['plain']:.2f} s, "
                  f"null {cold[prog.name]['null']:.2f} s", flush=True)

    rows, cols = [], {k: [] for k in ("null", "profile", "cProfile", "p/c", "cold")}
    for prog, _, _ in ready:
        b = best[prog.name]
        ratios = {"null": b["null"] / b["plain"], "profile": b["profile"] / b["plain"],
                  "cProfile": b["cProfile"] / b["plain"], "p/c": b["profile"] / b["cProfile"]}
        if prog.name in cold:
            ratios["cold"] = cold[prog.name]["null"] / cold[prog.name]["plain"]
        for k, x in ratios.items():
            cols[k].append(x)
        results[prog.name].update(best=b, ratios=ratios, cold=cold.get(prog.name))
        c = cold.get(prog.name)
        rows.append([prog.name, f"{b['plain']:.2f}",
                     *(f"{ratios[k]:.2f}" for k in ("null", "profile", "cProfile", "p/c")),
                     f"{c['plain']:.2f}" if c else "-", f"{c['null']:.2f}" if c else "-",
                     f"{ratios['cold']:.2f}" if c else "-"])
    rows.append(["geomean", "", *(f"{harness.geomean(cols[k]):.2f}" for k in ("null", "profile", "cProfile", "p/c")),
                 "", "", f"{harness.geomean(cols['cold']):.2f}" if cols["cold"] else "-"])
    print(f"\nbest of {rounds} rounds, CPU s of the child; ratios to plain (p/c: profile / cProfile); "
          "cold: first run, no cache")
    print(harness.table(["program", "plain s", "null", "profile", "cProfile", "p/c",
                         "cold plain s", "cold null s", "cold null/plain"], rows))
    for m in mismatches:
        print(f"!! output differs: {m}")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"version": version.stdout.strip(), "rounds": rounds,
                                               "quick": opts.quick, "programs": results,
                                               "mismatches": mismatches}, indent=1))


if __name__ == "__main__":
    main()
