"""CPython 3.13: the callee pair is ``[callee, NULL]``, ``CALL_KW`` takes the keyword names
from the stack, and conditional jumps insist on exact bools (``TO_BOOL``)."""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from types import CodeType
from typing import TYPE_CHECKING, Callable

from bytecode import Bytecode, Compare, Instr
from bytecode.instr import FreeVar

from ._instr import Location, make
from ._nullslot import own_assembler, own_decoder
from ._py312 import _Py312

if TYPE_CHECKING:
    from ._assembler import Assembler
    from ._decoder import Decoder
    from ._family import Family


def free_variables_apart(code: CodeType, decode: Callable[[CodeType], Bytecode]) -> Bytecode:
    """``decode(code)``, for ``bytecode``'s decoding, with every free variable named like a
    local decoded under a stand-in name and given its own back.

    3.13+ local opcodes index the free variables after the locals and the unshared cells,
    every one of them (CPython gives a free variable a slot of its own, and a class body's
    inlined comprehension may have a local of the same name: ``[i * x for i in r]`` where
    ``x`` is also a method's, or ``[x for x in r]``).  ``bytecode`` (0.19) leaves out the
    free variables named like a local, so it fails to read such a body, or reads the slot
    of the next free variable: a method's closure would get another variable's cell
    (docs/internals.md, "Free variables named like a local")."""
    clashing = set(code.co_freevars).intersection(code.co_varnames)
    if not clashing:
        return decode(code)
    taken = {*code.co_varnames, *code.co_cellvars, *code.co_freevars}
    own: dict[str, str] = {}  # a stand-in's own name
    for name in clashing:
        stand_in = name + "."
        while stand_in in taken:  # (a name no code object has: ``.0`` is the compiler's only dotted one)
            stand_in += "."
        taken.add(stand_in)
        own[stand_in] = name
    renamed = {name: stand_in for stand_in, name in own.items()}
    bc = decode(code.replace(co_freevars=tuple(renamed.get(name, name) for name in code.co_freevars)))
    for item in bc:
        if isinstance(item, Instr) and isinstance(item.arg, FreeVar) and item.arg.name in own:
            item.arg = FreeVar(own[item.arg.name])
    bc.freevars = list(code.co_freevars)
    return bc


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

    def decode_by_bytecode(self, code: CodeType) -> Bytecode:
        return free_variables_apart(code, super().decode_by_bytecode)

    def negate(self, loc: Location) -> list[Instr]:
        return [make("TO_BOOL", loc=loc), make("UNARY_NOT", loc=loc)]


FAMILY: Family = _Py313()
