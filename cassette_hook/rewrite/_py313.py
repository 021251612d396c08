"""CPython 3.13: the callee pair is ``[callee, NULL]``, ``CALL_KW`` takes the keyword names
from the stack, and conditional jumps insist on exact bools (``TO_BOOL``)."""

from __future__ import annotations

from bytecode import Instr

from ._instr import Location
from ._py312 import _Py312


class _Py313(_Py312):
    null_after_callee = True

    def negate(self, loc: Location) -> list[Instr]:
        return [Instr("TO_BOOL", location=loc), Instr("UNARY_NOT", location=loc)]


_family = _Py313()
rewrite_calls = _family.rewrite_calls
operator_site = _family.operator_site
load_global = _family.load_global
call_constant = _family.call_constant
null_slots = _family.null_slots
switch = _family
