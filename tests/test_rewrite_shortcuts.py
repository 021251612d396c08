"""The rewriter's own passes read and make instructions without ``bytecode``'s per-instruction
methods where those cost most of a pass (docs/internals.md, "Where a cold import's time
goes", "Our passes"): instructions made without the constructor's checks, stack effects and
control flow remembered per opcode, pairing asked only of the instructions that can take part
in it, hooks loaded in the form the code keeps.  Over real modules -- standard library
packages and this suite's corpus -- each shortcut must give what ``bytecode``'s own
computation gives, on every Python.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from types import CodeType
from typing import Sequence

import pytest
from bytecode import Instr, Label
from bytecode.instr import TryBegin, TryEnd

from cassette_hook.importhook import dual_code, switch
from cassette_hook.rewrite import GlobalName, UnsupportedCode, _instr, _rewriter, _stack, rewrite_code
from cassette_hook.rewrite._family import family
from cassette_hook.rewrite._names import switched_hooks
from cassette_hook.rewrite._rewriter import decode, items_of, rewritten

SOURCES = [
    *(p for name in ("email", "json")
      for p in sorted(Path(importlib.util.find_spec(name).origin).parent.glob("*.py"))),
    Path(importlib.util.find_spec("asyncio.tasks").origin),
    Path(__file__).with_name("corpus.py"),
]


def _modules() -> list[CodeType]:
    return [compile(path.read_text(encoding="utf-8"), str(path), "exec") for path in SOURCES]


def _code_objects() -> list[CodeType]:
    """Every code object of the sources: module bodies, classes, functions, comprehensions."""
    found, todo = [], _modules()
    while todo:
        code = todo.pop()
        found.append(code)
        todo += [const for const in code.co_consts if isinstance(const, CodeType)]
    return found


def _bodies() -> list[list[_stack.Item]]:
    """Each code object's items as the rewriting reads them, then as it leaves them."""
    bodies = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for code in _code_objects():
            try:
                bodies.append(family.plain_forms(items_of(decode(code))))
                bodies.append(items_of(rewritten(code, switched_hooks(), operators=True, nested=lambda c, part: c)))
            except UnsupportedCode:  # (shapes the rewriter refuses are tested elsewhere)
                continue
    return bodies


BODIES = _bodies()


def _instructions() -> list[Instr]:
    return [item for body in BODIES for item in body if isinstance(item, Instr)]


def test_the_stack_effects_the_walks_remember_are_those_bytecode_computes():
    for instr in _instructions():
        for jump in (False, True):
            assert _stack.effect(instr, jump) == instr.stack_effect(jump=jump), (instr, jump)


def test_where_the_walks_take_an_instruction_is_what_bytecode_says_of_it():
    for instr in _instructions():
        assert _stack.flow(instr) == (instr.has_jump() and instr.name != "END_ASYNC_FOR",
                                      instr.is_uncond_jump() or instr.is_final()), instr


def _relabelled(items: list[_stack.Item], kind: type[Label]) -> list[_stack.Item]:
    """``items`` with each label a new one of ``kind``, and the jumps and try blocks to it."""
    labels = {id(item): kind() for item in items if isinstance(item, Label)}
    blocks: dict[int, TryBegin] = {}
    out: list[_stack.Item] = []
    for item in items:
        if isinstance(item, Label):
            item = labels[id(item)]
        elif isinstance(item, Instr) and isinstance(item.arg, Label):
            item = item.copy()
            item.arg = labels[id(item.arg)]
        elif isinstance(item, TryBegin):
            item = blocks[id(item)] = TryBegin(labels[id(item.target)], item.push_lasti, item.stack_depth)
        elif isinstance(item, TryEnd):
            item = TryEnd(blocks.get(id(item.entry), item.entry))  # (the walk reads no TryEnd)
        out.append(item)
    return out


def test_the_depth_walk_finds_labels_of_a_subclass_of_label_as_it_finds_labels():
    class Named(Label):
        pass

    walked = 0
    for items in BODIES:
        if any(isinstance(item, Label) for item in items):
            assert _stack.stack_depths(_relabelled(items, Named)) == _stack.stack_depths(items)
            walked += 1
    assert walked > 100


def test_each_stack_depth_follows_from_the_depths_before_it_by_bytecodes_stack_effects():
    checked = 0
    for items in BODIES:
        depths = _stack.stack_depths(items)
        labels = {id(item): index for index, item in enumerate(items) if isinstance(item, Label)}
        for index, (item, depth) in enumerate(zip(items, depths)):
            if depth is None:
                continue
            if isinstance(item, TryBegin):
                assert depths[labels[id(item.target)]] == item.stack_depth + item.push_lasti + 1
            if not isinstance(item, Instr):
                assert index + 1 == len(items) or depths[index + 1] == depth
                continue
            if item.has_jump() and item.name != "END_ASYNC_FOR":
                assert depths[labels[id(item.arg)]] == depth + item.stack_effect(jump=True), (index, item)
            if not (item.is_uncond_jump() or item.is_final()):
                after = depth + (1 if item.name == "RETURN_GENERATOR" else item.stack_effect(jump=False))
                assert depths[index + 1] == after, (index, item)
                checked += 1
    assert checked > 10_000


def test_pairing_asks_only_the_instructions_the_family_names():
    """``pair_by_depth`` asks the family's ``consumer_depth`` and ``producer_depth`` only of
    the instructions named in ``consumer_names`` and ``producer_names``, and the rewriter its
    ``is_method_load`` of those in ``method_load_names``: of any other, each must say no."""
    if sys.version_info < (3, 11):  # (3.10 pairs compiler-made calls with their callees: _py310)
        from cassette_hook.rewrite import _py310

        for instr in _instructions():
            assert instr.name in _py310._CALLS or _py310._callee_depth(instr, 20) is None, instr
        return
    named = {"consumers": 0, "producers": 0, "method loads": 0}
    for instr in _instructions():
        if instr.name in family.consumer_names:
            named["consumers"] += 1
        else:
            assert family.consumer_depth(instr, 20) is None, instr
        if instr.name in family.producer_names:
            named["producers"] += 1
        else:
            assert family.producer_depth(instr, 20) is None, instr
        if instr.name in family.method_load_names:
            named["method loads"] += family.is_method_load(instr)
        else:
            assert not family.is_method_load(instr), instr
    assert all(named.values()), named  # (the sources have each kind, so the filters had both to tell apart)



def _pairs_item_by_item(items, depths, producer_depth, consumer_depth):
    """What ``pair_by_depth`` answers, by the plain walk: it stops at every item, asks each
    what it consumes and opens, trims the slots its depth pops, and goes where it goes."""
    labels = {id(item): index for index, item in enumerate(items) if isinstance(item, Label)}
    seen, pairs, unpaired, pending = [None] * len(items), {}, set(), [(0, {})]
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
                state = {d: p for d, p in state.items() if d < depth}
            if isinstance(item, Instr) and depth is not None:
                slot = consumer_depth(item, depth)
                if slot is not None:
                    if slot in state:
                        pairs[index] = pairs.get(index, frozenset()) | state[slot]
                    else:
                        unpaired.add(index)
                    state = {d: p for d, p in state.items() if d < slot}
                slot = producer_depth(item, depth)
                if slot is not None:
                    state = {**state, slot: frozenset({index})}
                if item.has_jump() and item.name != "END_ASYNC_FOR":
                    pending.append((labels[id(item.arg)], state))
                if item.is_uncond_jump() or item.is_final():
                    break
            elif isinstance(item, TryBegin):
                pending.append((labels[id(item.target)], {d: p for d, p in state.items() if d < item.stack_depth}))
            index += 1
    return {c: p for c, p in pairs.items() if c not in unpaired}


def _constant_opens(instr, depth):
    return depth if instr.name == "LOAD_CONST" else None


def _store_takes(instr, depth):
    return depth - 1 if instr.name in ("STORE_FAST", "STORE_NAME", "POP_TOP", "RETURN_VALUE") else None


def test_the_pairing_pairs_as_a_walk_stopping_at_every_item_does():
    """``pair_by_depth`` stops only where a slot is consumed or opened, control may not go
    on, or paths meet, and pops at once the slots of the items between (docs/performance.md,
    "The call sites' pass cheaper"): it must pair as the walk over every item does, for the
    family's call sites (3.11+) and for constants and what stores or drops them (every
    version: sparse pairs across branches, loops and handlers)."""
    ways = [(_constant_opens, _store_takes, {"LOAD_CONST"}, {"STORE_FAST", "STORE_NAME", "POP_TOP", "RETURN_VALUE"})]
    if sys.version_info >= (3, 11):
        ways.append((family.producer_depth, family.consumer_depth, family.producer_names, family.consumer_names))
    paired = 0
    for items in BODIES:
        depths = _stack.stack_depths(items)
        for producer_depth, consumer_depth, producers, consumers in ways:
            expected = _pairs_item_by_item(items, depths, producer_depth, consumer_depth)
            assert _stack.pair_by_depth(items, depths, producer_depth, consumer_depth, producers, consumers) \
                == expected
            paired += len(expected)
    assert paired > 3_000  # (4,976 on 3.10, with no call sites of the family's)


def _switched_and_twins() -> list[CodeType]:
    """Switched code of each source (as an import under a context makes it), and a twin of
    every function in it (as a context's first call of it makes it)."""
    from cassette_hook.runtime.callsites import HOOKS

    made = []
    switch.install_builtins()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module in _modules():
            made.append(dual_code.switched(module, "m"))
            for code in _code_objects_of(module):
                if code.co_flags & 0x2:  # CO_NEWLOCALS: a function's body (not a module's or a class's)
                    for enters in (False, True):
                        try:
                            made.append(rewrite_code(code, HOOKS, operators=True, enters=enters))
                        except UnsupportedCode:
                            continue
    return made


def _code_objects_of(code: CodeType) -> list[CodeType]:
    nested = [const for const in code.co_consts if isinstance(const, CodeType)]
    return [*nested, *(inner for const in nested for inner in _code_objects_of(const))]


@pytest.mark.skipif(_instr.make is _instr._checked, reason="this bytecode release: every instruction is checked")
def test_instructions_made_without_bytecodes_checks_are_those_its_constructor_makes(monkeypatch):
    """... and those copied from a site's shape without them (``_instr.placed``) are those
    ``bytecode``'s ``copy`` and location setter make."""
    unchecked = _switched_and_twins()
    patched = []
    for attribute, checked in (("make", _instr._checked), ("placed", _instr._placed_checked)):
        fast = getattr(_instr, attribute)
        for module in list(sys.modules.values()):
            if module.__name__.startswith("cassette_hook.") and getattr(module, attribute, None) is fast:
                monkeypatch.setattr(module, attribute, checked)
                patched.append(f"{module.__name__}.{attribute}")
    assert {"cassette_hook.rewrite._nullslot.make", "cassette_hook.importhook.dual_code.make",
            "cassette_hook.rewrite._nullslot.placed", "cassette_hook.rewrite._rewriter.placed"} <= set(patched)
    checked = _switched_and_twins()
    assert len(unchecked) == len(checked) > 1000
    for ours, theirs in zip(unchecked, checked):
        assert ours == theirs and ours.co_linetable == theirs.co_linetable, ours.co_name
        assert _code_objects_of(ours) == _code_objects_of(theirs), ours.co_name


def _fields(instr: Instr) -> tuple[object, ...]:
    return type(instr), instr.name, instr.opcode, instr.arg, instr.location, instr.has_jump()


def _site_fields(site: Sequence[object]) -> list[object]:
    """A site's items field by field (``_fields``), a label as its place among them, and
    an instruction's label argument as that label's place: two sites, each with labels of
    its own, compared."""
    places = {id(item): place for place, item in enumerate(site) if isinstance(item, Label)}
    return [("label", places[id(item)]) if isinstance(item, Label)
            else (*_fields(item)[:3], ("label", places[id(item.arg)]) if isinstance(item.arg, Label) else item.arg,
                  *_fields(item)[4:])
            for item in site]


def test_an_operator_site_copied_from_its_shape_is_the_site_made_where_it_is():
    """An operator site's instructions are made once for its shape (its hooks, the
    instruction's name and argument; in switched code, with the flag's load and jumps) and
    copied at each site, its jumps aimed at labels of its own: field by field what the
    family makes at that site, as new instructions."""
    from cassette_hook.runtime.callsites import HOOKS

    compared = 0
    for hooks in (switched_hooks(), HOOKS):
        for item in _instructions():
            if item.name not in family.operator_names:
                continue
            _rewriter._operator_replacement(item, hooks)  # (the shape, made if it was not)
            copied, site = _rewriter._operator_replacement(item, hooks), family.operator_site(item, hooks)
            assert (copied is None) == (site is None), item
            if site is not None:
                made = _rewriter._operator_site(item, site, hooks)
                assert _site_fields(copied) == _site_fields(made), item
                again = _rewriter._operator_replacement(item, hooks)
                assert again is not None
                assert all(i is not j for i, j in zip(copied, again) if i is not item)  # (``yield from``'s holds it)
                compared += 1
    assert compared > 1000


def test_switched_code_keeps_no_hook_as_a_constant():
    """Every site loads its hooks by name in switched code (``Family.load_hook``): a
    ``GlobalName`` left as a constant would be called as the string it is."""
    switch.install_builtins()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module in _modules():
            switched = dual_code.switched(module, "m")
            for code in [switched, *_code_objects_of(switched)]:
                assert not any(type(const) is GlobalName for const in code.co_consts), code.co_name



def _marked_callee_loads(*items: object) -> set[int]:
    """``_callee_loads`` of ``items``, where ``borrowed`` stands for a marked load."""
    from cassette_hook.rewrite import _py314

    body = [_py314._Borrowable("LOAD_FAST", item[1]) if type(item) is tuple and item[0] == "borrowed" else item
            for item in items]
    return family._callee_loads(body, _stack.stack_depths(body))


@pytest.mark.skipif(sys.version_info < (3, 14), reason="the compiler borrows loads from 3.14 on")
def test_the_callee_walk_follows_a_borrowed_value_through_jumps_swaps_and_copies():
    """A marked load is a callee's where its value reaches the callee's slot of a call on
    some path: after a jump (its label's items), moved by ``SWAP``, or kept under its
    ``COPY``; a value a call takes as its argument, or one an instruction took before it,
    is none, nor is a load no path reaches."""
    label, end = Label(), Label()
    assert _marked_callee_loads(  # f(x), f reaching the call through a jump
        ("borrowed", "f"), Instr("JUMP_FORWARD", label), ("borrowed", "g"), label, Instr("PUSH_NULL"),
        ("borrowed", "x"), Instr("CALL", 1), Instr("RETURN_VALUE")) == {0}
    assert _marked_callee_loads(  # g(a), g moved to the callee's slot by SWAPs
        ("borrowed", "a"), ("borrowed", "g"), Instr("SWAP", 2), Instr("PUSH_NULL"), Instr("SWAP", 2),
        Instr("CALL", 1), Instr("RETURN_VALUE")) == {1}
    assert _marked_callee_loads(  # (k := h)(h): h kept under its copy, then its copy an argument
        ("borrowed", "h"), Instr("COPY", 1), Instr("STORE_FAST", "k"), Instr("PUSH_NULL"), ("borrowed", "h"),
        Instr("CALL", 1), Instr("RETURN_VALUE")) == {0}
    assert _marked_callee_loads(  # len(f.x) if c else f: f taken by LOAD_ATTR, or returned
        ("borrowed", "c"), Instr("TO_BOOL"), Instr("POP_JUMP_IF_FALSE", label), Instr("LOAD_GLOBAL", (True, "len")),
        ("borrowed", "f"), Instr("LOAD_ATTR", (False, "x")), Instr("CALL", 1), Instr("JUMP_FORWARD", end),
        label, ("borrowed", "f"), end, Instr("RETURN_VALUE")) == set()
    assert _marked_callee_loads(  # f() after a return
        ("borrowed", "x"), Instr("RETURN_VALUE"), ("borrowed", "f"), Instr("PUSH_NULL"), Instr("CALL", 0),
        Instr("RETURN_VALUE")) == set()


@pytest.mark.skipif(sys.version_info < (3, 14), reason="the compiler borrows loads from 3.14 on")
def test_the_stack_shifts_the_callee_walk_remembers_are_those_bytecode_computes():
    """``borrowed_again`` keeps plain the borrowed loads that may push a callee, found by a
    walk that remembers what each opcode does to the stack (``_py314._shift``) under its
    name and a number its argument holds, as the depth walk keys its steps: for every
    instruction whose key the walk remembered (it asks only along a borrowed value's way),
    the answer remembered under its key must be its own."""
    from bytecode.instr import UNSET

    from cassette_hook.rewrite import _py314

    bodies = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for code in _code_objects():
            try:
                items = family.plain_forms(items_of(decode(code)), borrowable=True)
                bodies.append((items, _stack.stack_depths(items)))
            except UnsupportedCode:
                continue
    found = [family._callee_loads(items, depths) for items, depths in bodies]
    assert sum(map(len, found)) > 100, "the sources have borrowed loads of callees, for the walk to find"
    checked = 0
    for items, depths in bodies:
        for item, depth in zip(items, depths):
            if not isinstance(item, Instr) or depth is None:
                continue
            arg = item.arg
            number = (arg[0] if arg else None) if type(arg) is tuple else arg
            key = (item.name, number) if number is not UNSET and isinstance(number, int) else item.name
            if key not in _py314._SHIFTS:
                continue
            pre, _ = item.pre_and_post_stack_effect(jump=False)
            popped = -min(pre, 0)
            assert _py314._SHIFTS[key] == (_stack.jumps(item), item.is_uncond_jump() or item.is_final(),
                                           popped, popped + item.stack_effect(jump=False)), item
            checked += 1
    assert checked > 10_000
