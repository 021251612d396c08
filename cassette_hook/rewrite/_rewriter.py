"""The rewriting itself, on ``bytecode``: decode a code object, rewrite its sites, assemble.

Kept apart from the package's ``__init__`` so that importing cassette_hook (and running
code the import hook cached) never imports ``bytecode``: only rewriting does.
"""

from __future__ import annotations

import struct
import sys
from types import CodeType
from typing import TYPE_CHECKING, Any

from bytecode import Bytecode, ConcreteInstr, Instr

from . import RESOURCE_ERRORS, GlobalName, Hooks, UnsupportedCode
from ._markers import ContextSlot, nooverdub
from ._names import COMPREHENSIONS
from ._stack import Item, stack_depths

if TYPE_CHECKING:
    from . import Nested

if sys.version_info >= (3, 13):
    from . import _py313 as family
elif sys.version_info >= (3, 12):
    from . import _py312 as family
elif sys.version_info >= (3, 11):
    from . import _py311 as family
else:
    from . import _py310 as family

__all__ = ["assemble", "decode", "family", "linetable_310", "repaired_linetable", "rewritten"]


def decode(code: CodeType) -> Bytecode:
    """``code`` as ``bytecode`` instructions, with the exception handlers' stack depths."""
    return Bytecode.from_code(code, conserve_exception_block_stackdepth=True)


def rewritten(code: CodeType, hooks: Hooks, *, operators: bool, nested: Nested,
              decoded: Bytecode | None = None) -> Bytecode:
    """``code`` decoded (or ``decoded``: its decoding, reused, or what a pass made of it),
    with its sites rewritten, its code constants mapped by ``nested`` and the pass markers
    (``_markers``) replaced."""
    bc = decode(code) if decoded is None else decoded
    items = list(bc)
    items = family.rewrite_calls(items, stack_depths(items), hooks)
    if operators:
        items = _rewrite_operators(items, hooks)
    out: list[Item] = []
    for item in _rewrite_nested(items, nested):
        if isinstance(item, Instr) and item.name in _CONSTANT_LOADS and type(item.arg) in _SPECIAL_CONSTANTS:
            out += _load_special(item)
        else:
            out.append(item)
    bc[:] = out
    # ``bytecode`` numbers locals by first use after the arguments it is given; giving it
    # all of them keeps co_varnames -- and so the order of ``locals()`` -- as compiled.
    bc.argnames = list(code.co_varnames)
    return bc


def assemble(bc: Bytecode, stacksize: int, name: str) -> CodeType:
    """``bc`` as a code object, with the stack size given rather than recomputed."""
    try:
        # Every rewrite is stack-balanced and needs one slot more at most, for a moment,
        # and keeps the exception handlers' depths: nothing for ``bytecode`` to recompute
        # (which would be most of the rewriting time).
        concrete = bc.to_concrete_bytecode(compute_exception_stack_depths=False)
        code = concrete.to_code(stacksize=stacksize, compute_exception_stack_depths=False, check_pre_and_post=False)
    except RESOURCE_ERRORS:
        raise
    except Exception as exc:  # the bytecode package's own checks: stack depth, jumps
        raise UnsupportedCode(f"rewritten {name} does not assemble: {exc}") from exc
    if sys.version_info >= (3, 11):
        return code.replace(co_linetable=repaired_linetable(code.co_linetable))
    return code.replace(co_linetable=linetable_310(
        code.co_firstlineno, [(instr.size, instr.lineno) for instr in concrete if isinstance(instr, ConcreteInstr)]))


def linetable_310(first_line: int, instructions: list[tuple[int, int | None]]) -> bytes:
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


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x3F)
        value >>= 6
        if not value:
            return bytes(out)
        out[-1] |= 0x40


def repaired_linetable(table: bytes) -> bytes:
    """``table`` (a 3.11+ ``co_linetable``) with its one-line entries that name a column
    of 128 or more rewritten in the long form.

    ``bytecode`` (0.19) writes the one-line form (a header byte, then the start and end
    column as one byte each) for columns up to 255, but every byte of an entry after the
    first must be below 128: CPython finds where an entry starts by that high bit when it
    walks the table backwards, which it does to look up a line number (tracebacks,
    ``co_lines``).  A column byte of 128 or more is taken for an entry of its own, and the
    instructions after it get the line of an earlier one.
    """
    out = bytearray()
    i = 0
    while i < len(table):
        header = table[i]
        kind = (header >> 3) & 0xF
        if 10 <= kind <= 12:  # one-line form: the line delta is kind - 10
            column, end_column = table[i + 1], table[i + 2]
            if column < 0x80 and end_column < 0x80:
                out += table[i:i + 3]
            else:
                out.append(0x80 | (14 << 3) | (header & 0x7))
                out += _varint((kind - 10) << 1) + _varint(0) + _varint(column + 1) + _varint(end_column + 1)
            i += 3
            continue
        end = i + 1
        if kind < 10:  # short form: one byte of columns
            end += 1
        elif kind in (13, 14):  # one varint (no columns) or four (long form)
            for _ in range(1 if kind == 13 else 4):
                while table[end] & 0x40:
                    end += 1
                end += 1
        out += table[i:end]
        i = end
    return bytes(out)


_SPECIAL_CONSTANTS = frozenset({GlobalName, nooverdub, ContextSlot})
_CONSTANT_LOADS = frozenset({"LOAD_CONST", "RETURN_CONST"})  # RETURN_CONST: 3.12+


def _load_special(item: Instr) -> list[Instr]:
    """A hook loaded by name, or a pass's marker replaced (see ``_markers``)."""
    arg, loc = item.arg, item.location
    if isinstance(arg, GlobalName):
        return [family.load_global(str(arg), loc)]
    if isinstance(arg, nooverdub):  # its calls were left plain by rewrite_calls: load the callable itself
        return [Instr(item.name, arg.func, location=loc)]
    from .._context import current_context  # a contextslot: the running context, here and now

    load = family.call_constant(current_context, loc)
    return load if item.name == "LOAD_CONST" else [*load, Instr("RETURN_VALUE", location=loc)]


def _rewrite_operators(items: list[Item], hooks: Hooks) -> list[Item]:
    out: list[Item] = []
    for item in items:
        replacement = family.operator_site(item, hooks) if isinstance(item, Instr) else None
        if replacement is None:
            out.append(item)
        else:
            out.extend(replacement)
    return out


def _rewrite_nested(items: list[Item], nested: Nested) -> list[Item]:
    """Map the code constants: comprehensions and generator expressions, and the body of a
    ``class`` statement (the first code constant after ``LOAD_BUILD_CLASS``), run as part
    of this body; the others are the bodies of functions it defines."""
    out: list[Item] = []
    class_body_next = False
    for item in items:
        if isinstance(item, Instr) and item.name == "LOAD_BUILD_CLASS":
            class_body_next = True
        elif isinstance(item, Instr) and item.name == "LOAD_CONST" and isinstance(item.arg, CodeType):
            part = item.arg.co_name in COMPREHENSIONS or class_body_next
            replacement = nested(item.arg, part)
            if replacement is not item.arg:
                item = Instr("LOAD_CONST", replacement, location=item.location)
            class_body_next = False
        out.append(item)
    return out
