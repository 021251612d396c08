"""CPython 3.10: no ``NULL`` slot, so the hook is pushed under the callee at the call.

At ``CALL_FUNCTION n`` the stack is ``[f, a1 .. an]``; ``LOAD_CONST hook; ROT_N n+2``
slides the hook under ``f`` and ``CALL_FUNCTION n+1`` runs ``hook(f, a1 .. an)``.  Method
calls (``LOAD_METHOD``/``CALL_METHOD``) become an attribute load of the bound method and
the same plain call.  Calls the compiler makes on its own -- a ``with`` block's
``__exit__``, ``__build_class__``, the call of a comprehension's function -- are left
alone; they are found by pairing each call with the instruction that opened its callee
slot (see ``_stack``).
"""

from __future__ import annotations

import operator
from types import CodeType
from typing import TYPE_CHECKING, Sequence

from bytecode import Compare, Instr, Label

from ._instr import Location, arg_of
from ._markers import nooverdub
from ._operators import BINARY_310, UNARY, compare_op
from ._names import COMPREHENSIONS
from ._stack import Item, pair_by_depth

if TYPE_CHECKING:
    from . import Hooks

def _callee_depth(instr: Instr, depth: int) -> int | None:
    name = instr.name
    if name in ("CALL_FUNCTION", "CALL_METHOD"):
        return depth - arg_of(instr, int) - (2 if name == "CALL_METHOD" else 1)
    if name == "CALL_FUNCTION_KW":
        return depth - arg_of(instr, int) - 2
    if name == "CALL_FUNCTION_EX":
        return depth - 2 - (arg_of(instr, int) & 1)
    return None


def rewrite_calls(items: list[Item], depths: Sequence[int | None], hooks: Hooks) -> list[Item]:
    """``items`` with their call sites rewritten; the calls the compiler makes on its own,
    and the calls of a ``nooverdub`` marker a pass loaded, stay as they are."""
    def compiler_callee(instr: Instr, depth: int) -> int | None:
        """The callee slot opened by a compiler-made call, which stays unrewritten."""
        index = position[id(instr)]
        if instr.name == "LOAD_BUILD_CLASS" or instr.name == "LOAD_CONST" and type(instr.arg) is nooverdub:
            return depth  # ``__build_class__``, or a callable a pass wants called plainly
        if instr.name == "MAKE_FUNCTION":
            code = items[index - 2]
            if isinstance(code, Instr) and isinstance(code.arg, CodeType) and code.arg.co_name in COMPREHENSIONS:
                return depth + instr.stack_effect() - 1
        return None

    position = {id(item): index for index, item in enumerate(items)}
    compiler_calls = pair_by_depth(items, depths, compiler_callee, _callee_depth)
    out: list[Item] = []
    for index, item in enumerate(items):
        if not isinstance(item, Instr) or index in compiler_calls or _is_with_exit(items, index):
            out.append(item)
        elif item.name == "LOAD_METHOD":
            out.append(Instr("LOAD_ATTR", item.arg, location=item.location))
        elif item.name in ("CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW"):
            kw, nargs = item.name == "CALL_FUNCTION_KW", arg_of(item, int)
            out += _under(hooks.call, nargs + 2 + kw, item)
            out.append(Instr("CALL_FUNCTION_KW" if kw else "CALL_FUNCTION", nargs + 1, location=item.location))
        elif item.name == "CALL_FUNCTION_EX":
            nargs = 2 + (arg_of(item, int) & 1)
            out += _under(hooks.call_ex, nargs + 1, item)
            out.append(Instr("CALL_FUNCTION", nargs, location=item.location))
        else:
            out.append(item)
    return out


def _is_with_exit(items: Sequence[object], index: int) -> bool:
    """``LOAD_CONST None; DUP_TOP; DUP_TOP; CALL_FUNCTION 3`` is how 3.10 calls ``__exit__``."""
    tail = [getattr(item, "name", None) for item in items[max(0, index - 3) : index + 1]]
    return tail == ["LOAD_CONST", "DUP_TOP", "DUP_TOP", "CALL_FUNCTION"] and getattr(items[index], "arg", None) == 3


def _under(obj: object, depth: int, at: Instr) -> list[Instr]:
    """Push ``obj`` and slide it down to ``depth`` (1 = top of stack)."""
    loc = at.location
    rot = {2: "ROT_TWO", 3: "ROT_THREE", 4: "ROT_FOUR"}.get(depth)
    slide = Instr(rot, location=loc) if rot else Instr("ROT_N", depth, location=loc)
    return [Instr("LOAD_CONST", obj, location=loc), slide]


def operator_site(instr: Instr, hooks: Hooks) -> list[Instr] | None:
    name, loc = instr.name, instr.location
    if name in BINARY_310:
        return _binary(hooks.operator_site(BINARY_310[name]), instr)
    if name in UNARY or name == "GET_ITER":  # ``for x in obj`` starts with ``iter(obj)``
        op = UNARY.get(name, iter)
        return [*_under(hooks.operator_site(op), 2, instr), Instr("CALL_FUNCTION", 1, location=loc)]
    if name == "GET_YIELD_FROM_ITER":  # ``yield from obj``: ``iter(obj)`` unless a generator
        return [*_under(hooks.yield_from, 2, instr), Instr("CALL_FUNCTION", 1, location=loc), instr]
    if name == "COMPARE_OP":
        return _binary(hooks.operator_site(compare_op(arg_of(instr, Compare))[0]), instr)
    if name == "CONTAINS_OP":  # ``a in b`` is ``operator.contains(b, a)``
        out = [Instr("ROT_TWO", location=loc), *_binary(hooks.operator_site(operator.contains), instr)]
        return out + [Instr("UNARY_NOT", location=loc)] if instr.arg else out
    if name == "STORE_SUBSCR":  # [v, a, i] -> setitem(a, i, v)
        return [
            Instr("ROT_THREE", location=loc),
            Instr("ROT_THREE", location=loc),
            *_under(hooks.operator_site(operator.setitem), 4, instr),
            Instr("CALL_FUNCTION", 3, location=loc),
            Instr("POP_TOP", location=loc),
        ]
    if name == "DELETE_SUBSCR":
        return [*_binary(hooks.operator_site(operator.delitem), instr), Instr("POP_TOP", location=loc)]
    return None


def _binary(site: object, at: Instr) -> list[Instr]:
    return [*_under(site, 3, at), Instr("CALL_FUNCTION", 2, location=at.location)]


def call_constant(obj: object, loc: Location) -> list[Instr]:
    """Call ``obj`` with no arguments, leaving its result on the stack."""
    return [Instr("LOAD_CONST", obj, location=loc), Instr("CALL_FUNCTION", 0, location=loc)]


def null_slots(instr: Instr) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Where ``instr`` may meet or leave a ``NULL`` (see ``NullSlotFamily.null_slots``):
    on 3.10 only a method call's pair has one."""
    if instr.name == "LOAD_METHOD":
        return (), (2,)
    if instr.name == "CALL_METHOD":
        return (arg_of(instr, int) + 2,), ()
    return (), ()


def load_global(name: str, loc: Location) -> Instr:
    return Instr("LOAD_GLOBAL", name, location=loc)


class switch:
    """The instructions the import hook's mode switch is made of (see ``_dual``)."""

    load_global = staticmethod(load_global)
    load_global_callee = staticmethod(load_global)

    @staticmethod
    def call(nargs: int, loc: Location) -> list[Instr]:
        return [Instr("CALL_FUNCTION", nargs, location=loc)]

    @staticmethod
    def jump_if_true(target: Label, loc: Location) -> Instr:
        return Instr("POP_JUMP_IF_TRUE", target, location=loc)

    @staticmethod
    def jump_back(target: Label, loc: Location) -> Instr:
        return Instr("JUMP_ABSOLUTE", target, location=loc)
