"""What a context pays for overloads that name their callees (``Is[...]``: a mock, a watch)
on a program that never calls them, against a context that overloads nothing; and what a
matched identity overload costs per call against a counting prehook. Ratios come from one
interleaved run (see harness.py).

Variants, each the workload's ``run()``:
    plain     as compiled
    null      under a context that overloads nothing
    is        under a context whose one overload is ``overdub(ctx, f: Is[time.time])``
              (never met: the workloads do not call ``time.time``)
    watch     under a context whose one hook is ``prehook(ctx, f: Is[open], ...)`` (never met)
    class     under a context whose one overload takes its callee by a class, ``overdub(ctx,
              f: Rule, *args)`` (never met: no callee of the workloads is a ``Rule``)
    count     under a counting prehook (``operators = False``): a hook at every call

First through ``ch.overdub`` on the workloads, then (unless ``--no-hooked``) through
``with ctx:`` over a copy of them loaded through the import hook (``ch.install``). Last,
per call: a loop of calls of one Python function under ``count`` and under an identity
overload that names it (``overdub(ctx, f: Is[g], x): return ch.recurse(ctx, f, x)``).

    PYTHONPATH=. python benchmarks/bench_sparse.py [--quick] [--workloads fib,oo_sim] [--no-hooked]

Not run by ``main``: ``entering_route(rounds)``, the same per-call loop with the overload's
``recurse`` entered by hand and the whole entering route modelled (C path; see the comments
above it; ``cg_entering.py`` counts its variants' instructions), and ``prehook_routes(rounds)``.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import common
import harness
import workloads
from common import ch

HERE = Path(__file__).resolve().parent
HOOKED = "chb_sparse_hooked"


class Is(ch.Context):
    """Mocks ``time.time``, which the workloads never call."""


@ch.overdub.register
def _frozen(ctx: Is, f: ch.Is[time.time]) -> float:
    return 1e6


class Watch(ch.Context):
    """Watches ``open``, which the workloads never call."""


@ch.prehook.register
def _watched(ctx: Watch, f: ch.Is[open], *args: Any, **kwargs: Any) -> None:
    ctx.metadata.append(args)


class Rule:
    """A kind of callable the workloads never call (as an AD context's rules take ``f: np.ufunc``)."""

    def __call__(self, x: Any) -> Any:
        return x


class ByClass(ch.Context):
    """Overloads the calls of every ``Rule``, a class the workloads' callees are never instances of."""


@ch.overdub.register
def _by_class(ctx: ByClass, f: Rule, *args: Any) -> Any:
    return ch.recurse(ctx, f, *args)


CONTEXTS = {"null": common.Null, "is": Is, "watch": Watch, "class": ByClass, "count": common.Count}
SPARSE = ("is", "watch", "class")


def _context(name: str) -> ch.Context:
    return CONTEXTS[name](metadata=[0] if name == "count" else [])


def overdub_variants(run: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"plain": run}
    for name in CONTEXTS:
        out[name] = lambda name=name: ch.overdub(_context(name), run)
    return out


def hooked_variants(plain: Any, hooked: Any) -> dict[str, Any]:
    def under(name: str) -> Any:
        def go() -> Any:
            with _context(name):
                return hooked()
        return go

    return {"plain": plain, **{name: under(name) for name in CONTEXTS}}


def load_hooked(names: list[str]) -> dict[str, ModuleType]:
    """The workloads copied into a package loaded through the import hook."""
    root = Path(tempfile.mkdtemp(prefix="bench_sparse_"))
    pkg = root / HOOKED
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in names:
        shutil.copyfile(HERE / "workloads" / f"{name}.py", pkg / f"{name}.py")
    sys.path.insert(0, str(root))
    ch.install(include=[HOOKED])
    return {name: importlib.import_module(f"{HOOKED}.{name}") for name in names}


def report(title: str, results: list[harness.Result]) -> None:
    names = [n for n in CONTEXTS]
    rows = [[r.name] + [f"{r.ratio(v):.2f}" for v in names] + [f"{r.ratio(v) / r.ratio('null'):.2f}" for v in SPARSE]
            for r in results]
    rows.append(["geomean"] + [f"{harness.geomean(r.ratio(v) for r in results):.2f}" for v in names]
                + [f"{harness.geomean(r.ratio(v) / r.ratio('null') for r in results):.2f}" for v in SPARSE])
    print(f"\n{title}")
    print(harness.table(["workload"] + [f"{v}/plain" for v in names] + [f"{v}/null" for v in SPARSE], rows))


def _g(x: int) -> int:
    return x


def _loop() -> int:
    total = 0
    for i in range(20_000):
        total += _g(i)
    return total


class Identity(ch.Context):
    operators = False


@ch.overdub.register
def _identity(ctx: Identity, f: ch.Is[_g], x: int) -> int:
    return ch.recurse(ctx, f, x)  # type: ignore[no-any-return]


def per_call(rounds: int) -> None:
    variants = {"plain": _loop,
                "count": lambda: ch.overdub(common.Count(metadata=[0]), _loop),
                "identity": lambda: ch.overdub(Identity(), _loop)}
    expected = _loop()
    assert all(v() == expected for v in variants.values())
    res = harness.measure("calls", variants, rounds=rounds, warmup=2)
    print("\nper matched call (a loop of 20,000 calls of one function): ns a call over plain")
    print(harness.table(["variant", "ns/call over plain"],
                        [[v, f"{(res.median(v) - res.median('plain')) / 20_000:.0f}"] for v in ("count", "identity")]))


# The entering route for an overload (docs/performance.md, "The entering route for an
# overload's recurse, measured and modelled"), in two halves.
#
# The recurse half, real: an identity overload whose ``ch.recurse`` is written as an
# entering call site would run it, with the real C steps (``_speedups.unpop`` puts the
# popped entry back and returns the twin, the overload's frame calls it, inlined, and
# ``_speedups.repop`` pops the entry again, also when the twin raises).  The overload itself
# is still called by a ``Site``, from C, as today.  C path only.
class IdentityEntered(ch.Context):
    operators = False


@ch.overdub.register
def _identity_entered(ctx: IdentityEntered, f: ch.Is[_g], x: int) -> int:
    run = _unpop(ctx, f)
    try:
        out = run(x)
    except BaseException:
        _repop()
        raise
    _repop()
    return out  # type: ignore[no-any-return]


_speedups = getattr(ch._native.runtime, "module", None) if ch is not None else None  # (C path only)
_unpop, _repop = (_speedups.unpop, _speedups.repop) if _speedups is not None else (None, None)


# The whole route, modelled: the matched call as the program's frame would run it if the
# call site were handed the overload's twin (bound to its context) and called it, inlined,
# and the twin's recurse were the entering call site above.  Plain Python, no context:
# each step of ours is a builtin called from Python that stands in for it (a dictionary's
# ``get``, or a list's ``clear`` for a step that takes nothing); the real steps' own work
# is added from the profiles of the real routes (docs/performance.md).  Steps: the site's
# resolve (the overload's twin, its entry popped), the overload's frame, inlined, its
# recurse (``unpop``, the twin inlined, ``repop``), and, as the overload returns, one
# more step that puts its entry back on top.  ``_model_tail_loop``: the same for an overload
# whose recurse is its tail call, ``return ch.recurse(ctx, f, x)``, whose one step may end
# the overload's popping before the twin runs (the twin then runs under the state the
# call site had), so that nothing runs after the twin.  ``_model_any_loop``: the same tail
# call for bench_tools' ``recurse`` row, an overload of every callee with ``*args`` and
# ``**kwargs`` (``RecurseAll``), its twin made per callee as the identity overload's is.
class _ModelContext:
    pass


def _model_overload(ctx: _ModelContext, x: int) -> int:
    run = _model_unpop(ctx, _g)
    try:
        out = run(x)
    except BaseException:
        _model_step()
        raise
    _model_step()
    _model_step()
    return out  # type: ignore[no-any-return]


def _model_tail_overload(ctx: _ModelContext, x: int) -> int:
    return _model_unpop(ctx, _g)(x)  # type: ignore[no-any-return]


def _model_any_overload(ctx: _ModelContext, *args: Any, **kwargs: Any) -> Any:
    return _model_unpop(ctx, _g)(*args, **kwargs)


_model_twins: dict[Any, Any] = {_g: _g}
_model_resolve = {_g: _model_overload.__get__(_ModelContext())}.get
_model_tail_resolve = {_g: _model_tail_overload.__get__(_ModelContext())}.get
_model_any_resolve = {_g: _model_any_overload.__get__(_ModelContext())}.get
_model_unpop = _model_twins.get  # (ctx, f): ctx the key looked up (absent), f its default
_model_step = [].clear  # (a builtin that takes nothing, as repop)


def _model_loop() -> int:
    total = 0
    for i in range(20_000):
        total += _model_resolve(_g)(i)
    return total


def _model_tail_loop() -> int:
    total = 0
    for i in range(20_000):
        total += _model_tail_resolve(_g)(i)
    return total


def _model_any_loop() -> int:
    total = 0
    for i in range(20_000):
        total += _model_any_resolve(_g)(i)
    return total


class RecurseAll(ch.Context):
    """bench_tools' ``recurse`` row: an ``overdub`` overload of every call that only
    calls ``recurse``, with ``*args`` and ``**kwargs``."""

    operators = False

    def overdub(self, f: Any, /, *args: Any, **kwargs: Any) -> Any:
        return ch.recurse(self, f, *args, **kwargs)


def entering_route(rounds: int) -> None:
    """Per matched call, ns over plain: the counting prehook, the identity overload as it
    runs, the same with its recurse entered (real), and the whole route modelled (for an
    overload whose recurse is its tail call, too)."""
    variants = {"plain": _loop,
                "count": lambda: ch.overdub(common.Count(metadata=[0]), _loop),
                "identity": lambda: ch.overdub(Identity(), _loop),
                "entered": lambda: ch.overdub(IdentityEntered(), _loop),
                "model": _model_loop, "model-tail": _model_tail_loop,
                "recurse-all": lambda: ch.overdub(RecurseAll(), _loop), "model-any": _model_any_loop}
    expected = _loop()
    assert all(v() == expected for v in variants.values())
    res = harness.measure("calls", variants, rounds=rounds, warmup=2)
    print("\nper matched call, the entering route (a loop of 20,000 calls): ns a call over plain")
    print(harness.table(["variant", "ns/call over plain"],
                        [[v, f"{(res.median(v) - res.median('plain')) / 20_000:.0f}"]
                         for v in ("count", "identity", "entered", "model", "model-tail", "recurse-all", "model-any")]))


def prehook_routes(rounds: int, name: str = "interp") -> None:
    """One workload under a counting prehook through ``ch.overdub`` and through ``with
    ctx:`` over its import-hooked copy, over plain (docs/performance.md, "Hooks past the
    budget of `Site`s in C, and the pure-Python `recurse`")."""
    (mod,) = workloads.load([name])
    hooked = load_hooked([name])[name]

    def with_ctx() -> Any:
        with common.Count(metadata=[0]):
            return hooked.run()

    variants = {"plain": mod.run, "overdub": lambda: ch.overdub(common.Count(metadata=[0]), mod.run),
                "with": with_ctx}
    expected = mod.run()
    assert all(v() == expected for v in variants.values())
    res = harness.measure(name, variants, rounds=rounds, warmup=1)
    print(f"\n{name} under a counting prehook ({ch._native.runtime.name} path): ratio to plain")
    print(harness.table(["variant", "ratio"], [[v, f"{res.ratio(v):.2f}"] for v in ("overdub", "with")]
                        + [["with / overdub", f"{res.median('with') / res.median('overdub'):.2f}"]]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--workloads", help="comma-separated names (default: the project's own)")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--no-hooked", action="store_true", help="skip the import-hook half")
    args = ap.parse_args()
    if ch is None:
        raise SystemExit(common.no_package_note())
    names = args.workloads.split(",") if args.workloads else list(workloads.OWN)
    rounds = args.rounds or (5 if args.quick else 15)
    budget = (10.0 if args.quick else 60.0) / max(1, len(names))
    print(f"Python {sys.version.split()[0]} ({ch._native.runtime.name} path), {rounds} rounds")
    mods = workloads.load(names)

    def measured(variants_of: Callable[[Any], dict[str, Callable[[], Any]]]) -> list[Any]:
        """Each workload's variants, checked to give its plain result, then measured."""
        results = []
        for mod in mods:
            vs = variants_of(mod)
            expected = mod.run()
            for name, v in vs.items():
                if v() != expected:
                    print(f"!! {mod.NAME}: {name} returned another result", file=sys.stderr)
            results.append(harness.measure(mod.NAME, vs, rounds=rounds, warmup=1, budget_s=budget))
        return results

    report("through ch.overdub (ratio to plain; is/null, watch/null: ratio to the null context)",
           measured(lambda mod: overdub_variants(mod.run)))
    if not args.no_hooked:
        hooked = load_hooked([m.__name__.rsplit(".", 1)[1] for m in mods])
        report("through `with ctx:` over import-hooked code",
               measured(lambda mod: hooked_variants(mod.run, hooked[mod.__name__.rsplit(".", 1)[1]].run)))
    per_call(rounds)


if __name__ == "__main__":
    main()
