"""Copies of a library's functions that read some attributes of ``self`` off a receiver.

A library's code that runs plain (a primitive of the context's plan) may call the
program's code by reading it off an object and calling it: ``Thread._bootstrap_inner``
reads ``self.run``, ``Executor.map`` reads ``self.submit``.  No call site is made there,
and none can be put where the attribute is read (the instance, the class) without the
program seeing it.  So such a function is run from a *copy* whose only difference is
that, where the original loads ``self`` to read one of those attributes, the copy loads a
constant, a *receiver*: an object of the caller's whose property of that name reads the
attribute off ``self`` -- at the same moment, through the same lookup -- and gives back
what the caller needs (a call site of it).  The copy keeps the original's name, file, line
numbers and locals, so its frames and tracebacks read as plain
(docs/internals.md, "Callbacks from C").

:func:`swapped_code` makes the copy's code once, with :data:`PLACEHOLDER` where the
receiver goes, in the function's own code and in the comprehensions and generator
expressions nested in it (where ``self`` is a free variable); :func:`with_receiver` puts
one receiver in place of the placeholder, per call.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from types import CodeType
from typing import Any


class _Placeholder:
    """The constant a copy's code holds where the receiver goes (replaced per call)."""

    __slots__ = ()


PLACEHOLDER = _Placeholder()


def _owner_load(instr: Any, owners: tuple[str, ...]) -> list[Any] | None:
    """Where ``instr`` pushes one of the variables ``owners`` last (a local, a free
    variable of a comprehension, or the second half of a 3.13+ pair such as
    ``STORE_FAST_LOAD_FAST (args, self)``), the instructions that do what it does with
    the placeholder pushed in the owner's place; else None."""
    from bytecode import Instr

    if not isinstance(instr, Instr):
        return None
    arg, name = instr.arg, instr.name
    if isinstance(arg, tuple) and len(arg) == 2 and arg[1] in owners:
        for second in ("_LOAD_FAST_BORROW", "_LOAD_FAST"):
            if name.endswith(second):  # (the first half kept as it was, then the placeholder)
                return [Instr(name[:-len(second)], arg[0], location=instr.location),
                        Instr("LOAD_CONST", PLACEHOLDER, location=instr.location)]
        return None
    if name.startswith("LOAD_FAST"):
        loads = arg in owners
    elif name == "LOAD_DEREF":
        # (a free variable's is a FreeVar; a cell that is also an argument's, the argument's name)
        loads = (arg if isinstance(arg, str) else getattr(arg, "name", None)) in owners
    else:
        loads = False
    return [Instr("LOAD_CONST", PLACEHOLDER, location=instr.location)] if loads else None


def swapped_code(code: CodeType, names: tuple[str, ...],
                 owners: tuple[str, ...] = ("self",)) -> tuple[CodeType, dict[str, int]]:
    """``code`` with each ``self.<name>`` of ``names`` read off :data:`PLACEHOLDER`
    instead of ``self`` (or of another variable of ``owners`` that holds the same object),
    here and in the code nested in it, and how many reads of each name were swapped (the
    caller decides whether that is the shape it expects).  Code with nothing swapped is
    given back as it was."""
    from bytecode import Bytecode, Instr  # (imported here: only what runs a copy needs it)

    found = dict.fromkeys(names, 0)

    def swap(code: CodeType) -> CodeType:
        made = Bytecode.from_code(code)
        changed = False
        at = 0
        while at < len(made):
            item = made[at]
            if isinstance(item, Instr):
                if isinstance(item.arg, CodeType):  # a comprehension's, a generator expression's
                    nested = swap(item.arg)
                    if nested is not item.arg:
                        item.arg, changed = nested, True
                elif item.name in ("LOAD_ATTR", "LOAD_METHOD") and at > 0:
                    name: Any = item.arg[1] if isinstance(item.arg, tuple) else item.arg  # (3.12+: (method?, name))
                    swapped = _owner_load(made[at - 1], owners) if name in found else None
                    if swapped is not None:
                        found[name] += 1
                        made[at - 1:at] = swapped
                        at += len(swapped) - 1
                        changed = True
            at += 1
        return made.to_code() if changed else code

    return swap(code), found


def with_receiver(code: CodeType, receiver: Any) -> CodeType:
    """``code`` (made by :func:`swapped_code`) with ``receiver`` in place of the placeholder,
    in it and in the code nested in it."""
    consts = tuple(receiver if const is PLACEHOLDER
                   else with_receiver(const, receiver) if type(const) is CodeType and _holds(const) else const
                   for const in code.co_consts)
    return code.replace(co_consts=consts)


def _holds(code: CodeType) -> bool:
    """Does ``code``, or code nested in it, hold the placeholder?"""
    return any(const is PLACEHOLDER or type(const) is CodeType and _holds(const) for const in code.co_consts)
