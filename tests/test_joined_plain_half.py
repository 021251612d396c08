"""The plain half of switched code is the compiled body, copied as it is (3.12+).

docs/internals.md, "The import hook: switched code, made at import": where the family has an
assembler of its own, a joined body's plain half is the compiled code's own units (constants,
names and variables numbered as compiled, the handlers' entries moved with it) rather than
the body decoded and assembled again.  It must be the program as compiled -- the same
instructions, positions and handlers -- and the switched code as a whole what decoding and
assembling the plain half again made (``dual_code._Switcher._join``), instruction for
instruction.
"""

from __future__ import annotations

import dis
import importlib.util
import warnings
from pathlib import Path
from types import CodeType
from typing import Iterator

import pytest

from cassette_hook.importhook import dual_code, switch
from cassette_hook.rewrite._family import family
from cassette_hook.rewrite._names import ACTIVE

pytestmark = pytest.mark.skipif(family.assembler is None, reason="no assembler of ours: the plain half is assembled")

SOURCES = [
    *(p for name in ("json", "asyncio")
      for p in sorted(Path(importlib.util.find_spec(name).origin).parent.glob("*.py"))),
    Path(__file__).with_name("corpus.py"),
]


def _switched(path: Path, copied: bool = True) -> tuple[CodeType, CodeType]:
    """(``path`` compiled, switched), the plain half ``copied`` or assembled again."""
    code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
    switch.install_builtins()
    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        warnings.simplefilter("ignore")
        if not copied:
            patch.setattr(dual_code._Switcher, "_join_compiled", lambda self, body, code: None)
        return code, dual_code.switched(code, path.stem)


def _pairs(compiled: CodeType, switched: CodeType) -> Iterator[tuple[CodeType, CodeType]]:
    """Each compiled body with its switched form (they number code constants alike)."""
    yield compiled, switched
    for old, new in zip(compiled.co_consts, switched.co_consts):
        if isinstance(old, CodeType):
            assert isinstance(new, CodeType) and new.co_qualname == old.co_qualname
            yield from _pairs(old, new)


def _plain_half(code: CodeType) -> tuple[int, int] | None:
    """The byte offsets of a switched body's plain half, or None if it is not joined."""
    instructions = list(dis.get_instructions(code))
    for index, instruction in enumerate(instructions):
        if instruction.opname == "LOAD_GLOBAL" and instruction.argval == ACTIVE:
            start = instructions[index + 1].argval  # (POP_JUMP_IF_FALSE plain)
            # (the question's last jump, just before the plain half: to the other body)
            asked = max((i for i in instructions if i.offset < start), key=lambda i: i.offset)
            return start, asked.argval
    return None


def _prefix_bytes(code: CodeType) -> int:
    """Where a compiled body starts: after its first RESUME and that one's caches."""
    instructions = list(dis.get_instructions(code))  # (caches left out)
    return next(after.offset for before, after in zip(instructions, instructions[1:]) if before.opname == "RESUME")


def _joined_pairs() -> Iterator[tuple[CodeType, CodeType, int, int]]:
    for path in SOURCES:
        for compiled, switched in _pairs(*_switched(path)):
            half = _plain_half(switched)
            if half is not None:
                yield compiled, switched, *half


def test_the_plain_half_is_the_compiled_bodys_units_with_its_constants_names_and_variables():
    joined = 0
    for compiled, switched, start, stop in _joined_pairs():
        body = _prefix_bytes(compiled)
        assert switched.co_code[start:stop] == compiled.co_code[body:], compiled.co_qualname
        assert switched.co_code[:body] == compiled.co_code[:body], compiled.co_qualname
        assert switched.co_names[:len(compiled.co_names)] == compiled.co_names
        assert switched.co_varnames == compiled.co_varnames
        assert [c for c in switched.co_consts[:len(compiled.co_consts)] if not isinstance(c, CodeType)] == \
            [c for c in compiled.co_consts if not isinstance(c, CodeType)]
        joined += 1
    assert joined > 500


def test_the_plain_half_has_the_compiled_positions():
    for compiled, switched, start, stop in _joined_pairs():
        body = _prefix_bytes(compiled)
        positions = list(switched.co_positions())
        assert positions[start // 2:stop // 2] == list(compiled.co_positions())[body // 2:], compiled.co_qualname


def test_the_plain_half_has_the_compiled_handlers_moved_with_it():
    for compiled, switched, start, stop in _joined_pairs():
        body = _prefix_bytes(compiled)
        moved = [(e.start - body + start, e.end - body + start, e.target - body + start, e.depth, e.lasti)
                 for e in dis._parse_exception_table(compiled) if e.start >= body]  # type: ignore[attr-defined]
        inside = [(e.start, e.end, e.target, e.depth, e.lasti)
                  for e in dis._parse_exception_table(switched)  # type: ignore[attr-defined]
                  if start <= e.start < stop]
        assert inside == moved, compiled.co_qualname


def _normalized(code: CodeType) -> tuple[object, ...]:
    """``code``'s instructions, handlers and frame shape, jumps and handlers as instruction
    indexes and ``EXTENDED_ARG``\\s left out: what numbering constants and names leaves alone."""
    instructions = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
    index = {i.offset: n for n, i in enumerate(instructions)}

    def at(offset: int) -> int:  # (an EXTENDED_ARG's offset: the instruction it extends)
        return next((index[i.offset] for i in instructions if i.offset >= offset), len(instructions))

    shown = [(i.opname, ("jump", at(i.argval)) if i.opcode in dis.hasjrel
              else i.argval.co_qualname if isinstance(i.argval, CodeType) else repr(i.argval), i.positions)
             for i in instructions]
    handlers = [(at(e.start), at(e.end), at(e.target), e.depth, e.lasti)
                for e in dis._parse_exception_table(code)]  # type: ignore[attr-defined]
    return (shown, handlers, code.co_varnames, code.co_cellvars, code.co_freevars, code.co_stacksize,
            code.co_flags, code.co_firstlineno, code.co_qualname, sorted(code.co_names))


def _every_body(code: CodeType) -> dict[tuple[str, int], list[str]]:
    """Every body under ``code``, normalized, by name and first line."""
    out: dict[tuple[str, int], list[str]] = {}
    stack = [code]
    while stack:
        body = stack.pop()
        out.setdefault((body.co_qualname, body.co_firstlineno), []).append(repr(_normalized(body)))
        stack += (c for c in body.co_consts if isinstance(c, CodeType))
    return {key: sorted(bodies) for key, bodies in out.items()}


def test_switched_code_is_instruction_for_instruction_what_assembling_the_plain_half_again_made():
    compared = 0
    for path in SOURCES:
        copied, assembled = _every_body(_switched(path)[1]), _every_body(_switched(path, copied=False)[1])
        assert copied == assembled, path.name
        compared += len(copied)
    assert compared > 1000
