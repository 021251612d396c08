"""CPython 3.14: borrowed loads, ``LOAD_SMALL_INT``, ``CALL_FUNCTION_EX`` with a slot for
its keyword arguments, subscripts as ``BINARY_OP``, and ``all``/``any``/``tuple`` of a
generator expression compiled inline (see docs/internals.md, "CPython 3.14")."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, cast

from bytecode import BinaryOp, Instr, Label

from ._instr import Location, arg_of
from ._py313 import _Py313

if TYPE_CHECKING:
    from . import Hooks
    from ._family import Family
    from ._stack import Item

# The pair forms of the loads 3.13 has, by their borrowed names.
_UNBORROWED = {"LOAD_FAST_BORROW": "LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW": "LOAD_FAST_LOAD_FAST"}
_NAME_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FROM_DICT_OR_GLOBALS"})


class _Py314(_Py313):
    for_iter_exit: tuple[str, ...] = ("END_FOR",)  # an exhausted FOR_ITER lands on the POP_ITER after it
    inlined: tuple[object, ...] = (all, any, tuple)  # the builtins whose call of a genexp the compiler inlines

    def plain_forms(self, items: list[Item]) -> list[Item]:
        """Borrowed loads as plain ones, and ``LOAD_SMALL_INT`` as ``LOAD_CONST``: a
        borrowed reference is safe only while nothing the compiler did not see runs before
        its use, and the rewriter puts calls (hooks, a pass's statements) there.  A pass is
        given what it would be given on 3.13 (``LOAD_CONST 1``, not ``LOAD_SMALL_INT 1``).
        And an inlined ``all``/``any``/``tuple`` (3.15: ``list``, ``set`` too) of a generator expression goes to its
        fallback, the call the compiler kept for when the name is not the builtin: under
        a context it stays a call that hooks and overloads see, as on 3.13."""
        out: list[Item] = []
        index = 0
        while index < len(items):
            item = items[index]
            fallback = _inlined_call(items, index, self.inlined)
            if fallback is not None:
                # ``COPY 1; LOAD_COMMON_CONSTANT; IS_OP 0; POP_JUMP_IF_FALSE fallback`` becomes a
                # jump to the fallback (placed after it or not, as the compiler chose): the
                # inline loop is left unreachable.
                forward = any(other is fallback for other in items[index:])
                location = cast(Instr, item).location  # (the COPY)
                out.append(Instr("JUMP_FORWARD" if forward else "JUMP_BACKWARD", fallback, location=location))
                index += 4
                continue
            if isinstance(item, Instr) and item.name in _UNBORROWED:
                item = Instr(_UNBORROWED[item.name], item.arg, location=item.location)
            elif isinstance(item, Instr) and item.name == "LOAD_SMALL_INT":
                item = Instr("LOAD_CONST", item.arg, location=item.location)
            out.append(item)
            index += 1
        return out

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
        return Instr("POP_JUMP_IF_TRUE", target, location=loc)


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
