"""What a ``with ctx:`` block costs with the exit an interrupt cannot cut short.

On the pure-Python path ``Context.__exit__`` is a descriptor whose binding, as the block
is entered, makes a generator, runs it to its ``yield`` and hands the ``with`` statement
a callable of C parts that resumes it (docs/internals.md, "Interrupts"); on the C path it
is C (``_speedups.exit_method``).  This times an empty ``with`` block of a context that
overloads nothing, entered and left, interleaved:

- ``python exit``: a subclass whose ``__exit__`` is a plain Python method calling
  ``pop`` (the pure path's ``__exit__`` before, which an interrupt at its first line
  left on the stack);
- ``context's exit``: ``Context.__exit__`` as it is on the path the run takes, which calls
  ``context_stack.pop_at_exit`` (``pop``, then a tagging context's end of its extent);
- ``exit calling pop``: the same, calling ``pop`` itself (as before ``pop_at_exit`` took
  over the end of a tagging context's extent from ``_TaggingContext.__exit__``).

Run it on both paths (``CASSETTE_HOOK_PURE_PYTHON=1`` for the pure one); ``--cpu`` times
by the process's CPU time rather than the wall clock.

    PYTHONPATH=.:benchmarks python benchmarks/bench_with_exit.py [--cpu] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import harness

try:
    import cassette_hook as ch
    from cassette_hook import _native, context_stack
except ImportError as exc:  # the package is not there yet
    sys.exit(f"cassette_hook not importable ({exc}): nothing to measure")


class Exiting(ch.Context):
    """Overloads nothing; ``Context.__exit__``."""


class PythonExit(ch.Context):
    """Overloads nothing; a plain Python ``__exit__``."""

    def __exit__(self, *exc_info: object) -> None:
        context_stack.pop(self)


def blocks(ctx: ch.Context) -> Any:
    def run() -> None:
        for _ in range(100):
            with ctx:
                pass
    return run


def calling_pop(run: Any) -> Any:
    """``run`` with the exit calling ``pop`` rather than ``pop_at_exit``: on the C path
    what ``Context.__exit__`` calls is set by ``exit_method``; on the pure path the exit's
    generator reads ``pop_at_exit`` from the module."""
    at_exit = context_stack.pop_at_exit

    def with_pop() -> None:
        _native.runtime.exit_method(ch.Context, context_stack.pop)
        context_stack.pop_at_exit = context_stack.pop
        try:
            run()
        finally:
            _native.runtime.exit_method(ch.Context, at_exit)
            context_stack.pop_at_exit = at_exit
    return with_pop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--cpu", action="store_true", help="time by the process's CPU time")
    options = parser.parse_args()
    if options.cpu:
        harness.use_cpu_time()
    variants = {"python exit": blocks(PythonExit()), "context's exit": blocks(Exiting()),
                "exit calling pop": calling_pop(blocks(Exiting()))}
    result = harness.measure("100 with blocks", variants, rounds=options.rounds)
    clock = "CPU" if options.cpu else "wall"
    print(f"Python {sys.version.split()[0]}, {_native.runtime.name} path, {options.rounds} rounds, {clock} time")
    print(harness.table(["variant", "us per block", "x python exit", "IQR/med"], [
        [name, f"{result.median(name) / 100 / 1e3:.2f}", f"{result.ratio(name):.2f}", f"{result.spread(name):.3f}"]
        for name in variants]))


if __name__ == "__main__":
    main()
