"""The stack walks' C part (``rewrite/_stacking.c``) gives what its Python reference gives.

The depth walk and the pairing's two loops are in C where the accelerators are built,
chosen once by ``rewrite._stack`` (``stack_depths``, ``_find_pairs``), and in Python
(``_stack._stack_depths``, ``_stack._pairs``) where they are not or
``CASSETTE_HOOK_PURE_PYTHON=1`` is set (docs/internals.md, "The stack walks in C").  Over
the bodies of real modules, as the rewriter reads them and as it leaves them, the two must
give the same depths and the same pairs, and remember the same steps and roles; where the
C meets what it does not take (a subclass of an item class -- but the depth walk takes one
of Instr whose ``_name`` and ``_arg`` are Instr's slots, as 3.14's borrowable loads --, a
depth two paths disagree on, a label that is not an item, a try block of unknown depth
where pairs are walked, a slot that is no small int) it hands the items, or what its first
loop found, to the reference, which gives its answer or raises its error, with its message.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import warnings
from pathlib import Path
from types import CodeType
from typing import Iterator

import pytest
from bytecode import Instr, Label, SetLineno, TryBegin, TryEnd
from bytecode.instr import UNSET

from cassette_hook import _native
from cassette_hook.rewrite import UnsupportedCode, _stack
from cassette_hook.rewrite._family import family
from cassette_hook.rewrite._rewriter import decode, items_of, rewritten
from cassette_hook.rewrite._names import switched_hooks

from test_rewrite_shortcuts import BODIES, _constant_opens, _store_takes  # (this directory's: real modules)

_stacking = _native.optional(".rewrite._stacking")
pytestmark = pytest.mark.skipif(_stacking is None, reason="the pure-Python path: the reference alone is used")

MORE_SOURCES = [p for name in ("collections", "importlib", "unittest", "logging", "concurrent.futures")
                for p in sorted(Path(importlib.util.find_spec(name).origin).parent.glob("*.py"))]
# (sympy's and networkx's core, where they are installed: the programs issue 38's target is about)
INSTALLED = [p for name in ("sympy.core", "networkx.classes") if importlib.util.find_spec(name.partition(".")[0])
             for p in sorted(Path(importlib.util.find_spec(name).origin).parent.glob("*.py"))]
JUMP_IF_TRUE = "POP_JUMP_FORWARD_IF_TRUE" if sys.version_info[:2] == (3, 11) else "POP_JUMP_IF_TRUE"


def _codes_of(paths: list[Path]) -> Iterator[CodeType]:
    """Each code object compiled from ``paths``, nested ones included."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in paths:
            todo = [compile(path.read_text(encoding="utf-8"), str(path), "exec")]
            while todo:
                code = todo.pop()
                todo += [const for const in code.co_consts if isinstance(const, CodeType)]
                yield code


def _bodies_of(paths: list[Path]) -> Iterator[list[_stack.Item]]:
    """Each code object's items as the rewriting reads them, then as it leaves them."""
    for code in _codes_of(paths):
        try:
            yield family.plain_forms(items_of(decode(code)))
            yield items_of(rewritten(code, switched_hooks(), operators=True, nested=lambda c, part: c))
        except UnsupportedCode:
            continue


def _ways() -> list[tuple[object, ...]]:
    """The pairings to ask: constants and what stores or drops them (every version), and the
    family's call sites (3.11+)."""
    ways = [(_constant_opens, _store_takes, frozenset({"LOAD_CONST"}),
             frozenset({"STORE_FAST", "STORE_NAME", "POP_TOP", "RETURN_VALUE"}))]
    if sys.version_info >= (3, 11):
        ways.append((family.producer_depth, family.consumer_depth, family.producer_names, family.consumer_names))
    return ways


def _assert_c_walks_as_python(items: list[_stack.Item]) -> int:
    """The same depths, and for each pairing the same pairs and the same roles remembered;
    the number of pairs."""
    depths = _stack._stack_depths(items)
    assert _stacking.depths(items) == depths
    paired = 0
    for producer_depth, consumer_depth, producers, consumers in _ways():
        ours, theirs = {}, {}  # (each walk's roles)
        found = _stacking.pairs(items, depths, ours, producers, consumers, producer_depth, consumer_depth)
        expected = _stack._pairs(items, depths, theirs, producers, consumers, producer_depth, consumer_depth)
        assert found == expected and list(found) == list(expected)
        assert ours == theirs
        paired += len(found)
    return paired


@contextlib.contextmanager
def _references_counted() -> Iterator[dict[str, int]]:
    """``_stacking`` configured with references that count their calls (then as before)."""
    counts = {"depths": 0, "pairs": 0, "paired": 0}

    def depths(items):  # type: ignore[no-untyped-def]
        counts["depths"] += 1
        return _stack._stack_depths(items)

    def pairs(*args):  # type: ignore[no-untyped-def]
        counts["pairs"] += 1
        return _stack._pairs(*args)

    def paired(*args):  # type: ignore[no-untyped-def]
        counts["paired"] += 1
        return _stack._paired(*args)

    classes = (Instr, Label, SetLineno, TryBegin, TryEnd, UNSET, _stack._STEPS, _stack._step)
    _stacking.configure(*classes, depths, pairs, paired, _stack._role)
    try:
        yield counts
    finally:
        _stacking.configure(*classes, _stack._stack_depths, _stack._pairs, _stack._paired, _stack._role)


def test_the_walks_are_the_c_ones_where_the_accelerators_are_built():
    if os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS"):
        assert _stack.stack_depths is _stacking.depths
        assert _stack._find_pairs is _stacking.pairs


@pytest.mark.skipif(_stacking is not None, reason="the C walks are built")
def test_the_walks_are_the_references_on_the_pure_python_path():
    assert _stack.stack_depths is _stack._stack_depths
    assert _stack._find_pairs is _stack._pairs


def test_the_c_walks_give_the_python_walks_depths_and_pairs_over_real_modules():
    bodies = [*BODIES, *_bodies_of(MORE_SOURCES)]
    paired = sum(_assert_c_walks_as_python(items) for items in bodies)
    assert len(bodies) > 5000 and paired > 10_000


@pytest.mark.skipif(not INSTALLED, reason="neither sympy nor networkx is installed")
def test_the_c_walks_give_the_python_walks_depths_and_pairs_over_sympy_and_networkx():
    for items in _bodies_of(INSTALLED):
        _assert_c_walks_as_python(items)


def test_the_c_walks_take_real_modules_without_the_reference():
    with _references_counted() as counts:
        for items in BODIES:
            _assert_c_walks_as_python(items)
    assert counts == {"depths": 0, "pairs": 0, "paired": 0}


def test_the_c_depth_walk_fills_the_memo_of_steps_as_the_python_walk_does():
    kept = dict(_stack._STEPS)
    try:
        _stack._STEPS.clear()
        for items in BODIES:
            _stacking.depths(items)
        filled = dict(_stack._STEPS)
        _stack._STEPS.clear()
        for items in BODIES:
            _stack._stack_depths(items)
        assert filled == _stack._STEPS and len(filled) > 100
    finally:
        _stack._STEPS.update(kept)


def test_unreachable_items_have_no_depth_and_pair_with_nothing():
    items = [Instr("LOAD_CONST", 1), Instr("RETURN_VALUE"), Instr("LOAD_CONST", 2), Instr("POP_TOP"),
             Instr("LOAD_CONST", None), Instr("RETURN_VALUE")]
    assert _stacking.depths(items) == [0, 1, None, None, None, None]
    assert _assert_c_walks_as_python(items) == 1  # (the first return, with its constant)


def _try_block(push_lasti: bool, stack_depth: object) -> list[_stack.Item]:
    """A constant on the stack, then a try block around a ``NOP`` whose handler drops what
    it is handed."""
    handler = Label()
    block = TryBegin(handler, push_lasti, stack_depth)
    return [Instr("LOAD_CONST", 1), block, Instr("NOP"), TryEnd(block), Instr("RETURN_VALUE"),
            handler, Instr("POP_TOP"), Instr("POP_TOP"), Instr("RETURN_VALUE")]


def test_a_try_block_of_unknown_depth_hands_its_handler_the_depth_at_its_start():
    items = _try_block(True, UNSET)
    assert _stacking.depths(items) == _stack._stack_depths(items) == [0, 1, 1, 1, 1, 3, 3, 2, 1]


def test_a_try_block_of_known_depth_hands_its_handler_that_depth():
    items = _try_block(True, 0)
    assert _stacking.depths(items) == [0, 1, 1, 1, 1, 2, 2, 1, 0]
    _assert_c_walks_as_python(items)


def _message(walk, items) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(UnsupportedCode) as raised:
        walk(items)
    return str(raised.value)


def test_a_jump_reaching_a_label_at_another_depth_raises_the_references_error():
    join = Label()
    items = [Instr("LOAD_CONST", True), Instr(JUMP_IF_TRUE, join), Instr("LOAD_CONST", 1), Instr("JUMP_FORWARD", join),
             join, Instr("LOAD_CONST", None), Instr("RETURN_VALUE")]
    message = _message(_stacking.depths, items)
    assert message == _message(_stack._stack_depths, items)
    assert message.startswith("inconsistent stack depth at item 4: ")


def test_falling_through_to_an_item_at_another_depth_raises_the_references_error():
    join = Label()
    items = [Instr("LOAD_CONST", True), Instr(JUMP_IF_TRUE, join), Instr("LOAD_CONST", 1), join,
             Instr("LOAD_CONST", None), Instr("RETURN_VALUE")]
    message = _message(_stacking.depths, items)
    assert message == _message(_stack._stack_depths, items) == "inconsistent stack depth at item 3"


def test_a_jump_to_a_label_that_is_not_an_item_raises_the_references_key_error():
    items = [Instr("JUMP_FORWARD", Label())]
    with pytest.raises(KeyError):
        _stacking.depths(items)


class _Named(Label):
    pass


class _Own(Instr):
    pass


class _Block(TryBegin):
    pass


class _OwnArg(Instr):
    """An instruction whose ``_arg`` is its own (a property), not Instr's slot."""

    _arg = property(lambda self: self.__dict__["arg"], lambda self, arg: self.__dict__.__setitem__("arg", arg))


def _with_subclass(kind: type) -> list[_stack.Item]:
    """A body with a loop and a try block, one of its items of ``kind``."""
    start, handler = (_Named() if kind is _Named else Label()), Label()
    block = (_Block if kind is _Block else TryBegin)(handler, True, 0)
    instr = kind if issubclass(kind, Instr) else Instr
    return [block, start, Instr("LOAD_CONST", True), instr(JUMP_IF_TRUE, start), TryEnd(block),
            Instr("LOAD_CONST", None), Instr("RETURN_VALUE"), handler, Instr("POP_TOP"), Instr("POP_TOP"),
            Instr("LOAD_CONST", None), Instr("RETURN_VALUE")]


@pytest.mark.parametrize("kind", [_Named, _OwnArg, _Block], ids=["Label", "Instr, its own _arg", "TryBegin"])
def test_a_body_with_an_item_of_a_subclass_is_walked_by_the_reference(kind):
    items = _with_subclass(kind)
    with _references_counted() as counts:
        _assert_c_walks_as_python(items)
    assert counts == {"depths": 1, "pairs": len(_ways()), "paired": 0}


def test_an_instr_subclass_with_instrs_slots_is_walked_in_c_for_its_depths():
    items = _with_subclass(_Own)
    with _references_counted() as counts:
        _assert_c_walks_as_python(items)
    assert counts == {"depths": 0, "pairs": len(_ways()), "paired": 0}


@pytest.mark.skipif(sys.version_info < (3, 14), reason="3.14+: the compiler's borrowed loads")
def test_bodies_with_borrowable_loads_are_walked_in_c_for_their_depths():
    bodies = [family.plain_forms(items_of(decode(code)), borrowable=True) for code in _codes_of(MORE_SOURCES[:40])]
    assert sum(type(item) is not Instr and isinstance(item, Instr) for items in bodies for item in items) > 1000
    with _references_counted() as counts:
        for items in bodies:
            assert _stacking.depths(items) == _stack._stack_depths(items)
    assert counts["depths"] == 0


def test_a_sequence_other_than_a_list_is_walked_by_the_reference():
    items = BODIES[0]
    with _references_counted() as counts:
        assert _stacking.depths(tuple(items)) == _stack._stack_depths(items)
    assert counts["depths"] == 1


def test_a_slot_opened_again_is_the_later_producers():
    def lowest_slot(instr: Instr, depth: int) -> int:
        return 0

    items = [Instr("LOAD_CONST", 1), Instr("LOAD_CONST", 2), Instr("POP_TOP"), Instr("RETURN_VALUE")]
    depths = _stack._stack_depths(items)
    producers, consumers = frozenset({"LOAD_CONST"}), frozenset({"RETURN_VALUE"})
    found = _stacking.pairs(items, depths, {}, producers, consumers, lowest_slot, _store_takes)
    assert found == _stack._pairs(items, depths, {}, producers, consumers, lowest_slot, _store_takes) \
        == {3: frozenset({1})}


def test_a_try_block_of_unknown_depth_is_paired_by_the_reference_which_raises():
    items = _try_block(True, UNSET)
    depths = _stack._stack_depths(items)
    producers, consumers = frozenset({"LOAD_CONST"}), frozenset({"RETURN_VALUE"})
    with _references_counted() as counts, pytest.raises(TypeError) as ours:
        _stacking.pairs(items, depths, {}, producers, consumers, _constant_opens, _store_takes)
    assert counts == {"depths": 0, "pairs": 0, "paired": 1}
    with pytest.raises(TypeError) as theirs:
        _stack._pairs(items, depths, {}, producers, consumers, _constant_opens, _store_takes)
    assert str(ours.value) == str(theirs.value)


def test_a_slot_that_is_no_small_int_is_paired_by_the_reference():
    items = [Instr("LOAD_CONST", 1), Instr("RETURN_VALUE")]
    depths = _stack._stack_depths(items)
    far = -2**70  # (a depth no stack has, below every depth: the C takes slots far from a C long's limits)

    def opens(instr: Instr, depth: int) -> int:
        return far

    with _references_counted() as counts:
        found = _stacking.pairs(items, depths, {}, frozenset({"LOAD_CONST"}), frozenset({"RETURN_VALUE"}), opens,
                                opens)
    assert found == {1: frozenset({0})} and counts == {"depths": 0, "pairs": 0, "paired": 1}


def test_an_error_of_a_pairings_callback_is_raised_by_the_c_loop():
    def failing(instr: Instr, depth: int) -> int | None:
        raise LookupError(instr.name)

    items = [Instr("LOAD_CONST", 1), Instr("RETURN_VALUE")]
    with pytest.raises(LookupError, match="LOAD_CONST"):
        _stacking.pairs(items, _stack._stack_depths(items), {}, frozenset({"LOAD_CONST"}), frozenset(), failing,
                        failing)
