"""Code is decoded as ``bytecode``'s own decoding decodes it.

On 3.12 and 3.13 the families decode with a decoder of our own (``rewrite._decoder``)
rather than ``bytecode.Bytecode.from_code``, to make a cold import cheaper (docs/internals.md,
"Our own decoder"; docs/performance.md, "A decoder of our own").  Over real modules --
standard library packages and this suite's corpus -- every body must decode to what
``bytecode`` makes of it: item by item the same instructions (name, opcode, argument and
its type, position), labels where ``bytecode`` puts them and jumps to the same ones, the
same try blocks, and the same attributes of the whole.  What the decoder does not know it
leaves to ``bytecode``, whose result or error is then the one the rewriting always had.
"""

from __future__ import annotations

import importlib.util
import warnings
from opcode import opmap
from pathlib import Path
from types import CodeType
from typing import Iterator

import pytest

from cassette_hook.rewrite import UnsupportedCode, _rewriter
from cassette_hook.rewrite._family import family

decoder = getattr(family, "decoder", None)
pytestmark = pytest.mark.skipif(decoder is None, reason="bytecode decodes everything on this Python")

# Packages of many shapes: email (classes, generators, long lines), json (a scanner of
# closures), asyncio (coroutines, try/finally, async for/with), and the suite's corpus.
SOURCES = [
    *(p for name in ("email", "json", "asyncio")
      for p in sorted(Path(importlib.util.find_spec(name).origin).parent.glob("*.py"))),
    Path(__file__).with_name("corpus.py"),
]
ATTRIBUTES = ("argcount", "posonlyargcount", "kwonlyargcount", "flags", "first_lineno", "name", "qualname",
              "filename", "docstring", "cellvars", "freevars", "argnames")


def _bodies(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _bodies(const)


def _real_bodies() -> list[CodeType]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [body for path in SOURCES
                for body in _bodies(compile(path.read_text(encoding="utf-8"), str(path), "exec"))]


def _by_bytecode(code: CodeType):  # type: ignore[no-untyped-def]
    from bytecode import Bytecode

    return Bytecode.from_code(code, conserve_exception_block_stackdepth=True)


def _assert_same(ours, theirs) -> None:  # type: ignore[no-untyped-def]
    """``ours`` and ``theirs`` the same ``Bytecode``, item by item; a label (a jump's, a try
    block's target) the same as another where the other decoding has the same label."""
    from bytecode import Instr, Label, TryBegin, TryEnd

    where = theirs.qualname
    assert type(ours) is type(theirs)
    for name in ATTRIBUTES:
        mine, its = getattr(ours, name), getattr(theirs, name)
        assert type(mine) is type(its) and mine == its, (where, name)
    mine_items, its_items = list.copy(ours), list.copy(theirs)
    assert len(mine_items) == len(its_items), where
    labels: dict[object, object] = {}
    blocks: dict[object, object] = {}
    for index, (mine, its) in enumerate(zip(mine_items, its_items)):
        assert type(mine) is type(its), (where, index, mine, its)
        if type(mine) is Label:
            assert labels.setdefault(mine, its) is its, (where, index)
        elif type(mine) is TryBegin:
            blocks[mine] = its
            assert (mine.push_lasti, mine.stack_depth) == (its.push_lasti, its.stack_depth), (where, index)
            assert type(mine.push_lasti) is type(its.push_lasti), (where, index)
        elif type(mine) is TryEnd:
            assert blocks[mine.entry] is its.entry, (where, index)
        else:
            assert type(mine) is Instr, (where, index, mine)
            assert (mine.name, mine.opcode, mine.has_jump()) == (its.name, its.opcode, its.has_jump()), (where, index)
            assert mine.location == its.location, (where, index, mine.location, its.location)
            if type(mine.arg) is Label:
                assert type(its.arg) is Label and labels.setdefault(mine.arg, its.arg) is its.arg, (where, index)
            else:
                assert type(mine.arg) is type(its.arg) and mine.arg == its.arg, (where, index, mine, its)
                if isinstance(mine.arg, tuple):
                    assert [type(part) for part in mine.arg] == [type(part) for part in its.arg], (where, index)
    for mine, its in blocks.items():
        assert labels[mine.target] is its.target, where  # (every label was met above)


def test_our_decoder_makes_the_bytecode_bytecode_makes_of_real_modules_item_by_item():
    compared = 0
    for body in _real_bodies():
        try:
            theirs = _by_bytecode(body)
        except Exception:  # (3.13: a class body's inlined comprehension naming a free variable)
            assert decoder.bytecode(body) is None, body.co_qualname  # (left to bytecode, and its error)
            continue
        ours = decoder.bytecode(body)
        assert ours is not None, body.co_qualname  # (it declines nothing bytecode reads)
        _assert_same(ours, theirs)
        compared += 1
    assert compared > 1000


def test_the_family_decodes_with_our_decoder_not_bytecodes(monkeypatch):
    from bytecode import Bytecode

    body = compile("def f(x):\n    try:\n        return g(x) < 2\n    finally:\n        h()\n", "<f>", "exec")
    expected = _by_bytecode(body)

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("bytecode's decoding was asked")

    monkeypatch.setattr(Bytecode, "from_code", refused)
    _assert_same(_rewriter.decode(body), expected)


def _with_many_constants() -> CodeType:
    """A body whose constants and jumps need ``EXTENDED_ARG``: 300 constants, a branch over
    all of them, a loop back over all of them, inside a try block."""
    loads = "".join(f"                x = {n}.5\n" for n in range(300))
    source = ("def f(c):\n    try:\n        while c:\n            if c > 1:\n"
              f"{loads}            c -= 1\n    except ValueError:\n        pass\n")
    return next(c for c in compile(source, "<many>", "exec").co_consts if isinstance(c, CodeType))


def test_our_decoder_reads_extended_arguments_of_constants_and_jumps_as_bytecode_does():
    body = _with_many_constants()
    assert opmap["EXTENDED_ARG"] in body.co_code[0::2]
    ours = decoder.bytecode(body)
    assert ours is not None
    _assert_same(ours, _by_bytecode(body))


def test_our_decoder_leaves_an_extended_arg_at_the_end_to_bytecode_and_its_error():
    body = compile("x = 1\n", "<module>", "exec")
    broken = body.replace(co_code=body.co_code + bytes([opmap["EXTENDED_ARG"], 1]))
    assert decoder.bytecode(broken) is None
    with pytest.raises(UnsupportedCode, match="EXTENDED_ARG at the end"):
        _rewriter.decode(broken)


def test_our_decoder_leaves_a_handler_range_starting_inside_an_instruction_to_bytecode():
    body = _with_many_constants()
    table = bytearray(body.co_exceptiontable)
    start_units = next(i for i in range(0, len(body.co_code), 2)
                       if body.co_code[i] == opmap["EXTENDED_ARG"]) // 2 + 1  # (the instruction after it)
    assert start_units < 64 and table[0] & 128 and not table[0] & 64  # (a one-byte start: rewritten in place)
    moved = body.replace(co_exceptiontable=bytes([128 | start_units, *table[1:]]))
    assert decoder.bytecode(moved) is None


def test_our_decoder_names_arguments_cells_and_free_variables_as_bytecode_does():
    source = ("def f(a, b=1, /, c=2, *args, d, e=3, **kwargs):\n"
              "    '''The docstring.'''\n"
              "    x = a\n"
              "    def g(y):\n"
              "        return a + x + y + d\n"
              "    return g\n")
    outer = next(c for c in compile(source, "<f>", "exec").co_consts if isinstance(c, CodeType))
    for body in _bodies(outer):
        ours = decoder.bytecode(body)
        assert ours is not None
        _assert_same(ours, _by_bytecode(body))
