"""Where the time of an overdubbed call goes: the hot path, piece by piece.

Recursive ``fib(18)`` is nothing but calls, so it shows the per-call cost alone.  Each
``+ ...`` variant is fib rewritten by hand so that every call site first calls a small
Python function ``r(fib)`` that returns the recursive twin, doing a little more each time:

- ``+ call``: nothing but the call (the least any design pays that runs Python code at
  every call site);
- ``+ contextvar``: reads the active context (``ContextVar.get``);
- ``+ id lookup``: looks the twin up in a dict by ``id``;
- ``+ staleness``: checks the function's ``__code__``, ``__defaults__``, ``__kwdefaults__``;
- ``resolve model``: all of the above, as ``callsites.resolve``'s fast path does them;
- ``overdub``: ``ch.overdub(Null(), fib, 18)``, the real thing;
- ``monitoring``: a counting ``sys.monitoring`` CALL callback (3.12+), for scale.

    PYTHONPATH=. python benchmarks/bench_hotpath.py [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
from contextvars import ContextVar
from typing import Any, Callable

import cassette_hook as ch
import common
import harness

N = 18


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


_active: ContextVar[Any] = ContextVar("model", default=None)
_twins: dict[int, Any] = {}
PIECES = {
    "+ call": "",
    "+ contextvar": "entry = active.get()",
    "+ id lookup": "found = twins.get(id(f))",
    "+ staleness": "code, defaults, kwdefaults = f.__code__, f.__defaults__, f.__kwdefaults__",
}
PIECES["resolve model"] = "; ".join(body for body in PIECES.values() if body)


def with_resolver(body: str) -> Callable[[int], int]:
    """fib whose call sites run ``r(fib)`` first; ``r`` runs ``body`` and returns the twin."""
    namespace = {"active": _active, "twins": _twins, "fib": fib}
    exec(f"def r(f):\n    {body or 'pass'}\n    return twin\n"
         "def twin(n):\n    return n if n < 2 else r(fib)(n - 1) + r(fib)(n - 2)\n", namespace)
    return namespace["twin"]


class Null(ch.Context):
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21)
    rounds = parser.parse_args().rounds
    _twins[id(fib)] = (fib, fib.__code__, fib.__defaults__, fib.__kwdefaults__)
    token = _active.set(object())
    try:
        variants: dict[str, Callable[[], object]] = {"plain": lambda: fib(N)}
        for name, body in PIECES.items():
            variants[name] = (lambda twin: lambda: twin(N))(with_resolver(body))
        variants["overdub"] = lambda: ch.overdub(Null(), fib, N)
        if hasattr(sys, "monitoring"):
            variants["monitoring"] = lambda: common.with_monitoring(lambda: fib(N))
        result = harness.measure("fib", variants, rounds=rounds)
    finally:
        _active.reset(token)
    print(f"Python {sys.version.split()[0]}, fib({N}), {rounds} interleaved rounds")
    for name in variants:
        print(f"  {name:<14} {result.median(name) / 1e6:8.2f} ms   {result.ratio(name):5.2f} x plain")


if __name__ == "__main__":
    main()
