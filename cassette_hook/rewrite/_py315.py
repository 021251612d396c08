"""CPython 3.15: an iterator takes two stack slots (``GET_ITER`` pushes the iterator and an
index or ``NULL`` for ``FOR_ITER``), ``GET_ITER`` with an argument replaces
``GET_YIELD_FROM_ITER``, and ``list`` and ``set`` of a generator expression are compiled
inline too (see docs/internals.md, "CPython 3.15")."""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import types
from typing import TYPE_CHECKING

from bytecode import Instr

from ._instr import make
from ._py314 import _Py314

if TYPE_CHECKING:
    from . import Hooks
    from ._family import Family

_FOR_LOOP = 0  # GET_ITER's argument for a ``for`` loop; 1-3 are ``yield from``'s (pycore_opcode_utils.h)
# The callees whose count of references a call site's ``resolve`` reads (callsite.c: a bound
# method rebound, a bound C method swapped, a function made its own twin, when the site's is
# the only reference).
_COUNTED = (types.FunctionType, types.MethodType, types.BuiltinMethodType)


class _Py315(_Py314):
    inlined = (all, any, tuple, list, set)

    # A constant that is a function or a bound method (which only a pass puts in a body)
    # is loaded from a 1-tuple by ``plain_forms`` (``LOAD_CONST (f,); UNPACK_SEQUENCE 1``):
    # 3.15's ``LOAD_CONST`` pushes the code's constant without a reference of its own, and
    # a call site's ``resolve`` would take a constant that no other code holds for one made
    # for its call alone (docs/internals.md, "CPython 3.15").
    counted = _COUNTED

    def operator_site(self, instr: Instr, hooks: Hooks) -> list[Instr] | None:
        if instr.name != "GET_ITER":
            return super().operator_site(instr, hooks)
        loc = instr.location
        if instr.arg == _FOR_LOOP:
            # [iterable] -> [iter(iterable), NULL]: what GET_ITER leaves for an iterator that
            # is not a list or tuple (whose index it would start instead); FOR_ITER then asks
            # the iterator for each item, as the plain loop does for any other iterator.
            return [*self._unary(hooks.operator_site(iter), loc), make("PUSH_NULL", loc=loc)]
        # ``yield from obj``: ``iter(obj)`` unless a generator, then the instruction itself,
        # which keeps a generator as it is and gives SEND its two slots.
        return [*self._unary(hooks.yield_from, loc), instr]

    def null_slots(self, instr: Instr) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if instr.name == "GET_ITER":  # [iterator, index or NULL]
            return (), (1,)
        if instr.name == "FOR_ITER":  # [iterator, index or NULL] -> [iterator, index or NULL, item]
            return (1,), (2,)
        if instr.name in ("POP_ITER", "POP_TOP"):  # (a ``break`` pops the pair with two POP_TOPs)
            return (1,), ()
        if instr.name in ("END_SEND", "CLEANUP_THROW"):  # [receiver, NULL, value]: ``await`` and ``yield from``
            return (2,), ()
        return super().null_slots(instr)


FAMILY: Family = _Py315()
