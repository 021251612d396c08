"""Switched code is assembled as ``bytecode``'s own assembly makes it.

``rewrite._rewriter.assemble`` has the family write the line table rather than
``bytecode``'s ``to_code`` (docs/internals.md, "Where a cold import's time goes"), to make a
cold import cheaper.  Over real modules -- standard library packages and this suite's
corpus -- every body the import hook assembles must be what ``bytecode`` alone makes of
the same instructions: the same instructions, constants, names, exception table and stack
size, and on 3.11+ the same position of every instruction.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path
from types import CodeType

import pytest

from cassette_hook.importhook import dual_code, switch
from cassette_hook.rewrite import _rewriter
from cassette_hook.rewrite._family import family

# Packages of many shapes: email (classes, generators, long lines), json (a scanner of
# closures), asyncio (coroutines, try/finally, async for/with), and the suite's corpus.
SOURCES = [
    *(p for name in ("email", "json", "asyncio")
      for p in sorted(Path(importlib.util.find_spec(name).origin).parent.glob("*.py"))),
    Path(__file__).with_name("corpus.py"),
]


def _assembled_bodies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[CodeType, CodeType, bytes]]:
    """(switched body as assembled, the same as ``bytecode``'s ``to_code`` makes it, the
    line table the family writes for ``bytecode``'s) for every body that switching the
    sources assembles."""
    made: list[tuple[CodeType, CodeType, bytes]] = []

    def recording(bc, stacksize, name):  # type: ignore[no-untyped-def]
        ours = _rewriter.assemble(bc, stacksize, name)
        concrete = bc.to_concrete_bytecode(compute_exception_stack_depths=False)
        theirs = concrete.to_code(stacksize=stacksize, compute_exception_stack_depths=False, check_pre_and_post=False)
        made.append((ours, theirs, family.line_table(theirs, concrete) if sys.version_info < (3, 11) else b""))
        return ours

    monkeypatch.setattr(dual_code, "assemble", recording)
    switch.install_builtins()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in SOURCES:
            dual_code.switched(compile(path.read_text(encoding="utf-8"), str(path), "exec"), path.stem)
    assert len(made) > 1000  # (every source was switched)
    return made


def test_switched_bodies_have_the_instructions_constants_names_and_handlers_bytecode_assembles(monkeypatch):
    for ours, theirs, _ in _assembled_bodies(monkeypatch):
        assert ours.replace(co_linetable=b"") == theirs.replace(co_linetable=b""), ours.co_qualname
        assert ours.co_stacksize == theirs.co_stacksize


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 has no positions; see the next test")
def test_switched_bodies_give_each_instruction_the_position_bytecode_gives_it(monkeypatch):
    for ours, theirs, _ in _assembled_bodies(monkeypatch):
        assert list(ours.co_positions()) == list(theirs.co_positions()), ours.co_qualname


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10: the next test")
def test_switched_line_tables_are_bytecodes_where_no_column_reaches_128(monkeypatch):
    # (where one does, bytecode 0.19 writes a one-line entry CPython misreads backwards, and
    # the family the long form: tests/test_fuzz_sample.py, columns past 127)
    compared = 0
    for ours, theirs, _ in _assembled_bodies(monkeypatch):
        if all(column is None or column < 128 for position in theirs.co_positions() for column in position[2:]):
            assert ours.co_linetable == theirs.co_linetable, ours.co_qualname
            compared += 1
    assert compared > 1000


@pytest.mark.skipif(sys.version_info >= (3, 11), reason="3.11+: the tests before")
def test_switched_bodies_have_the_line_table_the_3_10_family_writes(monkeypatch):
    for ours, _, written in _assembled_bodies(monkeypatch):
        assert ours.co_linetable == written, ours.co_name


def test_bytecode_leaves_the_line_table_to_the_family():
    """The saving rests on the names of ``bytecode``'s private line-table encoders, which
    ``_rewriter._LinesUnwritten`` overrides: a release that renames them must fail here
    rather than quietly encode the table twice."""
    from bytecode import Bytecode

    code = compile("x = 1\ny = x + 1\n", "<module>", "exec")
    concrete = Bytecode.from_code(code).to_concrete_bytecode(compute_exception_stack_depths=False)
    concrete.__class__ = _rewriter._LinesUnwritten
    assembled = concrete.to_code(stacksize=code.co_stacksize, compute_exception_stack_depths=False,
                                 check_pre_and_post=False)
    assert assembled.co_linetable == b""
