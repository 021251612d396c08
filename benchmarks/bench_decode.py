"""Decoding alone: every code object of a package's modules decoded by ``bytecode``
(``Family.decode_by_bytecode``, as the families decode without a decoder of their own:
``Bytecode.from_code``, on 3.14+ through ``BUILD_INTERPOLATION``'s fix) and by the
family's own decoder (``rewrite._decoder``, 3.12+), module by module, the two ways
alternating, in one process; CPU time.

    PYTHONPATH=. python benchmarks/bench_decode.py [--package networkx] [--rounds 3] [--loop]

Reported: each way's CPU time summed over the modules, per round, and their ratio.  The
two ways' results are compared in ``tests/test_decoding.py``, not here.  With ``--loop``
the two ways are the family's decoder with its loop in Python (``Decoder._items``) and in C
(``_decoding.items``, where the C accelerators are built: docs/performance.md, "The
decoder's loop in C"), compared in ``tests/test_decoding_in_c.py``.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import pathlib
import sys
import time
import warnings
from types import CodeType
from typing import Callable, Iterator


def _bodies(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _bodies(const)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", default="networkx", help="installed packages whose sources to decode, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loop", action="store_true", help="the decoder's Python loop against its C loop")
    args = ap.parse_args()

    from cassette_hook.rewrite._family import family

    decoder = getattr(family, "decoder", None)
    if decoder is None:
        raise SystemExit(f"no decoder of our own on {sys.version.split()[0]} with this bytecode release")
    modules: list[list[CodeType]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for package in args.package.split(","):
            root = pathlib.Path(importlib.util.find_spec(package).origin).parent  # type: ignore[arg-type, union-attr]
            for path in sorted(root.rglob("*.py")):
                try:
                    modules.append(list(_bodies(compile(path.read_text(encoding="utf-8"), str(path), "exec"))))
                except (SyntaxError, UnicodeDecodeError, ValueError):
                    pass

    def theirs(code: CodeType) -> object:
        try:
            return family.decode_by_bytecode(code)  # type: ignore[attr-defined]  # (3.11+ families)
        except Exception:  # noqa: BLE001  (a body bytecode cannot read: ours declines it too)
            return None

    ways: dict[str, Callable[[CodeType], object]] = {"bytecode": theirs, "ours": decoder.bytecode}
    if args.loop:
        if decoder._scan is None:
            raise SystemExit("the decoder's C loop is not built (or CASSETTE_HOOK_PURE_PYTHON is set)")
        python = copy.copy(decoder)
        python._scan = None
        ways = {"Python": python.bytecode, "C": decoder.bytecode}
    first, second = ways
    print(f"{args.package}: {len(modules)} modules, {sum(map(len, modules))} code objects, {sys.version.split()[0]}")
    for round_ in range(args.rounds):
        spent = dict.fromkeys(ways, 0.0)
        for index, bodies in enumerate(modules):
            for way in (list(ways) if (index + round_) % 2 == 0 else list(ways)[::-1]):
                decode = ways[way]
                start = time.process_time()
                for body in bodies:
                    decode(body)
                spent[way] += time.process_time() - start
        print(f"round {round_ + 1}: {first} {spent[first]:.3f} s, {second} {spent[second]:.3f} s CPU, "
              f"{second} / {first} {spent[second] / spent[first]:.3f}", flush=True)


if __name__ == "__main__":
    main()
