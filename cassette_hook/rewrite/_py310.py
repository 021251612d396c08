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

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import operator
import struct
from types import CodeType
from typing import TYPE_CHECKING, Any, Sequence

from bytecode import Bytecode, Compare, ConcreteBytecode, ConcreteInstr, Instr, Label

from . import GlobalName
from ._instr import Location, arg_of, make
from ._markers import nooverdub
from ._operators import BINARY_310, UNARY, compare_op
from ._names import COMPREHENSIONS
from ._stack import Item, pair_by_depth

if TYPE_CHECKING:
    from ._assembler import Assembler
    from . import Hooks
    from ._family import Family

_CALLS = frozenset({"CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX"})  # (_callee_depth's)
_COMPILER_CALLEES = frozenset({"LOAD_BUILD_CLASS", "LOAD_CONST", "MAKE_FUNCTION"})  # (compiler_callee's, below)


def _callee_depth(instr: Instr, depth: int) -> int | None:
    name = instr.name
    if name in ("CALL_FUNCTION", "CALL_METHOD"):
        return depth - arg_of(instr, int) - (2 if name == "CALL_METHOD" else 1)
    if name == "CALL_FUNCTION_KW":
        return depth - arg_of(instr, int) - 2
    if name == "CALL_FUNCTION_EX":
        return depth - 2 - (arg_of(instr, int) & 1)
    return None


def _rewrite_calls(items: list[Item], depths: Sequence[int | None], hooks: Hooks, enters: bool) -> list[Item]:
    # (``enters`` changes nothing: every 3.10 call site hands ``call`` its arguments already.)
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
    compiler_calls = pair_by_depth(items, depths, compiler_callee, _callee_depth, _COMPILER_CALLEES, _CALLS)
    out: list[Item] = []
    for index, item in enumerate(items):
        if not isinstance(item, Instr) or index in compiler_calls or _is_with_exit(items, index):
            out.append(item)
        elif item.name == "LOAD_METHOD":
            out.append(make("LOAD_ATTR", item.arg, item.location))
        elif item.name in ("CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW"):
            kw, nargs = item.name == "CALL_FUNCTION_KW", arg_of(item, int)
            out += _under(hooks.call, nargs + 2 + kw, item)
            out.append(make("CALL_FUNCTION_KW" if kw else "CALL_FUNCTION", nargs + 1, item.location))
        elif item.name == "CALL_FUNCTION_EX":
            nargs = 2 + (arg_of(item, int) & 1)
            out += _under(hooks.call_ex, nargs + 1, item)
            out.append(make("CALL_FUNCTION", nargs, item.location))
        else:
            out.append(item)
    return out


def _is_with_exit(items: Sequence[object], index: int) -> bool:
    """``LOAD_CONST None; DUP_TOP; DUP_TOP; CALL_FUNCTION 3`` is how 3.10 calls ``__exit__``."""
    if getattr(items[index], "name", None) != "CALL_FUNCTION" or getattr(items[index], "arg", None) != 3:
        return False  # (asked of every instruction: the cheap test first)
    tail = [getattr(item, "name", None) for item in items[max(0, index - 3) : index + 1]]
    return tail == ["LOAD_CONST", "DUP_TOP", "DUP_TOP", "CALL_FUNCTION"]


def _under(obj: object, depth: int, at: Instr) -> list[Instr]:
    """Push ``obj`` and slide it down to ``depth`` (1 = top of stack)."""
    loc = at.location
    rot = {2: "ROT_TWO", 3: "ROT_THREE", 4: "ROT_FOUR"}.get(depth)
    slide = make(rot, loc=loc) if rot else make("ROT_N", depth, loc)
    return [_load_hook(obj, loc), slide]


def _load_hook(hook: object, loc: Location) -> Instr:
    return make("LOAD_GLOBAL", str(hook), loc) if type(hook) is GlobalName else make("LOAD_CONST", hook, loc)


def _operator_site(instr: Instr, hooks: Hooks) -> list[Instr] | None:
    name, loc = instr.name, instr.location
    if name in BINARY_310:
        return _binary(hooks.operator_site(BINARY_310[name]), instr)
    if name in UNARY or name == "GET_ITER":  # ``for x in obj`` starts with ``iter(obj)``
        op = UNARY.get(name, iter)
        return [*_under(hooks.operator_site(op), 2, instr), make("CALL_FUNCTION", 1, loc)]
    if name == "GET_YIELD_FROM_ITER":  # ``yield from obj``: ``iter(obj)`` unless a generator
        return [*_under(hooks.yield_from, 2, instr), make("CALL_FUNCTION", 1, loc), instr]
    if name == "COMPARE_OP":
        return _binary(hooks.operator_site(compare_op(arg_of(instr, Compare))[0]), instr)
    if name == "CONTAINS_OP":  # ``a in b`` is ``operator.contains(b, a)``
        out = [make("ROT_TWO", loc=loc), *_binary(hooks.operator_site(operator.contains), instr)]
        return out + [make("UNARY_NOT", loc=loc)] if instr.arg else out
    if name == "STORE_SUBSCR":  # [v, a, i] -> setitem(a, i, v)
        return [
            make("ROT_THREE", loc=loc),
            make("ROT_THREE", loc=loc),
            *_under(hooks.operator_site(operator.setitem), 4, instr),
            make("CALL_FUNCTION", 3, loc),
            make("POP_TOP", loc=loc),
        ]
    if name == "DELETE_SUBSCR":
        return [*_binary(hooks.operator_site(operator.delitem), instr), make("POP_TOP", loc=loc)]
    return None


def _binary(site: object, at: Instr) -> list[Instr]:
    return [*_under(site, 3, at), make("CALL_FUNCTION", 2, at.location)]


class _Py310:
    """Calls go through ``hooks.call(f, *args)``, slid under the callee (see the module)."""

    for_iter_exit: tuple[str, ...] = ()
    loads_trust_binding = False
    assembler: Assembler | None = None

    rewrite_calls = staticmethod(_rewrite_calls)
    operator_site = staticmethod(_operator_site)
    operator_names = frozenset({*BINARY_310, *UNARY, "GET_ITER", "GET_YIELD_FROM_ITER", "COMPARE_OP", "CONTAINS_OP",
                                "STORE_SUBSCR", "DELETE_SUBSCR"})

    def decode(self, code: CodeType) -> Bytecode:
        return Bytecode.from_code(code, conserve_exception_block_stackdepth=True)

    def plain_forms(self, items: list[Item], *, borrowable: bool = False) -> list[Item]:
        return items

    def borrowed_again(self, items: list[Item], depths: Sequence[int | None]) -> list[Item]:
        return items

    def load_global(self, name: str, loc: Location) -> Instr:
        return make("LOAD_GLOBAL", name, loc)

    load_hook = staticmethod(_load_hook)

    def load_global_callee(self, name: str, loc: Location) -> Instr:
        return make("LOAD_GLOBAL", name, loc)  # (3.10 calls need no slot beside the callee)

    def call(self, nargs: int, loc: Location) -> list[Instr]:
        return [make("CALL_FUNCTION", nargs, loc)]

    def call_constant(self, obj: object, loc: Location) -> list[Instr]:
        return [make("LOAD_CONST", obj, loc), make("CALL_FUNCTION", 0, loc)]

    def jump_if_true(self, target: Label, loc: Location) -> Instr:
        return make("POP_JUMP_IF_TRUE", target, loc)

    def jump_if_false(self, target: Label, loc: Location) -> Instr:
        return make("POP_JUMP_IF_FALSE", target, loc)

    def line_table(self, code: CodeType, concrete: ConcreteBytecode) -> bytes:
        return _line_table(code.co_firstlineno, [(instr.size, instr.lineno) for instr in concrete
                                                 if isinstance(instr, ConcreteInstr)])

    def null_slots(self, instr: Instr) -> tuple[tuple[int, ...], tuple[int, ...]]:
        # Only a method call's pair has one on 3.10.
        if instr.name == "LOAD_METHOD":
            return (), (2,)
        if instr.name == "CALL_METHOD":
            return (arg_of(instr, int) + 2,), ()
        return (), ()

    def start_depth(self, code: CodeType) -> int:
        # A generator's frame starts with the value sent to it (None, at the first send).
        return 1 if code.co_flags & _GENERATOR_FLAGS else 0


_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR


def _line_table(first_line: int, instructions: list[tuple[int, int | None]]) -> bytes:
    """The 3.10 ``co_linetable`` of instructions given as (size in bytes, line or None).

    ``bytecode`` (0.17) loses lines on 3.10 after an instruction that has none: it
    compares the next instruction's line with the last line it wrote, not with "none",
    so a generator expression (whose ``GEN_START`` has no line) got no line at all, and
    its frame line -1 in tracebacks.  Written here as CPython's compiler writes it
    (``Objects/lnotab_notes.txt``): pairs of (bytes, line delta from the last line that
    was not none), -128 for none.
    """
    runs: list[list[Any]] = []
    for size, line in instructions:
        if runs and runs[-1][1] == line:
            runs[-1][0] += size
        else:
            runs.append([size, line])
    out = bytearray()
    last = first_line
    for size, line in runs:
        if line is None:
            delta = -128
        else:
            delta, last = line - last, line
            while delta > 127:
                out += struct.pack("Bb", 0, 127)
                delta -= 127
            while delta < -127:
                out += struct.pack("Bb", 0, -127)
                delta += 127
        while size > 254:
            out += struct.pack("Bb", 254, delta)
            delta = -128 if line is None else 0
            size -= 254
        out += struct.pack("Bb", size, delta)
    return bytes(out)


FAMILY: Family = _Py310()
