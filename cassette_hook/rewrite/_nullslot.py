"""Rewriting for CPython 3.11+, where every call site reserves a slot for the callee's self.

Since 3.11 the compiler pushes a ``NULL`` (``PUSH_NULL``, ``LOAD_GLOBAL`` with its low bit,
method loads) next to the callee, and ``CALL n`` calls ``callee(*args)`` when that slot is
``NULL`` but ``slot_a(slot_b, *args)`` when it holds a value.  The rewriter therefore only
replaces the ``NULL`` by the hook: ``[hook, f, a, b]`` makes ``CALL 2`` run
``hook(f, a, b)``, keyword names included, with the stack shape unchanged.  Method loads
become plain attribute loads (a bound method) so the callee is one object.  Star calls
``CALL_FUNCTION_EX`` cannot take a value in that slot, so they become ``CALL`` of
``hooks.call_ex(f, args, kwargs)``.

Versions differ in where the ``NULL`` sits relative to the callee and in a few opcodes;
each version module subclasses :class:`NullSlotFamily` with just those differences.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Sequence

from bytecode import Instr

from ._operators import UNARY, binary_op, compare_op
from ._stack import pair_by_depth

if TYPE_CHECKING:
    from . import Hooks


class NullSlotFamily:
    """The 3.11+ rewriting scheme; subclasses fill in the version details."""

    null_after_callee = False  # 3.13 pushes [callee, NULL]; 3.11 and 3.12 push [NULL, callee]
    method_load = "LOAD_ATTR"  # the opcode of a method load (3.11: LOAD_METHOD)

    # -- version details -------------------------------------------------------------

    def call(self, nargs: int, loc: object) -> list[Instr]:
        """The instructions of a plain positional ``CALL nargs``."""
        return [Instr("CALL", nargs, location=loc)]

    def is_method_load(self, instr: Instr) -> bool:
        return instr.name == "LOAD_ATTR" and instr.arg[0]

    def plain_load(self, instr: Instr) -> Instr:
        """The method load ``instr`` as a load of the bound attribute."""
        return Instr(instr.name, (False, *instr.arg[1:]), location=instr.location)

    def consumer_depth(self, instr: Instr, depth: int) -> int | None:
        """Depth of the lower slot of the callee pair that a call-family instr consumes."""
        if instr.name == "CALL":
            return depth - instr.arg - 2
        if instr.name == "CALL_KW":
            return depth - instr.arg - 3
        if instr.name == "CALL_FUNCTION_EX":
            return depth - 3 - (instr.arg & 1)
        return None

    # -- the scheme ------------------------------------------------------------------

    def producer_depth(self, instr: Instr, depth: int) -> int | None:
        """Depth of the lower slot of the callee pair that ``instr`` starts, if any."""
        name = instr.name
        if name == "PUSH_NULL":
            return depth - 1 if self.null_after_callee else depth
        if name == "LOAD_GLOBAL" and instr.arg[0]:
            return depth
        if name == "LOAD_SUPER_ATTR" and instr.arg[0]:
            return depth - 3
        if self.is_method_load(instr):
            return depth - 1
        return None

    def rewrite_calls(self, items: list[object], depths: Sequence[int | None], hooks: Hooks) -> list[object]:
        consumers = pair_by_depth(items, depths, self.producer_depth, self.consumer_depth)
        producers = {producer: consumer for consumer, producer in consumers.items()}
        skipped = {p for p in producers if self._builds_class(items, p)}
        out: list[object] = []
        for index, item in enumerate(items):
            assert isinstance(item, Instr) or index not in producers
            if index in producers and index not in skipped:
                star = items[producers[index]].name == "CALL_FUNCTION_EX"  # type: ignore[attr-defined]
                out.extend(self._hook_in_slot(item, hooks.call_ex if star else hooks.call))  # type: ignore[arg-type]
            elif index in consumers and consumers[index] not in skipped and item.name == "CALL_FUNCTION_EX":  # type: ignore[attr-defined]
                out.extend(self.call(1 + (item.arg & 1), item.location))  # type: ignore[attr-defined]
            else:
                out.append(item)
        return out

    def _builds_class(self, items: Sequence[object], index: int) -> bool:
        """Is this ``PUSH_NULL`` the one of a ``class`` statement's ``__build_class__`` call?"""
        neighbour = index - 1 if self.null_after_callee else index + 1
        item = items[neighbour] if 0 <= neighbour < len(items) else None
        return isinstance(item, Instr) and item.name == "LOAD_BUILD_CLASS"

    def _hook_in_slot(self, instr: Instr, hook: object) -> list[Instr]:
        """Replace the NULL that ``instr`` pushes by ``hook``, below a single callee object."""
        loc = instr.location
        load_hook = Instr("LOAD_CONST", hook, location=loc)
        swap = Instr("SWAP", 2, location=loc)
        if instr.name == "PUSH_NULL":
            return [load_hook, swap] if self.null_after_callee else [load_hook]
        if instr.name == "LOAD_GLOBAL":
            return [Instr("LOAD_GLOBAL", (False, instr.arg[1]), location=loc), load_hook, swap]
        return [self.plain_load(instr), load_hook, swap]

    # -- operators -------------------------------------------------------------------

    def operator_site(self, instr: Instr, hooks: Hooks) -> list[Instr] | None:
        name, loc = instr.name, instr.location
        if name == "BINARY_OP":
            op = binary_op(instr.arg)
            return None if op is None else self._binary(hooks.operator_site(op), loc)
        if name == "BINARY_SUBSCR":
            return self._binary(hooks.operator_site(operator.getitem), loc)
        if name in UNARY:
            return self._unary(hooks.operator_site(UNARY[name]), loc)
        if name == "COMPARE_OP":
            op, cast = compare_op(instr.arg)
            out = self._binary(hooks.operator_site(op), loc)
            return out + [Instr("TO_BOOL", location=loc)] if cast else out
        if name == "CONTAINS_OP":  # ``a in b`` is ``operator.contains(b, a)``
            site = Instr("LOAD_CONST", hooks.operator_site(operator.contains), location=loc)
            out = [site, Instr("SWAP", 3, location=loc), *self.call(1, loc)]
            return out + self.negate(loc) if instr.arg else out
        if name == "STORE_SUBSCR":  # [v, a, i] -> setitem(a, i, v)
            return self._store(hooks.operator_site(operator.setitem), loc)
        if name == "DELETE_SUBSCR":
            return self._binary(hooks.operator_site(operator.delitem), loc) + [Instr("POP_TOP", location=loc)]
        return None

    def negate(self, loc: object) -> list[Instr]:
        return [Instr("UNARY_NOT", location=loc)]

    def _binary(self, site: object, loc: object) -> list[Instr]:
        """[a, b] -> site(a, b): the site below both operands, called with ``a`` as self."""
        return [
            Instr("LOAD_CONST", site, location=loc),
            Instr("SWAP", 3, location=loc),
            Instr("SWAP", 2, location=loc),
            *self.call(1, loc),
        ]

    def _unary(self, site: object, loc: object) -> list[Instr]:
        return [Instr("LOAD_CONST", site, location=loc), Instr("SWAP", 2, location=loc), *self.call(0, loc)]

    def _store(self, site: object, loc: object) -> list[Instr]:
        """[v, a, i] -> site(a, i, v), result dropped."""
        return [
            Instr("LOAD_CONST", site, location=loc),
            Instr("SWAP", 4, location=loc),
            *self.call(2, loc),
            Instr("POP_TOP", location=loc),
        ]
