"""CPython 3.11: ``PRECALL`` before every ``CALL``, ``LOAD_METHOD``, ``[NULL, callee]``."""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from typing import TYPE_CHECKING

from bytecode import Instr, Label

from ._instr import Location, arg_of, make
from ._nullslot import NullSlotFamily

if TYPE_CHECKING:
    from ._family import Family


class _Py311(NullSlotFamily):
    consumer_names = frozenset({"PRECALL", "CALL_FUNCTION_EX"})  # (CALL: see consumer_depth)
    method_load_names = frozenset({"LOAD_METHOD"})
    producer_names = frozenset({"PUSH_NULL", "LOAD_GLOBAL", *method_load_names})

    def call(self, nargs: int, loc: Location) -> list[Instr]:
        return [make("PRECALL", nargs, loc), make("CALL", nargs, loc)]

    def jump_if_true(self, target: Label, loc: Location) -> Instr:
        return make("POP_JUMP_FORWARD_IF_TRUE", target, loc)

    def jump_if_false(self, target: Label, loc: Location) -> Instr:
        return make("POP_JUMP_FORWARD_IF_FALSE", target, loc)

    def attribute_name(self, instr: Instr) -> str:
        return arg_of(instr, str)

    def consumer_depth(self, instr: Instr, depth: int) -> int | None:
        # PRECALL n carries the stack effect of the arguments; the CALL after it sees less.
        if instr.name == "PRECALL":
            return depth - arg_of(instr, int) - 2
        return None if instr.name == "CALL" else super().consumer_depth(instr, depth)

    def null_slots(self, instr: Instr) -> tuple[tuple[int, ...], tuple[int, ...]]:
        # PRECALL n takes the arguments off (as stack effects count); CALL then has [NULL, callee].
        if instr.name == "CALL":
            return (2,), ()
        if instr.name == "PRECALL":
            return (), ()
        return super().null_slots(instr)

    def callee_position(self, instr: Instr) -> int:
        return arg_of(instr, int) + 1 if instr.name == "PRECALL" else super().callee_position(instr)

    def is_method_load(self, instr: Instr) -> bool:
        return instr.name == "LOAD_METHOD"

    def plain_load(self, instr: Instr) -> Instr:
        return make("LOAD_ATTR", instr.arg, instr.location)


FAMILY: Family = _Py311()
