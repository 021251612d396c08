"""The decoder's C part (``rewrite/_decoding.c``) makes what its Python reference makes.

The decoder's loop over a code object's units is in C where the accelerators are built,
handed to the decoder once by ``rewrite._nullslot.own_decoder`` (``_decoding.items``), and
in Python (``_decoder.Decoder._items``) where it is not or ``CASSETTE_HOOK_PURE_PYTHON=1``
is set (docs/internals.md, "The decoder's loop in C").  Over real modules and the bodies
that take each of the decoder's rules, the two must make the same ``Bytecode``, item by
item (names, opcodes, arguments and their types, positions, labels, try blocks), with a
position object shared by the same instructions (the assembler compares them by identity),
and decline the same bodies.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
import warnings
from opcode import opmap
from pathlib import Path
from types import CodeType

import pytest

from cassette_hook import _native
from cassette_hook.rewrite._family import family
from cassette_hook.rewrite._instr import CompiledPosition

from new_kinds import NEW_KINDS  # (this directory's)
from test_decoding import (TEMPLATE, _assert_same, _bodies, _class_body_sharing_a_name, _real_bodies,
                           _with_jump_moved, _with_many_constants)  # (this directory's)

decoder = getattr(family, "decoder", None)
_decoding = _native.optional(".rewrite._decoding")
pytestmark = [pytest.mark.skipif(decoder is None, reason="bytecode decodes everything on this Python"),
              pytest.mark.skipif(_decoding is None, reason="the pure-Python path: the reference alone is used")]

MORE_SOURCES = [p for name in ("collections", "importlib", "unittest", "logging", "concurrent.futures")
                for p in sorted(Path(importlib.util.find_spec(name).origin).parent.glob("*.py"))]


def _reference():  # type: ignore[no-untyped-def]
    """The family's decoder with its Python loop (``Decoder._items``) in place of C's."""
    python = copy.copy(decoder)
    python._scan = None
    return python


def _assert_c_decodes_as_python(body: CodeType) -> None:
    """The C loop and the Python one make the same of ``body`` (or both decline it), with
    the same instructions sharing a position object."""
    ours, reference = decoder.bytecode(body), _reference().bytecode(body)
    assert (ours is None) == (reference is None), body.co_qualname
    if ours is None:
        return
    _assert_same(ours, reference)
    shared = [index for index in range(1, len(ours))
              if getattr(ours[index], "location", None) is getattr(ours[index - 1], "location", 0)]
    assert shared == [index for index in range(1, len(reference))
                      if getattr(reference[index], "location", None) is getattr(reference[index - 1], "location", 0)]


def test_the_decoder_loops_in_c_where_the_accelerators_are_built():
    if os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS"):
        assert decoder._scan is _decoding.items


def test_the_c_loop_decodes_real_modules_as_the_python_loop_item_by_item():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bodies = [*_real_bodies(), *(body for path in MORE_SOURCES
                                     for body in _bodies(compile(path.read_text(encoding="utf-8"), str(path), "exec")))]
    for body in bodies:
        _assert_c_decodes_as_python(body)
    assert len(bodies) > 3000


def test_the_c_loop_decodes_the_new_argument_kinds_as_the_python_loop():
    for body in _bodies(compile(NEW_KINDS, "<new kinds>", "exec")):
        _assert_c_decodes_as_python(body)


@pytest.mark.skipif(sys.version_info < (3, 14), reason="template strings (PEP 750) are 3.14's")
def test_the_c_loop_keeps_build_interpolations_argument_as_the_python_loop():
    for body in _bodies(compile(TEMPLATE, "<template>", "exec")):
        _assert_c_decodes_as_python(body)


def test_the_c_loop_reads_extended_arguments_and_try_blocks_as_the_python_loop():
    body = _with_many_constants()
    assert opmap["EXTENDED_ARG"] in body.co_code[0::2] and body.co_exceptiontable
    _assert_c_decodes_as_python(body)


def test_the_c_loop_names_cells_and_free_variables_as_the_python_loop():
    source = ("def f(a, b=1, /, c=2, *args, d, e=3, **kwargs):\n"
              "    x = a\n"
              "    def g(y):\n"
              "        nonlocal x\n"
              "        x = y\n"
              "        return a + x + y + d\n"
              "    return g\n")
    for body in _bodies(compile(source, "<f>", "exec")):
        _assert_c_decodes_as_python(body)
    _assert_c_decodes_as_python(_class_body_sharing_a_name())  # (3.13+: a free variable named like a local)


def test_the_c_loop_declines_an_extended_arg_at_the_end():
    body = compile("x = 1\n", "<module>", "exec")
    broken = body.replace(co_code=body.co_code + bytes([opmap["EXTENDED_ARG"], 1]))
    assert _decoding.items(decoder._scan_tables, broken, [], [], []) is None


def test_the_c_loop_declines_a_jump_landing_on_a_cache_entry_or_before_the_body():
    def first_cache_after(code: bytes, after: int) -> int:
        return next(unit for unit in range(after, len(code) // 2) if code[2 * unit] == opmap["CACHE"])

    def before_the_body(code: bytes, after: int) -> int:
        return -(len(code) // 2)

    for body in (_with_jump_moved("def f(c):\n    if c:\n        g(c)\n    return h(c)\n", True, first_cache_after),
                 _with_jump_moved("def f(c):\n    while c:\n        c -= 1\n", False, before_the_body)):
        assert _decoding.items(decoder._scan_tables, body, list(body.co_varnames), list(body.co_varnames), []) is None
        assert decoder.bytecode(body) is None


def test_the_c_loop_hands_an_argument_past_its_range_to_the_python_loop():
    # (eight EXTENDED_ARGs: an argument of 72 bits, which a Python int holds and C does not)
    body = compile("x = 1\n", "<module>", "exec")
    assert body.co_code[0] == opmap["RESUME"]
    wide = body.replace(co_code=bytes([opmap["EXTENDED_ARG"], 1] * 8) + body.co_code,
                        co_linetable=b"")  # (no positions: all None)
    assert _decoding.items(decoder._scan_tables, wide, [], [], []) is NotImplemented
    _assert_c_decodes_as_python(wide)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 63:
        out.append(64 | (value & 63))
        value >>= 6
    return bytes([*out, value])


def _signed(value: int) -> bytes:
    return _varint(-value << 1 | 1 if value < 0 else value << 1)


# One entry of each of the line table's forms (Objects/locations.md), a code unit each: the
# short forms (a column's high bits in the form, its low bits and the width in a byte), the
# one-line forms (0-2 lines on), no columns (a line delta, backwards too), the long form
# (with varints of several bytes, no columns, a line back), and no position.
_FORMS = [bytes([0x80 | 2 << 3, 3 << 4 | 5]), bytes([0x80 | 9 << 3, 7 << 4 | 15]),
          bytes([0x80 | 10 << 3, 4, 9]), bytes([0x80 | 11 << 3, 100, 127]), bytes([0x80 | 12 << 3, 0, 0]),
          bytes([0x80 | 13 << 3]) + _signed(-1), bytes([0x80 | 13 << 3]) + _signed(70),
          bytes([0x80 | 14 << 3]) + _signed(3) + _varint(2) + _varint(1000) + _varint(5000),
          bytes([0x80 | 14 << 3]) + _signed(-300) + _varint(0) + _varint(0) + _varint(0),
          bytes([0x80 | 15 << 3])]


def _with_line_table(entries: list[bytes]) -> CodeType:
    body = next(c for c in compile("def f(a, b):\n    if a:\n        return g(a, b) + b\n    return [b]\n",
                                   "<f>", "exec").co_consts if isinstance(c, CodeType))
    units = len(body.co_code) // 2
    return body.replace(co_linetable=b"".join(entries[unit % len(entries)] for unit in range(units)))


def test_the_c_loop_reads_each_of_the_line_tables_forms_as_co_positions_gives_them():
    for shift in range(len(_FORMS)):
        body = _with_line_table(_FORMS[shift:] + _FORMS[:shift])
        _assert_c_decodes_as_python(body)
        positions = list(body.co_positions())
        assert len(set(positions)) > len(_FORMS) // 2
        unit = 0  # (no EXTENDED_ARG here: an instruction's position is its first unit's)
        for item in decoder.bytecode(body):
            if hasattr(item, "opcode"):
                location = item.location
                assert (location.lineno, location.end_lineno, location.col_offset,
                        location.end_col_offset) == positions[unit], (shift, unit)
                unit += 1 + decoder._table[item.opcode][3]  # (and its inline caches)
        assert unit == len(positions)


def test_the_c_loop_declines_a_line_table_shorter_than_the_code_as_the_python_loop():
    body = _with_line_table(_FORMS)
    short = body.replace(co_linetable=body.co_linetable[:len(_FORMS[0]) * 2])
    assert decoder.bytecode(short) is None and _reference().bytecode(short) is None
    assert _decoding.items(decoder._scan_tables, short, list(short.co_varnames), list(short.co_varnames), []) is None


def test_the_c_loop_hands_a_line_table_ending_inside_an_entry_to_the_python_loop():
    body = _with_line_table(_FORMS)
    cut = body.replace(co_linetable=_FORMS[0] + _FORMS[7][:3])  # (a long form's varints cut)
    assert _decoding.items(decoder._scan_tables, cut, list(cut.co_varnames), list(cut.co_varnames),
                           []) is NotImplemented
    _assert_c_decodes_as_python(cut)


def _runs_both_ways(body: CodeType, start: int, stop: int) -> tuple[object, object]:
    """A plain half's runs of ``body``'s units ``start`` to ``stop``, read in C and by the
    reference (``_assembler.Verbatim``'s loop), each as (unit, position, its type, the
    index of the first run sharing its object)."""
    from cassette_hook.rewrite._assembler import Verbatim

    def described(runs):  # type: ignore[no-untyped-def]
        first = {}
        return [(unit, tuple(position), type(position), first.setdefault(id(position), index))
                for index, (unit, position) in enumerate(runs)]

    ours = _decoding.runs(body, start, stop, CompiledPosition)
    reference = Verbatim(body, body.co_consts, start, stop).runs
    return described(ours), described(reference)


def test_the_assembler_reads_a_plain_halfs_runs_in_c_where_the_accelerators_are_built():
    if os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS"):
        assert family.assembler._read_runs is _decoding.runs


def test_a_plain_halfs_runs_read_in_c_are_the_references_over_real_modules():
    bodies = _real_bodies()
    for body in bodies:
        units = len(body.co_code) // 2
        for start, stop in ((0, units), (0, min(units, 3)), (min(units, 3), units), (units // 2, units)):
            ours, reference = _runs_both_ways(body, start, stop)
            assert ours == reference, (body.co_qualname, start, stop)
    assert len(bodies) > 1000


def test_a_plain_halfs_runs_read_in_c_are_the_references_for_each_form_and_none():
    for shift in range(len(_FORMS)):
        body = _with_line_table(_FORMS[shift:] + _FORMS[:shift])
        units = len(body.co_code) // 2
        for start in (0, 1, 5):
            ours, reference = _runs_both_ways(body, start, units)
            assert ours == reference, (shift, start)
    no_lines = _with_line_table([bytes([0x80 | 15 << 3 | 7])])  # (eight units a run, no position: a run a unit)
    ours, reference = _runs_both_ways(no_lines, 0, len(no_lines.co_code) // 2)
    assert ours == reference and len(ours) == len(no_lines.co_code) // 2


def test_a_plain_halfs_runs_end_where_the_line_table_does_and_hand_an_unreadable_one_back():
    body = _with_line_table(_FORMS)
    short = body.replace(co_linetable=body.co_linetable[:len(_FORMS[0]) * 2])
    ours, reference = _runs_both_ways(short, 0, len(short.co_code) // 2)
    assert ours == reference and len(ours) <= 2
    cut = body.replace(co_linetable=_FORMS[0] + _FORMS[7][:3])
    assert _decoding.runs(cut, 0, len(cut.co_code) // 2, CompiledPosition) is NotImplemented


def test_a_plain_halfs_positions_made_in_c_hash_and_compare_as_tuples():
    body = _with_line_table(_FORMS)
    for position in {id(position): position for _, position in _decoding.runs(body, 0, len(body.co_code) // 2,
                                                                               CompiledPosition)}.values():
        assert hash(position) == hash(tuple(position)) and position == tuple(position)
        assert {tuple(position): 1}[position] == 1


def test_a_plain_halfs_positions_are_made_by_a_class_of_its_own_making():
    class Marked(tuple):  # type: ignore[type-arg]
        __slots__ = ()

        def __new__(cls, fields):  # type: ignore[no-untyped-def]
            return super().__new__(cls, ("marked", *fields))

    body = _with_line_table(_FORMS)
    runs = _decoding.runs(body, 0, len(body.co_code) // 2, Marked)
    assert runs and all(type(position) is Marked and position[0] == "marked" for _, position in runs)


def _placed_both_ways(templates, loc):  # type: ignore[no-untyped-def]
    """``templates`` placed at ``loc`` in C and by the reference (``_instr._placed_trusted``),
    each copy as (its class, its fields, whether its location is ``loc`` itself)."""
    from cassette_hook.rewrite._instr import _placed_trusted

    def described(made):  # type: ignore[no-untyped-def]
        return [(type(instr), instr._name, instr._opcode, instr._is_jump, instr._arg, instr._location is loc)
                for instr in made]

    return described(_decoding.placed(templates, loc)), described(_placed_trusted(templates, loc))


def test_the_passes_place_instructions_in_c_where_the_accelerators_are_built():
    from cassette_hook.rewrite import _instr

    if os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS") and _instr.follows_bytecode():
        assert _instr.placed is _decoding.placed


def test_the_passes_find_instructions_by_name_in_c_where_the_accelerators_are_built():
    from cassette_hook.rewrite import _instr

    if os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS"):
        assert _instr.named is _decoding.named


def test_instructions_placed_in_c_are_the_references_over_real_modules():
    from bytecode import Instr
    from bytecode.instr import InstrLocation

    loc = InstrLocation(7, 8, 1, 2)
    bodies = _real_bodies()[:400]
    for body in bodies:
        templates = [item for item in decoder.bytecode(body) if isinstance(item, Instr)]
        for at in (loc, None):
            ours, reference = _placed_both_ways(templates, at)
            assert ours == reference, body.co_qualname
        ours, reference = _placed_both_ways(tuple(templates), loc)
        assert ours == reference and len(ours) == len(templates)
    assert len(bodies) == 400


def test_instructions_placed_in_c_are_copies_each_of_its_own():
    from bytecode import Instr

    templates = [Instr("LOAD_CONST", 1), Instr("SWAP", 2), Instr("POP_TOP")]
    made = _decoding.placed(templates, None)
    assert made == templates and all(copy is not template for copy, template in zip(made, templates))
    made[0].arg = 5
    assert templates[0].arg == 1


def test_instructions_placed_in_c_read_and_set_fields_that_are_not_slots_by_name():
    class Located:
        __slots__ = ("_name", "_opcode", "_is_jump", "_arg", "_where")

        @property
        def _location(self):  # type: ignore[no-untyped-def]
            return self._where

        @_location.setter
        def _location(self, value):  # type: ignore[no-untyped-def]
            self._where = ("set", value)

    template = Located()
    template._name, template._opcode, template._is_jump, template._arg = "NOP", 9, False, None
    made = _decoding.placed([template], "here")
    assert type(made[0]) is Located and made[0]._where == ("set", "here") and made[0]._arg is None


def test_an_unset_field_of_a_template_raises_as_in_the_reference():
    from bytecode import Instr

    template = object.__new__(Instr)
    with pytest.raises(AttributeError):
        _decoding.placed([template], None)


def test_instructions_found_by_name_in_c_are_the_references_over_real_modules():
    from bytecode import Instr

    from cassette_hook.rewrite._instr import _named

    groups = {"LOAD_CONST": 2, "LOAD_ATTR": 1, "CALL": 0, "BINARY_OP": 0, "RETURN_VALUE": 1}
    bodies = _real_bodies()
    for body in bodies:
        items = list(decoder.bytecode(body))
        assert _decoding.named(items, Instr, groups, 3) == _named(items, Instr, groups, 3), body.co_qualname
    assert len(bodies) > 1000


def test_instructions_found_by_name_in_c_are_instances_of_the_class_given_subclasses_included():
    from bytecode import Instr, Label

    class Kept(Instr):
        pass

    items = [Label(), Instr("NOP"), Kept("NOP"), "NOP", Instr("POP_TOP"), Kept("LOAD_CONST", 1)]
    groups = {"NOP": 0, "LOAD_CONST": 1}
    assert _decoding.named(items, Instr, groups, 2) == [[1, 2], [5]]
    assert _decoding.named(items, Kept, groups, 2) == [[2], [5]]
    assert _decoding.named([], Instr, groups, 2) == [[], []]
