"""The decoder's C part (``rewrite/_decoding.c``) makes what its Python reference makes.

The decoder's loop over a code object's units is in C where the accelerators are built,
handed to the decoder once by ``rewrite._nullslot.own_decoder`` (``_decoding.items``), and
in Python (``_decoder.Decoder._items``) where it is not or ``CASSETTE_HOOK_PURE_PYTHON=1``
is set (docs/internals.md, "The decoder's loop in C").  Over real modules and the bodies
that take each of the decoder's rules, the two must make the same ``Bytecode``, item by
item (names, opcodes, arguments and their types, positions, labels, try blocks), with a
position object shared by the same instructions (the assembler compares them by identity),
and decline the same bodies.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
import warnings
from opcode import opmap
from pathlib import Path
from types import CodeType

import pytest

from cassette_hook import _native
from cassette_hook.rewrite._family import family

from new_kinds import NEW_KINDS  # (this directory's)
from test_decoding import (TEMPLATE, _assert_same, _bodies, _class_body_sharing_a_name, _real_bodies,
                           _with_jump_moved, _with_many_constants)  # (this directory's)

decoder = getattr(family, "decoder", None)
_decoding = _native.optional(".rewrite._decoding")
pytestmark = [pytest.mark.skipif(decoder is None, reason="bytecode decodes everything on this Python"),
              pytest.mark.skipif(_decoding is None, reason="the pure-Python path: the reference alone is used")]

MORE_SOURCES = [p for name in ("collections", "importlib", "unittest", "logging", "concurrent.futures")
                for p in sorted(Path(importlib.util.find_spec(name).origin).parent.glob("*.py"))]


def _reference():  # type: ignore[no-untyped-def]
    """The family's decoder with its Python loop (``Decoder._items``) in place of C's."""
    python = copy.copy(decoder)
    python._scan = None
    return python


def _assert_c_decodes_as_python(body: CodeType) -> None:
    """The C loop and the Python one make the same of ``body`` (or both decline it), with
    the same instructions sharing a position object."""
    ours, reference = decoder.bytecode(body), _reference().bytecode(body)
    assert (ours is None) == (reference is None), body.co_qualname
    if ours is None:
        return
    _assert_same(ours, reference)
    shared = [index for index in range(1, len(ours))
              if getattr(ours[index], "location", None) is getattr(ours[index - 1], "location", 0)]
    assert shared == [index for index in range(1, len(reference))
                      if getattr(reference[index], "location", None) is getattr(reference[index - 1], "location", 0)]


def test_the_decoder_loops_in_c_where_the_accelerators_are_built():
    if os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS"):
        assert decoder._scan is _decoding.items


def test_the_c_loop_decodes_real_modules_as_the_python_loop_item_by_item():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bodies = [*_real_bodies(), *(body for path in MORE_SOURCES
                                     for body in _bodies(compile(path.read_text(encoding="utf-8"), str(path), "exec")))]
    for body in bodies:
        _assert_c_decodes_as_python(body)
    assert len(bodies) > 3000


def test_the_c_loop_decodes_the_new_argument_kinds_as_the_python_loop():
    for body in _bodies(compile(NEW_KINDS, "<new kinds>", "exec")):
        _assert_c_decodes_as_python(body)


@pytest.mark.skipif(sys.version_info < (3, 14), reason="template strings (PEP 750) are 3.14's")
def test_the_c_loop_keeps_build_interpolations_argument_as_the_python_loop():
    for body in _bodies(compile(TEMPLATE, "<template>", "exec")):
        _assert_c_decodes_as_python(body)


def test_the_c_loop_reads_extended_arguments_and_try_blocks_as_the_python_loop():
    body = _with_many_constants()
    assert opmap["EXTENDED_ARG"] in body.co_code[0::2] and body.co_exceptiontable
    _assert_c_decodes_as_python(body)


def test_the_c_loop_names_cells_and_free_variables_as_the_python_loop():
    source = ("def f(a, b=1, /, c=2, *args, d, e=3, **kwargs):\n"
              "    x = a\n"
              "    def g(y):\n"
              "        nonlocal x\n"
              "        x = y\n"
              "        return a + x + y + d\n"
              "    return g\n")
    for body in _bodies(compile(source, "<f>", "exec")):
        _assert_c_decodes_as_python(body)
    _assert_c_decodes_as_python(_class_body_sharing_a_name())  # (3.13+: a free variable named like a local)


def test_the_c_loop_declines_an_extended_arg_at_the_end():
    body = compile("x = 1\n", "<module>", "exec")
    broken = body.replace(co_code=body.co_code + bytes([opmap["EXTENDED_ARG"], 1]))
    assert _decoding.items(decoder._scan_tables, broken, [], [], []) is None


def test_the_c_loop_declines_a_jump_landing_on_a_cache_entry_or_before_the_body():
    def first_cache_after(code: bytes, after: int) -> int:
        return next(unit for unit in range(after, len(code) // 2) if code[2 * unit] == opmap["CACHE"])

    def before_the_body(code: bytes, after: int) -> int:
        return -(len(code) // 2)

    for body in (_with_jump_moved("def f(c):\n    if c:\n        g(c)\n    return h(c)\n", True, first_cache_after),
                 _with_jump_moved("def f(c):\n    while c:\n        c -= 1\n", False, before_the_body)):
        assert _decoding.items(decoder._scan_tables, body, list(body.co_varnames), list(body.co_varnames), []) is None
        assert decoder.bytecode(body) is None


def test_the_c_loop_hands_an_argument_past_its_range_to_the_python_loop():
    # (eight EXTENDED_ARGs: an argument of 72 bits, which a Python int holds and C does not)
    body = compile("x = 1\n", "<module>", "exec")
    assert body.co_code[0] == opmap["RESUME"]
    wide = body.replace(co_code=bytes([opmap["EXTENDED_ARG"], 1] * 8) + body.co_code,
                        co_linetable=b"")  # (no positions: all None)
    assert _decoding.items(decoder._scan_tables, wide, [], [], []) is NotImplemented
    _assert_c_decodes_as_python(wide)
