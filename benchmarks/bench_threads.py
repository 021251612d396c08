"""What a whole-program context costs in another thread, against the main thread.

Whole-program contexts (``--context``, ``install_from_env``, the pytest plugin's) are the
*default* of the stack's ``ContextVar``: a thread that set no stack of its own reads them
with the one ``ContextVar.get`` that every call site does anyway.  This measures
recursive ``fib(N)``, instrumented in place (``ch.instrument``, as the import hook
would), under a whole-program context that overloads nothing (the hot path alone), in
the main thread and in a worker thread, each against the plain ``fib`` in the same
thread.  For reference, the same context set explicitly in the main thread by a ``with``
block, as the command line did before: a set variable is read from CPython's
per-variable cache, an unset one through the context's mapping.

Each sample is timed in the thread that runs it, by that thread's CPU time
(``time.thread_time_ns``: the machine's load and the hand-over to the worker are not
in it), in rounds that rotate the order of the variants (``harness.Result`` for the
statistics).

    PYTHONPATH=. python benchmarks/bench_threads.py [--rounds N] [-n N]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import harness

try:
    import cassette_hook as ch
    from cassette_hook import context_stack
except ImportError as exc:  # the package is not there yet
    sys.exit(f"cassette_hook not importable ({exc}): nothing to measure")

SOURCE = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"


def make_fib(instrumented: bool) -> Callable[[int], int]:
    namespace: dict[str, object] = {}
    exec(SOURCE, namespace)
    fib = namespace["fib"]
    return ch.instrument(fib) if instrumented else fib  # type: ignore[return-value]


class WholeProgram(ch.Context):
    """Overloads nothing: the whole-program context under test."""


class Explicit(ch.Context):
    """Overloads nothing: the same, pushed by a ``with`` block in the main thread."""


def timed(fn: Callable[[], object], loops: int) -> Callable[[], int]:
    """A sample: ``loops`` calls of ``fn``, in CPU ns of the thread that runs them, per call."""

    def sample() -> int:
        gc.collect()
        start = time.thread_time_ns()
        for _ in range(loops):
            fn()
        return (time.thread_time_ns() - start) // loops

    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("-n", type=int, default=18, help="fib(n) per call (default 18)")
    options = parser.parse_args()
    n = options.n
    plain, instrumented = make_fib(False), make_fib(True)
    worker = ThreadPoolExecutor(max_workers=1)  # started before the context: it sees it anyway
    worker.submit(int).result()
    context_stack.push_whole_program([WholeProgram()])
    explicit = Explicit()

    def with_block() -> object:
        with explicit:
            return instrumented(n)

    in_main = {"plain": lambda: plain(n), "whole-program": lambda: instrumented(n), "with block": with_block}
    in_worker = {"plain": lambda: plain(n), "whole-program": lambda: instrumented(n)}
    samples: dict[str, Callable[[], int]] = {}
    for name, fn in in_main.items():
        samples[f"{name}, main thread"] = timed(fn, 3)
    for name, fn in in_worker.items():
        samples[f"{name}, worker thread"] = (lambda sample: lambda: worker.submit(sample).result())(timed(fn, 3))
    result = harness.Result(f"fib({n})", "plain, main thread", {name: [] for name in samples})
    names = list(samples)
    try:
        assert worker.submit(context_stack.current_context).result() is context_stack.whole_program()[0]
        for name in names * 2:  # warm-up: twins are made at the first calls
            samples[name]()
        for r in range(options.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                result.samples[name].append(samples[name]())
    finally:
        worker.shutdown()
    same_thread = {name: "plain, worker thread" if "worker" in name else "plain, main thread" for name in names}
    print(f"Python {sys.version.split()[0]}, fib({n}), {options.rounds} rounds, CPU time of the running thread")
    print(harness.table(["variant", "median ms", "x plain (same thread)", "IQR/med"], [
        [name, f"{result.median(name) / 1e6:.3f}", f"{result.median(name) / result.median(same_thread[name]):.2f}",
         f"{result.spread(name):.3f}"] for name in names]))
    main_ratio = result.median("whole-program, main thread") / result.median("plain, main thread")
    worker_ratio = result.median("whole-program, worker thread") / result.median("plain, worker thread")
    print(f"whole-program overhead, worker thread / main thread: {worker_ratio / main_ratio:.3f}")


if __name__ == "__main__":
    main()
