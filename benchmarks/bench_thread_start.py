"""What starting a thread costs when ``Thread.start`` runs as a primitive (the trace).

Under a plan that does not recurse into ``threading`` (the trace's ``libraries=no``),
``Thread.start`` called from the program's code is emulated
(``primitives._thread_start``): the thread is started from copies of ``threading``'s
``start``, ``_bootstrap`` and ``_bootstrap_inner`` that hand a subclass's own ``run`` over
as a call site (``runtime/thread_bootstrap.py``; docs/internals.md, "Callbacks from C").
This times ``start()`` + ``join()`` of a ``Thread`` subclass whose ``run`` returns at once,
under a whole-program context that overloads nothing:

- ``plain``: ``thread.start()`` as the program calls it with no context;
- ``as before``: the primitive's handler with the copies turned off (``Thread.start``
  itself: the thread runs ``run`` plain, unseen);
- ``copies``: the primitive's handler as it is (``run`` is a call, made through the hot
  path under the whole-program context).

Rounds rotate the order of the variants (``harness.measure``); ``--cpu`` times by the
process's CPU time (the new thread's included) rather than the wall clock.

    PYTHONPATH=.:benchmarks python benchmarks/bench_thread_start.py [--cpu] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

import harness

try:
    import cassette_hook as ch
    from cassette_hook import context_stack
    from cassette_hook.runtime import primitives, thread_bootstrap
except ImportError as exc:  # the package is not there yet
    sys.exit(f"cassette_hook not importable ({exc}): nothing to measure")


class WholeProgram(ch.Context):
    """Overloads nothing: the whole-program context the threads start under."""


class Quick(threading.Thread):
    def run(self) -> None:
        pass


def plain() -> None:
    thread = Quick()
    thread.start()
    thread.join()


def emulated() -> None:
    thread = Quick()
    primitives.call_primitive(threading.Thread.start, (thread,), {})
    thread.join()


def without_copies() -> None:
    seeing = thread_bootstrap.seeing_start
    thread_bootstrap.seeing_start = lambda thread, handed: None  # type: ignore[assignment]
    try:
        emulated()
    finally:
        thread_bootstrap.seeing_start = seeing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--cpu", action="store_true", help="time by the process's CPU time")
    options = parser.parse_args()
    if options.cpu:
        harness.use_cpu_time()
    context_stack.push_whole_program([WholeProgram()])
    variants: dict[str, Any] = {"plain": plain, "as before": without_copies, "copies": emulated}
    result = harness.measure("start + join", variants, rounds=options.rounds)
    clock = "CPU" if options.cpu else "wall"
    print(f"Python {sys.version.split()[0]}, {options.rounds} rounds, {clock} time")
    print(harness.table(["variant", "median us", "x plain", "IQR/med"], [
        [name, f"{result.median(name) / 1e3:.1f}", f"{result.ratio(name):.2f}", f"{result.spread(name):.3f}"]
        for name in variants]))
    print(f"copies / as before: {result.median('copies') / result.median('as before'):.3f}")


if __name__ == "__main__":
    main()
