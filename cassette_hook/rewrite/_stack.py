"""Stack depths of a ``bytecode.Bytecode``, and pairing of call sites with what feeds them.

The rewriters need to know, for each call instruction, which earlier instruction pushed
the slot that the call consumes as its callee (or as its ``NULL``/self slot).  CPython's
compiler guarantees one stack depth per instruction whatever path reaches it, so a walk
over the control-flow edges gives every instruction's depth; a call consumes the slot at
a fixed distance below the top, and a second walk carries, along every path, which
instruction opened each slot still on the stack.  Anything it cannot pair is left
unrewritten.
"""

from __future__ import annotations

from typing import Callable, Sequence

from bytecode import Instr, Label
from bytecode.instr import UNSET, SetLineno, TryBegin, TryEnd

from . import UnsupportedCode

Item = Instr | Label | SetLineno | TryBegin | TryEnd  # an element of a Bytecode list


def stack_depths(items: Sequence[Item]) -> list[int | None]:
    """Depth of the value stack before each item (``None`` where unreachable).

    A try block whose depth is not known yet (``UNSET``: one a pass opened) keeps the
    depth at its start, as the compiler's do."""
    labels = {id(item): index for index, item in enumerate(items) if isinstance(item, Label)}
    depths: list[int | None] = [None] * len(items)
    pending: list[tuple[int, int]] = [(0, 0)]

    def reach(index: int, depth: int) -> None:
        known = depths[index]
        if known is None:
            depths[index] = depth
            pending.append((index, depth))
        elif known != depth:
            raise UnsupportedCode(f"inconsistent stack depth at item {index}: {known} != {depth}")

    while pending:
        index, depth = pending.pop()
        while index < len(items):
            item = items[index]
            depths[index] = depth
            if isinstance(item, TryBegin):
                handler = labels[id(item.target)]
                kept = depth if item.stack_depth is UNSET else int(item.stack_depth)
                reach(handler, kept + int(item.push_lasti) + 1)
            if isinstance(item, Instr):
                if jumps(item):
                    reach(labels[id(item.arg)], depth + item.stack_effect(jump=True))
                if item.is_uncond_jump() or item.is_final():
                    break
                depth += _effect(item)
            index += 1
            if index < len(items) and depths[index] is not None:
                if depths[index] != depth:
                    raise UnsupportedCode(f"inconsistent stack depth at item {index}")
                break
    return depths


def jumps(instr: Instr) -> bool:
    """May ``instr`` go on at its label?  3.14's ``END_ASYNC_FOR`` names the ``END_SEND`` of
    its loop, for ``sys.monitoring`` to tell where the branch it ends came from, but never
    goes there (and leaves the stack two lower than that place has it)."""
    return instr.has_jump() and instr.name != "END_ASYNC_FOR"


def _effect(instr: Instr) -> int:
    # A generator's frame resumes after RETURN_GENERATOR with the sent value pushed; dis
    # reports 0 for it before 3.13.
    return 1 if instr.name == "RETURN_GENERATOR" else instr.stack_effect(jump=False)


def pair_by_depth(
    items: Sequence[Item],
    depths: Sequence[int | None],
    producer_depth: Callable[[Instr, int], int | None],
    consumer_depth: Callable[[Instr, int], int | None],
) -> dict[int, frozenset[int]]:
    """Map each consumer's index to the producers of its slot, on every path reaching it.

    ``producer_depth(instr, depth)`` gives the depth of the slot an instruction opens (or
    ``None``); ``consumer_depth`` the depth of the slot a call consumes.  The walk follows
    control flow, so a producer whose consumer the compiler duplicated into two branches
    pairs with both; a consumer that some path reaches without a producer is left out.
    """
    labels = {id(item): index for index, item in enumerate(items) if isinstance(item, Label)}
    seen: list[dict[int, frozenset[int]] | None] = [None] * len(items)
    pairs: dict[int, frozenset[int]] = {}
    unpaired: set[int] = set()
    pending: list[tuple[int, dict[int, frozenset[int]]]] = [(0, {})]
    while pending:
        index, state = pending.pop()
        while index < len(items):
            known = seen[index]
            if known is not None:
                merged = {d: known[d] | state[d] for d in known.keys() & state.keys()}
                if merged == known:
                    break
                state = merged
            seen[index] = state
            item, depth = items[index], depths[index]
            if depth is not None:
                state = {d: p for d, p in state.items() if d < depth}  # slots popped by now
            if isinstance(item, TryBegin):
                handler_depth = int(item.stack_depth)
                pending.append((labels[id(item.target)], {d: p for d, p in state.items() if d < handler_depth}))
            if isinstance(item, Instr) and depth is not None:
                consumed = consumer_depth(item, depth)
                if consumed is not None:
                    producers = state.get(consumed)
                    if producers is None:
                        unpaired.add(index)
                    else:
                        pairs[index] = pairs.get(index, frozenset()) | producers
                    state = {d: p for d, p in state.items() if d < consumed}
                produced = producer_depth(item, depth)
                if produced is not None:
                    state = {**state, produced: frozenset({index})}
                if jumps(item):
                    pending.append((labels[id(item.arg)], state))
                if item.is_uncond_jump() or item.is_final():
                    break
            index += 1
    return {c: p for c, p in pairs.items() if c not in unpaired}
