"""Reach: the share of Python-level function calls in overdub's dynamic extent that the
context sees.

Ground truth: a PLAIN run under sys.setprofile, counting 'call' events that start a NEW
Python frame (a generator/coroutine resumption also fires 'call'; it is told apart by
f_lasti: a fresh frame sits at or before its first RESUME, or at -1 on 3.10).
Comprehension and generator-expression frames are not counted: they are part of the
enclosing function's body, which is rewritten with them (and 3.12 inlines most of them).
Observed: a context whose prehook classifies each ``f`` by the Python body (code object)
that calling it runs, if any (see ``python_bodies``). Both sides are keyed by
(filename, first line, name), so the top missed functions can be listed.
reach = matched / truth, where matched = sum over functions of min(seen, truth).

    PYTHONPATH=. python benchmarks/bench_reach.py [--quick] [--workloads fib,go] [--top 5]
"""

from __future__ import annotations

import argparse
import builtins
import dis
import functools
import inspect
import operator
import os
import sys
from collections import Counter
from types import CodeType, FunctionType, MethodType
from typing import Any, Callable, Iterable

import common
import harness
import workloads
from common import ch

Key = tuple[str, int, str]  # (filename, first line, qualified name)
COMPREHENSIONS = {"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"}
GEN_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
SKIP_DIR = os.path.dirname(ch.__file__) if ch is not None else "\0"  # the package's own frames
PLAIN: Callable[[Any], Any] = ch.standins.plain if ch is not None else (lambda attribute: attribute)


def key(code: CodeType) -> Key:
    return (code.co_filename, code.co_firstlineno, getattr(code, "co_qualname", code.co_name))


@functools.cache
def start_offset(code: CodeType) -> int:
    """f_lasti of a frame of ``code`` that has not run yet (3.11+: its first RESUME)."""
    if sys.version_info < (3, 11):
        return -1
    return next(i.offset for i in dis.get_instructions(code) if i.opname == "RESUME")


def frames(run: Callable[[], object]) -> Counter[CodeType]:
    """New Python frames per code object in a plain ``run()`` (run's own frame excluded)."""
    calls: Counter[CodeType] = Counter()

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call":
            code = frame.f_code
            if not code.co_flags & GEN_FLAGS or frame.f_lasti <= start_offset(code):
                calls[code] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    calls[run.__code__] -= 1  # overdub's top-level call is not a call inside it
    return +Counter({c: n for c, n in calls.items()
                     if not c.co_filename.startswith(SKIP_DIR) and c.co_name not in COMPREHENSIONS})


def ground_truth(run: Callable[[], object]) -> Counter[Key]:
    out: Counter[Key] = Counter()
    for code, n in frames(run).items():
        out[key(code)] += n
    return out


# ---- which Python body does calling f(*args) run? ---------------------------------------

def _py_attr(cls: type, name: str) -> CodeType | None:
    """Code of ``cls.<name>`` looked up along the MRO, if it is a Python function (also
    where the class holds a stand-in for it under a context: ``standins``)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            v = PLAIN(vars(klass)[name])
            v = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
            return v.__code__ if isinstance(v, FunctionType) else None
    return None


def _dunder_table() -> dict[Any, tuple[tuple[str, int], ...]]:
    """Operator functions and builtins -> the special methods they try, as (name, arg index)."""
    t: dict[Any, tuple[tuple[str, int], ...]] = {}
    for op in "add sub mul truediv floordiv mod pow matmul lshift rshift and or xor".split():
        fn = getattr(operator, op + "_" if op in ("and", "or") else op)
        t[fn] = ((f"__{op}__", 0), (f"__r{op}__", 1))
        t[getattr(operator, "i" + op)] = ((f"__i{op}__", 0), (f"__{op}__", 0), (f"__r{op}__", 1))
    for op, mirror in (("eq", "eq"), ("ne", "ne"), ("lt", "gt"), ("le", "ge"), ("gt", "lt"), ("ge", "le")):
        t[getattr(operator, op)] = ((f"__{op}__", 0), (f"__{mirror}__", 1))
    for fn, name in ((operator.neg, "neg"), (operator.pos, "pos"), (operator.invert, "invert"),
                     (operator.getitem, "getitem"), (operator.setitem, "setitem"),
                     (operator.delitem, "delitem"), (operator.contains, "contains"),
                     (operator.truth, "bool"), (operator.not_, "bool"), (operator.index, "index"),
                     (abs, "abs"), (len, "len"), (iter, "iter"), (next, "next"), (hash, "hash"),
                     (repr, "repr"), (str, "str"), (bool, "bool"), (format, "format"),
                     (reversed, "reversed"), (divmod, "divmod"), (builtins.int, "int"),
                     (builtins.float, "float")):
        t[fn] = ((f"__{name}__", 0),)
    return t


DUNDERS = _dunder_table()
CONSTRUCTION = {"__new__", "__init__"}
SEPARATE: set[str] = set()  # those the package reports as calls of their own (probed)


def python_bodies(f: Any, args: tuple[Any, ...] = ()) -> list[CodeType]:
    """Code objects of the Python bodies that calling ``f(*args)`` runs directly."""
    if isinstance(f, FunctionType):
        return [f.__code__]
    if isinstance(f, MethodType):
        return python_bodies(f.__func__, (f.__self__, *args))
    if isinstance(f, functools.partial):
        return python_bodies(f.func, (*f.args, *args))
    try:
        special = DUNDERS.get(f)
    except TypeError:  # unhashable callable
        special = None
    if special:
        for name, i in special:
            code = _py_attr(type(args[i]), name) if i < len(args) else None
            if code is not None:
                return [code]
        return []
    if isinstance(f, type):
        meta_call = _py_attr(type(f), "__call__")
        if meta_call is not None:
            return [meta_call]
        return [c for c in (_py_attr(f, name) for name in CONSTRUCTION - SEPARATE) if c is not None]
    call = _py_attr(type(f), "__call__")
    return [call] if call is not None else []


def probe_construction() -> set[str]:
    """Which of a class's Python __new__/__init__ does the package hand to prehook as a
    call of its own after the class call? Those must not be counted twice."""
    class T:
        def __new__(cls, x: int) -> T:
            return super().__new__(cls)

        def __init__(self, x: int) -> None:
            self.x = x

    class Probe(ch.Context):
        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            self.metadata.append(f)

    ctx = Probe(metadata=[])
    ch.overdub(ctx, lambda: T(1))
    return {name for name in CONSTRUCTION if T.__dict__[name] in ctx.metadata
            or getattr(T.__dict__[name], "__func__", None) in ctx.metadata}


def observed(run: Callable[[], object], ops: bool) -> Counter[Key]:
    class Reach(ch.Context):
        operators = ops

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            for code in python_bodies(f, args):
                self.metadata[key(code)] += 1

    ctx = Reach(metadata=Counter())
    ch.overdub(ctx, run)
    return ctx.metadata


def matched(truth: Counter[Key], seen: Counter[Key]) -> int:
    return sum((truth & seen).values())


def describe(k: Key) -> str:
    filename, line, name = k
    return f"{name} ({os.path.basename(filename)}:{line})"


def top(counter: Counter[Key], n: int) -> Iterable[str]:
    return (f"{c:>8,}  {describe(k)}" for k, c in counter.most_common(n))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="accepted for symmetry; one run each anyway")
    ap.add_argument("--workloads", help="comma-separated names (default: all)")
    ap.add_argument("--top", type=int, default=5, help="missed functions to list per workload")
    args = ap.parse_args()
    mods = workloads.load(args.workloads.split(",") if args.workloads else None)
    if ch is None:
        print(common.no_package_note())
    else:
        try:
            SEPARATE.update(probe_construction())
        except Exception:
            common.report_failure("probing class construction")
        print(f"prehook sees these as calls of their own after the class call (counted once): "
              f"{sorted(SEPARATE) or 'none'}")
    print(f"Python {sys.version.split()[0]}\n")

    rows: list[list[object]] = []
    details: list[tuple[str, Counter[Key], Counter[Key]]] = []
    hits: Counter[bool] = Counter()  # per operators setting, over workloads that ran
    truths: Counter[bool] = Counter()
    for mod in mods:
        mod.run()  # warm caches and lazy imports before counting
        truth = ground_truth(mod.run)
        row: list[object] = [mod.NAME, f"{sum(truth.values()):,}"]
        for ops in (True, False):
            if ch is None:
                row += ["-", "-"]
                continue
            try:
                seen = observed(mod.run, ops)
            except Exception as exc:
                common.report_failure(f"{mod.NAME}: overdub (operators={ops})")
                row += ["FAIL", type(exc).__name__]
                continue
            hit = matched(truth, seen)
            hits[ops] += hit
            truths[ops] += sum(truth.values())
            row += [f"{sum(seen.values()):,}", f"{hit / max(1, sum(truth.values())):.4f}"]
            if ops:
                details.append((mod.NAME, truth - seen, seen - truth))
        rows.append(row)
    if truths[True] or truths[False]:
        rows.append(["all (ran)", f"{max(truths.values()):,}", "",
                     f"{hits[True] / max(truths[True], 1):.4f}", "", f"{hits[False] / max(truths[False], 1):.4f}"])
    print(harness.table(["workload", "truth", "seen", "reach", "seen ops-off", "reach ops-off"], rows))
    print("\ntruth = new Python frames in a plain run; seen = Python bodies the prehook saw"
          "\n(operators as calls, the default; 'ops-off': Context.operators = False);"
          "\nreach = sum(min(seen, truth) per function) / truth. Target: reach >= 0.99.")
    for name, missed, extra in details:
        if missed:
            print(f"\n{name}: top missed (truth - seen, operators on)")
            print("\n".join(top(missed, args.top)))
        if extra:
            print(f"{name}: seen more often than called (seen - truth)")
            print("\n".join(top(extra, min(3, args.top))))


if __name__ == "__main__":
    main()
