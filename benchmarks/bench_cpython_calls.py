"""What CPython itself charges per call for the calls cassette_hook's hot path makes and
plain code does not, with no cassette_hook at all: the evidence for what remains of
bench_tools' rows on a newer CPython once cassette_hook's own C does the same work
(docs/performance.md, "3.14 and 3.15 against 3.13").

A hooked call site is C (the accelerator) calling Python: the counting prehook is a
Python method ``prehook(self, f, *args, **kwargs)`` called from C at every call, and the
``recurse`` overload a Python method ``overdub(self, f, /, *args, **kwargs)`` called from
C, which calls C (``ch.recurse``), which calls the callee, Python again, from C.  Plain
code makes none of these: its Python-to-Python calls are inlined by the interpreter.  Each
shape below is timed here with C built into CPython as the caller (``map`` drives the
calls, ``collections.deque(..., maxlen=0)`` consumes them) and ``operator.call`` standing
for ``ch.recurse``; a C callee that does next to nothing, driven the same way, is the
baseline that is subtracted, so that what is left is the Python side of each shape:

- ``f from Python``: ``def f(x): return x`` called by a Python loop, as plain code calls
  (less the loop alone);
- ``f from C``: the same ``f`` called from C (less ``operator.index`` called from C):
  entering a Python frame from C;
- ``prehook from C``: the counting prehook's shape (argument packing, the count);
- ``overdub from C``: the ``recurse`` overload's shape, Python entered from C twice
  (``f`` included).

All variants run interleaved in the same rounds (harness.py); the report is ns per call,
the median over rounds, and the interquartile range over rounds relative to the median.
Times from different interpreters are compared the way bench_tools' ns per call are:
run the versions one after the other, more than once, with ``--cpu`` on a loaded machine.

    python benchmarks/bench_cpython_calls.py [--rounds N] [--cpu] [--json out.json]
    python benchmarks/bench_cpython_calls.py --only overdub-c --loops K   # for callgrind
"""

from __future__ import annotations

import argparse
import collections
import json
import operator
import statistics
import sys
from typing import Any, Callable

import harness

CALLS = 20_000
"""Calls per timed thunk."""

consume = collections.deque(maxlen=0).extend
"""Drains an iterator in C (a Python loop would make the caller Python)."""


def f(x: Any) -> Any:
    return x


class Ctx:
    """The two shapes of bench_tools' rows, as a context's methods are written there."""

    def __init__(self) -> None:
        self.metadata = [0]

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.metadata[0] += 1

    def overdub(self, f: Any, /, *args: Any, **kwargs: Any) -> Any:
        return call(f, *args, **kwargs)


def _call(f: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    return f(*args, **kwargs)


call: Callable[..., Any] = getattr(operator, "call", _call)
"""``ch.recurse``'s stand-in: C calling back into Python (operator.call is 3.11+; 3.10
gets a Python one, which makes its ``overdub from C`` row not comparable)."""

xs = list(range(CALLS))
fs = [f] * CALLS
ctxs = [Ctx()] * CALLS
empties: list[dict[Any, Any]] = [{}] * CALLS


def loop() -> None:
    for _x in xs:
        pass


def f_from_python() -> None:
    for x in xs:
        f(x)


def c1() -> None:
    consume(map(operator.index, xs))


def f_from_c() -> None:
    consume(map(f, xs))


def c3() -> None:
    consume(map(dict.get, empties, fs, xs))


def prehook_from_c() -> None:
    consume(map(Ctx.prehook, ctxs, fs, xs))


def overdub_from_c() -> None:
    consume(map(Ctx.overdub, ctxs, fs, xs))


VARIANTS: dict[str, Callable[[], None]] = {
    "loop": loop, "f-python": f_from_python,
    "c1": c1, "f-c": f_from_c,
    "c3": c3, "prehook-c": prehook_from_c, "overdub-c": overdub_from_c,
}
"""Every thunk makes CALLS calls of its kind."""

ROWS: list[tuple[str, str, str]] = [
    ("f from Python (less the loop)", "f-python", "loop"),
    ("f from C (less operator.index from C)", "f-c", "c1"),
    ("prehook from C (less dict.get from C)", "prehook-c", "c3"),
    ("overdub from C, f from C (less dict.get from C)", "overdub-c", "c3"),
]
"""(label, variant, its baseline): what the variant adds to its baseline's call, per call."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--cpu", action="store_true", help="time by the process's CPU time (a shared machine)")
    ap.add_argument("--json", help="write the per-round samples (ns per call) here")
    ap.add_argument("--only", choices=list(VARIANTS), help="run one variant --loops times, untimed (for callgrind)")
    ap.add_argument("--loops", type=int, default=1)
    args = ap.parse_args()
    if args.only:
        for _ in range(args.loops):
            VARIANTS[args.only]()
        return
    if args.cpu:
        harness.use_cpu_time()
    res = harness.measure("cpython calls", VARIANTS, rounds=args.rounds)
    per_call = {v: [s / CALLS for s in res.samples[v]] for v in VARIANTS}
    rows = []
    for label, variant, base in ROWS:
        diffs = [a - b for a, b in zip(per_call[variant], per_call[base])]  # paired per round
        q1, _, q3 = statistics.quantiles(diffs, n=4)
        median = statistics.median(diffs)
        rows.append([label, f"{median:.1f}", f"{(q3 - q1) / median:.2f}"])
    print(f"Python {sys.version.split()[0]}, {args.rounds} rounds, {'CPU' if args.cpu else 'wall'} time, ns per call")
    print(harness.table(["shape", "ns/call", "IQR/med"], rows))
    print(harness.table(["variant", "ns/call", "IQR/med"],
                        [[v, f"{res.median(v) / CALLS:.1f}", f"{res.spread(v):.2f}"] for v in VARIANTS]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"python": sys.version.split()[0], "cpu": args.cpu, "calls": CALLS,
                       "samples_ns_per_call": per_call}, out, indent=1)


if __name__ == "__main__":
    main()
