"""Which ``operator`` function each overloadable operator instruction stands for.

Shared by the per-version rewriters; the instruction names and argument encodings differ
between versions, the operator functions do not.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import operator

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:  # (imported by code that rewrites nothing: ``_names``)
    from typing import Callable

    from bytecode import BinaryOp, Compare

    Operator = Callable[..., object]

BINARY: dict[str, Operator] = {
    "ADD": operator.add, "SUBTRACT": operator.sub, "MULTIPLY": operator.mul,
    "MATRIX_MULTIPLY": operator.matmul, "TRUE_DIVIDE": operator.truediv,
    "FLOOR_DIVIDE": operator.floordiv, "REMAINDER": operator.mod, "POWER": operator.pow,
    "LSHIFT": operator.lshift, "RSHIFT": operator.rshift, "AND": operator.and_,
    "OR": operator.or_, "XOR": operator.xor,
    "INPLACE_ADD": operator.iadd, "INPLACE_SUBTRACT": operator.isub,
    "INPLACE_MULTIPLY": operator.imul, "INPLACE_MATRIX_MULTIPLY": operator.imatmul,
    "INPLACE_TRUE_DIVIDE": operator.itruediv, "INPLACE_FLOOR_DIVIDE": operator.ifloordiv,
    "INPLACE_REMAINDER": operator.imod, "INPLACE_POWER": operator.ipow,
    "INPLACE_LSHIFT": operator.ilshift, "INPLACE_RSHIFT": operator.irshift,
    "INPLACE_AND": operator.iand, "INPLACE_OR": operator.ior, "INPLACE_XOR": operator.ixor,
}

# CPython 3.10 names the same operations with one opcode each (and says MODULO).
BINARY_310: dict[str, Operator] = {
    ("" if name.startswith("INPLACE_") else "BINARY_") + name.replace("REMAINDER", "MODULO"): op
    for name, op in BINARY.items()
}
BINARY_310["BINARY_SUBSCR"] = operator.getitem

UNARY: dict[str, Operator] = {
    "UNARY_NEGATIVE": operator.neg, "UNARY_INVERT": operator.invert,
    "UNARY_POSITIVE": operator.pos,
}

COMPARE: dict[str, Operator] = {
    "LT": operator.lt, "LE": operator.le, "EQ": operator.eq,
    "NE": operator.ne, "GT": operator.gt, "GE": operator.ge,
}


def binary_op(arg: BinaryOp) -> Operator | None:
    """The operator behind a ``BINARY_OP`` argument (3.11+)."""
    return BINARY.get(arg.name)


def compare_op(arg: Compare) -> tuple[Operator, bool]:
    """The comparison behind a ``COMPARE_OP`` argument, and whether 3.13 wants a bool."""
    name = arg.name
    cast = name.endswith("_CAST")
    return COMPARE[name.removesuffix("_CAST")], cast
