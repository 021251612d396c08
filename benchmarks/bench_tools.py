"""cassette_hook against the tools a user would choose between: issue 10's comparison table.

Each workload runs plain and under every row's tool, interleaved (harness.py); the table
gives, per row, the geometric mean over the workloads of the ratio of medians to plain,
and the cost per call: the extra time over plain divided by the calls the workload makes
(CALL events of a counting ``sys.monitoring`` callback on 3.12+, ``'call'`` events of
``sys.setprofile`` on 3.10 and 3.11), summed over the workloads; for the two counting
prehooks also the cost per *observed* event (the extra time divided by what the prehook
counted: calls, and operators where it sees them).  A micro row compares
cached dispatch through ``ch.prehook`` with ``functools.singledispatch``.  Rows whose
package is missing or does not run on this Python are skipped with a note.

    PYTHONPATH=. python benchmarks/bench_tools.py [--quick] [--workloads fib,go]
        [--rows null,count,cprofile] [--rounds N] [--json out.json] [--cpu]

Only cassette_hook's public API is used, so the script measures whatever the package's
hot path is at the time.
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import functools
import importlib.metadata
import json
import os
import statistics
import sys
import timeit
import types
from dataclasses import dataclass
from typing import Any, Callable

import common
import harness
import workloads
from common import ch
from harness import Thunk


class Unavailable(Exception):
    """The row cannot run here (package missing, or unsupported on this Python)."""


def version_of(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        raise Unavailable(f"{dist} is not installed (pip install -r benchmarks/requirements.txt)") from None


# --- the peers ------------------------------------------------------------------------

def monitoring(mod: types.ModuleType) -> Thunk:
    if sys.version_info < (3, 12):
        raise Unavailable("sys.monitoring needs Python 3.12+")
    return functools.partial(common.with_monitoring, mod.run)


def setprofile(mod: types.ModuleType) -> Thunk:
    return functools.partial(common.with_setprofile, mod.run)


def cprofile(mod: types.ModuleType) -> Thunk:
    def run() -> object:
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            return mod.run()
        finally:
            profiler.disable()
    return run


def viztracer(mod: types.ModuleType, *, values: bool = False) -> Thunk:
    version_of("viztracer")
    try:
        from viztracer import VizTracer
    except ImportError as exc:
        raise Unavailable(f"viztracer does not import here: {exc}") from None

    def run() -> object:
        tracer = VizTracer(verbose=0, log_func_args=values, log_func_retval=values)
        tracer.start()
        try:
            return mod.run()
        finally:
            tracer.stop()
            tracer.clear()
    return run


def pyinstrument(mod: types.ModuleType) -> Thunk:
    version_of("pyinstrument")
    from pyinstrument import Profiler

    def run() -> object:
        profiler = Profiler()
        profiler.start()
        try:
            return mod.run()
        finally:
            profiler.stop()
    return run


def pyccolo(mod: types.ModuleType) -> Thunk:
    """pyccolo rewrites source as it compiles it, so the workload module (and the
    pyperformance program it wraps) are compiled again, through the tracer, into fresh
    module objects; the tracer is enabled around each run, as ``pyc.tracing_enabled``
    would be in a user's program."""
    version_of("pyccolo")
    import pyccolo as pyc

    sources = [m for m in (getattr(mod, "bm", None), mod) if isinstance(m, types.ModuleType)]
    paths = {str(m.__file__) for m in sources}

    class CountCalls(pyc.BaseTracer):  # type: ignore[misc]
        calls = 0

        def should_instrument_file(self, filename: str) -> bool:
            return filename in paths

        @pyc.before_call  # type: ignore[untyped-decorator]
        def count(self, ret: Any, *_: Any, **__: Any) -> Any:
            CountCalls.calls += 1
            return ret

    tracer = CountCalls.instance()
    saved = {m.__name__: m for m in sources}
    try:
        with tracer.tracing_enabled():
            for m in sources:  # the program first: the workload module's load() finds it
                copy = types.ModuleType(m.__name__, m.__doc__)
                copy.__file__, copy.__package__ = m.__file__, m.__package__
                sys.modules[m.__name__] = copy  # (dataclasses look their module up)
                with open(str(m.__file__), encoding="utf-8") as fh:
                    tree = tracer.make_ast_rewriter(path=str(m.__file__)).visit(ast.parse(fh.read()))
                exec(compile(tree, str(m.__file__), "exec"), vars(copy))  # noqa: S102
    finally:
        sys.modules.update(saved)
    copied_run = copy.run

    def run() -> object:
        with tracer.tracing_enabled():
            return copied_run()
    return run


# --- cassette_hook ------------------------------------------------------------------------

if ch is not None:
    class CountAll(ch.Context):
        """A counting prehook with operators on (the class default)."""

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            self.metadata[0] += 1

    class Recurse(ch.Context):
        """An ``overdub`` overload that only calls ``recurse`` (operators off, as Count)."""

        operators = False

        def overdub(self, f: Any, /, *args: Any, **kwargs: Any) -> Any:
            return ch.recurse(self, f, *args, **kwargs)


def _package() -> None:
    if ch is None:
        raise Unavailable(common.no_package_note())


def ch_null(mod: types.ModuleType) -> Thunk:
    _package()
    return lambda: ch.overdub(common.Null(), mod.run)


COUNTING: dict[str, Callable[[], Any]] = {
    "count": lambda: common.Count(metadata=[0]),
    "count-ops": lambda: CountAll(metadata=[0]),
}
"""The rows whose context counts what it is shown, and how to make one."""


def observed_events(key: str, mod: types.ModuleType) -> int:
    """What the counting context of row ``key`` is shown in one run of ``mod``."""
    ctx = COUNTING[key]()
    ch.overdub(ctx, mod.run)
    return int(ctx.metadata[0])


def ch_count(mod: types.ModuleType) -> Thunk:
    _package()
    return lambda: ch.overdub(COUNTING["count"](), mod.run)


def ch_count_ops(mod: types.ModuleType) -> Thunk:
    _package()
    return lambda: ch.overdub(COUNTING["count-ops"](), mod.run)


def ch_recurse(mod: types.ModuleType) -> Thunk:
    _package()
    return lambda: ch.overdub(Recurse(), mod.run)


def _sink() -> Any:
    """Where the reports go: nowhere, but through a real text stream."""
    return open(os.devnull, "w", encoding="utf-8")


def ch_profile(mod: types.ModuleType) -> Thunk:
    _package()
    sink = _sink()
    return lambda: ch.overdub(ch.ProfileContext(sink), mod.run)


def ch_trace(mod: types.ModuleType, **options: Any) -> Thunk:
    _package()
    sink = _sink()
    return lambda: ch.overdub(ch.TraceContext(sink, **options), mod.run)


@dataclass(frozen=True)
class Row:
    label: str
    make: Callable[[types.ModuleType], Thunk]


ROWS: dict[str, Row] = {
    "monitoring": Row("`sys.monitoring`, counting CALL callback", monitoring),
    "viztracer": Row("viztracer {viztracer} (every call and return)", viztracer),
    "viztracer-values": Row("viztracer {viztracer}, `log_func_args` + `log_func_retval`",
                            functools.partial(viztracer, values=True)),
    "cprofile": Row("`cProfile`", cprofile),
    "setprofile": Row("`sys.setprofile`, no-op Python function", setprofile),
    "pyinstrument": Row("pyinstrument {pyinstrument}", pyinstrument),
    "pyccolo": Row("pyccolo {pyccolo}, counting `before_call` handler", pyccolo),
    "null": Row("cassette_hook, context that overloads nothing (`ch.overdub`)", ch_null),
    "count": Row("cassette_hook, counting `prehook` (`operators = False`)", ch_count),
    "count-ops": Row("cassette_hook, counting `prehook`, operators on", ch_count_ops),
    "recurse": Row("cassette_hook, `overdub` overload that only calls `recurse`", ch_recurse),
    "profile": Row("cassette_hook, `ProfileContext()` defaults", ch_profile),
    "trace": Row("cassette_hook, `TraceContext()` defaults", ch_trace),
    # By default a tracer shows a library's function as one call, and pyperformance's
    # programs are installed packages: this row traces inside them (and the stdlib) too.
    "trace-libraries": Row("cassette_hook, `TraceContext(libraries=True)`",
                           functools.partial(ch_trace, libraries=True)),
}
WORKLOADS = ("fib", "oo_sim", "interp") + workloads.PYPERFORMANCE


def label(key: str) -> str:
    versions = {}
    for dist in ("viztracer", "pyinstrument", "pyccolo"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "?"
    return ROWS[key].label.format(**versions)


def count_calls(run: Thunk) -> int:
    """The calls one run makes: CALL events (3.12+) or setprofile 'call' events."""
    if sys.version_info >= (3, 12):
        box = [0]
        common.with_monitoring(run, box)
        return box[0]
    calls = [0]

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call":
            calls[0] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls[0]


# --- cached dispatch (micro row) ----------------------------------------------------------

def dispatch_micro(rounds: int, number: int) -> tuple[float, float] | str:
    """Median ns per call of ``ch.prehook(ctx, f, x, y, z)`` (three arguments, three
    overloads for the context class, cached) and of a ``functools.singledispatch`` function with
    three methods on one argument; interleaved rounds, as bench_dispatch.py."""
    if ch is None:
        return common.no_package_note()

    class Dispatch(ch.Context):
        pass

    def f() -> None:
        pass

    @ch.prehook.register
    def _(ctx: Dispatch, f: Any, x: int, y: int, z: int) -> int:
        return 1

    @ch.prehook.register
    def _(ctx: Dispatch, f: Any, x: float, y: float, z: float) -> int:
        return 2

    @ch.prehook.register
    def _(ctx: Dispatch, f: Any, x: Any, y: Any, z: Any) -> int:
        return 3

    import bench_dispatch  # (it imports cassette_hook)

    statement, names = bench_dispatch.singledispatch()  # three methods, called on one argument
    ctx = Dispatch()
    ours = timeit.Timer("prehook(ctx, f, 1, 2, 3)", timer=harness.seconds,
                        globals={"prehook": ch.prehook, "ctx": ctx, "f": f})
    theirs = timeit.Timer(statement, timer=harness.seconds, globals=names)
    assert ch.prehook(ctx, f, 1, 2, 3) == 1 and eval(statement, names) == 1  # noqa: S307 (and the caches are warm)
    a: list[float] = []
    b: list[float] = []
    for r in range(rounds):
        for timer, out in ((ours, a), (theirs, b))[::1 if r % 2 else -1]:
            out.append(timer.timeit(number) / number * 1e9)
    return statistics.median(a), statistics.median(b)


# --- main ------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 rounds, short budgets (~5 minutes)")
    ap.add_argument("--workloads", help=f"comma-separated names (default: {','.join(WORKLOADS)})")
    ap.add_argument("--rows", help=f"comma-separated rows (default: all): {','.join(ROWS)},dispatch")
    ap.add_argument("--rounds", type=int, help="measured rounds per workload (default 11; --quick 3)")
    ap.add_argument("--json", metavar="FILE", help="also write samples (ns), call counts and ratios here")
    ap.add_argument("--cpu", action="store_true",
                    help="time by the process's CPU time, not the wall clock (a shared, loaded machine)")
    args = ap.parse_args()
    if args.cpu:
        harness.use_cpu_time()
    names = args.workloads.split(",") if args.workloads else list(WORKLOADS)
    rows = args.rows.split(",") if args.rows else [*ROWS, "dispatch"]
    unknown = [r for r in rows if r not in ROWS and r != "dispatch"]
    if unknown:
        raise SystemExit(f"unknown rows {unknown}; known: {', '.join(ROWS)}, dispatch")
    mods = workloads.load(names)
    rounds = args.rounds or (3 if args.quick else 11)
    budget = 20.0 if args.quick else 90.0  # seconds per workload, at least 3 rounds
    print(f"Python {sys.version.split()[0]}, {len(mods)} workloads, {rounds} rounds, "
          f"<= {budget:.0f} s per workload\n")

    notes: dict[str, str] = {}
    results: list[harness.Result] = []
    calls: dict[str, int] = {}
    events: dict[str, dict[str, int]] = {}  # row -> workload -> observed events (counting rows)
    for mod in mods:
        expected = mod.run()
        calls[mod.NAME] = count_calls(mod.run)
        variants: dict[str, Thunk] = {"plain": mod.run}
        for key in rows:
            if key == "dispatch" or key in notes:
                continue
            try:
                thunk = ROWS[key].make(mod)
                got = thunk()  # (once: rewriting, imports; and a check of the result)
            except Unavailable as exc:
                notes[key] = str(exc)
                continue
            except Exception:  # report, then measure the others
                common.report_failure(f"{mod.NAME} under {key}")
                notes.setdefault(f"{key} on {mod.NAME}", "failed (see stderr); left out of its geomean")
                continue
            if got != expected:
                print(f"!! {mod.NAME} under {key} returned {got!r}, plain {expected!r}", file=sys.stderr)
            if key in COUNTING:
                events.setdefault(key, {})[mod.NAME] = observed_events(key, mod)
            variants[key] = thunk
        results.append(harness.measure(mod.NAME, variants, rounds=rounds, warmup=1, budget_s=budget))
        print(f"  {mod.NAME}: {len(results[-1].samples['plain'])} rounds, {calls[mod.NAME]:,} calls",
              file=sys.stderr)

    measured = [k for k in rows if any(k in r.samples for r in results)]
    summary: dict[str, dict[str, float]] = {}
    table = []
    for key in measured:
        mine = [r for r in results if key in r.samples]
        extra = sum(r.median(key) - r.median("plain") for r in mine)
        per_call = extra / sum(calls[r.name] for r in mine)
        summary[key] = {"ratio": harness.geomean(r.ratio(key) for r in mine), "ns_per_call": per_call}
        per_event = ""
        if key in events:
            summary[key]["ns_per_event"] = extra / sum(events[key][r.name] for r in mine)
            per_event = f"{summary[key]['ns_per_event']:,.0f}"
        table.append([label(key), f"{summary[key]['ratio']:.2f}x", f"{per_call:,.0f}", per_event,
                      f"{len(mine)}" if len(mine) < len(results) else "all"])
    print(harness.table(["tool", "ratio (geomean)", "ns per call", "ns per observed event", "workloads"], table))
    print("\nratio = geometric mean over the workloads of median(tool) / median(plain);"
          "\nns per call = sum over workloads of (median(tool) - median(plain)) / sum of calls "
          f"({'CALL events' if sys.version_info >= (3, 12) else 'setprofile call events'});"
          "\nns per observed event = the same extra time / sum of what the counting prehook counted.")

    print("\nPer workload (ratio to plain):")
    print(harness.table(["workload", "plain ms", "calls"] + measured,
                        [[r.name, f"{r.median('plain') / 1e6:.1f}", f"{calls[r.name]:,}"]
                         + [f"{r.ratio(k):.1f}" if k in r.samples else "-" for k in measured]
                         for r in results]))
    print("noise (largest IQR/median per workload): "
          + ", ".join(f"{r.name} {max(map(r.spread, r.samples)):.0%}" for r in results))

    micro: dict[str, float] = {}
    if "dispatch" in rows:
        out = dispatch_micro(rounds=9 if args.quick else 31, number=20_000)
        if isinstance(out, str):
            notes["dispatch"] = out
        else:
            ours, single = out
            micro = {"prehook_ns": ours, "singledispatch_ns": single}
            print(f"\nCached dispatch: ch.prehook(ctx, f, x, y, z), 3 overloads: {ours:,.0f} ns; "
                  f"functools.singledispatch, 1 argument, 3 methods: {single:,.0f} ns; "
                  f"ratio {ours / single:.2f}")
    for key, note in notes.items():
        print(f"note: {key}: {note}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"python": sys.version, "calls": calls, "events": events, "summary": summary, "dispatch": micro,
                       "notes": notes, "samples": {r.name: r.samples for r in results}}, fh)


if __name__ == "__main__":
    main()
