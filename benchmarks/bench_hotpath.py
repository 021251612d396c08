"""Where the time of an overdubbed call goes: the hot path against its floor.

Recursive ``fib(18)`` is nothing but calls, so it shows the per-call cost alone:

- ``plain``: the function as compiled;
- ``floor``: the same function rewritten by hand so that each call site first calls a
  Python function that returns its argument, ``passthrough(fib)(n - 1)`` -- the least any
  design pays that runs Python code at every call site;
- ``model``: ``passthrough`` replaced by the essence of ``callsite.resolve`` (read the
  context variable, look the twin up by ``id``, check it is current);
- ``overdub``: ``ch.overdub(Null(), fib, 18)``, the real thing;
- ``monitoring``: a counting ``sys.monitoring`` CALL callback (3.12+), for scale.

    PYTHONPATH=. python benchmarks/bench_hotpath.py [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
from contextvars import ContextVar
from types import FunctionType
from typing import Any, Callable

import cassette_hook as ch
import harness

N = 18


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def passthrough(f: Any) -> Any:
    return f


def floor_fib(n: int) -> int:
    return n if n < 2 else passthrough(floor_fib)(n - 1) + passthrough(floor_fib)(n - 2)


_active: ContextVar[Any] = ContextVar("model", default=None)
_twins: dict[int, tuple[FunctionType, Any, Any, Any]] = {}


def model_resolve(f: Any) -> Any:
    entry = _active.get()
    if entry is None:
        return f
    found = _twins.get(id(f))
    if found is not None:
        twin, code, defaults, kwdefaults = found
        if f.__code__ is code and f.__defaults__ is defaults and f.__kwdefaults__ is kwdefaults:
            return twin
    return f


def model_fib(n: int) -> int:
    return n if n < 2 else model_resolve(fib)(n - 1) + model_resolve(fib)(n - 2)


class Null(ch.Context):
    pass


def monitored(run: Callable[[], object]) -> Callable[[], object] | None:
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return None
    tool = monitoring.PROFILER_ID
    count = [0]

    def on_call(*args: object) -> None:
        count[0] += 1

    def variant() -> object:
        monitoring.use_tool_id(tool, "bench_hotpath")
        monitoring.register_callback(tool, monitoring.events.CALL, on_call)
        monitoring.set_events(tool, monitoring.events.CALL)
        try:
            return run()
        finally:
            monitoring.set_events(tool, 0)
            monitoring.register_callback(tool, monitoring.events.CALL, None)
            monitoring.free_tool_id(tool)

    return variant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21)
    rounds = parser.parse_args().rounds
    _twins[id(fib)] = (model_fib, fib.__code__, fib.__defaults__, fib.__kwdefaults__)
    token = _active.set(object())
    try:
        variants: dict[str, Callable[[], object]] = {
            "plain": lambda: fib(N),
            "floor": lambda: floor_fib(N),
            "model": lambda: model_fib(N),
            "overdub": lambda: ch.overdub(Null(), fib, N),
        }
        watched = monitored(lambda: fib(N))
        if watched is not None:
            variants["monitoring"] = watched
        result = harness.measure("fib", variants, rounds=rounds)
    finally:
        _active.reset(token)
    print(f"Python {sys.version.split()[0]}, fib({N}), {rounds} interleaved rounds")
    for name in variants:
        print(f"  {name:<11} {result.median(name) / 1e6:8.2f} ms   {result.ratio(name):5.2f} x plain")


if __name__ == "__main__":
    main()
