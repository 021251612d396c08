"""Switched code entered at its rewritten body: the code of a twin of import-hooked code.

A call from a rewritten site to a function the import hook loaded resolves under the
active plan, which has answered the switch's question for the function's module once
(``Plan.runs_module``), and knows whether it counts operators.  Switched code asks both
again and again: ``__cassette_hook_enter__`` at every call (a context-variable read and
a dict look-up, and the instructions around them), ``__cassette_hook_operators__``
before every operator.  Under a null context that was most of what the import hook cost
beyond ``overdub``.  So a twin runs its switched code with those tests made jumps:

    LOAD_GLOBAL __cassette_hook_active__; POP_JUMP_IF_FALSE plain;
    __cassette_hook_enter__(<module>); POP_JUMP_IF_TRUE instrumented     (with their caches)
        -> JUMP_FORWARD instrumented; NOP ...
    LOAD_GLOBAL __cassette_hook_operators__ <caches>; POP_JUMP_IF_FALSE plain_op
        -> JUMP_FORWARD plain_op; NOP ...          (for a plan that counts no operators)

Every instruction keeps its offset, so line numbers, positions and the exception table
stay valid (the switch's line is the body's first: a tracer sees it once either way);
the NOPs (not zeroed caches) keep the bytes a sequence of instructions for whatever
walks them (``dis``, ``sys.monitoring``).  The bytes are patched in place with
``opcode``'s tables, because decoding a function (``bytecode``, ``dis``) takes 0.2-0.6
ms, which a large program would pay at its first call of each function.  What differs
between versions is in the tables read at import, below.
"""

from __future__ import annotations

import opcode
import sys
from itertools import islice
from types import CodeType

from ._names import ACTIVE, ENTER, OPERATORS_ON

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Iterator

__all__ = ["rewritten_entry"]

_EXTENDED_ARG = opcode.opmap["EXTENDED_ARG"]
_LOAD_GLOBAL = opcode.opmap["LOAD_GLOBAL"]
_LOAD_CONST = opcode.opmap["LOAD_CONST"]
_JUMP_FORWARD = opcode.opmap["JUMP_FORWARD"]
_NOP = opcode.opmap["NOP"]
_ABSOLUTE_JUMPS = frozenset(opcode.hasjabs)  # 3.10's conditional jumps: to an instruction index
_RELATIVE_JUMPS = frozenset(opcode.hasjrel)  # 3.11+: forward, from the end of the jump's caches


def _forward_conditional_jumps(when: str) -> frozenset[int]:
    return frozenset(code for name, code in opcode.opmap.items()  # (3.11 also has backward ones)
                     if name.startswith("POP_JUMP") and name.endswith(f"IF_{when}") and "BACKWARD" not in name)


_IF_TRUE, _IF_FALSE = _forward_conditional_jumps("TRUE"), _forward_conditional_jumps("FALSE")


def _cache_sizes() -> list[int]:
    """Inline cache entries after each opcode: none before 3.11, by opcode on 3.11 and
    3.12, by name on 3.13."""
    entries = getattr(opcode, "_inline_cache_entries", None)
    if entries is None:
        return [0] * 256
    if isinstance(entries, dict):
        return [entries.get(name, 0) for name in opcode.opname]
    return list(entries)


_CACHES = _cache_sizes()
_NAME_SHIFT = 1 if sys.version_info >= (3, 11) else 0  # 3.11+: LOAD_GLOBAL's low bit pushes NULL
_SCAN_LIMIT = 12  # instructions: the switch follows a prefix of a few, its check is five


def rewritten_entry(code: CodeType, operators: bool) -> tuple[str, CodeType] | None:
    """For switched ``code``: the module its switch asks about, and ``code`` with the
    switch jumping straight to the rewritten body and, unless ``operators``, every
    operator run as compiled.  None when the switch is not where ``_dual`` puts it (or
    too far from the rewritten body): the twin then runs ``code`` itself, switch and all."""
    raw, names = code.co_code, code.co_names
    scan = _instructions(raw, 0)  # (the prefix loads no global: the first global load is the switch's)
    load = next(((start, arg) for start, op, arg, _ in islice(scan, _SCAN_LIMIT) if op == _LOAD_GLOBAL), None)
    if load is None or names[load[1] >> _NAME_SHIFT] != ACTIVE:
        return None
    switch = load[0]
    asked = list(islice(scan, _SCAN_LIMIT))  # the switch's jump, the question, its jump
    if not (asked and asked[0][1] in _IF_FALSE and len(asked) > 1 and asked[1][1] == _LOAD_GLOBAL
            and names[asked[1][2] >> _NAME_SHIFT] == ENTER):
        return None
    module = next((code.co_consts[arg] for _, op, arg, _ in asked if op == _LOAD_CONST), None)
    jump_end, instrumented = next(((end, _target(op, arg, end)) for _, op, arg, end in asked if op in _IF_TRUE),
                                  (0, None))
    if not isinstance(module, str) or instrumented is None:
        return None
    patched = bytearray(raw)
    if not _jump_over(patched, switch, jump_end, instrumented):
        return None
    if not operators and OPERATORS_ON in names:
        for guard in _global_loads(raw, names.index(OPERATORS_ON) << _NAME_SHIFT):
            start, op, arg, end = next(islice(_instructions(raw, guard), 1, None))  # the guard's jump
            target = _target(op, arg, end)
            if op in _IF_FALSE and target is not None:
                _jump_over(patched, guard, end, target)
    return module, code.replace(co_code=bytes(patched))


def _instructions(raw: bytes, start: int) -> Iterator[tuple[int, int, int, int]]:
    """(offset of its first unit, opcode, argument, offset after its caches) of each
    instruction from ``start``."""
    offset = start
    while offset < len(raw):
        first, arg = offset, 0
        while raw[offset] == _EXTENDED_ARG:
            arg = (arg | raw[offset + 1]) << 8
            offset += 2
        op = raw[offset]
        arg |= raw[offset + 1]
        offset += 2 + 2 * _CACHES[op]
        yield first, op, arg, offset


def _target(op: int, arg: int, end: int) -> int | None:
    if op in _ABSOLUTE_JUMPS:
        return 2 * arg
    if op in _RELATIVE_JUMPS:
        return end + 2 * arg
    return None


def _global_loads(raw: bytes, arg: int) -> Iterator[int]:
    """Offsets of the instructions that load global ``arg`` (with its ``EXTENDED_ARG``s).
    Found with ``bytes.find``: in ``co_code`` every cache unit is zero, so a unit that
    starts at an even offset with ``LOAD_GLOBAL``'s opcode is one."""
    prefix = b"".join(bytes((_EXTENDED_ARG, (arg >> shift) & 0xFF)) for shift in (24, 16, 8) if arg >> shift)
    pattern = prefix + bytes((_LOAD_GLOBAL, arg & 0xFF))
    offset = raw.find(pattern)
    while offset >= 0:
        if offset % 2 == 0 and (offset == 0 or raw[offset - 2] != _EXTENDED_ARG):
            yield offset
        offset = raw.find(pattern, offset + 1)


def _jump_over(raw: bytearray, start: int, end: int, target: int) -> bool:
    """Make the instructions in ``raw[start:end]`` one jump to ``target``, then NOPs; or
    say that a jump so far does not fit (a function of over 64K instructions)."""
    distance = (target - start) // 2 - 1  # in units, from the end of a one-unit jump
    units = [(_JUMP_FORWARD, distance)]
    if distance > 0xFF:  # (an EXTENDED_ARG first: one unit further; every region has two)
        units = [(_EXTENDED_ARG, (distance - 1) >> 8), (_JUMP_FORWARD, (distance - 1) & 0xFF)]
        if distance - 1 > 0xFFFF:
            return False
    units += [(_NOP, 0)] * ((end - start) // 2 - len(units))
    raw[start:end] = bytes(byte for unit in units for byte in unit)
    return True
