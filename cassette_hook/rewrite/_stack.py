"""Stack depths of a ``bytecode.Bytecode``, and pairing of call sites with what feeds them.

The rewriters need to know, for each call instruction, which earlier instruction pushed
the slot that the call consumes as its callee (or as its ``NULL``/self slot).  CPython's
compiler guarantees one stack depth per instruction whatever path reaches it, so a walk
over the control-flow edges gives every instruction's depth; a call consumes the slot at
a fixed distance below the top, and a second walk carries, along every path, which
instruction opened each slot still on the stack.  Anything it cannot pair is left
unrewritten.

Both walks ask of each instruction only what its opcode, or its opcode and argument, say:
where it goes (:func:`flow`) and how it moves the stack (:func:`effect`), asked of
``bytecode`` once per opcode (and argument) and remembered, not at every instruction
(``Instr.stack_effect`` works out, at each call, the argument it hands ``dis``: 0.7 µs, most
of the depth walk's time, which was 4% of a cold rewrite).

Where the accelerators are built, both walks run in C (``_stacking.c``: :data:`stack_depths`
and the pairing's loops, :data:`_find_pairs`, chosen once below), the Python functions here
their references (docs/internals.md, "The stack walks in C").
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from typing import Callable, Collection, Sequence

from bytecode import Instr, Label
from bytecode.instr import UNSET, SetLineno, TryBegin, TryEnd

from .._native import optional
from . import UnsupportedCode
from ._memo import Memo

Item = Instr | Label | SetLineno | TryBegin | TryEnd  # an element of a Bytecode list


def _stack_depths(items: Sequence[Item]) -> list[int | None]:
    """Depth of the value stack before each item (``None`` where unreachable).

    A try block whose depth is not known yet (``UNSET``: one a pass opened) keeps the
    depth at its start, as the compiler's do.  The reference of ``_stacking.depths``, the
    same walk in C (:data:`stack_depths` is the one this process uses)."""
    labels = _label_indexes(items)
    depths: list[int | None] = [None] * len(items)
    pending: list[tuple[int, int]] = [(0, 0)]

    def reach(index: int, depth: int) -> None:
        known = depths[index]
        if known is None:
            depths[index] = depth
            pending.append((index, depth))
        elif known != depth:
            raise UnsupportedCode(f"inconsistent stack depth at item {index}: {known} != {depth}")

    count = len(items)
    steps = _STEPS
    while pending:
        index, depth = pending.pop()
        while index < count:
            item = items[index]
            depths[index] = depth
            if isinstance(item, Instr):
                arg = item._arg  # (the slots behind Instr.arg and .name: without the properties' calls)
                name = item._name
                if type(arg) is str or type(arg) is Label:  # (the commonest: a variable, a name, a label)
                    key: object = name
                else:
                    number = (arg[0] if arg else None) if type(arg) is tuple else arg
                    key = (name, number) if number is not UNSET and isinstance(number, int) else name
                step = steps.get(key) or _step(item, key)
                if step[0]:
                    reach(labels[id(arg)], depth + step[2])
                if step[1]:
                    break
                depth += step[3]
            elif isinstance(item, TryBegin):
                handler = labels[id(item.target)]
                kept = depth if item.stack_depth is UNSET else int(item.stack_depth)
                reach(handler, kept + int(item.push_lasti) + 1)
            index += 1
            if index < count and depths[index] is not None:
                if depths[index] != depth:
                    raise UnsupportedCode(f"inconsistent stack depth at item {index}")
                break
    return depths


def _label_indexes(items: Sequence[Item]) -> dict[int, int]:
    """Each label's index in ``items``, by its ``id``.  The labels are found by ``list.index``
    over the items' types, a scan in C, rather than by asking each item whether it is a label
    (a third of the depth walk's time); only where some item's type is a subclass of
    ``Label`` does it ask each item."""
    kinds = list(map(type, items))
    if any(kind is not Label and issubclass(kind, Label) for kind in set(kinds)):
        return {id(item): index for index, item in enumerate(items) if isinstance(item, Label)}
    labels: dict[int, int] = {}
    index = -1
    try:
        while True:
            index = kinds.index(Label, index + 1)
            labels[id(items[index])] = index
    except ValueError:  # (no label after the last)
        return labels


def _step(instr: Instr, key: object) -> tuple[bool, bool, int, int]:
    """What the depth walk asks of ``instr``: :func:`flow`'s two answers, the depth it adds
    at its label if it jumps, the depth it adds at the next item if it goes on; remembered
    under ``key``, what :func:`effect` remembers its answers by (the opcode's name, and an
    argument that is a number).  One look-up an instruction instead of three calls: the
    walk was a seventh of a cold rewrite of sympy (docs/performance.md, "Our passes
    cheaper")."""
    jump, stops = flow(instr)
    step = _STEPS[key] = (jump, stops, effect(instr, True) if jump else 0, 0 if stops else _effect(instr))
    return step


_STEPS: dict[object, tuple[bool, bool, int, int]] = {}  # see _step()


def jumps(instr: Instr) -> bool:
    """May ``instr`` go on at its label?  3.14's ``END_ASYNC_FOR`` names the ``END_SEND`` of
    its loop, for ``sys.monitoring`` to tell where the branch it ends came from, but never
    goes there (and leaves the stack two lower than that place has it)."""
    return flow(instr)[0]


def flow(instr: Instr) -> tuple[bool, bool]:
    """(may ``instr`` go on at its label (:func:`jumps`), does it never go on to the next
    item (an unconditional jump, a return, a raise)), as ``bytecode`` says of its opcode."""
    known = _FLOWS.get(instr.name)
    if known is None:
        known = _FLOWS[instr.name] = (instr.has_jump() and instr.name != "END_ASYNC_FOR",
                                      instr.is_uncond_jump() or instr.is_final())
    return known


_FLOWS: dict[str, tuple[bool, bool]] = {}  # opcode name -> flow()
# (by the ids of a family's sets of producers' and consumers' names, the sets held: each
# name's role in pair_by_depth's first loop -- consumer? producer? its flow() -- or () for none)
_Role = tuple[bool, bool, tuple[bool, bool]] | tuple[()]
_ROLES: Memo[tuple[int, int], dict[str, _Role]] = Memo(64)  # (a few sets for each family)
_GOES_ON = (False, False)  # (flow() of what neither jumps nor stops)


def effect(instr: Instr, jump: bool) -> int:
    """``instr.stack_effect(jump=jump)``, remembered by what it is computed from: the opcode,
    and an argument that is an int (or a flagged name's flag); any other argument is no
    number of ``dis``'s, and ``bytecode`` gives ``dis`` 0 (or none) for it."""
    arg = instr.arg
    if type(arg) is tuple:
        arg = arg[0] if arg else None  # (a flagged name, a pair of variables, a constant)
    key = (instr.name, jump, arg) if arg is not UNSET and isinstance(arg, int) else (instr.name, jump)
    known = _EFFECTS.get(key)
    if known is None:
        known = _EFFECTS[key] = instr.stack_effect(jump=jump)
    return known


_EFFECTS: dict[tuple[object, ...], int] = {}  # see effect()


def _effect(instr: Instr) -> int:
    # A generator's frame resumes after RETURN_GENERATOR with the sent value pushed; dis
    # reports 0 for it before 3.13.
    return 1 if instr.name == "RETURN_GENERATOR" else effect(instr, False)


def pair_by_depth(
    items: Sequence[Item],
    depths: Sequence[int | None],
    producer_depth: Callable[[Instr, int], int | None],
    consumer_depth: Callable[[Instr, int], int | None],
    producers: Collection[str],
    consumers: Collection[str],
) -> dict[int, frozenset[int]]:
    """Map each consumer's index to the producers of its slot, on every path reaching it.

    ``producer_depth(instr, depth)`` gives the depth of the slot an instruction opens (or
    ``None``), asked only of the instructions named in ``producers``; ``consumer_depth``
    the depth of the slot a call consumes, asked only of those named in ``consumers``.
    The walk follows control flow, so a producer whose consumer the compiler duplicated
    into two branches pairs with both; a consumer that some path reaches without a
    producer is left out.
    """
    roles = _ROLES.get((id(producers), id(consumers)))
    if roles is None:
        roles = {}
        if type(producers) is frozenset and type(consumers) is frozenset:  # (a family's: kept, with its names)
            _ROLES.remember((id(producers), id(consumers)), roles, producers, consumers)
    return _find_pairs(items, depths, roles, producers, consumers, producer_depth, consumer_depth)


def _pairs(
    items: Sequence[Item],
    depths: Sequence[int | None],
    roles: dict[str, _Role],
    producers: Collection[str],
    consumers: Collection[str],
    producer_depth: Callable[[Instr, int], int | None],
    consumer_depth: Callable[[Instr, int], int | None],
) -> dict[int, frozenset[int]]:
    """:func:`pair_by_depth`'s two loops, ``roles`` the names' roles remembered for its
    ``producers`` and ``consumers``: the reference of ``_stacking.pairs``, the same loops in
    C (:data:`_find_pairs` is the one this process uses)."""
    # Each instruction is asked once, not at each of the walk's passes over it; and the walk
    # stops only where something can happen: where a slot is consumed or opened, where
    # control may leave the next item (a jump, a return), where paths meet (a label), where
    # a try block starts, at an unreachable item.  Between two such stops control only goes
    # on to the next item and nothing changes but the depth, which can only pop slots: the
    # lowest depth between them pops what each of them would have (``lowest``; 0 items
    # between: None).  Stopping at every item, asking each its kind, was most of the pass
    # (docs/performance.md, "The call sites' pass cheaper").
    return _paired(items, depths, *_stops(items, depths, roles, producers, consumers, producer_depth, consumer_depth))


def _paired(
    items: Sequence[Item],
    depths: Sequence[int | None],
    consumed: dict[int, int],
    produced: dict[int, int],
    exits: dict[int, tuple[bool, bool]],
    stops: list[int],
    lowest: list[int | None],
) -> dict[int, frozenset[int]]:
    """:func:`pair_by_depth`'s second loop, over what its first (:func:`_stops`) found: the
    walk over the stops along the control flow, carrying which producers opened each slot
    still on the stack.  ``_stacking.pairs`` hands it what it does not take (a try block of
    unknown depth, a label that is not an item, a slot that is no small int)."""
    if not consumed:
        return {}
    slot: int | None  # (a slot on the stack; a consumed or produced one, or None)
    at = {id(items[index]): place for place, index in enumerate(stops) if isinstance(items[index], Label)}
    seen: list[dict[int, frozenset[int]] | None] = [None] * len(stops)
    pairs: dict[int, frozenset[int]] = {}
    unpaired: set[int] = set()
    pending: list[tuple[int, dict[int, frozenset[int]]]] = [(0, {})]
    while pending:
        place, state = pending.pop()
        on = False  # (gone on from the stop before, rather than started here)
        while place < len(stops):
            index = stops[place]
            between = lowest[place]
            if on and between is not None:
                for slot in state:
                    if slot >= between:  # slots popped by the items between
                        state = {d: p for d, p in state.items() if d < between}
                        break
            on = True
            known = seen[place]
            if known is not None:
                merged = {d: known[d] | state[d] for d in known.keys() & state.keys()}
                if merged == known:
                    break
                state = merged
            seen[place] = state
            item, depth = items[index], depths[index]
            if depth is not None:
                for slot in state:
                    if slot >= depth:  # slots popped by now
                        state = {d: p for d, p in state.items() if d < depth}
                        break
            if isinstance(item, Instr):
                if depth is not None:
                    slot = consumed.get(index)
                    if slot is not None:
                        producers_of = state.get(slot)
                        if producers_of is None:
                            unpaired.add(index)
                        else:
                            pairs[index] = pairs.get(index, frozenset()) | producers_of
                        state = {d: p for d, p in state.items() if d < slot}
                    slot = produced.get(index)
                    if slot is not None:
                        state = {**state, slot: frozenset({index})}
                    jump, ends = exits.get(index, _GOES_ON)
                    if jump:
                        pending.append((at[id(item.arg)], state))
                    if ends:
                        break
            elif isinstance(item, TryBegin):
                handler_depth = int(item.stack_depth)
                pending.append((at[id(item.target)], {d: p for d, p in state.items() if d < handler_depth}))
            place += 1
    return {c: p for c, p in pairs.items() if c not in unpaired}


def _stops(
    items: Sequence[Item],
    depths: Sequence[int | None],
    roles: dict[str, _Role],
    producers: Collection[str],
    consumers: Collection[str],
    producer_depth: Callable[[Instr, int], int | None],
    consumer_depth: Callable[[Instr, int], int | None],
) -> tuple[dict[int, int], dict[int, int], dict[int, tuple[bool, bool]], list[int], list[int | None]]:
    """:func:`pair_by_depth`'s first loop: the slots consumed and produced (by index), the
    exits, the stops, and by stop the lowest depth of the items since the stop before."""
    consumed: dict[int, int] = {}
    produced: dict[int, int] = {}
    exits: dict[int, tuple[bool, bool]] = {}  # the stops where control may not go on to the next item
    stops: list[int] = []  # the items where the walk stops, in order
    lowest: list[int | None] = []  # (by stop) the lowest depth of the items since the stop before
    low: int | None = None
    # (an instruction told by its type first, its name read under bytecode's property, and
    # its role looked up once by the name: the kind of each item, asked twice, the property
    # and three look-ups by the name were most of this loop, which was most of the pairing;
    # docs/performance.md, "The pairing's first loop cheaper")
    for index, item in enumerate(items):
        depth = depths[index]
        if depth is None:  # (unreachable)
            stop = True
        elif type(item) is Instr or isinstance(item, Instr):
            stop = index == 0
            name = item._name
            role = roles.get(name)
            if role is None:
                role = _role(item, roles, producers, consumers)
            if role:  # (most instructions: none of the three)
                consumer, producer, goes = role
                if consumer and (slot := consumer_depth(item, depth)) is not None:
                    consumed[index] = slot
                    stop = True
                if producer and (slot := producer_depth(item, depth)) is not None:
                    produced[index] = slot
                    stop = True
                if goes[0] or goes[1]:
                    exits[index] = goes
                    stop = True
        else:
            stop = index == 0 or not isinstance(item, (SetLineno, TryEnd))
        if stop:
            stops.append(index)
            lowest.append(low)
            low = None
        elif low is None or depth < low:  # type: ignore[operator]  # (a depth: an item without one is a stop)
            low = depth
    return consumed, produced, exits, stops, lowest


def _role(item: Instr, roles: dict[str, _Role], producers: Collection[str], consumers: Collection[str]) -> _Role:
    """``item``'s role in :func:`_stops`, by its name (consumer? producer? its :func:`flow`),
    or () for none of the three; remembered in ``roles``."""
    name = item._name
    goes = _FLOWS.get(name) or flow(item)
    consumer, producer = name in consumers, name in producers
    role = roles[name] = (consumer, producer, goes) if consumer or producer or goes[0] or goes[1] else ()
    return role


_stacking = optional(".rewrite._stacking")  # (the loops in C: docs/internals.md, "The stack walks in C")
if _stacking is not None:
    _stacking.configure(Instr, Label, SetLineno, TryBegin, TryEnd, UNSET, _STEPS, _step, _stack_depths, _pairs, _paired,
                        _role)
stack_depths: Callable[[Sequence[Item]], list[int | None]] = _stack_depths if _stacking is None else _stacking.depths
"""The depth walk this process uses: ``_stacking.c``'s where it is built (the same depths, or
the same error: it hands the reference what it does not take), else :func:`_stack_depths`."""
_find_pairs: Callable[..., dict[int, frozenset[int]]] = _pairs if _stacking is None else _stacking.pairs
"""The pairing's loops this process uses: ``_stacking.c``'s where it is built, else :func:`_pairs`."""
