"""The assembler's C part (``rewrite/_assembly.c``) makes what its Python reference makes.

The line table's encoder and the loop over a body's items are in C where the accelerators
are built, chosen once by ``rewrite._nullslot`` (``line_table``, the assembler's ``walk``),
and in Python (``_nullslot._line_table``, ``_assembler.Assembler._code``'s loop) where
they are not or ``CASSETTE_HOOK_PURE_PYTHON=1`` is set (docs/internals.md, "The
assembler's per-instruction work in C").  The two tables must write the same bytes for
every body the import hook assembles -- over real modules -- and for the positions that
take each of the table's forms, and raise the same errors (the assembler then declines the
body); the two loops must make the same code object of every body, or both decline it.
"""

from __future__ import annotations

import copy
import marshal
import os
import sys
import warnings
from pathlib import Path

import pytest
from bytecode import Bytecode, Instr, Label, SetLineno, TryBegin, TryEnd
from bytecode.instr import InstrLocation
from hypothesis import given, settings
from hypothesis import strategies as st

from cassette_hook import _native
from cassette_hook.importhook import dual_code, switch
from cassette_hook.rewrite import _nullslot
from cassette_hook.rewrite._family import family
from cassette_hook.rewrite._instr import CompiledPosition

from new_kinds import NEW_KINDS  # (this directory's)
from test_assembly import _CELLS, _WIDE, SOURCES, _fields  # (this directory's: real modules, bodies past 255)

_assembly = _native.optional(".rewrite._assembly")
needs_c = pytest.mark.skipif(_assembly is None, reason="the pure-Python path: the reference alone is used")
needs_positions = pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10's line table is _py310's, not this")


def test_the_line_table_is_the_c_one_where_the_accelerators_are_built_else_the_reference():
    if _native.PURE_PYTHON:
        assert _nullslot.line_table is _nullslot._line_table
    elif os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS"):
        assert _assembly is not None and _nullslot.line_table is _assembly.line_table


def _outcome(encode, first_line, runs):  # type: ignore[no-untyped-def]
    """What ``encode`` makes of the runs: the bytes, or the error's type and message."""
    try:
        return encode(first_line, list(runs))
    except Exception as exc:  # (the same error, both ways)
        return type(exc), str(exc)


def _both(first_line, runs):  # type: ignore[no-untyped-def]
    assert _assembly is not None
    return _outcome(_nullslot._line_table, first_line, runs), _outcome(_assembly.line_table, first_line, runs)


@needs_c
@needs_positions
def test_the_c_line_table_writes_the_references_bytes_for_every_body_of_real_modules(monkeypatch):
    recorded: list[tuple[int, list[object]]] = []

    def recording(first_line, runs):  # type: ignore[no-untyped-def]
        runs = list(runs)
        recorded.append((first_line, runs))
        return _nullslot._line_table(first_line, runs)

    monkeypatch.setattr(_nullslot, "line_table", recording)  # (bytecode's route: the family's line_table)
    if family.assembler is not None:
        monkeypatch.setattr(family.assembler, "_line_table", recording)
    switch.install_builtins()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in SOURCES:  # (as an import under a context switches them: plain halves copied as compiled)
            dual_code.switched(compile(path.read_text(encoding="utf-8"), str(path), "exec"), path.stem)
    assert len(recorded) > 1000
    assert any(type(position) is CompiledPosition for _, runs in recorded for position, _ in runs) == (
        family.assembler is not None)  # (3.12+: a plain half copied as compiled keeps co_positions)
    for first_line, runs in recorded:
        ours, reference = _both(first_line, runs)
        assert ours == reference


def _at(line, end=None, column=None, end_column=None):  # type: ignore[no-untyped-def]
    return InstrLocation(line, end, column, end_column)


# Each of the table's forms and the turns between them: the short form (a column below 72 on
# the line before's line), the one-line form (the next two lines, columns below 128), the
# long form (columns from 128 on, lines further, several lines), a line without columns, no
# position, runs past eight units, None continuing a run, compiled positions, numbers of
# three and more six-bit chunks, and a line going back.
_FORMS = [
    (1, [(None, 1), (_at(1, 1, 0, 5), 3), (_at(1, 1, 4, 19), 1), (_at(2, 2, 8, 120), 2), (_at(4, 4, 127, 127), 1)]),
    (10, [(_at(10, 10, 130, 200), 20), (_at(11, 11, 0, 300), 1), (_at(12, 15, 4, 9), 9), (None, 4)]),
    (3, [(_at(3), 2), (_at(None), 1), (_at(None), 1), (_at(3), 17), (_at(2), 1), (_at(5000), 1), (_at(1), 1)]),
    (7, [(CompiledPosition((7, 7, 1, 4)), 1), (CompiledPosition((7, 7, 1, 4)), 2), (_at(7, 7, 1, 4), 1),
         (CompiledPosition((None, None, None, None)), 2), (CompiledPosition((9, 9, 0xFFF, 0x1001)), 1)]),
    (1, [(_at(1, 1, 2, 3), 0), (_at(0x40000, 0x40000 + 0x1234, 5, 70000), 8), (_at(2, 2, 71, 86), 16)]),
]


@needs_c
@needs_positions
@pytest.mark.parametrize("first_line, runs", _FORMS)
def test_the_c_line_table_writes_each_form_as_the_reference_does(first_line, runs):
    ours, reference = _both(first_line, runs)
    assert type(reference) is bytes
    assert ours == reference


# Positions bytecode would refuse but co_positions may hold, and positions the reference
# refuses: the same bytes or the same error.
_ODD = [
    [(CompiledPosition((1, 3, None, None)), 1)],  # several lines without a column: ValueError
    [(CompiledPosition((1, None, 4, None)), 1)],  # a column without an end: ValueError
    [(CompiledPosition((1, 1, 10, 5)), 1)],  # an end column before the column (a byte all the same)
    [(CompiledPosition((1, 1, 8, 0)), 1)],  # the same, below zero: ValueError
    [(CompiledPosition((5, 2, 1, 2)), 1)],  # an end line before the line (the reference's table from its end)
    [(CompiledPosition((9000, 2, 1, 2)), 1)],  # the same, past the reference's table: IndexError
]


@needs_c
@needs_positions
@pytest.mark.parametrize("runs", _ODD)
def test_the_c_line_table_writes_or_refuses_odd_positions_as_the_reference_does(runs):
    ours, reference = _both(1, runs)
    assert ours == reference


@needs_c
@pytest.mark.parametrize("field", [-1, 2 ** 40, "1", 1.0])
def test_the_c_line_table_refuses_a_field_out_of_its_range_with_a_value_error(field):
    # (the assembler then declines the body: bytecode's InstrLocation and co_positions hold
    # none of these)
    assert _assembly is not None
    with pytest.raises(ValueError):
        _assembly.line_table(1, [(CompiledPosition((1, 1, field, 3)), 1)])


_FIELD = st.one_of(st.none(), st.integers(0, 300), st.integers(0, 2 ** 39))
_POSITION = st.one_of(
    st.none(),
    st.builds(CompiledPosition, st.tuples(_FIELD, _FIELD, _FIELD, _FIELD)),
    st.builds(lambda line, span, column, width: _at(line, line + span, column, column + width),
              st.integers(1, 400), st.sampled_from([0, 0, 1, 2, 3, 5000]), st.integers(0, 300), st.integers(0, 40)),
)


@needs_c
@needs_positions
@settings(max_examples=300, deadline=None)
@given(st.integers(0, 500), st.lists(st.tuples(_POSITION, st.integers(0, 20)), max_size=30))
def test_the_c_line_table_writes_or_refuses_any_runs_as_the_reference_does(first_line, runs):
    ours, reference = _both(first_line, runs)
    assert ours == reference


@needs_c
@needs_positions
def test_a_body_assembled_with_the_c_line_table_has_the_positions_of_the_compiled_one():
    code = compile("def f(a):\n    b = [x + 1\n         for x in a]\n    return b  # a\n", "<f>", "exec").co_consts[0]
    concrete = Bytecode.from_code(code).to_concrete_bytecode()
    table = _nullslot.line_table(code.co_firstlineno, [(instr.location, instr.size >> 1) for instr in concrete])
    assert list(code.replace(co_linetable=table).co_positions()) == list(code.co_positions())


def _without_the_c_loop():  # type: ignore[no-untyped-def]
    """The family's assembler with the Python loop alone (its line table as it is)."""
    assert family.assembler is not None
    python = copy.copy(family.assembler)
    python._walk = None
    return python


def _assembled_by_both_loops(monkeypatch, sources, join_compiled=True):  # type: ignore[no-untyped-def]
    """(the code or None, the C loop's; the same, the Python loop's) for every body that
    switching ``sources`` ((text, name) pairs) assembles; ``join_compiled``: a plain half
    copied as compiled (a ``Verbatim`` block), else decoded."""
    assert family.assembler is not None and family.assembler._walk is not None
    python, bodies = _without_the_c_loop(), []
    code = family.assembler.code

    def recording(bc, stacksize):  # type: ignore[no-untyped-def]
        bodies.append((code(bc, stacksize), python.code(bc, stacksize)))
        return bodies[-1][0]

    monkeypatch.setattr(family.assembler, "code", recording)
    if not join_compiled:
        monkeypatch.setattr(dual_code._Switcher, "_join_compiled", lambda self, body, code: None)
    switch.install_builtins()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for text, name in sources:
            dual_code.switched(compile(text, name, "exec"), Path(name).stem)
    return bodies


def _same(ours, reference):  # type: ignore[no-untyped-def]
    if reference is None:
        return ours is None
    return ours is not None and marshal.dumps(ours) == marshal.dumps(reference) and _fields(ours) == _fields(
        reference) and list(ours.co_positions()) == list(reference.co_positions())


needs_c_loop = pytest.mark.skipif(family.assembler is None or family.assembler._walk is None,
                                  reason="no assembler of ours, or the pure-Python path: the Python loop alone")


@needs_c_loop
@pytest.mark.parametrize("join_compiled", [True, False], ids=["plain half copied", "plain half decoded"])
def test_the_c_loop_makes_the_python_loops_code_object_of_every_body_of_real_modules(monkeypatch, join_compiled):
    sources = [(path.read_text(encoding="utf-8"), str(path)) for path in SOURCES]
    bodies = _assembled_by_both_loops(monkeypatch, sources, join_compiled)
    assert len(bodies) > 1000 and all(reference is not None for _, reference in bodies)
    different = [reference.co_qualname for ours, reference in bodies if not _same(ours, reference)]
    assert different == []


# What the C loop hands to the Python one (a cell or free variable, an enum argument, 3.14's
# new argument kinds), and what it takes of its own that is rarer in the modules above: wide
# arguments, jumps and handlers, cells numbered past 255
@needs_c_loop
@pytest.mark.parametrize("source", [_WIDE, _CELLS, NEW_KINDS,
                                    "def f(a):\n    def g():\n        nonlocal a\n        a += 1\n        return a\n"
                                    "    b = [a - x for x in a if x < 2 or not x]\n    return g, b, a @ a, -a\n"],
                         ids=["wide", "cells", "new kinds", "closures and operators"])
def test_the_c_loop_makes_the_python_loops_code_object_of_bodies_it_hands_back_in_part(monkeypatch, source):
    bodies = _assembled_by_both_loops(monkeypatch, [(source, "<source>")])
    assert bodies and all(_same(ours, reference) for ours, reference in bodies)


def _declined_body(*items):  # type: ignore[no-untyped-def]
    return Bytecode([Instr("RESUME", 0), *items, Instr("LOAD_CONST", None), Instr("RETURN_VALUE")])


def _declined(kind):  # type: ignore[no-untyped-def]
    handler = Label()
    outer, inner = TryBegin(handler, False, 0), TryBegin(handler, False, 0)
    return {
        "set lineno": _declined_body(Instr("LOAD_NAME", "x"), Instr("POP_TOP"), SetLineno(3)),
        "nested try blocks": Bytecode([Instr("RESUME", 0), outer, inner, Instr("NOP"), TryEnd(inner), TryEnd(outer),
                                       Instr("LOAD_CONST", None), Instr("RETURN_VALUE"), handler, Instr("RERAISE", 0)]),
        "cache": _declined_body(Instr("NOP"), Instr("CACHE")),  # (a CACHE a pass wrote)
        "a try block's end without its start": _declined_body(Instr("NOP"), TryEnd(outer)),
    }[kind]


@needs_c_loop
@pytest.mark.parametrize("kind", ["set lineno", "nested try blocks", "cache", "a try block's end without its start"])
def test_the_c_loop_declines_what_the_python_loop_declines(kind):
    assert family.assembler is not None
    assert family.assembler.code(_declined(kind), 2) is None and _without_the_c_loop().code(_declined(kind), 2) is None
