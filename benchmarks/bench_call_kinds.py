"""What one call of each kind costs a context that overloads nothing, and what a method
site saves a method call.

Each kind is a loop of calls, ``for i in range(n): a.m(i)`` and the like, timed plain and
as a twin under a context that overloads nothing, in interleaved rounds:

- ``plain``: the loop as compiled;
- ``null``: its twin as cassette_hook makes it (on the C path, 3.11+: method loads
  become method sites, ``_speedups.MethodSite``);
- ``bound``: its twin rewritten without method sites, as before them (and as on the
  pure-Python path): each method load a plain attribute load of a bound method, its call
  resolved.

The report is the extra time per call over plain, in ns, for each row and per call a
context sees in it (``calls seen``, counted with a prehook: ``Based()`` is three).  On 3.10, and on the
pure-Python path, the two twins are the same.

    .tox/py312/bin/python benchmarks/bench_call_kinds.py [--rounds N] [--cpu] [--only TEXT ...]

with an interpreter that has the package installed with its accelerators (a tox env's),
and without ``PYTHONPATH=.``: the checkout's sources have no built ``_speedups``, and the
report's first line would say ``pure-Python path``.
"""

from __future__ import annotations

import argparse
import array
import functools
import re
import sys
import types
from typing import Any, Callable, NamedTuple

import cassette_hook as ch
import harness
from cassette_hook.runtime import callsites
from cassette_hook import _native, rewrite

N = 20_000


class Null(ch.Context):
    pass


class _Object:
    def method(self, x: int) -> int:
        return x

    @classmethod
    def klass(cls, x: int) -> int:
        return x


def function(x: int) -> int:
    return x


class _Callable:
    def __call__(self, x: int) -> int:
        return x


class Bare:
    """A class with no ``__init__`` of its own: its construction is one call a context sees."""


class Initialized:
    """A class whose ``__init__`` does nothing: two calls, the class's and ``__init__``'s."""

    def __init__(self) -> None:
        pass


class Based:
    """Three calls: the class's, ``__init__``'s and ``object.__init__``'s (``super()`` is
    ``LOAD_SUPER_ATTR`` on 3.12+, no call)."""

    def __init__(self) -> None:
        super().__init__()


class Pair(NamedTuple):
    left: int
    right: int


callable_obj = _Callable()
items = [2, 1]
pattern = re.compile(r"\d+")  # pattern.match: a builtin_method (METH_METHOD: it takes its class)
numbers = array.array("i")


def closure_made(x: int) -> int:
    """A function that makes a closure and calls it: a new function object per call."""
    def inner() -> int:
        return x

    return inner()


@functools.cache
def cached(x: int) -> int:
    """A function behind ``functools.lru_cache``: a C object called, whose type's slot runs."""
    return x


class _Cached:
    @functools.cache  # noqa: B019 -- one module-level instance
    def method(self, x: int) -> int:
        return x


cached_obj = _Cached()  # cached_obj.method: a bound method whose __func__ is the wrapper


module = types.ModuleType("module")
module.function = function  # type: ignore[attr-defined]


def loop_of(call: str) -> Callable[..., None]:
    """``for i in range(n): <call>``, with ``obj``, ``table`` and the module's names in scope."""
    namespace: dict[str, Any] = dict(globals())
    exec(f"def loop(obj, table, n):\n    for i in range(n):\n        {call}\n", namespace)
    return namespace["loop"]  # type: ignore[no-any-return]


KINDS = ["obj.method(i)", "table.get(i)", "obj.klass(i)", "module.function(i)", "function(i)",
         # callees resolved past the table of twins: a class C constructs, a builtin that
         # takes callbacks, a callable instance, object.__init__ (a C slot) from super(), a
         # star call, a builtin method that takes callbacks, a class with a Python __new__
         "dict(a=i)", "min(i, 1)", "callable_obj(i)", "Bare()", "Initialized()", "Based()", "function(*(i,))",
         "items.sort()", "Pair(i, 1)",
         # a builtin_method, bound; a closure made per call (by a function: the call
         # costs include closure_made's own); a lambda made per call
         'pattern.match("abc123", 3)', "numbers.extend(())", "closure_made(i)", "(lambda: i)()",
         # functools.lru_cache's wrapper, called; an lru_cache on a method
         "cached(i)", "cached_obj.method(i)",
         # builtins handed what they iterate or call back (prepared at each call: a list
         # iterated, two lists and a builtin callback)
         "sorted(items)", "map(divmod, items, items)"]


def twin(loop: Callable[..., None], hooks: rewrite.Hooks) -> Callable[..., None]:
    code = rewrite.rewrite_code(loop.__code__, hooks, operators=False)
    return types.FunctionType(code, loop.__globals__, loop.__name__)


class _Counting(ch.Context):
    def __init__(self) -> None:
        self.calls = 0

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.calls += 1


def calls_seen(loop: Callable[..., None]) -> int:
    """How many calls a context sees in one pass of ``loop``'s body: a row may be more
    than one call (``Based()`` is three), and its cost is then theirs together."""
    seen = []
    for n in (1, 2):
        counting = _Counting()
        ch.overdub(counting, loop, _Object(), {}, n)
        seen.append(counting.calls)
    return seen[1] - seen[0]


def under_null(run: Callable[..., None], *args: Any) -> Callable[[], None]:
    def measured() -> None:
        with Null():
            run(*args)

    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cpu", action="store_true", help="time by the process's CPU time (a shared machine)")
    parser.add_argument("--only", action="append", metavar="TEXT",
                        help="only the calls whose text contains TEXT (repeatable)")
    options = parser.parse_args()
    rounds = options.rounds
    if options.cpu:
        harness.use_cpu_time()
    without_sites = rewrite.Hooks(**{name: getattr(callsites.HOOKS, name) for name in rewrite.Hooks.__slots__
                                     if name != "method_site"})
    args = (_Object(), {}, N)
    print(f"Python {sys.version.split()[0]}, {N:,} calls a sample, {rounds} interleaved rounds, "
          f"{'C' if _native.runtime.name == 'C' else 'pure-Python'} path")
    rows = []
    for kind in KINDS:
        if options.only and not any(text in kind for text in options.only):
            continue
        loop = loop_of(kind)
        variants = {"plain": lambda loop=loop: loop(*args), "null": under_null(twin(loop, callsites.HOOKS), *args),
                    "bound": under_null(twin(loop, without_sites), *args)}
        result = harness.measure(kind, variants, rounds=rounds)
        plain, seen = result.median("plain"), calls_seen(loop)
        over = (result.median("null") - plain) / N
        rows.append([kind, str(seen), f"{plain / N:.0f}", f"{over:+.0f}", f"{over / seen:+.0f}",
                     f"{(result.median('bound') - plain) / N:+.0f}"])
    print(harness.table(["call", "calls seen", "plain ns", "null: ns over plain", "null: per call seen",
                         "bound: ns over plain"], rows))


if __name__ == "__main__":
    main()
