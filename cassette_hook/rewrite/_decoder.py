"""A decoder of our own for the common case (3.12+): a code object straight to the
``Bytecode`` that ``bytecode.Bytecode.from_code`` makes of it.

``bytecode`` decodes in two steps: it makes a ``ConcreteInstr`` object of every code unit
(each ``CACHE`` entry included), strips the ``EXTENDED_ARG``\\s, and then converts that list
to abstract instructions, asking every concrete instruction for its size, its jump target
and its line through method calls and a generator.  That was about a third of a cold
rewrite (docs/performance.md, "A decoder of our own").  :class:`Decoder` reads ``co_code``
once, stepping over each instruction's inline caches without looking at them, with the
per-opcode facts (name, kind of argument, jump direction, cache entries) in one table, and
puts the labels in at the end, where the jumps and handlers say.

It follows ``bytecode``'s conversion (``bytecode.concrete.ConcreteBytecode.from_code`` and
``to_bytecode``, release 0.19) rule for rule -- the arguments' kinds and their order of
precedence, where a jump lands, a ``CellVar`` shared by the instructions of an unshared
cell, a label before a ``TryBegin`` at the same offset, a ``TryEnd`` after the instruction
a handler's range ends on (or after its caches) -- so that what it makes is equal to what
``bytecode`` makes (``tests/test_decoding.py`` compares the two, item by item, over real
modules on every Python that uses it).  In one rule it does not follow ``bytecode``: 3.13's
local opcodes index the free variables after the locals and the unshared cells, every one
of them, as CPython lays them out (a free variable never shares a local's slot, though a
class body's inlined comprehension may have a local of the same name); ``bytecode`` leaves
out those named like a local, and then fails to read such a body, or, where the class body
has another free variable, reads the wrong one (docs/internals.md, "A decoder of our own").
What it does not know it declines
(:meth:`Decoder.bytecode` returns None: an ``EXTENDED_ARG`` where ``bytecode`` would raise
or drop it, a jump or a handler that lands on a cache entry, inside an instruction or outside the body,
exception table entries that are not in order, an opcode of a kind it does not know), and
the family's ``decode`` takes ``bytecode``'s route, whose result or error is then the one it
always gave.  The version's details (inline cache sizes, how a comparison is decoded,
whether a local opcode may name a cell, an instruction whose argument the family keeps as
CPython encodes it: 3.14's ``BUILD_INTERPOLATION``) come from the family (``_py312`` ...
``_py315``); which opcodes take which kind of argument (3.14's small ints, common
constants and special methods, 3.15's ``GET_ITER`` argument) from ``bytecode``'s own
tables, which it derives from ``opcode``.

Its loop over the units (:meth:`Decoder._items`) is the reference of a loop in C,
``_decoding.items`` (``rewrite/_decoding.c``), which ``_nullslot.own_decoder`` hands the
decoder where the accelerators are built: the same items, the positions read from
``co_linetable`` without a tuple a unit (docs/internals.md, "The decoder's loop in C";
``tests/test_decoding_in_c.py`` compares the two).
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import sys
from opcode import EXTENDED_ARG, opname
from types import CodeType
from typing import Any, Callable, Mapping, NamedTuple, Sequence, cast

from bytecode import BinaryOp, Bytecode, CompilerFlags, Compare, Instr, Label
from bytecode.concrete import HAS_COMPARE, HAS_CONST, HAS_FREE, HAS_LOCAL, HAS_NAME
from bytecode.instr import (BINARY_OPS, BITFLAG2_OPCODES, BITFLAG_OPCODES,
                            COMMON_CONSTANT_OPS, DUAL_ARG_OPCODES, FORMAT_VALUE_OPS, HAS_ABSOLUTE_JUMP,
                            HAS_BACKWARD_RELATIVE_JUMP, HAS_FORWARD_RELATIVE_JUMP, HAS_JUMP, INTRINSIC_1OP,
                            INTRINSIC_2OP, NOP_OPCODE, SPECIAL_OPS, UNSET, CellVar, CommonConstant, FormatValue,
                            FreeVar, InstrLocation, Intrinsic1Op, Intrinsic2Op, SpecialMethod, TryBegin, TryEnd,
                            opcode_has_argument)

from ._stack import Item

__all__ = ["Decoder"]

# What an opcode's argument decodes to, in the order ``bytecode`` asks (to_bytecode).
(_CONST, _LOCAL, _DUAL, _NAME, _FLAG_NAME, _FLAGS_NAME, _FREE, _INT, _NO_ARG,
 _COMPARE, _INTRINSIC1, _INTRINSIC2, _BINARY, _COMMON, _SPECIAL, _FORMAT,  # (an enum member, memoized by value)
 _JUMP, _EXTENDED, _UNKNOWN) = range(19)
_FIRST_ENUM = _COMPARE
_FORWARD, _BACKWARD, _ABSOLUTE = 1, 2, 3
_NOWHERE = 1 << 62  # (past any offset: no exception table entry left)

_new = object.__new__
# (an InstrLocation's slots, set as ``InstrLocation._from_tuple`` sets them, without its call and
# without looking each slot up by name)
_set_lineno, _set_end_lineno, _set_col_offset, _set_end_col_offset = (
    InstrLocation.__dict__[slot].__set__ for slot in ("lineno", "end_lineno", "col_offset", "end_col_offset"))


Scan = Callable[[tuple[object, ...], CodeType, Sequence[Any], list[Any], list[Any]], object]
"""``_decoding.items``: :meth:`Decoder._items` in C (the items; None where it declines;
``NotImplemented`` where the reference is to decode the code)."""


class _Declined(Exception):
    """Something the decoder does not know: ``bytecode``'s route decodes it."""


class _Entry(NamedTuple):
    """One exception table entry, in code units, its range inclusive (as ``bytecode``'s)."""

    start: int
    stop: int
    target: int
    stack_depth: int
    push_lasti: bool


def _kind(opcode: int, cache_opcode: int) -> int:
    if opcode == EXTENDED_ARG:
        return _EXTENDED
    if opcode == cache_opcode:
        return _UNKNOWN  # (a CACHE where an instruction should be)
    if opcode in HAS_JUMP:
        known = not ({opcode} & (HAS_CONST | HAS_LOCAL | HAS_NAME | HAS_FREE | HAS_COMPARE))
        return _JUMP if known and opcode_has_argument(opcode) else _UNKNOWN
    if not opcode_has_argument(opcode):
        return _NO_ARG
    if opcode in HAS_CONST:
        return _CONST
    if opcode in HAS_LOCAL:
        return _DUAL if opcode in DUAL_ARG_OPCODES else _LOCAL
    if opcode in HAS_NAME:
        return _FLAG_NAME if opcode in BITFLAG_OPCODES else _FLAGS_NAME if opcode in BITFLAG2_OPCODES else _NAME
    if opcode in HAS_FREE:
        return _FREE
    if opcode in HAS_COMPARE:
        return _COMPARE
    if opcode in INTRINSIC_1OP:
        return _INTRINSIC1
    if opcode in INTRINSIC_2OP:
        return _INTRINSIC2
    if opcode in BINARY_OPS:
        return _BINARY
    if opcode in COMMON_CONSTANT_OPS:  # (3.14+)
        return _COMMON
    if opcode in SPECIAL_OPS:  # (3.14+)
        return _SPECIAL
    if opcode in FORMAT_VALUE_OPS:  # (3.14's BUILD_INTERPOLATION: bytecode misreads it, _py314 keeps it)
        return _UNKNOWN if opcode in BITFLAG_OPCODES else _FORMAT
    return _INT  # (3.14's LOAD_SMALL_INT, 3.15's GET_ITER with its argument: CACHE_ONLY_ARG_OPCODES)


def _direction(opcode: int) -> int:
    if opcode in HAS_FORWARD_RELATIVE_JUMP:
        return _FORWARD
    if opcode in HAS_BACKWARD_RELATIVE_JUMP:
        return _BACKWARD
    return _ABSOLUTE if opcode in HAS_ABSOLUTE_JUMP else 0


def exception_entries(table: bytes) -> list[_Entry]:
    """``co_exceptiontable``'s entries (``Objects/exception_handling_notes.txt``): four
    varints each, six bits a byte, high first, bit 64 saying another byte follows.  (Read
    here for decoding, and by ``_assembler`` for the compiled entries it moves.)"""
    values: list[int] = []
    value = 0
    for byte in table:
        value = (value << 6) | (byte & 63)
        if not byte & 64:
            values.append(value)
            value = 0
    if len(values) % 4 or value:  # (a truncated table: declined, bytecode reads it its own way)
        raise ValueError("a truncated exception table")
    return [_Entry(values[i], values[i] + values[i + 1] - 1, values[i + 2], values[i + 3] >> 1,
                   bool(values[i + 3] & 1)) for i in range(0, len(values), 4)]


class Decoder:
    """Decodes a code object as ``bytecode`` would, for one CPython version."""

    def __init__(self, caches: Sequence[int], compare: Callable[[int], Compare], *, cache_opcode: int,
                 local_cells: bool, kept: Mapping[int, type[Instr]] | None = None,
                 scan: Scan | None = None) -> None:
        """``kept``: the opcodes whose argument the family keeps as CPython encodes it (an
        int), and the class of ``Instr`` its ``decode`` makes of them (3.14+'s
        ``BUILD_INTERPOLATION``).  ``scan``: the loop over the units in C
        (``_decoding.items``), or None where :meth:`_items`, its reference, runs."""
        self._local_cells = local_cells  # a local opcode may name a cell or free variable (3.13+)
        kept = kept or {}
        kinds = [_INT if op in kept else _kind(op, cache_opcode) for op in range(256)]
        directions = [_direction(op) for op in range(256)]
        classes = [kept.get(op, Instr) for op in range(256)]
        # (name, kind, jump direction, inline cache entries, is a jump, class of Instr) by opcode
        self._table = [(opname[op], kinds[op], directions[op], caches[op], op in HAS_JUMP, classes[op])
                       for op in range(256)]
        converters: dict[int, Callable[[int], object]] = {
            _COMPARE: compare, _INTRINSIC1: Intrinsic1Op, _INTRINSIC2: Intrinsic2Op, _BINARY: BinaryOp,
            _COMMON: CommonConstant, _SPECIAL: SpecialMethod, _FORMAT: FormatValue}
        self._converters = [converters.get(kind, int) for kind in range(_UNKNOWN + 1)]  # (int: no enum)
        self._members: list[dict[int, object]] = [{} for _ in range(_UNKNOWN + 1)]  # enum members by arg
        self._scan = scan
        # (the table as _decoding.c reads it: names, kinds, jump directions, caches, is a jump,
        # classes, converters, the memos, the classes it makes, UNSET, NOP's opcode)
        self._scan_tables: tuple[object, ...] = (
            tuple(opname[:256]), bytes(kinds), bytes(directions), bytes(caches[op] for op in range(256)),
            bytes(op in HAS_JUMP for op in range(256)), tuple(classes), self._converters, self._members,
            InstrLocation, Label, TryBegin, TryEnd, CellVar, FreeVar, UNSET, NOP_OPCODE)

    def bytecode(self, code: CodeType) -> Bytecode | None:
        """``Bytecode.from_code(code, conserve_exception_block_stackdepth=True)``'s result, or
        None where this decoder declines ``code``."""
        try:
            return self._bytecode(code)
        except (_Declined, KeyError, IndexError, TypeError, ValueError):
            return None  # (bytecode's route then gives its result, or its error)

    def _bytecode(self, code: CodeType) -> Bytecode:
        if sys.version_info < (3, 11):  # (never: made for 3.12+; this says so to the type checker)
            raise _Declined
        consts, freevars = code.co_consts, code.co_freevars
        varnames = list(code.co_varnames)
        cells: list[str | CellVar] = [*varnames, *(CellVar(name) for name in code.co_cellvars if name not in varnames)]
        locals_: Sequence[str | CellVar | FreeVar] = varnames
        if self._local_cells:
            locals_ = [*cells, *(FreeVar(name) for name in freevars)]  # (all: see above)
        entries = exception_entries(code.co_exceptiontable)
        for entry, following in zip(entries, entries[1:]):
            if not entry.start <= entry.stop < following.start:
                raise _Declined  # (out of order or overlapping: bytecode has rules of its own)
        scanned = NotImplemented if self._scan is None else self._scan(self._scan_tables, code, locals_, cells,
                                                                        entries)
        if scanned is None:
            raise _Declined  # (where the reference declines)
        # (no C, or what it does not take: the reference)
        items = self._items(code, locals_, cells, entries) if scanned is NotImplemented else cast("list[Item]", scanned)

        bc = Bytecode()
        bc.argcount, bc.posonlyargcount = code.co_argcount, code.co_posonlyargcount
        bc.kwonlyargcount = code.co_kwonlyargcount
        bc.flags = CompilerFlags(code.co_flags)
        bc.first_lineno = code.co_firstlineno
        bc.name, bc.qualname, bc.filename = code.co_name, code.co_qualname, code.co_filename
        if consts and (consts[0] is None or isinstance(consts[0], str)):
            bc.docstring = consts[0]
        bc.cellvars, bc.freevars = list(code.co_cellvars), list(freevars)
        bc.argnames = varnames[:_argument_count(code)]
        list.extend(bc, items)
        return bc

    def _items(self, code: CodeType, locals_: Sequence[str | CellVar | FreeVar], cells: list[str | CellVar],
               entries: list[_Entry]) -> list[Item]:
        """``code``'s items: its instructions, the try blocks' starts and ends, and the labels
        where the jumps and handlers land (``_decoding.items`` in C, where it is built)."""
        if sys.version_info < (3, 11):  # (never: made for 3.12+; this says so to the type checker)
            raise _Declined
        raw = code.co_code
        positions = list(code.co_positions())
        consts, names, freevars = code.co_consts, code.co_names, code.co_freevars
        ncells = len(cells)
        table, converters, members = self._table, self._converters, self._members
        next_entry = 0
        next_start = next_stop = _NOWHERE
        if entries:
            next_start, next_stop = entries[0].start, entries[0].stop
        try_begin: TryBegin | None = None
        handlers: list[tuple[TryBegin, int]] = []

        items: list[Item] = []
        append = items.append
        units = len(raw) >> 1
        starts = [-1] * units  # an instruction's first code unit -> where its labels go in items (else -1)
        jumps: list[tuple[int, int]] = []  # (a jump's index in items, the code unit it lands on)
        last_position: object = None
        location: InstrLocation | None = None
        unit = 0
        while unit < units:
            first = unit
            op = raw[2 * unit]
            name, kind, direction, caches, is_jump, cls = table[op]
            if kind == _EXTENDED:
                extended = raw[2 * unit + 1]
                unit += 1
                while unit < units and raw[2 * unit] == EXTENDED_ARG:
                    extended = (extended << 8) + raw[2 * unit + 1]
                    unit += 1
                if unit == units:
                    raise _Declined  # (EXTENDED_ARG at the end: bytecode's error)
                op = raw[2 * unit]
                name, kind, direction, caches, is_jump, cls = table[op]
                if kind == _NO_ARG and op != NOP_OPCODE:
                    raise _Declined  # (an argument for an instruction without one: bytecode's error)
                c_arg = UNSET if op == NOP_OPCODE else (extended << 8) + raw[2 * unit + 1]
            else:
                c_arg = raw[2 * unit + 1]
            last = unit + caches  # (its last code unit)

            if next_start <= last:
                if next_start != first:
                    raise _Declined  # (a handler's range starting on a cache entry or inside an instruction)
                starts[first] = len(items)
                entry = entries[next_entry]
                try_begin = TryBegin(Label(), entry.push_lasti, entry.stack_depth)
                handlers.append((try_begin, entry.target))
                append(try_begin)
                next_start = _NOWHERE
            else:
                starts[first] = len(items)

            position = positions[unit]
            if position != last_position:
                # (InstrLocation._from_tuple's four stores, through the slots' own setters)
                location = _new(InstrLocation)
                lineno, end_lineno, col_offset, end_col_offset = last_position = position
                _set_lineno(location, lineno)
                _set_end_lineno(location, end_lineno)
                _set_col_offset(location, col_offset)
                _set_end_col_offset(location, end_col_offset)

            # (the kinds by how common they are: networkx's code on 3.12 and 3.13)
            if kind == _INT:
                arg: object = c_arg
            elif kind == _LOCAL:
                arg = locals_[c_arg]
            elif kind == _CONST:
                arg = consts[c_arg]
            elif kind == _FLAG_NAME:
                arg = (c_arg & 1 == 1, names[c_arg >> 1])
            elif kind == _NO_ARG:
                arg = UNSET
            elif kind == _JUMP:
                arg = None  # (the label, once all are known)
                after = last + 1
                jumps.append((len(items), after + c_arg if direction == _FORWARD else after - c_arg
                              if direction == _BACKWARD else c_arg))
            elif kind == _NAME:
                arg = names[c_arg]
            elif kind == _DUAL:
                arg = (locals_[c_arg >> 4], locals_[c_arg & 15])
            elif kind >= _FIRST_ENUM and kind < _JUMP:
                known = members[kind]
                arg = known.get(c_arg)
                if arg is None:
                    arg = known[c_arg] = converters[kind](c_arg)
            elif kind == _FREE:
                if c_arg < ncells:
                    cell = cells[c_arg]
                    arg = cell if isinstance(cell, CellVar) else CellVar(cell)
                else:
                    arg = FreeVar(freevars[c_arg - ncells])
            elif kind == _FLAGS_NAME:
                arg = (c_arg & 1 == 1, c_arg & 2 == 2, names[c_arg >> 2])
            else:
                raise _Declined

            instr = _new(cls)
            instr._name = name
            instr._opcode = op
            instr._is_jump = is_jump
            instr._arg = arg
            instr._location = location
            append(instr)

            if next_stop <= last:
                if next_stop < unit or try_begin is None:
                    raise _Declined  # (a handler's range ending inside an instruction, or before it starts)
                append(TryEnd(try_begin))
                try_begin = None
                next_entry += 1
                if next_entry < len(entries):
                    next_start, next_stop = entries[next_entry].start, entries[next_entry].stop
                else:
                    next_stop = _NOWHERE
            unit = last + 1

        if next_entry < len(entries):
            raise _Declined  # (a handler's range past the end)
        labels: dict[int, Label] = {}
        for index, target in jumps:
            cast(Instr, items[index])._arg = labels.get(target) or labels.setdefault(target, Label())
        for try_begin, target in handlers:
            try_begin.target = labels.get(target) or labels.setdefault(target, Label())
        if labels:
            placed = [(starts[target] if target >= 0 else -1, label) for target, label in labels.items()]
            if any(index < 0 for index, _ in placed):
                raise _Declined  # (a jump or a handler landing on a cache entry, inside an instruction or before all)
            items = _with_labels(items, placed)
        return items


def _argument_count(code: CodeType) -> int:
    """How many of ``co_varnames`` are arguments, ``*args`` and ``**kwargs`` included."""
    flags = code.co_flags
    return (code.co_argcount + code.co_kwonlyargcount + code.co_posonlyargcount
            + bool(flags & 0x04) + bool(flags & 0x08))  # (CO_VARARGS, CO_VARKEYWORDS)


def _with_labels(items: list[Item], placed: list[tuple[int, Label]]) -> list[Item]:
    """``items`` with each label put in at its index (as it was before the label went in)."""
    placed.sort(key=lambda pair: pair[0])
    out: list[Item] = []
    done = 0
    for index, label in placed:
        out += items[done:index]
        out.append(label)
        done = index
    out += items[done:]
    return out
