"""Code is decoded as ``bytecode``'s own decoding decodes it.

On 3.12+ the families decode with a decoder of our own (``rewrite._decoder``) rather than
``bytecode.Bytecode.from_code`` (on 3.14+, the family's route through it, which keeps
``BUILD_INTERPOLATION``'s argument), to make a cold import cheaper (docs/internals.md,
"Our own decoder"; docs/performance.md, "A decoder of our own").  Over real modules --
standard library packages and this suite's corpus -- every body must decode to what
``bytecode`` makes of it: item by item the same instructions (name, opcode, argument and
its type, position), labels where ``bytecode`` puts them and jumps to the same ones, the
same try blocks, and the same attributes of the whole.  What the decoder does not know it
leaves to ``bytecode``, whose result or error is then the one the rewriting always had.
The one body ``bytecode`` misreads (3.13: a free variable named like a local, in a class
body with an inlined comprehension) our decoder reads as CPython lays it out, and it must
assemble back to itself.
"""

from __future__ import annotations

import dis
import importlib.util
import sys
import warnings
from opcode import opmap, opname
from pathlib import Path
from types import CodeType
from typing import Callable, Iterator

import pytest

from cassette_hook.rewrite import UnsupportedCode, _rewriter
from cassette_hook.rewrite._family import family

from new_kinds import NEW_KINDS, NEW_OPCODES  # (this directory's)

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
    """What the family's decoding made before our decoder: ``bytecode``'s."""
    return family.decode_by_bytecode(code)


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
            assert isinstance(mine, Instr), (where, index, mine)  # (3.14+: _py314's _Interpolation too)
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
        if _has_a_free_variable_named_like_a_local(body):
            continue  # (bytecode misreads those on 3.13: they are assembled back below instead)
        ours = decoder.bytecode(body)
        assert ours is not None, body.co_qualname  # (it declines nothing bytecode reads)
        _assert_same(ours, _by_bytecode(body))
        compared += 1
    assert compared > 1000


def _has_a_free_variable_named_like_a_local(body: CodeType) -> bool:
    return not set(body.co_freevars).isdisjoint(body.co_varnames)


def _assert_assembles_back(body: CodeType) -> None:
    """``body`` decoded by our decoder and assembled by our assembler, unchanged, is
    ``body`` again: the same instructions at the same offsets, reading the same local, cell
    and free variable slots and the same constants and names (which the assembler numbers
    in the order it meets them, the compiler in its own), the same handlers and positions."""
    decoded = decoder.bytecode(body)
    assert decoded is not None, body.co_qualname
    decoded.argnames = list(body.co_varnames)  # (as the rewriting gives it: _rewriter.rewritten)
    again = family.assembler.code(decoded, body.co_stacksize)
    assert again is not None, body.co_qualname
    for field in ("co_varnames", "co_cellvars", "co_freevars", "co_nlocals", "co_flags", "co_stacksize",
                  "co_exceptiontable"):
        assert getattr(again, field) == getattr(body, field), (body.co_qualname, field)
    slots = set(dis.haslocal) | set(dis.hasfree)
    assert [(i.offset, i.opname, i.arg if i.opcode in slots else i.argval, i.positions)
            for i in dis.get_instructions(again)] == [
        (i.offset, i.opname, i.arg if i.opcode in slots else i.argval, i.positions)
        for i in dis.get_instructions(body)], body.co_qualname


def test_bodies_with_a_free_variable_named_like_a_local_assemble_back_to_themselves():
    # (3.13: a class body whose inlined comprehension names a free variable has a local and
    # a free variable of the same name, in two slots)
    bodies = [body for body in _real_bodies() if _has_a_free_variable_named_like_a_local(body)]
    assert bodies
    for body in bodies:
        _assert_assembles_back(body)


_CLASS_BODY_SHARING_A_NAME = (
    "def f(a):\n"
    "    outer, zed = a * 2, a + 1\n"
    "    class Body:\n"
    "        y = [i * outer for i in range(3)]\n"
    "        w = zed\n"
    "        def get(self):\n"
    "            return outer\n"
    "    return Body\n")


def _class_body_sharing_a_name() -> CodeType:
    outer = next(c for c in compile(_CLASS_BODY_SHARING_A_NAME, "<f>", "exec").co_consts if isinstance(c, CodeType))
    return next(c for c in outer.co_consts if isinstance(c, CodeType))


def test_our_decoder_gives_a_methods_closure_the_free_variable_a_local_shares_its_name_with():
    from bytecode import FreeVar

    body = _class_body_sharing_a_name()
    assert body.co_freevars == ("outer", "zed")
    closure = [item.arg for item in decoder.bytecode(body)
               if getattr(item, "name", None) in ("LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_CLOSURE")
               and isinstance(item.arg, FreeVar)]
    assert closure == [FreeVar("outer")]  # (bytecode 0.19 reads FreeVar('zed') on 3.13)


def test_a_class_body_with_a_local_and_a_free_variable_of_one_name_assembles_back_to_itself():
    _assert_assembles_back(_class_body_sharing_a_name())


def test_the_family_decodes_with_our_decoder_not_bytecodes(monkeypatch):
    from bytecode import Bytecode, ConcreteBytecode

    body = compile("def f(x):\n    try:\n        return g(x) < 2\n    finally:\n        h()\n", "<f>", "exec")
    expected = _by_bytecode(body)

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("bytecode's decoding was asked")

    monkeypatch.setattr(Bytecode, "from_code", refused)
    monkeypatch.setattr(ConcreteBytecode, "from_code", refused)  # (3.14+'s route)
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


def _with_jump_moved(source: str, forward: bool, target: Callable[[bytes, int], int]) -> CodeType:
    """``source``'s function with its first forward (or backward) jump's argument rewritten
    to land on the code unit ``target(co_code, its "after" unit)`` gives."""
    body = next(c for c in compile(source, "<jump>", "exec").co_consts if isinstance(c, CodeType))
    jumps = getattr(dis, "hasjump", None) or dis.hasjrel  # (3.12's jumps are all relative)
    jump = next(i for i in dis.get_instructions(body) if i.opcode in jumps and (i.argval > i.offset) == forward)
    after = jump.argval // 2 - jump.arg if forward else jump.argval // 2 + jump.arg  # (the unit it counts from)
    moved = target(body.co_code, after)
    arg = moved - after if forward else after - moved
    assert 0 <= arg < 256 and body.co_code[jump.offset - 2] != opmap["EXTENDED_ARG"]
    code = bytearray(body.co_code)
    code[jump.offset + 1] = arg
    return body.replace(co_code=bytes(code))


def test_our_decoder_leaves_a_jump_landing_on_a_cache_entry_to_bytecode():
    def first_cache_after(code: bytes, after: int) -> int:
        return next(unit for unit in range(after, len(code) // 2) if opname[code[2 * unit]] == "CACHE")

    body = _with_jump_moved("def f(c):\n    if c:\n        g(c)\n    return h(c)\n", True, first_cache_after)
    assert decoder.bytecode(body) is None


def test_our_decoder_leaves_a_jump_landing_before_the_first_instruction_to_bytecode():
    def as_far_before_as_the_body_is_long(code: bytes, after: int) -> int:
        return -(len(code) // 2)  # (a list indexed there from the end would give the first instruction)

    body = _with_jump_moved("def f(c):\n    while c:\n        c -= 1\n", False, as_far_before_as_the_body_is_long)
    assert decoder.bytecode(body) is None


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




def test_our_decoder_reads_the_argument_kinds_of_3_14_and_3_15_as_bytecode_does():
    bodies = list(_bodies(compile(NEW_KINDS, "<new kinds>", "exec")))
    compiled = {opname[op] for body in bodies for op in body.co_code[0::2]}
    assert {name for name in NEW_OPCODES if name in opmap} <= compiled  # (each kind this Python has is read)
    for body in bodies:
        ours = decoder.bytecode(body)
        assert ours is not None, body.co_qualname
        _assert_same(ours, _by_bytecode(body))


TEMPLATE = "def g(x, w):\n    return t'a{x}b{x!r:>{w}}c{x!s}{x!a:^{w}}{x:}{x=}'\n"


@pytest.mark.skipif(sys.version_info < (3, 14), reason="template strings (PEP 750) are 3.14's")
def test_our_decoder_keeps_build_interpolations_argument_as_the_family_does():
    bodies = list(_bodies(compile(TEMPLATE, "<template>", "exec")))
    interpolations = [op for body in bodies for op in body.co_code[0::2] if op == opmap["BUILD_INTERPOLATION"]]
    assert len(interpolations) == 6
    for body in bodies:
        ours = decoder.bytecode(body)
        assert ours is not None, body.co_qualname
        _assert_same(ours, _by_bytecode(body))
