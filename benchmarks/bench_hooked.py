"""What a *hooked* call site can cost in pure Python: models of the hot-path redesign.

``bench_hotpath.py`` takes the null context's call site apart; this script does the same
for a context with a counting ``prehook`` -- the case the redesign (issue 10) must bring
down to a counting ``sys.monitoring`` CALL callback.  Recursive ``fib(18)`` is nothing but
calls.  Each model is fib written by hand the way a rewritten call site would run it,
with the same prehook (a method that counts) and the same twin:

- ``closure``: today's shape in miniature: ``resolve(f)`` returns a closure made for the
  call, the user's frame calls it, the closure pops the context (a ``ContextVar`` set and
  reset), calls the prehook, then the twin -- a frame of ours under every callee;
- ``enter+pop``: the site calls ``enter(f, *args)``, which pops the context, calls the
  prehook and returns the twin; the user's frame then calls the twin itself -- no frame of
  ours under the callee;
- ``enter+flag``: the same, popping the context by setting a thread-local attribute
  instead (what a stack that is not a ``ContextVar`` during hooks would pay);
- ``enter``: the same without popping the context around the hook;
- ``inline``: the site calls the prehook and then the twin itself, with no function of
  ours at all (the floor of any design that runs the hook as a Python call: what
  per-plan bytecode, or a C trampoline, would cost);
- ``overdub``: ``ch.overdub(Count(), fib, 18)``, the real thing today;
- ``monitoring``: a counting ``sys.monitoring`` CALL callback (3.12+).

    PYTHONPATH=.:benchmarks python benchmarks/bench_hooked.py [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import threading
from contextvars import ContextVar
from typing import Any, Callable

import cassette_hook as ch
import common
import harness

N = 18


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class _Ctx:
    def __init__(self) -> None:
        self.count = 0

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.count += 1


class _Entry:
    __slots__ = ("ctx", "below", "prehook")

    def __init__(self, ctx: _Ctx) -> None:
        self.ctx, self.below, self.prehook = ctx, None, type(ctx).prehook


_active: ContextVar[Any] = ContextVar("model", default=None)

SITES = {
    "closure": "resolve(fib)({arg})",
    "enter+pop": "enter_pop(fib, {arg})({arg})",
    "enter+flag": "enter_flag(fib, {arg})({arg})",
    "enter": "enter(fib, {arg})({arg})",
    "inline": "prehook(ctx, fib, {arg}); twin({arg})",
}
HELPERS = """
def resolve(f):
    entry = get()
    def overdubbed(*args, **kwargs):
        token = set_(entry.below)
        try:
            entry.prehook(entry.ctx, f, *args, **kwargs)
        finally:
            reset(token)
        return twin(*args, **kwargs)
    return overdubbed

def enter_pop(f, *args):
    entry = get()
    token = set_(entry.below)
    try:
        entry.prehook(entry.ctx, f, *args)
    finally:
        reset(token)
    return twin

def enter_flag(f, *args):
    entry = get()
    state.popped = entry.below
    try:
        entry.prehook(entry.ctx, f, *args)
    finally:
        state.popped = entry
    return twin

def enter(f, *args):
    entry = get()
    entry.prehook(entry.ctx, f, *args)
    return twin
"""


def model(site: str, ctx: _Ctx) -> Callable[[int], int]:
    """fib whose two call sites run ``site``; the inline model's sites are statements."""
    namespace: dict[str, Any] = {"get": _active.get, "set_": _active.set, "reset": _active.reset, "fib": fib,
                                 "prehook": _Ctx.prehook, "ctx": ctx, "state": threading.local()}
    if ";" in site:  # the hook as a statement of its own, then the call
        first, second = (site.format(arg=a) for a in ("n - 1", "n - 2"))
        body = (f"    if n < 2:\n        return n\n    {first.split('; ')[0]}\n    a = {first.split('; ')[1]}\n"
                f"    {second.split('; ')[0]}\n    return a + {second.split('; ')[1]}\n")
    else:
        body = f"    return n if n < 2 else {site.format(arg='n - 1')} + {site.format(arg='n - 2')}\n"
    exec(HELPERS + "def twin(n):\n" + body, namespace)
    return namespace["twin"]  # type: ignore[no-any-return]


class Count(ch.Context):
    operators = False

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.metadata[0] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21)
    rounds = parser.parse_args().rounds
    ctx = _Ctx()
    token = _active.set(_Entry(ctx))
    try:
        variants: dict[str, Callable[[], object]] = {"plain": lambda: fib(N)}
        for name, site in SITES.items():
            variants[name] = (lambda twin: lambda: twin(N))(model(site, ctx))
        variants["overdub"] = lambda: ch.overdub(Count([0]), fib, N)
        if hasattr(sys, "monitoring"):
            variants["monitoring"] = lambda: common.with_monitoring(lambda: fib(N))
        result = harness.measure("fib", variants, rounds=rounds)
    finally:
        _active.reset(token)
    calls = fib_calls(N) - 1
    plain = result.median("plain")
    print(f"Python {sys.version.split()[0]}, fib({N}): {calls} hooked calls, {rounds} interleaved rounds")
    for name in variants:
        extra = (result.median(name) - plain) / calls
        print(f"  {name:<11} {result.median(name) / 1e6:8.2f} ms   {result.ratio(name):5.2f} x plain"
              f"   {extra:6.0f} ns per call")


def fib_calls(n: int) -> int:
    return 1 if n < 2 else 1 + fib_calls(n - 1) + fib_calls(n - 2)


if __name__ == "__main__":
    main()
