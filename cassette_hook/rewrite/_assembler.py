"""An assembler of our own for the common case (3.12+): a rewritten body straight to a
code object, without ``bytecode``'s concrete instructions.

``bytecode`` assembles a ``Bytecode`` in two steps: it converts every item to a
``ConcreteInstr`` object (one more object per instruction that takes inline caches, for
its ``CACHE`` entries), resolves the jumps over those objects, and then encodes them one
method call at a time, with a list of line numbers the family's line table does not read.
That was about two fifths of a cold rewrite (docs/internals.md, "Where a cold import's time
goes").  :class:`Assembler` makes the same code object in one pass over the items into flat
lists of opcodes, arguments and positions, then the jumps, the bytes, the exception table
and the line table from those lists.

It follows ``bytecode``'s conversion (``bytecode.concrete._ConvertBytecodeToConcrete``)
rule for rule -- the order constants, names and local variables are numbered in, the
jumps' arguments and their ``EXTENDED_ARG``\\s, the exception table -- so that what it makes
is identical to what ``bytecode`` makes (``tests/test_assembly.py`` compares the two, field
by field, over real modules on every Python that uses it).  What it does not know it
declines (:meth:`Assembler.code` returns None: a ``SetLineno``, a ``CACHE`` written by a
pass, nested try blocks, an argument of a kind it does not expect, jumps that do not
settle), and ``_rewriter.assemble`` takes ``bytecode``'s route, whose result or error is
then the one it always gave.  The version's details (inline cache sizes, how a comparison
is encoded, two-variable opcodes, the family's own classes of ``Instr``: 3.14's
``BUILD_INTERPOLATION``) come from the family (``_py312`` ... ``_py315``).  3.14's new
arguments (a small int, a common constant, a special method: ints and ``IntEnum``\\s) are
copied into the code as they are, as ``bytecode`` copies them.

Where the accelerators are built, the loop over the items and the line table run in C
(``_assembly.c``'s ``walk`` and ``line_table``, which ``_nullslot`` hands the assembler):
the loop here is then the reference, and the body the C loop hands back an item at a time
for what it does not take (docs/internals.md, "The assembler's per-instruction work in C").
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import itertools
import operator
from opcode import EXTENDED_ARG, opmap
from types import CodeType
from typing import Any, Callable, Iterable, Sequence, cast

from bytecode import Bytecode, Compare, Instr, Label
from bytecode.concrete import HAS_COMPARE, HAS_CONST, HAS_FREE, HAS_LOCAL, HAS_NAME
from bytecode.instr import (BITFLAG2_OPCODES, BITFLAG_OPCODES, DUAL_ARG_OPCODES, HAS_ABSOLUTE_JUMP,
                            HAS_BACKWARD_RELATIVE_JUMP, HAS_FORWARD_RELATIVE_JUMP, INTRINSIC, UNSET, CellVar, FreeVar,
                            InstrLocation, Intrinsic1Op, Intrinsic2Op, TryBegin, TryEnd, const_key)

from ._decoder import exception_entries
from ._instr import CompiledPosition, Location, named

__all__ = ["Assembler", "Verbatim"]

LineTable = Callable[[int, Iterable[tuple[Location, int]]], bytes]
"""The family's line table of (position, code units) runs (``_nullslot.line_table``: the C
encoder of ``_assembly.c`` where it is built, else its reference ``_nullslot._line_table``)."""

# What each opcode's argument is, as bytecode's conversion asks it, in its order; _CACHE:
# the family's CACHE, which a body may not hold (declined).
_CONST, _LOCAL, _DUAL, _NAME, _FLAG_NAME, _FLAGS_NAME, _FREE, _COMPARE, _INTRINSIC, _INT, _CACHE = range(11)
_FORWARD, _BACKWARD, _ABSOLUTE = 1, 2, 3
# The kinds the C loop takes (_assembly.c's KIND_INT ... KIND_FLAGS_NAME, in its order); 0: it
# hands the instruction to the Python loop's body
_WALK_KINDS = {_INT: 1, _CONST: 2, _NAME: 3, _LOCAL: 4, _FLAG_NAME: 5, _FLAGS_NAME: 6, _COMPARE: 7}
_RESUME = opmap["RESUME"]
_JUMP_PASSES = 10  # bytecode's own limit before it gives up on jumps that do not settle


def _kind(opcode: int) -> int:
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
    if opcode in INTRINSIC:
        return _INTRINSIC
    return _INT


def _jump(opcode: int) -> int:
    if opcode in HAS_FORWARD_RELATIVE_JUMP:
        return _FORWARD
    if opcode in HAS_BACKWARD_RELATIVE_JUMP:
        return _BACKWARD
    return _ABSOLUTE if opcode in HAS_ABSOLUTE_JUMP else 0


_WalkState = tuple[InstrLocation, bool, bool]  # (the loop's position, has it no line, is a try block open)
Walk = Callable[..., _WalkState]
"""``_assembly.walk``: the loop over the items in C (see ``Assembler._code``)."""
ReadRuns = Callable[[CodeType, int, int, type], object]
"""``_decoding.runs``: :class:`Verbatim`'s runs read in C (the runs, or ``NotImplemented``
where the reference is to read them)."""

_code_type: Callable[..., CodeType] = CodeType  # (3.11+'s arguments: mypy checks this module as 3.10 too)


def _units(arg: int) -> int:
    """Code units an instruction with ``arg`` takes, its ``EXTENDED_ARG``\\s included."""
    return 1 if arg <= 0xFF else 2 if arg <= 0xFFFF else 3 if arg <= 0xFFFFFF else 4


def _code_fields(code: CodeType) -> tuple[object, ...]:
    """Fields of ``code`` that its marshalled bytes hold, cheap to compare: strings and bytes
    (whose hash each keeps) and a number.  Two code objects marshalled alike have them alike."""
    return code.co_filename, code.co_name, code.co_firstlineno, code.co_linetable


def _numbering(values: list[str], index_of: dict[str, int]) -> Callable[[str], int]:
    """A name's index in ``values``, appended at its first use (as ``bytecode`` numbers
    names and local variables); ``index_of``: the indexes, kept (the C loop reads it too)."""

    def number(value: str) -> int:
        index = index_of.get(value)
        if index is None:
            index = index_of[value] = len(values)
            values.append(value)
        return index

    return number


class Verbatim:
    """Code units ``start`` to ``stop`` of a compiled ``code``, to be assembled as they are.

    The import hook's switched code holds a body twice, the plain half being the compiled
    body (docs/internals.md, "The import hook: switched code, made at import").  Decoding
    that half and assembling it again instruction by instruction was most of the
    assembler's work in a cold import; its code units can be copied instead, provided the
    code object numbers constants, names and local variables as ``code`` does (the first
    item of what is assembled is then a ``Verbatim``: its ``consts`` -- ``code``'s, its
    nested code objects replaced -- names and variables come first) and the jumps in it
    are relative (3.12+: a block moves unchanged).  Its exception table entries come along,
    their offsets moved with the units, and the positions are ``code``'s own.
    """

    __slots__ = ("code", "consts", "start", "stop", "opcodes", "args", "runs")

    def __init__(self, code: CodeType, consts: tuple[object, ...], start: int, stop: int,
                 read_runs: ReadRuns | None = None) -> None:
        """``read_runs``: the runs' reader in C (``_decoding.runs``), or None where the loop
        below, its reference, reads them."""
        self.code, self.consts, self.start, self.stop = code, consts, start, stop
        raw = code.co_code[2 * start:2 * stop]
        self.opcodes, self.args = list(raw[0::2]), list(raw[1::2])
        read = NotImplemented if read_runs is None else read_runs(code, start, stop, CompiledPosition)
        if read is not NotImplemented:
            self.runs = cast("list[tuple[int, InstrLocation]]", read)
            return
        # (the line table's runs: where each starts among the units, and its position; a
        # unit a run where there is no line -- see Assembler._code.  Only the runs are
        # kept: a position a unit was a list the joining read the first of, 7% of this)
        runs: list[tuple[int, InstrLocation]] = []
        last: CompiledPosition | None = None
        for unit, position in enumerate(itertools.islice(cast(Any, code).co_positions(), start, stop)):  # (3.11+)
            if position != last:  # (one object a run, as the encoder likes them)
                last = CompiledPosition(position)
                runs.append((unit, cast(InstrLocation, last)))
            elif position[0] is None:
                runs.append((unit, cast(InstrLocation, last)))
        self.runs = runs

    @property
    def first_position(self) -> CompiledPosition | None:
        """The position of the block's first code unit (None: it has none)."""
        return cast(CompiledPosition, self.runs[0][1]) if self.runs else None


class _Declined(Exception):
    """Something the assembler does not know: ``bytecode``'s route assembles it."""


class Assembler:
    """Assembles a rewritten ``Bytecode`` as ``bytecode`` would, for one CPython version."""

    def __init__(self, caches: Sequence[int], compare: Callable[[Compare], int], line_table: LineTable, *,
                 cache_opcode: int, local_cells: bool, instr_types: Iterable[type[Instr]] = (),
                 walk: Walk | None = None, read_runs: ReadRuns | None = None) -> None:
        """``instr_types``: the family's own classes of ``Instr`` that may be in a body (its
        ``decode`` makes them), assembled as ``Instr``\\s; any other class is a pass's and
        declined.  ``walk``: the loop over the items in C (``_assembly.walk``), or None
        (the Python loop alone).  ``read_runs``: :class:`Verbatim`'s runs read in C
        (``_decoding.runs``), or None."""
        self._instr_types = frozenset({Instr, *instr_types})
        self._caches = caches  # inline cache entries after each opcode
        self._compare = compare
        self._line_table = line_table
        self._cache_opcode = cache_opcode
        self._local_cells = local_cells  # a cell or free variable may be a local opcode's argument (3.13+)
        self._kinds = [_CACHE if opcode == cache_opcode else _kind(opcode) for opcode in range(256)]
        self._jumps = [_jump(opcode) for opcode in range(256)]
        # (the two-variable opcodes by name, 3.13+: named's one group)
        self._dual = {name: 0 for name, opcode in opmap.items() if opcode < 256 and self._kinds[opcode] == _DUAL}
        # (each opcode's units and a run of zero arguments, made once: the loop over the
        # items extends its lists by them rather than appending unit by unit)
        self._unit_opcodes = [[opcode] + [cache_opcode] * entries for opcode, entries in enumerate(caches)]
        self._zeros = [[0] * entries for entries in range(max(caches) + 1)]
        self._walk = walk
        self._read_runs = read_runs
        self._walk_tables = (self._instr_types, bytes(_WALK_KINDS.get(kind, 0) for kind in self._kinds),
                             bytes(caches[:256]), cache_opcode, Label, InstrLocation, UNSET, Compare, TryBegin, TryEnd,
                             Verbatim)

    def code(self, bc: Bytecode, stacksize: int) -> CodeType | None:
        """``bc`` as a code object with ``stacksize`` (as ``_rewriter.assemble`` makes it by
        ``bytecode``'s route), or None where this assembler declines it."""
        try:
            return self._code(bc, stacksize)
        except (_Declined, KeyError, IndexError, TypeError, ValueError, AttributeError):
            return None  # (bytecode's route then gives its result, or its error)

    def halves(self, code: CodeType, consts: tuple[object, ...]) -> tuple[Verbatim, Verbatim, int] | None:
        """``code``'s prefix (its units up to its first ``RESUME``, that one's caches
        included: where a frame starts) and the rest, as :class:`Verbatim` blocks with
        ``consts``, and how many instructions the prefix has; None where there is no
        ``RESUME``."""
        opcodes = code.co_code[0::2]
        resume = opcodes.find(_RESUME)
        if resume < 0:
            return None
        stop = resume + 1 + self._caches[_RESUME]
        instructions = sum(1 for opcode in opcodes[:stop] if opcode != EXTENDED_ARG and opcode != self._cache_opcode)
        return (Verbatim(code, consts, 0, stop, self._read_runs),
                Verbatim(code, consts, stop, len(opcodes), self._read_runs), instructions)

    def _code(self, bc: Bytecode, stacksize: int) -> CodeType:
        consts: list[object] = []
        const_index: dict[object, int] = {}
        names: list[str] = []
        varnames: list[str] = []

        by_id: dict[int, int] = {}  # (a constant's index by the object: the items hold them all)
        # (the code constants by what a code object's marshalled bytes hold, each with those
        # that have it alike: see code_const)
        codes: dict[tuple[object, ...], list[tuple[CodeType, int]]] = {}

        def const(value: object) -> int:
            # (bytecode's key is the value marshalled: a code object's whole tree, each time
            # a body loads it -- a module's joined body, its seed's constants too)
            index = by_id.get(id(value))
            if index is None:
                if type(value) is CodeType:
                    index = code_const(value)
                else:
                    key = const_key(value)
                    index = const_index.get(key)
                    if index is None:
                        index = const_index[key] = len(consts)
                        consts.append(value)
                by_id[id(value)] = index
            return index

        def code_const(value: CodeType) -> int:
            # A code constant's index as its marshalled bytes, ``bytecode``'s key, give it, with
            # the bytes made only where they may be another's: two code objects marshalled alike
            # have the same file, name, first line and line table (``_code_fields``), and no
            # other constant is marshalled as a code object is.  So a code object whose fields
            # no other's had is a constant of its own, and only one whose fields some had is
            # marshalled, with them.  (Marshalling every code constant, its whole tree, was a
            # fourteenth of assembling a module; its hash costs as much.)
            fields = _code_fields(value)
            alike = codes.get(fields)
            if alike is not None:
                key = const_key(value)
                for other, index in alike:
                    if const_key(other) == key:
                        return index
            index = len(consts)
            consts.append(value)
            if alike is None:
                codes[fields] = [(value, index)]
            else:
                alike.append((value, index))
            return index

        name_index: dict[str, int] = {}
        varname_index: dict[str, int] = {}
        name, varname = _numbering(names, name_index), _numbering(varnames, varname_index)

        items = cast(list[object], list.copy(bc))  # (bytecode's items, and Verbatim blocks)
        seed = items[0] if items and type(items[0]) is Verbatim else None
        if seed is not None:  # (numbered as compiled, so that its units hold as they are)
            for value in seed.consts:
                const(value)
            for value in seed.code.co_names:
                name(value)
            for value in seed.code.co_varnames:
                varname(value)
            if (len(consts), len(names), len(varnames)) != (len(seed.consts), len(seed.code.co_names),
                                                             len(seed.code.co_varnames)):
                raise _Declined  # (two constants of one key)
        if bc.docstring is not UNSET:
            const(bc.docstring)
        for arg_name in bc.argnames:
            varname(arg_name)
        if self._dual:  # (3.13+: the two-variable opcodes' names first, for small indexes)
            # (those instructions found at once, _instr.named: in C where it is built, where a
            # walk over every item in Python was about a third of this method's own time)
            for index in named(items, Instr, self._dual, 1)[0]:
                item = items[index]
                if type(item) is Instr:
                    for pair_name in cast(tuple[str, str], item.arg):
                        varname(pair_name)

        kinds, caches, local_cells = self._kinds, self._caches, self._local_cells
        instr_types, unit_opcodes, zeros = self._instr_types, self._unit_opcodes, self._zeros
        cellvars, freevars = bc.cellvars, bc.freevars
        opcodes: list[int] = []
        args: list[int] = []  # (0 where there is none: bytecode writes it so)
        # (the line table's runs: where each starts among the units, and its position --
        # one a run of instructions with one position object, or a unit where it has no
        # line, as the table joins none of those; docs/performance.md, "The line table
        # made of runs")
        starts: list[int] = [0]
        run_positions: list[InstrLocation] = []
        add_opcode, add_arg, add_start, add_position = opcodes.append, args.append, starts.append, run_positions.append
        labels: dict[Label, int] = {}
        jumps: list[tuple[int, Label]] = []
        blocks: dict[TryBegin, list[int]] = {}  # index of the first instruction in the block, of the last
        cells: list[int] = []
        frees: list[int] = []
        wide: list[int] = []  # (the instructions whose argument takes EXTENDED_ARGs, in order)
        start_position = InstrLocation(bc.first_lineno, None, None, None)
        add_position(start_position)
        verbatim: list[tuple[int, Verbatim]] = []  # (index of its first unit, the block)

        def walk(part: Iterable[object], state: _WalkState) -> _WalkState:
            """The loop over the items, over ``part``: all of them, or on the C path (``walk``,
            ``_assembly.c``) one it hands back; ``state``: the position, whether it has no
            line, whether a try block is open, as the items before left them, and returned
            as ``part`` leaves them."""
            position, lineless, in_try = state
            for item in part:
                if type(item) in instr_types:  # (an Instr, or a subclass the family names; first: most items)
                    # (the fields under bytecode's properties, read as our decoder writes them: a
                    # property call each was a tenth of this loop)
                    opcode, arg, loc = item._opcode, item._arg, item._location  # type: ignore[attr-defined]
                    if loc is not position and isinstance(loc, InstrLocation):  # (else None or UNSET: the one before)
                        position = loc
                        lineless = loc.lineno is None
                        if not lineless:
                            add_start(len(opcodes))
                            add_position(loc)
                    kind = kinds[opcode]
                    if type(arg) is Label:
                        jumps.append((len(opcodes), arg))
                        c_arg = 0  # (set once the offsets are known)
                    elif kind == _INT:
                        if type(arg) is int:
                            c_arg = arg
                        elif arg is UNSET:
                            c_arg = 0
                        elif isinstance(arg, int):  # (an enum of ``bytecode``'s: BinaryOp ...)
                            c_arg = int(arg)
                        else:
                            raise _Declined
                    elif kind == _CONST:
                        c_arg = const(arg)
                    elif kind == _NAME:
                        if type(arg) is not str:
                            raise _Declined
                        c_arg = name(arg)
                    elif kind == _LOCAL:
                        if type(arg) is str:
                            c_arg = varname(arg)
                        elif local_cells and isinstance(arg, CellVar):
                            cells.append(len(opcodes))
                            c_arg = cellvars.index(arg.name)
                        elif local_cells and isinstance(arg, FreeVar):
                            frees.append(len(opcodes))
                            c_arg = freevars.index(arg.name)
                        else:
                            raise _Declined
                    elif kind == _FLAG_NAME:
                        if type(arg) is not tuple or type(arg[1]) is not str:
                            raise _Declined
                        c_arg = int(arg[0]) + (name(arg[1]) << 1)
                    elif kind == _FLAGS_NAME:
                        if type(arg) is not tuple or type(arg[2]) is not str:
                            raise _Declined
                        c_arg = int(arg[0]) + 2 * int(arg[1]) + (name(arg[2]) << 2)
                    elif kind == _FREE:
                        if isinstance(arg, CellVar):
                            cells.append(len(opcodes))
                            c_arg = cellvars.index(arg.name)
                        elif isinstance(arg, FreeVar):
                            frees.append(len(opcodes))
                            c_arg = freevars.index(arg.name)
                        else:
                            raise _Declined
                    elif kind == _COMPARE:
                        if not isinstance(arg, Compare):
                            raise _Declined
                        c_arg = self._compare(arg)
                    elif kind == _INTRINSIC:
                        if not isinstance(arg, (Intrinsic1Op, Intrinsic2Op)):
                            raise _Declined
                        c_arg = arg.value
                    elif kind == _DUAL:
                        first, second = varnames.index(arg[0]), varnames.index(arg[1])  # (ValueError: declined)
                        if first > 16 or second > 16:  # (bytecode then splits it in two: rare enough to leave to it)
                            raise _Declined
                        c_arg = (first << 4) + second
                    else:  # (_CACHE: a CACHE written by a pass)
                        raise _Declined
                    if c_arg > 0xFF:
                        wide.append(len(opcodes))
                    entries = caches[opcode]
                    if lineless:  # (a run a unit)
                        starts.extend(range(len(opcodes), len(opcodes) + entries + 1))
                        run_positions.extend([position] * (entries + 1))
                    if entries:  # (the opcode and its CACHE entries at once)
                        opcodes.extend(unit_opcodes[opcode])
                        add_arg(c_arg)
                        args.extend(zeros[entries])
                    else:
                        add_opcode(opcode)
                        add_arg(c_arg)
                elif type(item) is Label:
                    labels[item] = len(opcodes)
                elif type(item) is Verbatim:
                    if seed is None or item.code is not seed.code:
                        raise _Declined
                    verbatim.append((len(opcodes), item))
                    for unit, at in item.runs:
                        add_start(len(opcodes) + unit)
                        add_position(at)
                    opcodes.extend(item.opcodes)
                    args.extend(item.args)
                    if item.runs:
                        position = item.runs[-1][1]
                        lineless = position.lineno is None
                elif type(item) is TryBegin:
                    if in_try or type(item.stack_depth) is not int or type(item.target) is not Label:
                        raise _Declined
                    in_try = True
                    blocks[item] = [len(opcodes), 0]
                elif type(item) is TryEnd:
                    in_try = False
                    blocks[item.entry][1] = len(opcodes) - 1
                else:
                    raise _Declined  # (a SetLineno; an instruction type of a pass's own)
            return position, lineless, in_try

        if self._walk is None:
            walk(items, (start_position, False, False))  # (lineless: has the position no line?)
        else:  # (the C loop: instructions of the common kinds, labels, try blocks; the rest through walk)
            self._walk(self._walk_tables, items, (start_position, False, False),
                       (opcodes, args, starts, run_positions, labels, jumps, wide, blocks, verbatim),
                       (by_id, names, name_index, varnames, varname_index, const, self._compare,
                        None if seed is None else seed.code), walk)

        if seed is not None and (len(varnames) != len(seed.code.co_varnames) or tuple(cellvars) != seed.code.co_cellvars
                                 or tuple(freevars) != seed.code.co_freevars):
            raise _Declined  # (the cells would not be numbered as compiled)
        self._number_cells(args, cells, frees, varnames, cellvars)
        if cells or frees:  # (numbered among the locals now: wide or not as their slots are)
            wide = sorted(index for index in {*wide, *cells, *frees} if args[index] > 0xFF)
        label_offsets, wide = self._resolve_jumps(opcodes, args, labels, jumps, wide)

        def instruction_offset(index: int) -> int:  # (of an instruction itself, after its EXTENDED_ARGs)
            if index < 0:  # (a try block that ended before its first instruction: as a list indexes it)
                index += len(args)
                if index < 0:
                    raise _Declined
            return label_offsets[index + 1] - 1

        handlers: list[tuple[int, int, int, int]] = []  # (start, size, target, depth and lasti)
        for block, (start, stop) in blocks.items():
            start_offset = instruction_offset(start)
            size = instruction_offset(stop) - start_offset + 1
            if size < 0:  # (a try block never ended; bytecode's encoder would never stop)
                raise _Declined
            handlers.append((start_offset, size, label_offsets[labels[cast(Label, block.target)]],
                            (block.stack_depth << 1) + block.push_lasti))
        if verbatim:
            handlers += _moved_entries(verbatim, label_offsets)
            handlers.sort()
        table = bytearray()
        for start_offset, size, target, depth_lasti in handlers:
            _exception_varint(table, start_offset, True)
            _exception_varint(table, size)
            _exception_varint(table, target)
            _exception_varint(table, depth_lasti)

        code = bytearray(2 * label_offsets[-1])
        if len(starts) > 1 and starts[1] == 0:  # (the first position: no unit has it)
            del starts[0], run_positions[0]
        ends = starts[1:]
        ends.append(len(args))
        # (each run's units: its instructions' where none is wide, else from their offsets)
        units = map(operator.sub, ends, starts) if not wide else map(
            operator.sub, map(label_offsets.__getitem__, ends), map(label_offsets.__getitem__, starts))
        runs: Iterable[tuple[Location, int]] = zip(run_positions, units) if args else ()
        if not wide:  # (most bodies: every instruction one code unit)
            code[0::2], code[1::2] = opcodes, args
            return self._code_object(bc, stacksize, code, consts, names, varnames, table, runs)
        # (the runs of one-unit instructions between the wide ones copied as slices)
        start = 0
        for index in wide:
            _copy_units(code, 2 * label_offsets[start], opcodes, args, start, index)
            arg, offset = args[index], 2 * label_offsets[index]
            for shift in range(_units(arg) - 1, 0, -1):
                code[offset] = EXTENDED_ARG
                code[offset + 1] = (arg >> 8 * shift) & 0xFF
                offset += 2
            code[offset] = opcodes[index]
            code[offset + 1] = arg & 0xFF
            start = index + 1
        _copy_units(code, 2 * label_offsets[start], opcodes, args, start, len(args))
        return self._code_object(bc, stacksize, code, consts, names, varnames, table, runs)

    def _code_object(self, bc: Bytecode, stacksize: int, code: bytearray, consts: list[object], names: list[str],
                     varnames: list[str], table: bytearray, runs: Iterable[tuple[Location, int]]) -> CodeType:
        return _code_type(
            bc.argcount, bc.posonlyargcount, bc.kwonlyargcount, len(varnames), stacksize, int(bc.flags),
            bytes(code), tuple(consts), tuple(names), tuple(varnames), bc.filename, bc.name, bc.qualname,
            bc.first_lineno, self._line_table(bc.first_lineno, runs), bytes(table),
            tuple(bc.freevars), tuple(bc.cellvars))

    @staticmethod
    def _number_cells(args: list[int], cells: list[int], frees: list[int], varnames: list[str],
                      cellvars: Sequence[str]) -> None:
        """Cell and free variables numbered among the locals, once all locals are known: a
        cell of an argument shares its slot, the others follow the locals, the free
        variables the cells."""
        shared = 0
        unshared = 0
        slots: list[int] = []
        for cell in cellvars:
            if cell in varnames:
                slots.append(varnames.index(cell))
                shared += 1
            else:
                slots.append(len(varnames) + unshared)
                unshared += 1
        for index in cells:
            args[index] = slots[args[index]]
        free_offset = len(varnames) + len(cellvars) - shared
        for index in frees:
            args[index] += free_offset

    def _resolve_jumps(self, opcodes: list[int], args: list[int], labels: dict[Label, int],
                       jumps: list[tuple[int, Label]], wide: list[int]) -> tuple[Sequence[int], list[int]]:
        """The jumps' arguments, pass after pass until no ``EXTENDED_ARG`` changes an offset,
        given the instructions other than jumps whose argument takes ``EXTENDED_ARG``\\s
        (``wide``, in order); the offset of each instruction's first unit (a label's; the
        last: the end) and the wide instructions, jumps included, in order.

        The offsets are the indexes where no instruction is wide (most bodies: then no list
        is made of them, and a jump's argument is worked out from its index and its label's,
        without the offsets' look-ups and the widths' calls: the passes were a fifth of
        ``Assembler._code`` over sympy's bodies; docs/performance.md, "The passes' work
        cheaper, again"), else made a run of indexes at a time between the wide ones."""
        caches, kinds = self._caches, self._jumps
        count = len(args)
        now = wide
        for _ in range(_JUMP_PASSES):
            label_offsets: Sequence[int] = range(count + 1)
            moved = False
            if not now:  # (every jump one unit, every offset its index: a jump's own arithmetic, inline)
                for index, label in jumps:
                    opcode = opcodes[index]
                    kind = kinds[opcode]
                    if kind == _FORWARD:
                        arg = labels[label] - index - caches[opcode] - 1
                    elif kind == _BACKWARD:
                        arg = index + caches[opcode] + 1 - labels[label]
                    elif kind:
                        arg = labels[label]
                    else:
                        raise _Declined
                    if arg > 0xFF:  # (now wide: the offsets after it move)
                        if arg > 0x7FFFFFFF:
                            raise _Declined
                        moved = True
                    elif arg < 0:
                        raise _Declined
                    args[index] = arg
            else:
                offsets: list[int] = []
                start = shift = 0
                for index in now:
                    offsets += range(start + shift, index + 1 + shift)
                    shift += _units(args[index]) - 1
                    start = index + 1
                offsets += range(start + shift, count + 1 + shift)
                label_offsets = offsets
                for index, label in jumps:
                    target = label_offsets[labels[label]]
                    opcode = opcodes[index]
                    arg = args[index]
                    width = 1 if arg <= 0xFF else _units(arg)  # (the call only for a wide one)
                    after = label_offsets[index] + caches[opcode] + width
                    kind = kinds[opcode]
                    arg = target - after if kind == _FORWARD else after - target if kind == _BACKWARD else target
                    if kind == 0 or not 0 <= arg <= 0x7FFFFFFF:
                        raise _Declined
                    args[index] = arg
                    if (1 if arg <= 0xFF else _units(arg)) != width:
                        moved = True
            if not moved:
                return label_offsets, now
            now = sorted([*wide, *(index for index, _ in jumps if args[index] > 0xFF)])
        raise _Declined


def _copy_units(code: bytearray, offset: int, opcodes: list[int], args: list[int], start: int, stop: int) -> None:
    """Instructions ``start`` to ``stop``, one code unit each, into ``code`` at byte ``offset``."""
    end = offset + 2 * (stop - start)
    code[offset:end:2] = opcodes[start:stop]
    code[offset + 1:end:2] = args[start:stop]


def _moved_entries(verbatim: list[tuple[int, Verbatim]], offsets: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """The exception table entries of the compiled code the ``verbatim`` blocks come from
    (each with the index of its first unit among ``offsets``, the units' offsets), moved
    with the units.  An entry that ends where a block ends, or runs on into the next, covers
    what was put between them, as a try block open there does when the code is decoded and
    assembled again (the switch, after a 3.12+ generator's prefix, whose try block ends with
    its ``RESUME``).  Declined: an entry or handler outside the blocks."""
    code = verbatim[0][1].code

    def moved(unit: int) -> int:
        for index, block in verbatim:
            if block.start <= unit < block.stop:
                return offsets[index] + unit - block.start  # (a block's units are one instruction each)
        raise _Declined

    def moved_end(unit: int) -> int:  # (an end, exclusive)
        for number, (index, block) in enumerate(verbatim):
            if block.start < unit <= block.stop:
                if unit == block.stop and number + 1 < len(verbatim):
                    return offsets[verbatim[number + 1][0]]
                return offsets[index] + unit - block.start
        raise _Declined

    out: list[tuple[int, int, int, int]] = []
    for entry in exception_entries(cast(Any, code).co_exceptiontable):
        first = moved(entry.start)
        out.append((first, moved_end(entry.stop + 1) - first, moved(entry.target),
                    (entry.stack_depth << 1) + entry.push_lasti))
    return out


def _exception_varint(out: bytearray, value: int, start: bool = False) -> None:
    """``value`` in six-bit chunks, high first, the first marked as an entry's start if
    ``start`` (``Objects/exception_handling_notes.txt``), as ``bytecode`` writes it."""
    chunks = [value & 63]
    value >>= 6
    while value:
        chunks.append(value & 63 | 64)
        value >>= 6
    if start:
        chunks[-1] |= 128
    out.extend(reversed(chunks))
