"""The standard library's modules switched: each joined body's plain half is its compiled body.

    python fuzz/joined_stdlib.py        # 3.12+, where a family has an assembler of its own

``tests/test_joined_plain_half.py`` checks, for ``json``, ``asyncio`` and the test corpus,
that the plain half of a switched body is the compiled body copied (code units, positions,
handlers moved with it), and that switching makes, instruction for instruction, what
decoding and assembling the plain half again made.  This runs the same checks over every
module of the running Python's standard library (``test``, ``idlelib``, ``lib2to3`` and
installed packages left out), with that test module's helpers; minutes, not for CI.

Two differences between copying and assembling again are expected, and not reported: a
copied body keeps every name of the compiled names table, those only dead code used
(``if 0: ...``) included, where assembling again numbers only the names used; and a
``frozenset`` constant may list its items in another order.
"""

from __future__ import annotations

import dis
import os
import sys
import sysconfig
import time
import traceback
from pathlib import Path
from types import CodeType

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

import test_joined_plain_half as joined

LEFT_OUT = {"test", "idlelib", "lib2to3", "site-packages", "dist-packages"}


def sources() -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return sorted(path for path in stdlib.rglob("*.py") if not LEFT_OUT & set(path.relative_to(stdlib).parts))


def _comparable(body: tuple[object, ...]) -> tuple[object, ...]:
    """``joined._normalized`` without what copying may keep apart (see the module docstring)."""
    shown, *rest, _names = body
    shown = [(name, repr(sorted(map(repr, eval(value, {"frozenset": frozenset}))))  # noqa: S307 - our own reprs
              if isinstance(value, str) and value.startswith("frozenset(") else value, positions)
             for name, value, positions in shown]
    return (shown, *rest)


def problems_of(path: Path) -> list[str]:
    compiled, switched = joined._switched(path)
    found = []
    for old, new in joined._pairs(compiled, switched):
        half = joined._plain_half(new)
        if half is None:
            continue
        start, stop = half
        body = joined._prefix_bytes(old)
        if new.co_code[start:stop] != old.co_code[body:] or new.co_code[:body] != old.co_code[:body] \
                or new.co_varnames != old.co_varnames or new.co_names[:len(old.co_names)] != old.co_names:
            found.append(f"{old.co_qualname}: code")
        if list(new.co_positions())[start // 2:stop // 2] != list(old.co_positions())[body // 2:]:
            found.append(f"{old.co_qualname}: positions")
        moved = [(e.start - body + start, e.end - body + start, e.target - body + start, e.depth, e.lasti)
                 for e in dis._parse_exception_table(old) if e.start >= body]  # type: ignore[attr-defined]
        inside = [(e.start, e.end, e.target, e.depth, e.lasti)
                  for e in dis._parse_exception_table(new)  # type: ignore[attr-defined]
                  if start <= e.start < stop]
        if inside != moved:
            found.append(f"{old.co_qualname}: handlers")
    again = joined._switched(path, copied=False)[1]
    copied_bodies, assembled_bodies = _bodies(switched), _bodies(again)
    for key, copied in copied_bodies.items():
        for one, other in zip(copied, assembled_bodies.get(key, [])):
            names, other_names = one[-1], other[-1]
            if _comparable(one) != _comparable(other) or not set(other_names) <= set(names):
                found.append(f"{key[0]}: assembled again differs")
    return found


def _bodies(code: CodeType) -> dict[tuple[str, int], list[tuple[object, ...]]]:
    out: dict[tuple[str, int], list[tuple[object, ...]]] = {}
    stack = [code]
    while stack:
        body = stack.pop()
        out.setdefault((body.co_qualname, body.co_firstlineno), []).append(joined._normalized(body))
        stack += (c for c in body.co_consts if isinstance(c, CodeType))
    return out


def main() -> int:
    started = time.monotonic()
    checked, problems = 0, []
    for path in sources():
        try:
            compile(path.read_bytes(), str(path), "exec")
        except (SyntaxError, ValueError):
            continue
        checked += 1
        try:
            problems += [f"{path}: {problem}" for problem in problems_of(path)]
        except Exception as e:  # noqa: BLE001 - reported with the module
            problems.append(f"{path}: {''.join(traceback.format_exception_only(e)).strip()}")
    print(f"{sys.version.split()[0]}: {checked} modules, {len(problems)} problems, "
          f"{time.monotonic() - started:.0f} s")
    print("\n".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    if joined.family.assembler is None:
        sys.exit(f"{sys.version.split()[0]}: no assembler of ours, nothing is copied")
    sys.exit(main())
