"""CPython 3.14: borrowed loads, ``LOAD_SMALL_INT``, ``CALL_FUNCTION_EX`` with a slot for
its keyword arguments, subscripts as ``BINARY_OP``, ``all``/``any``/``tuple`` of a
generator expression compiled inline, and template strings' ``BUILD_INTERPOLATION``,
whose argument ``bytecode`` misreads (see docs/internals.md, "CPython 3.14")."""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import operator
from types import CodeType
from typing import TYPE_CHECKING, Sequence

from bytecode import BinaryOp, Bytecode, ConcreteBytecode, ConcreteInstr, Instr, Label
from bytecode.instr import UNSET, TryBegin

from ._instr import Location, arg_of, make, named
from ._nullslot import own_assembler, own_decoder
from ._py313 import _Py313, _compare_arg, _compare_of, free_variables_apart
from ._stack import flow

if TYPE_CHECKING:
    from ._assembler import Assembler
    from . import Hooks
    from ._decoder import Decoder
    from ._family import Family
    from ._stack import Item

# The pair forms of the loads 3.13 has, by their borrowed names.
_UNBORROWED = {"LOAD_FAST_BORROW": "LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW": "LOAD_FAST_LOAD_FAST"}
_BORROWED = {plain: borrowed for borrowed, plain in _UNBORROWED.items()}
_NAME_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FROM_DICT_OR_GLOBALS"})
# What plain_forms visits (``named``'s one group), without and with a ``counted`` kind of constant.
_PLAIN_NAMES = ("COPY", "LOAD_SMALL_INT", *_UNBORROWED)
_PLAIN_GROUPS = {False: dict.fromkeys(_PLAIN_NAMES, 0), True: dict.fromkeys((*_PLAIN_NAMES, "LOAD_CONST"), 0)}


# BUILD_INTERPOLATION's argument, as CPython 3.14 encodes it (codegen.c): how many values it
# takes (2, or 3 with a format spec: bit 0) and the conversion (0 none, 1 !s, 2 !r, 3 !a)
# shifted by 2.  bytecode 0.19 reads it as 3.13's CONVERT_VALUE argument shifted by 1 after
# a flag bit: (bit 0, FormatValue(oparg >> 1)), which fails for most arguments (FormatValue
# has no 0, 4, 5, 6 or 7) and for the rest names the wrong conversion; it encodes no
# such pair back (an int is asserted) and its stack effect of the pair fails.
_INTERPOLATION = "BUILD_INTERPOLATION"
_READABLE = 2  # an argument bytecode decodes, (False, FormatValue.STR), with bit 0 set as needed


class _Interpolation(Instr):
    """``BUILD_INTERPOLATION`` with its argument as CPython encodes it, an int: what
    ``bytecode`` assembles as it is (an int argument is copied into the code) and counts
    the stack effect of (CPython's own ``dis.stack_effect``, and bit 0 for what it takes),
    but its ``Instr`` refuses (it wants the pair it misreads)."""

    __slots__ = ()

    def _check_arg(self, name: str, opcode: int, arg: object) -> None:
        if name == _INTERPOLATION:
            if not (type(arg) is int and 0 <= arg < 16):
                raise TypeError(f"{_INTERPOLATION}'s argument is CPython's int (0-15), not {arg!r}")
            return
        super()._check_arg(name, opcode, arg)  # (set() to another instruction)


class _Borrowable(Instr):
    """A load the compiler wrote borrowed, read as the plain one (``plain_forms`` with
    ``borrowable``), which ``borrowed_again`` may make borrowed again."""

    __slots__ = ()


class _Py314(_Py313):
    for_iter_exit: tuple[str, ...] = ("END_FOR",)  # an exhausted FOR_ITER lands on the POP_ITER after it
    inlined: tuple[object, ...] = (all, any, tuple)  # the builtins whose call of a genexp the compiler inlines
    counted: tuple[type, ...] = ()  # the constants plain_forms loads from a 1-tuple (3.15)
    # (3.14's comparisons are 3.13's; our decoder makes each BUILD_INTERPOLATION as
    # decode_by_bytecode does, an _Interpolation, which our assembler takes as an Instr)
    assembler: Assembler | None = own_assembler(_compare_arg, local_cells=True, instr_types=(_Interpolation,))
    decoder: Decoder | None = own_decoder(_compare_of, local_cells=True, kept={_INTERPOLATION: _Interpolation})

    def decode_by_bytecode(self, code: CodeType) -> Bytecode:
        return free_variables_apart(code, self._with_interpolations)

    @staticmethod
    def _with_interpolations(code: CodeType) -> Bytecode:
        """As ``bytecode`` decodes it, but each ``BUILD_INTERPOLATION`` keeps its argument
        as compiled (an :class:`_Interpolation`): it is decoded from a stand-in argument
        ``bytecode`` reads, then given its own back, in the order they come."""
        concrete = ConcreteBytecode.from_code(code)
        compiled: list[int] = []
        for instr in concrete:
            if isinstance(instr, ConcreteInstr) and instr.name == _INTERPOLATION:
                compiled.append(instr.arg)
                instr.arg = _READABLE | (instr.arg & 1)
        bc = concrete.to_bytecode(conserve_exception_block_stackdepth=True)
        if compiled:
            args = iter(compiled)
            for index, item in enumerate(bc):
                if isinstance(item, Instr) and item.name == _INTERPOLATION:
                    bc[index] = _Interpolation(_INTERPOLATION, next(args), location=item.location)
            assert next(args, None) is None, f"{code.co_name}: an interpolation was lost in decoding"
        return bc

    def plain_forms(self, items: list[Item], *, borrowable: bool = False) -> list[Item]:
        """Borrowed loads as plain ones, and ``LOAD_SMALL_INT`` as ``LOAD_CONST``: a
        borrowed reference is safe only while nothing the compiler did not see runs before
        its use, and the rewriter puts calls (hooks, a pass's statements) there.  A pass is
        given what it would be given on 3.13 (``LOAD_CONST 1``, not ``LOAD_SMALL_INT 1``).
        And an inlined ``all``/``any``/``tuple`` (3.15: ``list``, ``set`` too) of a generator expression goes to its
        fallback, the call the compiler kept for when the name is not the builtin: under
        a context it stays a call that hooks and overloads see, as on 3.13.  (3.15: and a
        constant of a ``counted`` kind loaded from a 1-tuple: see :class:`_Py315`.)

        Only the instructions it may change are visited, found by name at once
        (``_instr.named``: in C where it is built), the items between them copied a slice
        at a time: a walk of every item in Python was the largest function of a cold
        rewrite's profile on 3.14 (docs/performance.md, "A first run on 3.14 and 3.15: the
        passes' walks in C there too")."""
        out: list[Item] = []
        kind = _Borrowable if borrowable else Instr
        counted = self.counted
        start = 0  # (the first item not copied yet)
        for index in named(items, Instr, _PLAIN_GROUPS[bool(counted)], 1)[0]:
            if index < start:  # (in an inlined call's test, left out)
                continue
            item = items[index]
            assert isinstance(item, Instr)
            name = item.name
            if name == "COPY":
                fallback = _inlined_call(items, index, self.inlined)
                if fallback is None:
                    continue
                # ``COPY 1; LOAD_COMMON_CONSTANT; IS_OP 0; POP_JUMP_IF_FALSE fallback`` becomes a
                # jump to the fallback (placed after it or not, as the compiler chose): the
                # inline loop is left unreachable.
                forward = any(other is fallback for other in items[index:])
                out += items[start:index]
                out.append(make("JUMP_FORWARD" if forward else "JUMP_BACKWARD", fallback, item.location))
                start = index + 4
                continue
            if name in _UNBORROWED:  # (the plain load takes the argument the borrowed one was checked for)
                made: list[Item] = [make(_UNBORROWED[name], item.arg, item.location, kind)]
            elif name == "LOAD_SMALL_INT":
                made = [make("LOAD_CONST", item.arg, item.location)]
            elif isinstance(item.arg, counted):  # (a LOAD_CONST: none in a body as compiled)
                made = [Instr("LOAD_CONST", (item.arg,), location=item.location),
                        Instr("UNPACK_SEQUENCE", 1, location=item.location)]
            else:
                continue
            out += items[start:index]
            out += made
            start = index + 1
        out += items[start:]
        return out

    def borrowed_again(self, items: list[Item], depths: Sequence[int | None]) -> list[Item]:
        """A twin reads its variables as compiled, without a reference of its own where the
        compiler borrowed (as a plain load, every local a twin read cost it an increment
        and a decrement of its count that the program does not pay: a null context's ratio
        to plain 1-4% higher on 3.14 and 3.15; docs/performance.md, "Borrowed loads in
        twins").  But not a load that may push a call's callee: ``resolve`` and ``enter``
        take a callee with no reference but the site's for a bound method made for that
        call alone, and rebind it to its twin in place (callsite.c), which a variable's
        bound method, borrowed, would look like."""
        marked = _marked(items)
        if not marked:
            return items
        callees = self._callee_loads(items, depths, marked)
        out = list(items)
        for index in marked:  # (none left marked: nothing else may tell it from a plain load)
            item = items[index]
            assert isinstance(item, Instr)
            out[index] = make(item.name if index in callees else _BORROWED[item.name], item.arg, item.location)
        return out

    def _callee_loads(self, items: list[Item], depths: Sequence[int | None],
                      marked: Sequence[int] | None = None) -> set[int]:
        """The indices of the marked loads whose value may be a call's callee, on some
        path: each reachable marked load's value followed along the control flow, slot by
        slot (moved by ``COPY`` and ``SWAP``; gone where an instruction takes it, or the
        stack there is shallower), until it is a consumer's callee or gone everywhere.
        What each opcode does to the stack is remembered (:func:`_shift`), and only the
        family's ``consumer_names`` are asked for a callee (tests/test_rewrite_shortcuts.py
        checks that no other has one).

        The answer a walk of the whole body would give carrying, for each slot of the
        stack, the loads its value may come from (merged where paths meet): each slot's
        loads move independently of the others', so a load's value is followed alone, over
        the few items it lives (most are taken by the next instruction or the call after),
        not every item of the body (docs/performance.md, "Where a first run's switching
        goes on 3.14 and 3.15").  ``marked``: the marked loads' indices, if known (:func:`_marked`)."""
        found: set[int] = set()
        consumers = self.consumer_names
        labels: dict[int, int] | None = None
        count = len(items)
        for load in _marked(items) if marked is None else marked:
            start = depths[load]
            if start is None:  # (unreachable: no path carries its value)
                continue
            marked_load = items[load]
            assert isinstance(marked_load, Instr)
            pending = [(load + 1, start + 1), (load + 1, start)] if marked_load.name == "LOAD_FAST_LOAD_FAST" \
                else [(load + 1, start)]
            seen: set[tuple[int, int]] = set()
            while pending:
                index, slot = pending.pop()
                while index < count:  # (the value in ``slot`` before ``items[index]``)
                    depth = depths[index]
                    assert depth is not None  # (reached from a reachable item)
                    if slot >= depth or (index, slot) in seen:  # (cut off here, or followed from here before)
                        break
                    seen.add((index, slot))
                    item = items[index]
                    if isinstance(item, Instr):
                        name = item._name
                        if name in consumers:
                            callee = self.consumer_depth(item, depth)
                            if callee is not None and (callee if callee >= 0 else depth + callee) == slot:
                                found.add(load)
                                pending.clear()
                                break
                        arg = item._arg
                        number = (arg[0] if arg else None) if type(arg) is tuple else arg
                        key = (name, number) if number is not UNSET and isinstance(number, int) else name
                        jump, stops, popped, _ = _SHIFTS.get(key) or _shift(item, key)
                        if jump:
                            labels = _labels(items) if labels is None else labels
                            pending.append((labels[id(arg)], slot))  # (as it was before the instruction)
                        if stops:
                            break
                        if name == "COPY":
                            if slot == depth - arg_of(item, int):
                                pending.append((index + 1, depth))
                        elif name == "SWAP":
                            n = arg_of(item, int)
                            if slot == depth - 1:
                                slot = depth - n
                            elif slot == depth - n:
                                slot = depth - 1
                        elif slot >= depth - popped:
                            break  # (taken: a load takes none)
                    elif isinstance(item, TryBegin):
                        labels = _labels(items) if labels is None else labels
                        pending.append((labels[id(item.target)], slot))  # (cut there to the handler's depth)
                    index += 1
        return found

    def consumer_depth(self, instr: Instr, depth: int) -> int | None:
        # [callee, NULL, args, kwargs or NULL]: the keyword slot is always there.
        return depth - 4 if instr.name == "CALL_FUNCTION_EX" else super().consumer_depth(instr, depth)

    def callee_position(self, instr: Instr) -> int:
        return 4 if instr.name == "CALL_FUNCTION_EX" else super().callee_position(instr)

    def null_slots(self, instr: Instr) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if instr.name == "CALL_FUNCTION_EX":  # its self slot, and its keyword arguments' (a PUSH_NULL)
            return (3, 1), ()
        return super().null_slots(instr)

    def operator_site(self, instr: Instr, hooks: Hooks) -> list[Instr] | None:
        if instr.name == "BINARY_OP" and arg_of(instr, BinaryOp) is BinaryOp.SUBSCR:  # (BINARY_SUBSCR's successor)
            return self._binary(hooks.operator_site(operator.getitem), instr.location)
        return super().operator_site(instr, hooks)

    def jump_if_true(self, target: Label, loc: Location) -> Instr:
        return make("POP_JUMP_IF_TRUE", target, loc)


def _shift(instr: Instr, key: object) -> tuple[bool, bool, int, int]:
    """What ``_callee_loads`` asks of ``instr``: may it go on at its label, does it never go
    on to the next item (``_stack.flow``), how many values it takes, how many it pushes
    after (``bytecode``'s ``pre_and_post_stack_effect`` and ``stack_effect``); remembered
    under ``key``, the opcode's name and a number its argument holds, as
    ``_stack.stack_depths`` remembers its steps (all of these are computed from those)."""
    jump, stops = flow(instr)
    pre, _ = instr.pre_and_post_stack_effect(jump=False)  # (what it takes, negative; or 0 and what it pushes)
    popped = -min(pre, 0)
    shift = _SHIFTS[key] = (jump, stops, popped, popped + instr.stack_effect(jump=False))
    return shift


_SHIFTS: dict[object, tuple[bool, bool, int, int]] = {}  # see _shift()


def _labels(items: list[Item]) -> dict[int, int]:
    """Each label's index in ``items``, by its ``id`` (made only for a value that jumps)."""
    return {id(item): index for index, item in enumerate(items) if isinstance(item, Label)}


def _marked(items: list[Item]) -> list[int]:
    """The indices of the marked loads (:class:`_Borrowable`) in ``items``, found by
    ``list.index`` over the items' types, a scan in C, rather than by asking each item."""
    kinds = list(map(type, items))
    marked: list[int] = []
    index = -1
    try:
        while True:
            index = kinds.index(_Borrowable, index + 1)
            marked.append(index)
    except ValueError:  # (none after the last)
        return marked


def _inlined_call(items: list[Item], index: int, inlined: tuple[object, ...]) -> Label | None:
    """If ``items[index]`` is the ``COPY 1`` that starts the compiler's test of an inlined
    builtin's name (``all(x for x in y)``: ``LOAD_GLOBAL all; COPY 1; LOAD_COMMON_CONSTANT
    all; IS_OP 0; POP_JUMP_IF_FALSE fallback``), the fallback's label."""
    window = items[index - 1:index + 4] if index >= 1 else []
    if len(window) < 5 or not all(isinstance(item, Instr) for item in window):
        return None
    load, copy, constant, is_op, jump = window
    assert isinstance(load, Instr) and isinstance(copy, Instr) and isinstance(constant, Instr)
    assert isinstance(is_op, Instr) and isinstance(jump, Instr)
    if (load.name in _NAME_LOADS and copy.name == "COPY" and copy.arg == 1 and constant.name == "LOAD_COMMON_CONSTANT"
            and is_op.name == "IS_OP" and is_op.arg == 0 and jump.name == "POP_JUMP_IF_FALSE"
            and isinstance(jump.arg, Label) and any(_common_constant(constant) is f for f in inlined)):
        return jump.arg
    return None


def _common_constant(instr: Instr) -> object:
    """The object a ``LOAD_COMMON_CONSTANT`` loads."""
    from opcode import _common_constants  # type: ignore[attr-defined]  # (3.14+)

    constants: list[object] = _common_constants
    return constants[arg_of(instr, int)]  # (bytecode's CommonConstant is an IntEnum)


FAMILY: Family = _Py314()
