"""The cost of a cold rewrite alone: switched code (``importhook.dual_code.switched``, what an
import under a context makes of each module it compiles) made of a package's sources, by
two checkouts of cassette_hook in turn, to compare a change to the rewriter with what it
changed.

Each round runs one fresh interpreter per checkout (``PYTHONPATH=TREE``), in turn, the
order alternating round by round (A B, B A, ...). A child compiles every module of the
packages (untimed), then switches them all twice and reports the CPU time of the faster
pass. Reported: each checkout's median, and the median over rounds of B's time divided by
A's in the same round. A checkout needs its C accelerators built in place (``python
setup.py build_ext --inplace``): without them switched code is made without method sites.

    python benchmarks/bench_switch.py --tree A_DIR --tree B_DIR [--package networkx] [--rounds 6]

On a machine shared with other jobs, one child's CPU time moves by 10-15% with the load
(two children of one checkout, run in turn, differed by 5-10%). ``--lines`` compares
within one process instead, module by module in alternating order: the switched code made
as ``rewrite._rewriter.assemble`` makes it (the family writes the line table) against the
same with ``bytecode``'s own ``to_code``, which encodes the line table itself (the way
before the family wrote it, less its second walk repairing columns past 127: so the
saving is if anything understated).

    PYTHONPATH=. python benchmarks/bench_switch.py --lines [--package networkx] [--rounds 1]

``--plain-half`` compares likewise the joined bodies' plain half copied as compiled
(``_assembler.Verbatim``, 3.12 and 3.13) against the same decoded and assembled again (the
way before), and counts the joined bodies the assembler declined to copy.

    PYTHONPATH=. python benchmarks/bench_switch.py --plain-half [--package sympy] [--rounds 1]

``--calls-pass`` times, in each child, the call sites' pass alone (``Family.rewrite_calls``,
its pairing included) over every body of the modules, decoded once beforehand, best of
three: a change to that pass is a few percent of the whole switch, under its noise.

    python benchmarks/bench_switch.py --tree A_DIR --tree B_DIR --calls-pass [--package networkx]

``--operators-pass`` likewise times the constants' and operators' pass alone
(``_rewriter._rewrite_constants_and_operators``, with operators, as switched code makes
them) over what the call sites' pass made of every body, made beforehand.

    python benchmarks/bench_switch.py --tree A_DIR --tree B_DIR --operators-pass [--package networkx]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

# Both children start alike: the packages' modules compiled (those that compile), the
# switched code's builtins installed.
MODULES = r"""
import importlib.util, pathlib, sys, time, warnings
from cassette_hook.importhook import dual_code, switch
modules = []
for package in sys.argv[1].split(","):
    for path in sorted(pathlib.Path(importlib.util.find_spec(package).origin).parent.rglob("*.py")):
        try:
            modules.append(compile(path.read_text(encoding="utf-8"), str(path), "exec"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            pass
switch.install_builtins()
warnings.simplefilter("ignore")
"""

CHILD = MODULES + r"""
from cassette_hook.rewrite import _names
def once():
    t = time.process_time()
    for module in modules:
        try:
            dual_code.switched(module, "m")
        except Exception:
            pass
    return time.process_time() - t
print(min(once(), once()), len(modules), _names.variant())
"""


# Every body of the modules decoded once, as the call sites' pass reads it (``bodies``: items, depths).
BODIES = MODULES + r"""
import types
from cassette_hook.rewrite import _names, _rewriter
from cassette_hook.rewrite._stack import stack_depths
hooks, family, bodies = _names.switched_hooks(), _rewriter.family, []
def codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from codes(const)
for module in modules:
    for code in codes(module):
        try:
            items = family.plain_forms(_rewriter.items_of(_rewriter.decode(code)))
            bodies.append((items, stack_depths(items)))
        except Exception:
            pass
"""

CALLS = BODIES + r"""
def once():
    t = time.process_time()
    for items, depths in bodies:
        family.rewrite_calls(items, depths, hooks, False)
    return time.process_time() - t
print(min(once(), once(), once()), len(modules), _names.variant())
"""

OPERATORS = BODIES + r"""
called = [family.rewrite_calls(items, depths, hooks, False) for items, depths in bodies]
def once():
    t = time.process_time()
    for items in called:
        _rewriter._rewrite_constants_and_operators(items, hooks, True, lambda code, part: code)
    return time.process_time() - t
print(min(once(), once(), once()), len(modules), _names.variant())
"""


# Two ways of one step, timed module by module in alternating order (``use`` puts a way in
# place): ``old`` and ``new`` are their CPU times, in the order of ``ways``.
ALTERNATING = r"""
spent = dict.fromkeys(ways, 0.0)
for round_ in range(int(sys.argv[2])):
    for index, module in enumerate(modules):
        for way in (list(ways) if (index + round_) % 2 == 0 else list(ways)[::-1]):
            use(ways[way])
            t = time.process_time()
            try:
                dual_code.switched(module, "m")
            except Exception:
                pass
            spent[way] += time.process_time() - t
old, new = spent.values()
"""

LINES = MODULES + r"""
from cassette_hook.rewrite import _rewriter
def bytecodes_lines(bc, stacksize, name):
    concrete = bc.to_concrete_bytecode(compute_exception_stack_depths=False)
    return concrete.to_code(stacksize=stacksize, compute_exception_stack_depths=False, check_pre_and_post=False)
ways = {"bytecode's line table": bytecodes_lines, "the family's": _rewriter.assemble}
def use(way):
    dual_code.assemble = way
""" + ALTERNATING + r"""
print(f"{sys.argv[1]} ({len(modules)} modules) x {sys.argv[2]}, {sys.version.split()[0]}: bytecode's line table "
      f"{old:.2f} s, the family's {new:.2f} s CPU: {new / old:.3f}")
"""

HALF = MODULES + r"""
Switcher = dual_code._Switcher
copied = Switcher._join_compiled
declined = [0, 0]
def counting(self, body, code):
    result = copied(self, body, code)
    declined[result is None] += 1
    return result
ways = {"assembled again": lambda self, body, code: None, "copied": counting}
def use(way):
    Switcher._join_compiled = way
""" + ALTERNATING + r"""
print(f"{sys.argv[1]} ({len(modules)} modules) x {sys.argv[2]}, {sys.version.split()[0]}: plain half assembled "
      f"again {old:.2f} s, copied {new:.2f} s CPU: {new / old:.3f} ({declined[0]} joined bodies copied, "
      f"{declined[1]} declined)")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", help="a checkout of cassette_hook (twice: A, then B)")
    ap.add_argument("--lines", action="store_true",
                    help="in this checkout: the family's line table against bytecode's, module by module")
    ap.add_argument("--plain-half", action="store_true",
                    help="in this checkout: joined bodies' plain half copied as compiled against assembled again")
    ap.add_argument("--calls-pass", action="store_true",
                    help="with --tree twice: time the call sites' pass alone, over the bodies decoded once")
    ap.add_argument("--operators-pass", action="store_true",
                    help="with --tree twice: time the constants' and operators' pass alone, over the call sites' "
                         "pass's bodies")
    ap.add_argument("--package", default="networkx", help="installed packages whose sources to switch, comma-separated")
    ap.add_argument("--rounds", type=int, default=6, help="(with --lines: passes over the modules; give 1)")
    args = ap.parse_args()
    if args.lines:
        subprocess.run([sys.executable, "-c", LINES, args.package, str(args.rounds)], check=True)
        return
    if args.plain_half:
        subprocess.run([sys.executable, "-c", HALF, args.package, str(args.rounds)], check=True)
        return
    if not args.tree or len(args.tree) != 2:
        raise SystemExit("give --tree twice: A, then B")
    times: dict[str, list[float]] = {tree: [] for tree in args.tree}
    ratios = []
    for round_ in range(args.rounds):
        order = args.tree if round_ % 2 == 0 else args.tree[::-1]
        got = {}
        for tree in order:
            env = {**os.environ, "PYTHONPATH": tree}
            # (from an empty directory: ``-c`` puts the working directory first on sys.path, so a
            # checkout's own package there would be imported whatever PYTHONPATH says)
            with tempfile.TemporaryDirectory() as empty:
                child = CALLS if args.calls_pass else OPERATORS if args.operators_pass else CHILD
                out = subprocess.run([sys.executable, "-c", child, args.package], env=env, check=True,
                                     capture_output=True, text=True, cwd=empty).stdout.split()
            if out[2] != "c":
                raise SystemExit(f"{tree}: switched code made without the C accelerators (build them in place)")
            got[tree] = float(out[0])
            times[tree].append(got[tree])
        ratios.append(got[args.tree[1]] / got[args.tree[0]])
        print(f"round {round_ + 1}: A {got[args.tree[0]]:.3f} s, B {got[args.tree[1]]:.3f} s, B/A {ratios[-1]:.3f}",
              flush=True)
    a, b = (statistics.median(times[tree]) for tree in args.tree)
    print(f"{args.package} ({out[1]} modules), {sys.version.split()[0]}: A {a:.3f} s, B {b:.3f} s CPU (medians); "
          f"B/A {statistics.median(ratios):.3f} (median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
