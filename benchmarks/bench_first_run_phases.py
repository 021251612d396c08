"""Where a first run under ``--context null`` spends its CPU, by phase (issue 38, item 5).

The script of ``bench_startup.py --cold-start PACKAGE`` (``COLD_SCRIPTS``), run as there: a
new ``PYTHONPYCACHEPREFIX`` holding the ``.pyc`` files of everything but the package, with
``.pyc`` files written or (``--no-pyc``) with ``PYTHONDONTWRITEBYTECODE=1``.  Each run is a
child that wraps the functions of each phase with ``time.process_time`` (py-spy does not
work on the shared machine) -- the switch at a first call, decoding, the passes,
assembling, the line table, the joining, the code cache's reads and writes, the plans'
twins, CPython's ``compile`` -- charges each its own time (what the wrapped functions it
calls took is theirs), and then runs ``python -m cassette_hook --include PACKAGE --context
null SCRIPT`` through ``runpy``.  Reported: each phase's CPU seconds in each round, and the
plain run's (``python SCRIPT``, as cold).  The wrappers cost about a microsecond a call
(some 20,000 calls for networkx): the phases' times are a little high, the whole run's too.

    PYTHONPATH=TREE python benchmarks/bench_first_run_phases.py --package networkx [--no-pyc] [--rounds 2]
"""

from __future__ import annotations

import argparse
import builtins
import collections
import functools
import json
import os
import runpy
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

from bench_startup import COLD_SCRIPTS, package_dir, run

# The rows: a phase's label and the wrapped functions whose own time it is.
PHASES: dict[str, list[str]] = {
    "CPython's compile (the plain run's too)": ["builtins.compile"],
    "decoding (_decoder)": ["Decoder.bytecode", "_rewriter.decode"],
    "the passes (_nullslot, _stack, _rewriter)": [
        "NullSlotFamily.rewrite_calls", "_nullslot.pair_by_depth", "_rewriter.stack_depths",
        "_rewriter._rewrite_constants_and_operators", "_rewriter.rewritten", "rewrite.rewrite_part"],
    "assembling: its loop, constants' keys, jumps (_assembler)": [
        "Assembler._code", "const_key", "Assembler._resolve_jumps", "Assembler._code_object", "_rewriter.assemble"],
    "the line table (_nullslot._line_table)": ["line table"],
    "the plain half's blocks (_assembler.Verbatim)": ["Verbatim.__init__", "Assembler.halves"],
    "joining the halves (dual_code)": [
        "_Switcher.switched", "_Switcher._join_compiled", "_Switcher._plain", "_Switcher._sites",
        "_Switcher._instrumented_nested"],
    "the switch at a first call (lazy_mode)": [
        "lazy_mode._switch", "lazy_mode._made", "lazy_mode._give", "lazy_mode._armed_module", "lazy_mode.functions",
        "lazy_mode.keep_made"],
    "the hook's own (finder._made, switch.install_builtins)": ["finder._made", "switch.install_builtins"],
    "the code cache: reading (code_cache)": ["code_cache.read", "code_cache.read_mirroring"],
    "the code cache: writing (code_cache)": ["code_cache.write"],
    "twins made by plans (plan)": ["Plan._make_twin", "plan._rewrite_or_warn"],
}
# Wrapped functions whose time is also shown with what they call (inclusive).
WHOLE = {
    "module bodies switched at import (finder._made, all in)": "finder._made",
    "functions switched at their first call (lazy_mode._switch, all in)": "lazy_mode._switch",
    "twins rewritten by plans (plan._rewrite_or_warn, all in)": "plan._rewrite_or_warn",
}


class _Clock:
    """Each wrapped function's own CPU time (less the wrapped ones it calls), its time with
    them (counted once where it recurses), and its calls."""

    def __init__(self) -> None:
        self.own: collections.Counter[str] = collections.Counter()
        self.whole: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self._depth: collections.Counter[str] = collections.Counter()
        self._stack: list[list[Any]] = []

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        clock, now = self, time.process_time

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            clock._stack.append([now(), 0.0])
            clock._depth[name] += 1
            try:
                return function(*args, **kwargs)
            finally:
                start, nested = clock._stack.pop()
                spent = now() - start
                clock.own[name] += spent - nested
                clock.calls[name] += 1
                clock._depth[name] -= 1
                if not clock._depth[name]:
                    clock.whole[name] += spent
                if clock._stack:
                    clock._stack[-1][1] += spent

        return timed


def _child(package: str, script: str, out: str) -> None:
    """Run the hooked first run with the phases' functions wrapped; their times to ``out``."""
    from cassette_hook.importhook import code_cache, dual_code, finder, lazy_mode, switch
    from cassette_hook.rewrite import _assembler, _decoder, _family, _nullslot, _rewriter
    from cassette_hook.runtime import plan
    import cassette_hook.rewrite as rewrite

    clock = _Clock()

    def function(module: Any, attr: str) -> None:  # (and wherever it was imported by name)
        original = getattr(module, attr)
        timed = clock.wrap(f"{module.__name__.rsplit('.', 1)[-1]}.{attr}", original)
        for other in list(sys.modules.values()):
            namespace = getattr(other, "__dict__", None) or {}
            for key, value in list(namespace.items()):
                if value is original:
                    setattr(other, key, timed)

    def method(cls: type, attr: str) -> None:
        setattr(cls, attr, clock.wrap(f"{cls.__name__}.{attr}", cls.__dict__[attr]))

    for module, attrs in ((lazy_mode, ["_switch", "_made", "_give", "_armed_module", "functions", "keep_made"]),
                          (_rewriter, ["rewritten", "decode", "assemble", "stack_depths",
                                       "_rewrite_constants_and_operators"]),
                          (rewrite, ["rewrite_part"]), (_nullslot, ["pair_by_depth"]),
                          (code_cache, ["write", "read", "read_mirroring"]), (finder, ["_made"]),
                          (switch, ["install_builtins"]), (plan, ["_rewrite_or_warn"])):
        for attr in attrs:
            function(module, attr)
    for cls, attrs in ((dual_code._Switcher, ["switched", "_plain", "_sites", "_join_compiled",
                                               "_instrumented_nested"]),
                       (_nullslot.NullSlotFamily, ["rewrite_calls"]), (_decoder.Decoder, ["bytecode"]),
                       (_assembler.Assembler, ["_code", "halves", "_resolve_jumps", "_code_object"]),
                       (_assembler.Verbatim, ["__init__"]), (plan.Plan, ["_make_twin"])):
        for attr in attrs:
            method(cls, attr)
    _assembler.const_key = clock.wrap("const_key", _assembler.const_key)  # type: ignore[assignment]
    assembler = _family.family.assembler
    if assembler is not None:  # (3.12+: the family's own)
        assembler._line_table = clock.wrap("line table", assembler._line_table)
    builtins.compile = clock.wrap("builtins.compile", builtins.compile)  # type: ignore[assignment]
    start = time.process_time()
    sys.argv = ["cassette_hook", "--include", package, "--context", "null", script]
    try:
        runpy.run_module("cassette_hook", run_name="__main__", alter_sys=True)
    finally:
        total = time.process_time() - start
        with open(out, "w") as file:
            json.dump({"total": total, "own": clock.own, "whole": clock.whole, "calls": clock.calls}, file)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", choices=sorted(COLD_SCRIPTS), default="networkx")
    ap.add_argument("--no-pyc", action="store_true", help="PYTHONDONTWRITEBYTECODE=1 (no cache written)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    results: list[dict[str, Any]] = []
    plain: list[float] = []
    with tempfile.TemporaryDirectory(prefix="cassette_hook_bench_phases_") as tmp:
        script, warm = os.path.join(tmp, f"cold_{args.package}.py"), os.path.join(tmp, "warm")
        with open(script, "w") as file:
            file.write(COLD_SCRIPTS[args.package])
        hooked = ["-m", "cassette_hook", "--include", args.package, "--context", "null", script]
        for cmd in ([script], hooked):  # (everything's .pyc in the warm prefix)
            run(cmd, tmp, {**env, "PYTHONPYCACHEPREFIX": warm})
        mirrored = os.path.join(warm, os.path.relpath(package_dir(args.package, tmp, env), os.path.sep))
        for r in range(args.rounds):
            for kind in ("plain", "phases"):
                prefix = os.path.join(tmp, f"cold-{r}-{kind}")
                shutil.copytree(warm, prefix, ignore=lambda d, names: [
                    n for n in names if os.path.join(d, n) == mirrored])  # (the package's .pyc left out)
                child_env = {**env, "PYTHONPYCACHEPREFIX": prefix, "PYTHONHASHSEED": "0"}
                if args.no_pyc:
                    child_env["PYTHONDONTWRITEBYTECODE"] = "1"
                if kind == "plain":
                    plain.append(run([script], tmp, child_env)[1])
                else:
                    out = os.path.join(tmp, f"phases-{r}.json")
                    run([os.path.abspath(__file__), "--child", args.package, script, out], tmp, child_env)
                    with open(out) as file:
                        results.append(json.load(file))
                shutil.rmtree(prefix, ignore_errors=True)
    print(f"Python {sys.version.split()[0]}; {args.package}; {'no .pyc written' if args.no_pyc else '.pyc written'}; "
          f"CPU s, each round\n")
    rows = [["plain first run (the whole process)", *(f"{p:.3f}" for p in plain)],
            ["hooked: the run after start-up", *(f"{r['total']:.3f}" for r in results)]]
    rows += [[label, *(f"{r['whole'].get(name, 0):.3f}" for r in results)] for label, name in WHOLE.items()]
    for label, names in PHASES.items():
        rows.append([label, *(f"{sum(r['own'].get(n, 0) for n in names):.3f}" for r in results)])
    rows.append(["the rest: the program, imports, cassette_hook's start",
                 *(f"{r['total'] - sum(r['own'].values()):.3f}" for r in results)])
    width = max(len(row[0]) for row in rows)
    for row in rows:
        print(f"{row[0]:<{width}}  " + "  ".join(f"{cell:>7}" for cell in row[1:]))


if __name__ == "__main__":
    main()
