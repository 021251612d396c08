"""CPython 3.13: the callee pair is ``[callee, NULL]``, ``CALL_KW`` takes the keyword names
from the stack, and conditional jumps insist on exact bools (``TO_BOOL``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytecode import Compare, Instr

from ._instr import Location, make
from ._nullslot import own_assembler, own_decoder
from ._py312 import _Py312

if TYPE_CHECKING:
    from ._assembler import Assembler
    from ._decoder import Decoder
    from ._family import Family


def _compare_arg(compare: Compare) -> int:
    """``COMPARE_OP``'s argument on 3.13, as ``bytecode`` encodes it: the comparison above the
    mask and the bit that asks for a bool."""
    return int(compare._get_mask()) + ((compare.value & 0b1111) << 5) + (compare.value & 16)  # type: ignore[no-untyped-call]


def _compare_of(arg: int) -> Compare:
    """The comparison of ``COMPARE_OP``'s argument on 3.13, as ``bytecode`` decodes it: the
    bit that asks for a bool as the comparison's fifth."""
    return Compare((arg >> 5) + (16 if arg & 16 else 0))


class _Py313(_Py312):
    for_iter_exit: tuple[str, ...] = ("END_FOR", "POP_TOP")  # ... and past the POP_TOP after it
    null_after_callee = True
    assembler: Assembler | None = own_assembler(_compare_arg, local_cells=True)
    decoder: Decoder | None = own_decoder(_compare_of, local_cells=True)

    def negate(self, loc: Location) -> list[Instr]:
        return [make("TO_BOOL", loc=loc), make("UNARY_NOT", loc=loc)]


FAMILY: Family = _Py313()
