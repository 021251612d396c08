"""What giving switched functions their compiled code back while idle costs (``lazy_mode``).

Imports a package through the lazy hook, activates a context once (which switches its
functions), and then times:

    pass        the pass that switches the functions again as an activation starts
                (``lazy_mode._pass_seconds``): over the functions an activation switched where
                a function watcher is (3.12+ with the C accelerators; giving the compiled
                code back costs about the same), over the heap elsewhere (to find the
                closures made meanwhile too); median of 21 activations that restore
    restoring   ``with Null(): pass`` when every end of activity restores and every start
                switches again (``lazy_mode.RESTORE_AFTER = 0``)
    default     the same loop with the default policy, which stops restoring once the
                idle spells between activations are short
    watching    what watching the process go busy and idle adds to each activation under
                that policy: the loop with and without ``lazy_mode``'s watchers, interleaved

    PYTHONPATH=.:benchmarks python benchmarks/bench_restore.py [--package networkx] [--loops N]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import statistics
import sys
import time

import common
from common import ch


def activations(loops: int) -> float:
    """Seconds per ``with Null(): pass``, over ``loops`` of them."""
    null = common.Null()
    start = time.perf_counter()
    for _ in range(loops):
        with null:
            pass
    return (time.perf_counter() - start) / loops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", default="networkx", help="an installed package to instrument (default networkx)")
    ap.add_argument("--loops", type=int, default=1000, help="activations timed per policy (default 1000)")
    args = ap.parse_args()
    if ch is None:
        raise SystemExit(common.no_package_note())
    from cassette_hook.importhook import lazy_mode

    ch.install(include=[args.package])
    importlib.import_module(args.package)
    lazy_mode.RESTORE_AFTER = 0.0
    with common.Null():
        pass
    gc.collect()
    functions = len(lazy_mode._switched_by_activations)
    passes = []
    for _ in range(21):
        with common.Null():
            passes.append(lazy_mode._pass_seconds)  # (the pass made as this activation started)
    restoring = activations(args.loops)
    lazy_mode.RESTORE_AFTER = 100.0
    default = activations(args.loops)
    from cassette_hook.importhook import switch

    watchers = list(switch._activity_watchers)
    watched, unwatched = [], []
    for _ in range(11):
        switch._activity_watchers[:] = watchers
        watched.append(activations(args.loops))
        switch._activity_watchers[:] = []
        unwatched.append(activations(args.loops))
    switch._activity_watchers[:] = watchers
    one_pass = statistics.median(passes)
    way = "over those functions" if lazy_mode.watcher() is not None else "over the heap (no function watcher)"
    print(f"Python {sys.version.split()[0]}, {args.package}: {functions:,} functions switched by an activation; "
          f"the pass {way}")
    print(f"pass: {one_pass * 1e3:.2f} ms ({one_pass / functions * 1e9:.0f} ns a function)")
    print(f"with Null(): pass  restoring every time: {restoring * 1e6:,.1f} us; "
          f"default policy: {default * 1e6:,.1f} us")
    extra = statistics.median(watched) - statistics.median(unwatched)
    print(f"watching busy and idle adds {extra * 1e9:,.0f} ns to an activation "
          f"({statistics.median(watched) / statistics.median(unwatched):.3f}x)")


if __name__ == "__main__":
    main()
