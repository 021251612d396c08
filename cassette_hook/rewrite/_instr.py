"""Typed access to ``bytecode`` instructions' arguments.

``Instr.arg`` is typed as the union of what any opcode takes; each opcode takes one kind.
The rewriters read arguments through these accessors, which narrow the union for the
opcodes they are used on -- checked, here, rather than at every use.
"""

from __future__ import annotations

from typing import TypeVar, cast

from bytecode import Instr
from bytecode.instr import InstrLocation

T = TypeVar("T")

Location = InstrLocation | None  # an instruction's position, or none

# ``LOAD_GLOBAL`` (3.11+), ``LOAD_ATTR`` (3.12+): (flag, name); ``LOAD_SUPER_ATTR``:
# (flag, two-argument form, name).  The first flag says "push NULL" / "method load".
FlaggedName = tuple[bool, str] | tuple[bool, bool, str]


def arg_of(instr: Instr, kind: type[T]) -> T:
    """``instr.arg``, which the opcode says is a ``kind`` (``int`` for ``CALL n``...)."""
    arg = instr.arg
    if not isinstance(arg, kind):
        raise TypeError(f"{instr.name} has {arg!r} as its argument, not a {kind.__name__}")
    return arg


def flagged_name(instr: Instr) -> FlaggedName:
    """The argument of ``LOAD_GLOBAL`` (3.11+), ``LOAD_ATTR`` or ``LOAD_SUPER_ATTR`` (3.12+)."""
    arg = instr.arg
    if not isinstance(arg, tuple):
        raise TypeError(f"{instr.name} has {arg!r} as its argument, not (flag, ..., name)")
    return cast(FlaggedName, arg)


def global_name(instr: Instr) -> str:
    """The name a ``LOAD_GLOBAL`` loads, on every version."""
    arg = instr.arg
    return flagged_name(instr)[-1] if isinstance(arg, tuple) else arg_of(instr, str)
