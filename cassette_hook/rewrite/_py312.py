"""CPython 3.12: slices have their own opcodes, and ``+x`` is an intrinsic."""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import operator
from typing import TYPE_CHECKING

from bytecode import Compare, Instr
from bytecode.instr import Intrinsic1Op

from ._instr import make
from ._nullslot import NullSlotFamily, own_assembler, own_decoder

if TYPE_CHECKING:
    from . import Hooks
    from ._assembler import Assembler
    from ._decoder import Decoder
    from ._family import Family


def _compare_arg(compare: Compare) -> int:
    """``COMPARE_OP``'s argument on 3.12, as ``bytecode`` encodes it: the comparison above the
    four bits of the specializer's mask."""
    return int(compare._get_mask()) + (compare.value << 4)  # type: ignore[no-untyped-call]


def _compare_of(arg: int) -> Compare:
    """The comparison of ``COMPARE_OP``'s argument on 3.12, as ``bytecode`` decodes it."""
    return Compare(arg >> 4)


class _Py312(NullSlotFamily):
    for_iter_exit: tuple[str, ...] = ("END_FOR",)  # an exhausted FOR_ITER jumps past its END_FOR
    loads_trust_binding = True
    operator_names = NullSlotFamily.operator_names | {"BINARY_SLICE", "STORE_SLICE", "CALL_INTRINSIC_1"}
    assembler: Assembler | None = own_assembler(_compare_arg, local_cells=False)
    decoder: Decoder | None = own_decoder(_compare_of, local_cells=False)

    def operator_site(self, instr: Instr, hooks: Hooks) -> list[Instr] | None:
        loc = instr.location
        if instr.name == "BINARY_SLICE":  # [a, i, j] -> getitem(a, slice(i, j))
            return [make("BUILD_SLICE", 2, loc), *self._binary(hooks.operator_site(operator.getitem), loc)]
        if instr.name == "STORE_SLICE":  # [v, a, i, j] -> setitem(a, slice(i, j), v)
            return [make("BUILD_SLICE", 2, loc), *self._store(hooks.operator_site(operator.setitem), loc)]
        if instr.name == "CALL_INTRINSIC_1" and instr.arg == Intrinsic1Op.INTRINSIC_UNARY_POSITIVE:
            return self._unary(hooks.operator_site(operator.pos), loc)
        return super().operator_site(instr, hooks)


FAMILY: Family = _Py312()
