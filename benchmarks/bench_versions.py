"""Calls to the functions cassette_hook makes or changes: as specializable as plain ones?

Specialized calls guard on a function's version, and CPython 3.13 gives one only in
``MAKE_FUNCTION``: a function whose ``__code__`` is assigned loses it, and one made by
``types.FunctionType`` never has one.  Both happen here: a lazy import hook switches a
function by assigning its code at the first activation, and ``overdub``'s twins are made
by ``FunctionType``.  The C accelerators give them the version ``MAKE_FUNCTION`` would
(``_speedups.set_code``, ``_speedups.version_like``).  Pairs of copies of ``fib`` (all
calls), timed interleaved:

    switched    idle: ``chb_given`` and ``chb_taken`` imported light and switched by one
                activation, the second then assigned its code again plainly (the
                pure-Python path's way)
    twins       ``ch.overdub(Null(), fib, 20)`` on two plain copies, ``chb_twin_given``'s
                twins versioned, ``chb_twin_taken``'s made without

and the specialized forms of the calls in each are printed.  (3.11 and 3.12 give a
function a new version when a call to it next specializes: there the ratios are 1.)

    PYTHONPATH=.:benchmarks python benchmarks/bench_versions.py [--rounds N]
"""

from __future__ import annotations

import argparse
import dis
import importlib
import sys
import tempfile
from pathlib import Path
from types import FunctionType

import harness

import cassette_hook as ch

FIB = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"


class Null(ch.Context):
    pass


def calls(function: FunctionType) -> str:
    return ", ".join(sorted({i.opname for i in dis.get_instructions(function, adaptive=True)
                             if i.opname.startswith("CALL")}))


def compare(label: str, given: harness.Thunk, taken: harness.Thunk, rounds: int) -> None:
    res = harness.measure(label, {"given": given, "taken": taken}, rounds=rounds, warmup=3,
                          min_sample_ns=5_000_000)
    print(f"{label}: without a version / with = {res.median('taken') / res.median('given'):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cassette_hook_bench_versions_"))
    for name in ("chb_given", "chb_taken", "chb_twin_given", "chb_twin_taken"):
        (root / f"{name}.py").write_text(FIB)
    sys.path.insert(0, str(root))
    ch.install(include=["chb_given", "chb_taken"])  # lazy, the default
    from cassette_hook.importhook import lazy_mode

    lazy_mode.RESTORE_AFTER = None  # (idle, the functions keep the switched code: what is timed here)
    given, taken = (importlib.import_module(n).fib for n in ("chb_given", "chb_taken"))
    with Null():  # the first activation switches both
        pass
    taken.__code__ = taken.__code__  # what the activation does without _speedups.set_code
    print(f"Python {sys.version.split()[0]}")
    compare("switched, idle", lambda: given(20), lambda: taken(20), args.rounds)
    print(f"  calls in fib: given {calls(given)}; taken {calls(taken)}")

    from cassette_hook.runtime import callsites, plan

    given, taken = (importlib.import_module(n).fib for n in ("chb_twin_given", "chb_twin_taken"))
    version_like = plan._version_like
    if version_like is not None:  # chb_twin_taken's twins made as the pure-Python path makes them
        plan._version_like = lambda twin, func: func.__module__ == "chb_twin_given" and version_like(twin, func)
    ctx = Null()
    compare("twins, overdub(Null())", lambda: ch.overdub(ctx, given, 20), lambda: ch.overdub(ctx, taken, 20),
            args.rounds)
    with ctx:
        twins = callsites.resolve(given), callsites.resolve(taken)
    print(f"  calls in the twins: given {calls(twins[0])}; taken {calls(twins[1])}")


if __name__ == "__main__":
    main()
