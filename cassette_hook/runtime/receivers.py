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

from types import CodeType
from typing import Any


class _Placeholder:
    """The constant a copy's code holds where the receiver goes (replaced per call)."""

    __slots__ = ()


PLACEHOLDER = _Placeholder()


def _loads(instr: Any, owners: tuple[str, ...]) -> bool:
    """Does ``instr`` push one of the variables ``owners`` (a local, or a free variable of
    a comprehension)?"""
    from bytecode import Instr

    if not isinstance(instr, Instr):
        return False
    if instr.name.startswith("LOAD_FAST"):
        return instr.arg in owners  # (LOAD_FAST_LOAD_FAST's is a pair: not a single load)
    if instr.name != "LOAD_DEREF":
        return False
    # (a free variable's is a FreeVar; a cell that is also an argument's, the argument's name)
    return (instr.arg if isinstance(instr.arg, str) else getattr(instr.arg, "name", None)) in owners


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
        previous: Any = None
        for item in made:
            if isinstance(item, Instr):
                if isinstance(item.arg, CodeType):  # a comprehension's, a generator expression's
                    nested = swap(item.arg)
                    if nested is not item.arg:
                        item.arg, changed = nested, True
                elif item.name in ("LOAD_ATTR", "LOAD_METHOD"):
                    name: Any = item.arg[1] if isinstance(item.arg, tuple) else item.arg  # (3.12+: (method?, name))
                    if name in found and _loads(previous, owners):
                        found[name] += 1
                        previous.set("LOAD_CONST", PLACEHOLDER)
                        changed = True
            previous = item
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
