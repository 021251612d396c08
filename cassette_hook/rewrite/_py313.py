"""CPython 3.13: the callee pair is ``[callee, NULL]``, ``CALL_KW`` takes the keyword names
from the stack, and conditional jumps insist on exact bools (``TO_BOOL``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytecode import Instr

from ._instr import Location
from ._py312 import _Py312

if TYPE_CHECKING:
    from ._family import Family


class _Py313(_Py312):
    for_iter_exit: tuple[str, ...] = ("END_FOR", "POP_TOP")  # ... and past the POP_TOP after it
    null_after_callee = True

    def negate(self, loc: Location) -> list[Instr]:
        return [Instr("TO_BOOL", location=loc), Instr("UNARY_NOT", location=loc)]


FAMILY: Family = _Py313()
