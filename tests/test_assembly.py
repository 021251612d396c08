"""Switched code is assembled as ``bytecode``'s own assembly makes it.

``rewrite._rewriter.assemble`` has the family write the line table rather than
``bytecode``'s ``to_code``, and on 3.12+ assembles with an assembler of our own
(``rewrite._assembler``) rather than ``bytecode``'s conversion to concrete instructions
(docs/internals.md, "Where a cold import's time goes"), to make a cold import cheaper.
Over real modules -- standard library packages and this suite's corpus -- every body the
import hook assembles must be what ``bytecode`` alone makes of the same instructions: the
same instructions, constants, names, exception table and stack size, and on 3.11+ the same
position of every instruction; and our assembler's whole code object, line table included,
what ``bytecode``'s route through ``_rewriter.assemble`` makes.
"""

from __future__ import annotations

import dis
import importlib.util
import marshal
import sys
import warnings
from pathlib import Path
from types import CodeType
from typing import Callable

import pytest

from cassette_hook.importhook import dual_code, switch
from cassette_hook.rewrite import _rewriter
from cassette_hook.rewrite._family import family

from new_kinds import NEW_KINDS, NEW_OPCODES  # (this directory's)

# Packages of many shapes: email (classes, generators, long lines), json (a scanner of
# closures), asyncio (coroutines, try/finally, async for/with), and the suite's corpus.
SOURCES = [
    *(p for name in ("email", "json", "asyncio")
      for p in sorted(Path(importlib.util.find_spec(name).origin).parent.glob("*.py"))),
    Path(__file__).with_name("corpus.py"),
]


def _switch_sources(monkeypatch: pytest.MonkeyPatch, assemble: Callable[..., CodeType],
                    sources: list[tuple[str, str]] | None = None) -> None:
    """Every source (by default ``SOURCES``; else (text, name) pairs) switched as an import
    under a context switches it, ``assemble`` standing in for ``dual_code``'s."""
    monkeypatch.setattr(dual_code, "assemble", assemble)
    # (every joined body through ``assemble`` too, its plain half decoded: where it is copied
    # as compiled instead, tests/test_joined_plain_half.py holds it to this route)
    monkeypatch.setattr(dual_code._Switcher, "_join_compiled", lambda self, body, code: None)
    switch.install_builtins()
    if sources is None:
        sources = [(path.read_text(encoding="utf-8"), str(path)) for path in SOURCES]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for text, name in sources:
            dual_code.switched(compile(text, name, "exec"), Path(name).stem)


def _assembled_bodies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[CodeType, CodeType, bytes]]:
    """(switched body as assembled, the same as ``bytecode``'s ``to_code`` makes it, the
    line table the family writes for ``bytecode``'s) for every body that switching the
    sources assembles."""
    made: list[tuple[CodeType, CodeType, bytes]] = []

    def recording(bc, stacksize, name):  # type: ignore[no-untyped-def]
        ours = _rewriter.assemble(bc, stacksize, name)
        concrete = bc.to_concrete_bytecode(compute_exception_stack_depths=False)
        theirs = concrete.to_code(stacksize=stacksize, compute_exception_stack_depths=False, check_pre_and_post=False)
        made.append((ours, theirs, family.line_table(theirs, concrete) if sys.version_info < (3, 11) else b""))
        return ours

    _switch_sources(monkeypatch, recording)
    assert len(made) > 1000  # (every source was switched)
    return made


def test_switched_bodies_have_the_instructions_constants_names_and_handlers_bytecode_assembles(monkeypatch):
    for ours, theirs, _ in _assembled_bodies(monkeypatch):
        assert ours.replace(co_linetable=b"") == theirs.replace(co_linetable=b""), ours.co_qualname
        assert ours.co_stacksize == theirs.co_stacksize


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 has no positions; see the next test")
def test_switched_bodies_give_each_instruction_the_position_bytecode_gives_it(monkeypatch):
    for ours, theirs, _ in _assembled_bodies(monkeypatch):
        assert list(ours.co_positions()) == list(theirs.co_positions()), ours.co_qualname


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10: the next test")
def test_switched_line_tables_are_bytecodes_where_no_column_reaches_128(monkeypatch):
    # (where one does, bytecode 0.19 writes a one-line entry CPython misreads backwards, and
    # the family the long form: tests/test_fuzz_sample.py, columns past 127)
    compared = 0
    for ours, theirs, _ in _assembled_bodies(monkeypatch):
        if all(column is None or column < 128 for position in theirs.co_positions() for column in position[2:]):
            assert ours.co_linetable == theirs.co_linetable, ours.co_qualname
            compared += 1
    assert compared > 1000


@pytest.mark.skipif(sys.version_info >= (3, 11), reason="3.11+: the tests before")
def test_switched_bodies_have_the_line_table_the_3_10_family_writes(monkeypatch):
    for ours, _, written in _assembled_bodies(monkeypatch):
        assert ours.co_linetable == written, ours.co_name


needs_assembler = pytest.mark.skipif(family.assembler is None, reason="bytecode assembles everything on this Python")


def _by_bytecode(bc, stacksize):  # type: ignore[no-untyped-def]
    """``bc`` assembled by ``_rewriter.assemble``'s ``bytecode`` route (the family writing the
    line table), as every Python without an assembler of ours assembles it."""
    concrete = bc.to_concrete_bytecode(compute_exception_stack_depths=False)
    concrete.__class__ = _rewriter._LinesUnwritten
    code = concrete.to_code(stacksize=stacksize, compute_exception_stack_depths=False, check_pre_and_post=False)
    return code.replace(co_linetable=family.line_table(code, concrete))


def _both_ways(monkeypatch: pytest.MonkeyPatch,
               sources: list[tuple[str, str]] | None = None) -> list[tuple[CodeType | None, CodeType]]:
    """(our assembler's code or None where it declined, ``bytecode``'s route's) for every
    body that switching the sources (``_switch_sources``'s) assembles."""
    made: list[tuple[CodeType | None, CodeType]] = []

    def recording(bc, stacksize, name):  # type: ignore[no-untyped-def]
        assert family.assembler is not None
        made.append((family.assembler.code(bc, stacksize), _by_bytecode(bc, stacksize)))
        return made[-1][1]

    _switch_sources(monkeypatch, recording, sources)
    return made


def _fields(code: CodeType) -> dict[str, object]:
    return {name: getattr(code, name) for name in dir(code)
            if name.startswith("co_") and name != "co_lnotab" and not callable(getattr(code, name))}


@needs_assembler
def test_our_assembler_makes_the_code_object_bytecodes_route_makes_field_by_field(monkeypatch):
    compared = 0
    for ours, theirs in _both_ways(monkeypatch):
        if ours is not None:
            assert _fields(ours) == _fields(theirs), theirs.co_qualname
            assert ours.co_consts == theirs.co_consts and ours == theirs, theirs.co_qualname
            compared += 1
    assert compared > 1000


@needs_assembler
def test_our_assembler_takes_every_body_the_import_hook_makes_of_real_modules(monkeypatch):
    declined = [theirs.co_qualname for ours, theirs in _both_ways(monkeypatch) if ours is None]
    assert declined == []




def _assembles_as_bytecode_does(monkeypatch: pytest.MonkeyPatch, source: str) -> set[str]:
    """Asserts our assembler makes each switched body of ``source`` as ``bytecode``'s route
    does; the instructions those bodies have."""
    made = _both_ways(monkeypatch, [(source, "<new kinds>")])
    assert made
    for ours, theirs in made:
        assert ours is not None, theirs.co_qualname
        assert _fields(ours) == _fields(theirs) and ours == theirs, theirs.co_qualname
    return {dis.opname[op] for _, theirs in made for op in theirs.co_code[0::2]}


@needs_assembler
def test_our_assembler_assembles_the_argument_kinds_of_3_14_and_3_15_as_bytecode_does(monkeypatch):
    assembled = _assembles_as_bytecode_does(monkeypatch, NEW_KINDS)
    assert {name for name in NEW_OPCODES if name in dis.opmap} <= assembled  # (each kind this Python has)


@needs_assembler
@pytest.mark.skipif(sys.version_info < (3, 14), reason="template strings (PEP 750) are 3.14's")
def test_our_assembler_assembles_build_interpolation_as_the_family_keeps_it(monkeypatch):
    source = "def g(x, w):\n    return t'a{len(x)}b{x!r:>{w}}c{x!s}{x!a:^{w}}{x:}{x=}'\n"  # (a call: rewritten)
    assert "BUILD_INTERPOLATION" in _assembles_as_bytecode_does(monkeypatch, source)


@needs_assembler
def test_our_assembler_leaves_a_body_with_a_set_lineno_to_bytecode():
    from bytecode import Bytecode, SetLineno

    bc = Bytecode.from_code(compile("x = 1\ny = x + 1\n", "<module>", "exec"))
    bc.insert(0, SetLineno(7))
    assert family.assembler is not None and family.assembler.code(bc, 2) is None
    assert _rewriter.assemble(bc, 2, "<module>").co_firstlineno == 1  # (bytecode's route assembles it)


@needs_assembler
def test_our_assembler_leaves_nested_try_blocks_to_bytecode_and_its_error():
    from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd

    from cassette_hook.rewrite import UnsupportedCode

    handler = Label()
    outer, inner = TryBegin(handler, False, 0), TryBegin(handler, False, 0)
    bc = Bytecode([Instr("RESUME", 0), outer, inner, Instr("NOP"), TryEnd(inner), TryEnd(outer),
                   Instr("LOAD_CONST", None), Instr("RETURN_VALUE"), handler, Instr("RERAISE", 0)])
    assert family.assembler is not None and family.assembler.code(bc, 2) is None
    with pytest.raises(UnsupportedCode, match="cannot be nested"):
        _rewriter.assemble(bc, 2, "f")


def _loading(*constants: object):  # type: ignore[no-untyped-def]
    """A body that loads each of ``constants`` in turn (and drops it)."""
    from bytecode import Bytecode, Instr

    loads = [instr for constant in constants for instr in (Instr("LOAD_CONST", constant), Instr("POP_TOP"))]
    return Bytecode([Instr("RESUME", 0), *loads, Instr("LOAD_CONST", None), Instr("RETURN_VALUE")])


def _numbers_constants_as_bytecode_does(*constants: object) -> tuple[object, ...]:
    """Asserts our assembler makes a body loading ``constants`` as ``bytecode``'s route does,
    each constant numbered as it numbers it; the constants."""
    bc = _loading(*constants)
    assert family.assembler is not None
    ours, theirs = family.assembler.code(bc, 2), _by_bytecode(bc, 2)
    assert ours is not None and _fields(ours) == _fields(theirs) and ours == theirs
    assert len(ours.co_consts) == len(theirs.co_consts)
    assert all(a is b for a, b in zip(ours.co_consts, theirs.co_consts))
    return ours.co_consts


_FUNCTION = marshal.dumps(compile("def f():\n    return 1\n", "<a>", "exec").co_consts[0])


@needs_assembler
def test_our_assembler_numbers_two_code_constants_marshalled_alike_once_as_bytecode_does():
    """Code constants are keyed as ``bytecode`` keys them, by their marshalled bytes; ours
    marshals one only where one with its file, name, first line and line table came before
    (docs/internals.md, "An assembler of our own")."""
    first, second = marshal.loads(_FUNCTION), marshal.loads(_FUNCTION)
    assert first is not second and marshal.dumps(first) == marshal.dumps(second)
    assert _numbers_constants_as_bytecode_does(first, second) == (first, None)


@needs_assembler
def test_our_assembler_numbers_two_code_constants_of_one_place_marshalled_apart_twice_as_bytecode_does():
    """Two code objects of one file, name, first line and line table, whose marshalled
    bytes differ (here by a constant), are two constants."""
    first = marshal.loads(_FUNCTION)
    second = first.replace(co_consts=(*first.co_consts, 2))
    assert marshal.dumps(first) != marshal.dumps(second)
    assert _numbers_constants_as_bytecode_does(first, second) == (first, second, None)


@needs_assembler
def test_our_assembler_numbers_two_code_constants_of_two_files_twice_as_bytecode_does():
    """``==`` on code objects does not compare their file names; their marshalled bytes do."""
    first = marshal.loads(_FUNCTION)
    second = first.replace(co_filename="<b>")
    assert first == second and marshal.dumps(first) != marshal.dumps(second)
    assert _numbers_constants_as_bytecode_does(first, second) == (first, second, None)


@needs_assembler
def test_our_assembler_numbers_a_code_constant_no_hash_takes_as_bytecode_does():
    """A code object holding a constant no hash takes (a pass may load any object) is a
    constant like another: our assembler never hashes a code object."""
    code = marshal.loads(_FUNCTION)
    odd = code.replace(co_consts=(*code.co_consts, [1]))
    with pytest.raises(TypeError):
        hash(odd)
    assert _numbers_constants_as_bytecode_does(odd, code, odd) == (odd, code, None)


@needs_assembler
def test_our_assembler_widens_a_jump_past_255_units_with_extended_args_as_bytecode_does():
    from bytecode import Bytecode, Instr, Label

    end = Label()
    bc = Bytecode([Instr("RESUME", 0), Instr("LOAD_CONST", True), Instr("POP_JUMP_IF_TRUE", end),
                   *(Instr("NOP") for _ in range(300)), end, Instr("LOAD_CONST", None), Instr("RETURN_VALUE")])
    assert family.assembler is not None
    ours = family.assembler.code(bc, 2)
    assert ours is not None and ours == _by_bytecode(bc, 2)
    assert ours.co_linetable == _by_bytecode(bc, 2).co_linetable
    opcodes = list(ours.co_code[0::2])
    assert dis.opname[opcodes[opcodes.index(dis.opmap["POP_JUMP_IF_TRUE"]) - 1]] == "EXTENDED_ARG"


@needs_assembler
def test_our_assembler_gives_each_unit_without_a_line_an_entry_of_its_own_as_bytecode_does():
    """The line table is handed a run of instructions at a time (those of one position
    object), but where a position has no line a unit at a time -- a wide instruction's
    units as one, each ``CACHE`` entry apart -- as ``bytecode``'s route writes it, joining
    no two (docs/performance.md, "The line table made of runs")."""
    from bytecode import Bytecode, Instr, Label
    from bytecode.instr import InstrLocation

    site, none, other_none = InstrLocation(2, 2, 4, 9), InstrLocation(None, None, None, None), InstrLocation(
        None, None, None, None)
    end = Label()
    bc = Bytecode([Instr("RESUME", 0, location=InstrLocation(1, 1, 0, 0)),
                   Instr("LOAD_GLOBAL", (True, "len"), location=site), Instr("LOAD_CONST", "ab", location=site),
                   Instr("CALL", 1, location=site),  # (one object: one run)
                   Instr("POP_JUMP_IF_TRUE", end, location=none),  # (no line, and wide: past 255 units)
                   *(Instr("NOP", location=InstrLocation(3, 3, 0, 4)) for _ in range(300)),
                   end, Instr("LOAD_GLOBAL", (False, "len"), location=none),  # (no line, with CACHE entries)
                   Instr("POP_TOP"), Instr("LOAD_CONST", None, location=other_none), Instr("RETURN_VALUE")])
    assert family.assembler is not None
    ours, theirs = family.assembler.code(bc, 3), _by_bytecode(bc, 3)
    assert ours is not None and _fields(ours) == _fields(theirs) and ours == theirs
    assert list(ours.co_positions()) == list(theirs.co_positions())
    assert sum(1 for position in ours.co_positions() if position[0] is None) > 5


def test_bytecode_leaves_the_line_table_to_the_family():
    """The saving rests on the names of ``bytecode``'s private line-table encoders, which
    ``_rewriter._LinesUnwritten`` overrides: a release that renames them must fail here
    rather than quietly encode the table twice."""
    from bytecode import Bytecode

    code = compile("x = 1\ny = x + 1\n", "<module>", "exec")
    concrete = Bytecode.from_code(code).to_concrete_bytecode(compute_exception_stack_depths=False)
    concrete.__class__ = _rewriter._LinesUnwritten
    assembled = concrete.to_code(stacksize=code.co_stacksize, compute_exception_stack_depths=False,
                                 check_pre_and_post=False)
    assert assembled.co_linetable == b""


# (300 of each: past the 255 an argument's one byte holds, so the arguments, the jumps over
# them and the handlers' offsets take EXTENDED_ARGs; a module's joined body often does)
_WIDE = "\n".join([
    "def wide(flag):",
    *(f"    v{n} = {n}.5 if flag else name{n}" for n in range(300)),
    "    try:",
    "        while flag:",
    *(f"            flag = v{n} if flag else len(name{n})" for n in range(0, 300, 30)),
    "    except ValueError:",
    "        return v299",
    "    return [v0, v150, v299]",
])

# (a cell after 300 locals: its index among the cells 0, its slot among the locals past 255)
_CELLS = "\n".join([
    "def cells(flag):",
    *(f"    v{n} = len(name{n})" for n in range(300)),
    "    cell = len(flag)",
    "    return lambda: len(cell)",
])


@needs_assembler
def test_our_assembler_assembles_arguments_jumps_and_handlers_past_255_as_bytecode_does(monkeypatch):
    assert "EXTENDED_ARG" in _assembles_as_bytecode_does(monkeypatch, _WIDE)


@needs_assembler
def test_our_assembler_numbers_cells_past_255_among_the_locals_as_bytecode_does(monkeypatch):
    assert "EXTENDED_ARG" in _assembles_as_bytecode_does(monkeypatch, _CELLS)
