"""What a profile's records cost the garbage collector: the tracked objects it adds per
node of its call tree, which every full collection walks.

A synthetic program of many distinct call paths (a layered graph of generated functions)
is profiled with ``ProfileContext`` once (the functions' twins are made then), then again;
the script counts the collector's tracked objects before and after the second profile
(``len(gc.get_objects())``), per node of its trees.

    PYTHONPATH=. python benchmarks/bench_profile_gc.py [--layers N] [--width N]
"""

from __future__ import annotations

import argparse
import gc
import io
from typing import Any, Callable

import cassette_hook as ch
from cassette_hook.contexts import _calltree


def make_program(layers: int, width: int) -> Callable[[], Any]:
    """``width`` functions per layer, each calling two of the next layer's: the number of
    distinct call paths grows with the layers, as in a large program's."""
    lines = []
    for layer in range(layers):
        for i in range(width):
            if layer == layers - 1:
                body = "return 1"
            else:
                body = f"return f{layer + 1}_{i}() + f{layer + 1}_{(i * 7 + 3) % width}()"
            lines.append(f"def f{layer}_{i}():\n    {body}\n")
    lines.append("def main():\n    return " + " + ".join(f"f0_{i}()" for i in range(width)) + "\n")
    namespace: dict[str, Any] = {}
    exec(compile("".join(lines), "<generated>", "exec"), namespace)
    return namespace["main"]  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=9)
    parser.add_argument("--width", type=int, default=8)
    options = parser.parse_args()
    program = make_program(options.layers, options.width)
    ch.ProfileContext(io.StringIO()).runcall(program)  # (first: the twins and plans, made once, are not records)
    gc.collect()
    before = len(gc.get_objects())
    profile = ch.ProfileContext(io.StringIO())
    profile.runcall(program)
    gc.collect()
    added = len(gc.get_objects()) - before
    nodes = sum(1 for tree in profile._trees_now() for entering, _ in _calltree.events(tree.root) if entering)
    print(f"recording: {'C' if _calltree._recording is not None else 'pure Python'}; "
          f"{nodes:,} nodes; tracked objects added: {added:,} ({added / nodes:.2f} per node)")


if __name__ == "__main__":
    main()
