"""Idle cost of the import hook: workloads loaded through ``ch.install`` and run with no
context active, against the same workloads loaded plainly, in one interleaved run (see
harness.py); and, as a second column, the same instrumented copy under a context that
overloads nothing (``with Null(): run()``: the null-context cost through the import hook).

Every workload (the set of bench_overdub, pyperformance programs included) is copied into
several packages in a temporary directory, each imported the ordinary way:

    chb_plain     plain, as compiled
    chb_control   a second plain copy: an A/A control (code placement, noise)
    chb_idle      through the import hook (ch.install(include=["chb_idle"]))
    chb_clean     plain, but its functions see the builtins through a copy of the builtins
                  dict taken before the hook was installed, with every key an exact ``str``

The hook is installed before anything is loaded, as a user would install it. Installing it
puts its hooks among the builtins. Had one of their names been a ``str`` subclass (as
before commit 8caff24), the builtins dict would have become a general-keys dict, and on
CPython 3.11+ no ``LOAD_GLOBAL`` of a builtin, in any code of the process, would specialise
any more: plain code would slow down too, and idle/plain would hide it. ``chb_clean``
stands for plain code in a process without the hook, measured in the same process and
rounds, so plain/clean shows such a process-wide effect (it should be 1). Only the
workload's own modules see the copy: stdlib code it calls (``copy``, ``random``) runs with
the real builtins in every variant. The header line counts builtins keys that are not
exact ``str``.

Columns (ratios: median over rounds of the per-round ratio of the two variants):
    idle/plain    the switch's own cost, both under the hooked builtins   (the target)
    by min        the same, as the ratio of the two variants' fastest samples
    null/plain    instrumented copy under Null(), separately interleaved with plain
    control/plain A/A: two identical plain copies -- what "no difference" looks like
    plain/clean   process-wide effect of installing the hook on code it did not touch
    idle/clean    instrumented idle vs plain code in a process without the hook

    PYTHONPATH=. python benchmarks/bench_idle.py [--quick] [--workloads fib,go] [--rounds N]
                                                 [--explain] [--no-clean] [--lazy [--restored]] [--json F]
                                                 [--cpu]

--lazy imports light and switches at a first activation; the functions keep their switched
code after it, as they do where contexts come and go often. --restored gives them their
compiled code back as the activation ends, as the hook does once the process has been idle
a while (``lazy_mode.RESTORE_AFTER``).

--explain also traces one run of each workload (opcode events of sys.settrace; 3.12+:
sys.monitoring INSTRUCTION and PY_START events) and prints the bytecodes it executes, how
many of them are switch checks (two instructions each), how many load a builtin, and
which specialised form the switch's LOAD_GLOBAL has taken (3.11+).
"""

from __future__ import annotations

import argparse
import builtins
import dis
import gc
import importlib
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from types import CodeType, FunctionType, ModuleType
from typing import Any, Callable, Iterator

import common
import harness
import workloads
from common import ch

HERE = Path(__file__).resolve().parent
PLAIN, CONTROL, IDLE, CLEAN = "chb_plain", "chb_control", "chb_idle", "chb_clean"
INSTRUMENTED = (IDLE,)
CLEAN_BUILTINS = (CLEAN,)
ACTIVE = "__cassette_hook_active__"

_LOAD_OVERRIDE = '''

# --- bench_idle: the program is a module of this package, imported the ordinary way ---
import importlib as _bench_importlib


def load(name: str) -> Any:  # noqa: F811
    return _bench_importlib.import_module(f"{__package__}.bm_{name}")
'''


# -- making the copies ------------------------------------------------------------------

def make_packages(root: Path, names: list[str], packages: list[str]) -> None:
    """Write each package: the workload modules, our ``_pyperformance`` (loading the
    program from the package) and, for ``pp_*`` workloads, the pyperformance program."""
    from workloads import _pyperformance

    pp_source = (HERE / "workloads" / "_pyperformance.py").read_text() + _LOAD_OVERRIDE
    for pkg in packages:
        d = root / pkg
        d.mkdir()
        (d / "__init__.py").write_text("")
        (d / "_pyperformance.py").write_text(pp_source)
        for name in names:
            module = module_name(name)
            shutil.copyfile(HERE / "workloads" / f"{module}.py", d / f"{module}.py")
            if name in workloads.PYPERFORMANCE:
                shutil.copyfile(_pyperformance.benchmark_path(name), d / f"bm_{name}.py")


def module_name(name: str) -> str:
    return f"pp_{name}" if name in workloads.PYPERFORMANCE else name


class CleanBuiltins:
    """A meta-path finder (put first) for the ``CLEAN_BUILTINS`` packages: finds their
    modules through the finders behind it (the import hook included) and has each module
    run with ``__builtins__`` set to ``builtins_copy`` -- so every function defined in it
    sees that dict as its builtins."""

    def __init__(self, builtins_copy: dict[str, Any]) -> None:
        self.builtins_copy = builtins_copy
        self.busy = False

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.split(".")[0] not in CLEAN_BUILTINS or self.busy:
            return None  # busy: the import hook asks the finders around it, this one too
        self.busy = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self.busy = False
        loader: Any = spec.loader
        copy, exec_module = self.builtins_copy, loader.exec_module

        def exec_with_builtins(module: ModuleType) -> None:
            module.__dict__["__builtins__"] = copy
            exec_module(module)

        loader.exec_module = exec_with_builtins
        return spec


# -- checking what was loaded -----------------------------------------------------------

def functions(mod: ModuleType) -> Iterator[FunctionType]:
    """Functions defined in the workload module and in the program it wraps (``bm``):
    module level, methods, static/class methods and property accessors."""
    spaces = [mod] + ([mod.bm] if isinstance(getattr(mod, "bm", None), ModuleType) else [])
    for space in spaces:
        for obj in vars(space).values():
            members = list(vars(obj).values()) if isinstance(obj, type) and obj.__module__ == space.__name__ else [obj]
            for m in members:
                if isinstance(m, (staticmethod, classmethod)):
                    m = m.__func__
                if isinstance(m, property):
                    yield from (f for f in (m.fget, m.fset, m.fdel) if isinstance(f, FunctionType))
                elif isinstance(m, FunctionType) and m.__module__ == space.__name__:
                    yield m


def all_codes(mod: ModuleType) -> list[CodeType]:
    """Every code object of the module's functions, nested ones included."""
    out: dict[int, CodeType] = {}

    def walk(code: CodeType) -> None:
        if id(code) not in out:
            out[id(code)] = code
            for c in code.co_consts:
                if isinstance(c, CodeType):
                    walk(c)

    for f in functions(mod):
        walk(f.__code__)
    return list(out.values())


def switched_counts(mod: ModuleType) -> tuple[int, int]:
    from cassette_hook.rewrite import _names

    fns = list(functions(mod))
    return sum(_names.is_switched(f.__code__) for f in fns), len(fns)


def lazy_mode_module() -> ModuleType:
    """The lazy mode's module, where the installed tree has it.

    ``cassette_hook.importhook.lazy_mode`` since the tree was laid out by concept (commit
    6d91a5b), ``cassette_hook._light`` before: a tree from before the move can then be
    measured by this script, interleaved with a newer one (docs/performance.md, "Issue 36:
    the refactor's cost").
    """
    try:
        return importlib.import_module("cassette_hook.importhook.lazy_mode")
    except ImportError:  # (a tree from before 6d91a5b)
        return importlib.import_module("cassette_hook._light")


def idle() -> bool:
    return getattr(builtins, ACTIVE) is False and ch.current_context() is None


def check_idle() -> None:
    if not idle():
        raise SystemExit(f"!! a context is active (builtins.{ACTIVE} = {getattr(builtins, ACTIVE)!r}): "
                         "the idle numbers would be wrong")


# -- explaining -------------------------------------------------------------------------

def trace_counts(run: Callable[[], object]) -> dict[str, Any]:
    """Bytecodes executed by one ``run()`` (opcode tracing; sys.monitoring on 3.12+): in
    all, switch checks (LOAD_GLOBAL of the flag), builtin LOAD_GLOBALs (other than the
    flag), and the code objects that ran a check."""
    tables: dict[int, tuple[CodeType, dict[int, tuple[str, Any]]]] = {}
    counts: dict[str, Any] = {"bytecodes": 0, "checks": 0, "builtin_loads": 0}
    checked: dict[int, CodeType] = {}

    def table(code: CodeType) -> dict[int, tuple[str, Any]]:
        entry = tables.get(id(code))
        if entry is None:
            entry = tables[id(code)] = (code, {i.offset: (i.opname, i.argval) for i in dis.get_instructions(code)})
        return entry[1]

    def count(code: CodeType, offset: int, globals_: dict[str, Any]) -> None:
        counts["bytecodes"] += 1
        op = table(code).get(offset)
        if op is not None and op[0] == "LOAD_GLOBAL":
            if op[1] == ACTIVE:
                counts["checks"] += 1
                checked[id(code)] = code
            elif op[1] not in globals_:
                counts["builtin_loads"] += 1

    if sys.version_info >= (3, 12):  # 3.12's opcode tracing misses frames: use sys.monitoring
        mon = sys.monitoring  # type: ignore[attr-defined]
        tool = next(t for t in (mon.DEBUGGER_ID, *range(6)) if mon.get_tool(t) is None)

        def on_instruction(code: CodeType, offset: int) -> None:
            count(code, offset, sys._getframe(1).f_globals)

        early: dict[int, bool] = {}

        def on_start(code: CodeType, offset: int) -> None:
            # A generator's switch sits before its RESUME on 3.12+ (see the docs), where
            # no INSTRUCTION event is given: count it when the fresh frame starts.
            found = early.get(id(code))
            if found is None:
                ops = table(code)
                check = min((o for o, (name, arg) in ops.items() if arg == ACTIVE), default=None)
                resume = min((o for o, (name, _) in ops.items() if name == "RESUME"), default=None)
                found = early[id(code)] = check is not None and resume is not None and check < resume
            if found:
                counts["bytecodes"] += 2
                counts["checks"] += 1
                checked[id(code)] = code

        mon.use_tool_id(tool, "cassette_hook-bench-idle")
        mon.register_callback(tool, mon.events.INSTRUCTION, on_instruction)
        mon.register_callback(tool, mon.events.PY_START, on_start)
        mon.set_events(tool, mon.events.INSTRUCTION | mon.events.PY_START)
        try:
            run()
        finally:
            mon.set_events(tool, 0)
            mon.register_callback(tool, mon.events.INSTRUCTION, None)
            mon.register_callback(tool, mon.events.PY_START, None)
            mon.free_tool_id(tool)
    else:
        def tracer(frame: Any, event: str, arg: Any) -> Any:
            if event == "call":
                frame.f_trace_opcodes = True
            elif event == "opcode":
                count(frame.f_code, frame.f_lasti, frame.f_globals)
            return tracer

        sys.settrace(tracer)
        try:
            run()
        finally:
            sys.settrace(None)
    counts["checked_codes"] = list(checked.values())
    return counts


def check_opnames(codes: list[CodeType]) -> dict[str, int]:
    """How the switch's LOAD_GLOBAL has been specialised (3.11+), per code object."""
    out: dict[str, int] = {}
    for code in codes:
        for ins in dis.get_instructions(code, adaptive=True):
            if ins.argval == ACTIVE:
                out[ins.opname] = out.get(ins.opname, 0) + 1
                break
    return out


def code_key(code: CodeType) -> tuple[str, int, str]:
    return (Path(code.co_filename).name, code.co_firstlineno, code.co_name)


def explain(copies: dict[str, ModuleType], name: str) -> list[object]:
    """One row of the --explain table (call after the timing: the code is warm)."""
    adaptive = sys.version_info >= (3, 11)
    ops: dict[tuple[str, int, str], str] = {}
    if adaptive:  # read the specialisations before tracing disturbs them
        for code in all_codes(copies[IDLE]):
            found = check_opnames([code])
            if found:
                ops[code_key(code)] = next(iter(found))
    plain = trace_counts(copies[PLAIN].run)
    traced = trace_counts(copies[IDLE].run)
    check_idle()
    ran = {code_key(c) for c in traced["checked_codes"]}
    added = traced["bytecodes"] - plain["bytecodes"]

    def summary() -> str:
        if not adaptive:
            return "-"
        seen: dict[str, int] = {}
        for key, opname in ops.items():
            if key in ran:
                seen[opname] = seen.get(opname, 0) + 1
        return " ".join(f"{k.removeprefix('LOAD_GLOBAL').lstrip('_') or 'generic'}:{v}"
                        for k, v in sorted(seen.items()))

    return [name, f"{plain['bytecodes']:,}", f"{traced['checks']:,}", f"{added:,}",
            f"{added / plain['bytecodes']:.1%}", f"{plain['builtin_loads']:,}",
            f"{plain['builtin_loads'] / plain['bytecodes']:.1%}", summary()]


# -- main -------------------------------------------------------------------------------

def paired(res: harness.Result, variant: str, base: str) -> tuple[float, float]:
    """Median over rounds of variant/base in the same round, and its IQR/median."""
    rs = [v / b for v, b in zip(res.samples[variant], res.samples[base])]
    med = statistics.median(rs)
    if len(rs) < 2:
        return med, float("nan")
    q1, _, q3 = statistics.quantiles(rs, n=4)
    return med, (q3 - q1) / med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds, ~1-2 minutes in all")
    ap.add_argument("--workloads", help="comma-separated names (default: all)")
    ap.add_argument("--rounds", type=int, help="measured idle rounds per workload (null: a quarter)")
    ap.add_argument("--min-sample-ms", type=float, default=5.0, help="calibrated loop per sample (default 5)")
    ap.add_argument("--no-clean", action="store_true",
                    help="skip the chb_clean (exact-str builtins) and chb_control copies")
    ap.add_argument("--explain", action="store_true", help="also count bytecodes and switch checks per run")
    ap.add_argument("--json", metavar="FILE", help="also write the raw samples (ns) here")
    ap.add_argument("--lazy", action="store_true",
                    help="import light (the hook's default) and switch at a first activation, as a user's first "
                         "`with ctx:` does, instead of switching at import")
    ap.add_argument("--restored", action="store_true",
                    help="with --lazy: the functions get their compiled code back as the activation ends")
    ap.add_argument("--cpu", action="store_true",
                    help="time by the process's CPU time, not the wall clock (a shared, loaded machine)")
    args = ap.parse_args()
    if args.restored and not args.lazy:
        ap.error("--restored goes with --lazy")
    if args.cpu:
        harness.use_cpu_time()
    if ch is None:
        raise SystemExit(common.no_package_note())
    from cassette_hook.rewrite import _names

    names = args.workloads.split(",") if args.workloads else list(workloads.ALL)
    for name in names:
        if name not in workloads.ALL:
            raise SystemExit(f"unknown workload {name!r}; known: {', '.join(workloads.ALL)}")
    if any(n in workloads.PYPERFORMANCE for n in names):
        try:
            importlib.import_module("pyperf")  # the programs import it
            from workloads import _pyperformance
            _pyperformance.benchmark_path("go")
        except (ImportError, FileNotFoundError) as exc:
            print(f"skipping the pyperformance workloads: {exc}", file=sys.stderr)
            names = [n for n in names if n not in workloads.PYPERFORMANCE]
    packages = [PLAIN, IDLE] if args.no_clean else [PLAIN, CONTROL, IDLE, CLEAN]
    rounds = args.rounds or (30 if args.quick else 120)
    budget = (60.0 if args.quick else 300.0) / max(1, len(names))

    root = Path(tempfile.mkdtemp(prefix="cassette_hook_bench_idle_"))
    try:
        make_packages(root, names, packages)
        sys.path.insert(0, str(root))
        clean = {str(k): v for k, v in vars(builtins).items()}  # before the hook adds anything
        # What users do, first; switched at import (lazy=False), or (--lazy) at the first
        # activation after each import: the idle cost measured is that of code a context has
        # run once (lazy code that none has run is the compiled code).
        ch.install(include=[p for p in packages if p in INSTRUMENTED], lazy=args.lazy)
        lazy_mode = lazy_mode_module()
        lazy_mode.RESTORE_AFTER = 0.0 if args.restored else None  # (the default decides by the idle spells)
        if not args.no_clean:
            sys.meta_path.insert(0, CleanBuiltins(clean))
        non_str = sum(type(k) is not str for k in vars(builtins))
        print(f"Python {sys.version.split()[0]}, up to {rounds} idle rounds per workload, "
              f"<= {budget:.0f} s each; {non_str} builtins keys are not exact str after ch.install\n")

        results: list[tuple[str, harness.Result, harness.Result, str]] = []
        explained: list[list[object]] = []
        for name in names:
            copies = {pkg: importlib.import_module(f"{pkg}.{module_name(name)}") for pkg in packages}
            if args.lazy:
                with common.Null():  # switches what was imported light (assigning each function's code;
                    for pkg in INSTRUMENTED:  # with a function watcher, the first calls do: as if all ran)
                        for f in functions(copies[pkg]) if pkg in copies else ():
                            lazy_mode.first_call(f)
                gc.collect()  # (the entry gone: with --restored, the compiled code is back)
            for pkg in INSTRUMENTED:
                if pkg in copies:
                    switched = _names.is_switched(copies[pkg].run.__code__)
                    assert switched != args.restored, f"{pkg}.{name}.run: switched {switched}"
            for pkg in (PLAIN, CONTROL, CLEAN):
                if pkg in copies:
                    assert not any(_names.is_switched(f.__code__) for f in functions(copies[pkg])), pkg
            if CLEAN in copies:
                assert copies[CLEAN].run.__builtins__ is not vars(builtins)  # type: ignore[attr-defined]
            n_switched, n_functions = switched_counts(copies[IDLE])
            check_idle()
            expected = copies[PLAIN].run()
            for pkg, mod in copies.items():
                got = mod.run()
                if got != expected:
                    print(f"!! {name}: {pkg} returned {got!r}, plain {expected!r}", file=sys.stderr)
            null_ctx = common.Null()

            def under_null(run: Callable[[], object] = copies[IDLE].run) -> object:
                with null_ctx:
                    return run()

            if under_null() != expected:
                print(f"!! {name}: instrumented copy under Null() differs from plain", file=sys.stderr)
            check_idle()

            variants = {"plain": copies[PLAIN].run, "idle": copies[IDLE].run}
            for pkg, label in ((CONTROL, "control"), (CLEAN, "clean")):
                if pkg in copies:
                    variants[label] = copies[pkg].run
            res = harness.measure(name, variants, rounds=rounds, warmup=3,
                                  min_sample_ns=int(args.min_sample_ms * 1e6), budget_s=budget * 0.8)
            check_idle()
            null = harness.measure(name, {"plain": copies[PLAIN].run, "null": under_null},
                                   rounds=max(5, rounds // 4), warmup=2,
                                   min_sample_ns=int(args.min_sample_ms * 1e6), budget_s=budget * 0.2)
            check_idle()
            results.append((name, res, null, f"{n_switched}/{n_functions}"))
            print(f"  {name}: {len(res.samples['plain'])} idle rounds, {len(null.samples['plain'])} null rounds",
                  file=sys.stderr)
            if args.explain:
                explained.append(explain(copies, name))

        cols = [("idle", "plain")] + ([("control", "plain"), ("plain", "clean"), ("idle", "clean")]
                                      if not args.no_clean else [])
        rows: list[list[object]] = []
        for name, res, null, sw in results:
            row: list[object] = [name, f"{res.median('plain') / 1e6:.2f}"]
            ratio, noise = paired(res, "idle", "plain")
            by_min = min(res.samples["idle"]) / min(res.samples["plain"])
            row += [f"{ratio:.3f}", f"{by_min:.3f}", f"{noise:.1%}", f"{paired(null, 'null', 'plain')[0]:.2f}"]
            row += [f"{paired(res, v, b)[0]:.3f}" for v, b in cols[1:]]
            rows.append(row + [sw])
        geo = [harness.geomean(paired(r, v, b)[0] for _, r, _, _ in results) for v, b in cols]
        null_geo = harness.geomean(paired(n, "null", "plain")[0] for _, _, n, _ in results)
        min_geo = harness.geomean(min(r.samples["idle"]) / min(r.samples["plain"]) for _, r, _, _ in results)
        last: list[object] = ["geomean", "", f"{geo[0]:.3f}", f"{min_geo:.3f}", "", f"{null_geo:.2f}"]
        rows.append(last + [f"{g:.3f}" for g in geo[1:]] + [""])
        worst = max(results, key=lambda r: paired(r[1], "idle", "plain")[0])
        print(harness.table(["workload", "plain ms", "idle/plain", "by min", "noise", "null/plain"]
                            + [f"{v}/{b}" for v, b in cols[1:]] + ["switched fns"], rows))
        print(f"\nratios: median over rounds of the per-round ratio; noise = IQR/median of idle/plain;"
              f"\nworst idle/plain: {worst[0]} {paired(worst[1], 'idle', 'plain')[0]:.3f}"
              f"  (targets: geomean <= 1.03, every workload <= 1.10)")
        if explained:
            print("\n" + harness.table(
                ["workload", "bytecodes/run", "checks/run", "added", "added %", "builtin loads",
                 "% of bytecodes", "check op"], explained))
            print("\nadded = bytecodes of the idle copy - plain copy (2 per check); builtin loads ="
                  " LOAD_GLOBALs resolved in builtins (plain copy);\ncheck op = specialised form of the"
                  " switch's LOAD_GLOBAL in the code objects that ran a check (3.11+).")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"python": sys.version,
                           "results": {n: {"idle": r.samples, "null": nl.samples} for n, r, nl, _ in results}}, fh)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
