"""Typed access to ``bytecode`` instructions' arguments.

``Instr.arg`` is typed as the union of what any opcode takes; each opcode takes one kind.
The rewriters read arguments through these accessors, which narrow the union for the
opcodes they are used on -- checked, here, rather than at every use.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import operator
from opcode import opmap
from typing import Any, Callable, Mapping, Sequence, TypeVar, cast

import bytecode
from bytecode import Instr, Label
from bytecode.instr import UNSET, InstrLocation

from .._native import optional

T = TypeVar("T")

Location = InstrLocation | None  # an instruction's position, or none



class CompiledPosition(tuple[int | None, int | None, int | None, int | None]):
    """A compiled position, as ``co_positions`` gives it (``_assembler.Verbatim``'s), read
    by the line table's encoder as it reads a ``bytecode`` position (``lineno`` ...
    ``end_col_offset``) -- or as the tuple it is, without the properties' calls."""

    __slots__ = ()
    lineno = property(operator.itemgetter(0))
    end_lineno = property(operator.itemgetter(1))
    col_offset = property(operator.itemgetter(2))
    end_col_offset = property(operator.itemgetter(3))

# ``LOAD_GLOBAL`` (3.11+), ``LOAD_ATTR`` (3.12+): (flag, name); ``LOAD_SUPER_ATTR``:
# (flag, two-argument form, name).  The first flag says "push NULL" / "method load".
FlaggedName = tuple[bool, str] | tuple[bool, bool, str]


BYTECODE_FOLLOWED = "0.19."
"""The ``bytecode`` releases whose internals the rewriting follows: ``Instr._from_trusted``
(:func:`make`), and the conversions ``_assembler`` and ``_decoder`` reproduce (0.19.1 is the
one ``tests/test_rewrite_shortcuts.py``, ``tests/test_assembly.py`` and
``tests/test_decoding.py`` compared them with; older ones lack names they import).  With
another release ``bytecode`` makes, assembles and decodes everything, as before."""


def follows_bytecode() -> bool:
    """Is the installed ``bytecode`` a release :data:`BYTECODE_FOLLOWED` names?"""
    return bytecode.__version__.startswith(BYTECODE_FOLLOWED)


def _checked(name: str, arg: object = UNSET, loc: Location = None, kind: type[Instr] = Instr) -> Instr:
    return kind(name, arg, location=loc)


def _trusted(name: str, arg: object = UNSET, loc: Location = None, kind: type[Instr] = Instr) -> Instr:
    opcode = opmap[name]
    if arg is UNSET and opcode in _CACHE_ONLY_ARG:  # (what ``Instr``'s constructor does besides its checks)
        arg = 0
    return kind._from_trusted(name, opcode, arg, loc)


_CACHE_ONLY_ARG: frozenset[int] = frozenset(getattr(bytecode.instr, "CACHE_ONLY_ARG_OPCODES", ()))

make = _trusted if follows_bytecode() else _checked
"""``Instr(name, arg, location=loc)`` (or ``kind``'s: a subclass adding no state), for the
instructions the rewriting makes of its own (the arguments their opcodes take, never a
pass's).  ``Instr``'s constructor checks its argument against lists of opcodes by ``in``
(``dis.hasname`` and the like): 2.5 µs an instruction, and the rewriting makes about three
for every two it reads: about a fifth of a cold rewrite (docs/internals.md, "Where a cold
import's time goes").  Where the installed ``bytecode`` is a release
:data:`BYTECODE_FOLLOWED` names, the instruction is made as ``bytecode`` makes those it
decodes (``Instr._from_trusted``): the same object, without the checks;
``tests/test_rewrite_shortcuts.py`` compares the code made both ways."""


def _placed_checked(templates: Sequence[Instr], loc: Location) -> list[Instr]:
    out: list[Instr] = []
    for template in templates:
        instr = template.copy()
        instr.location = loc
        out.append(instr)
    return out


def _placed_trusted(templates: Sequence[Instr], loc: Location) -> list[Instr]:
    out: list[Instr] = []
    append, new = out.append, object.__new__
    for template in templates:  # (``Instr.copy`` and the location set, inline)
        instr = new(type(template))
        instr._name = template._name
        instr._opcode = template._opcode
        instr._is_jump = template._is_jump
        instr._arg = template._arg
        instr._location = loc
        append(instr)
    return out


_decoding = optional(".rewrite._decoding")  # (its ``placed``: the copies made in C)
placed: Callable[[Sequence[Instr], Location], list[Instr]] = (
    _placed_checked if not follows_bytecode() else _placed_trusted if _decoding is None else _decoding.placed)
"""Copies of ``templates`` at ``loc``: the instructions of a site, made once (by
:data:`make`, by the family's own methods) for each shape of site and copied at each site
that has it, as ``make`` would make each of them there.  A site's instructions were a call
of ``make`` each, and a chain of the family's methods for each site: most of what making a
site cost (docs/performance.md, "The sites' instructions made once").  Where the installed
``bytecode`` is a release :data:`BYTECODE_FOLLOWED` names, ``Instr.copy`` inline -- in C
where the accelerators are built (``_decoding.placed``, made as the decoder's loop makes
its instructions: the loop here, its reference, was the largest of the passes' own costs
after the pairing; docs/performance.md, "Placing and joining cheaper"); else ``copy`` and
the location set, checked."""


def _named(items: Sequence[object], cls: type, groups: Mapping[str, int], count: int) -> list[list[int]]:
    found: list[list[int]] = [[] for _ in range(count)]
    for index, item in enumerate(items):
        if type(item) is cls or isinstance(item, cls):
            group = groups.get(cast(Instr, item)._name)  # (its name read under bytecode's property)
            if group is not None:
                found[group].append(index)
    return found


named: Callable[[list[Any], type, dict[str, int], int], list[list[int]]] = (
    _named if _decoding is None else _decoding.named)
"""For each of ``count`` groups, the indexes of the items that are ``cls`` instances (an
``Instr``) whose name ``groups`` maps to that group, in order: where a pass's walk over a
body finds the few instructions it acts on.  In C where the accelerators are built
(``_decoding.named``): in Python, the type test and the name read and looked up at each
item were most of the call sites' pass's own time and of the operators' (docs/performance.md,
"Placing and joining cheaper"); :func:`_named` is its reference."""


def _aimed_checked(instr: Instr, target: Label) -> None:
    instr.arg = target


def _aimed_trusted(instr: Instr, target: Label) -> None:
    instr._arg = target  # (a jump's: a label is what its opcode takes)


aim = _aimed_trusted if follows_bytecode() else _aimed_checked
"""Point ``instr``, a jump :data:`placed` copied, at ``target``: a site whose shape jumps is
made once with jumps to a stand-in label, and each copy aimed at the site's own labels."""


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
