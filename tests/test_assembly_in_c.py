"""The assembler's C part (``rewrite/_assembly.c``) writes what its Python reference writes.

The line table's encoder is in C where the accelerators are built, chosen once by
``rewrite._nullslot`` (``line_table``), and in Python (``_nullslot._line_table``) where
they are not or ``CASSETTE_HOOK_PURE_PYTHON=1`` is set (docs/internals.md, "An assembler
of our own").  The two must write the same bytes for every body the import hook
assembles -- over real modules -- and for the positions that take each of the table's
forms, and raise the same errors (the assembler then declines the body).
"""

from __future__ import annotations

import os
import sys
import warnings

import pytest
from bytecode import Bytecode
from bytecode.instr import InstrLocation
from hypothesis import given, settings
from hypothesis import strategies as st

from cassette_hook import _native
from cassette_hook.importhook import dual_code, switch
from cassette_hook.rewrite import _nullslot
from cassette_hook.rewrite._family import family
from cassette_hook.rewrite._instr import CompiledPosition

from test_assembly import SOURCES  # (this directory's: real modules)

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
