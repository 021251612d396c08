"""Code for the import hook: each body twice, plain and rewritten, behind a mode switch.

A module the import hook loads runs most of the time with no context active anywhere,
and must then run at (nearly) its plain speed.  So every function body is compiled into
one code object holding both versions::

    [prefix: MAKE_CELL, COPY_FREE_VARS, RETURN_GENERATOR, RESUME -- as compiled]
    LOAD_GLOBAL __cassette_hook_active__       # a bool among the builtins
    POP_JUMP_IF_TRUE check
  plain:
    <the body as compiled>
  check:
    __cassette_hook_enter__(<module name>)    # a context here, and this module in its scope?
    POP_JUMP_IF_TRUE instrumented
    JUMP_BACKWARD plain
  instrumented:
    <the body with its sites rewritten>

Idle, a call pays one global load and one untaken jump.  The choice is made once per
call (for a generator, when it first runs): a frame stays in the body it started in.
Both bodies keep the compiled line numbers and positions, so tracebacks, ``inspect`` and
line tracing see the program as written.  Nested function bodies get the same treatment
(so functions defined later are switchable too); comprehensions and class bodies, which
run as part of their parent, are plain in the plain body and rewritten in the other.
Everything is loaded by name, never as a Python object constant, so the result can be
written to a ``.pyc`` file.
"""

from __future__ import annotations

import operator as _operator
from types import CodeType
from typing import Sequence

from bytecode import Bytecode, Instr, Label
from bytecode.instr import TryBegin

from . import GlobalName, Hooks, _family, assemble, rewritten
from ._instr import global_name
from ._operators import BINARY, COMPARE, UNARY, Operator
from ._stack import COMPREHENSIONS

ACTIVE = "__cassette_hook_active__"
ENTER = "__cassette_hook_enter__"
_PREFIX = frozenset({"MAKE_CELL", "COPY_FREE_VARS", "RETURN_GENERATOR", "POP_TOP", "GEN_START", "RESUME"})
_CO_NEWLOCALS = 0x2

OPERATORS: tuple[Operator, ...] = (*BINARY.values(), *UNARY.values(), *COMPARE.values(),
                                   _operator.getitem, _operator.setitem, _operator.delitem, _operator.contains, iter)


def operator_name(op: Operator) -> GlobalName:
    """The builtin name under which an operator site for ``op`` is found."""
    return GlobalName(f"__cassette_hook_op_{op.__name__}__")


HOOKS = Hooks(
    resolve=GlobalName("__cassette_hook_resolve__"),
    resolve_star=GlobalName("__cassette_hook_resolve_star__"),
    call=GlobalName("__cassette_hook_call__"),
    call_ex=GlobalName("__cassette_hook_call_ex__"),
    operator_site=operator_name,
    yield_from=GlobalName("__cassette_hook_yield_from__"),
)


def is_switched(code: CodeType) -> bool:
    """Was this body made by :func:`switched` (with a rewritten body behind the switch)?"""
    return ENTER in code.co_names


def plain_body(code: CodeType) -> CodeType:
    """The body as compiled, out of a switched code object: its prefix and the plain body,
    without the switch and the rewritten body (a context with a pass rewrites this one).

    The plain body's nested functions stay switchable, as :func:`switched` made them.
    """
    bc = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    items = list(bc)
    start = next(index for index, item in enumerate(items)
                 if isinstance(item, Instr) and item.name == "LOAD_GLOBAL" and global_name(item) == ACTIVE)
    jump, plain_label = items[start + 1], items[start + 2]
    if not (isinstance(jump, Instr) and isinstance(jump.arg, Label) and isinstance(plain_label, Label)):
        raise ValueError(f"{code.co_name} is not a switched code object")
    end = items.index(jump.arg)
    bc[:] = [*items[:start], *items[start + 3:end]]
    bc.argnames = list(code.co_varnames)
    return assemble(bc, code.co_stacksize, code.co_name)


def switched(code: CodeType, module: str) -> CodeType:
    """``code`` (a module's, or any function's) with every body behind a mode switch.

    Raises ``UnsupportedCode`` when the top-level body cannot be rewritten; a nested part
    that cannot is kept as compiled, with a warning.
    """
    return _Switcher(module).switched(code)


class _Switcher:
    def __init__(self, module: str) -> None:
        self.module = module
        self._done: dict[int, tuple[CodeType, CodeType]] = {}  # id(code) -> (code, result)
        self._has_sites: set[int] = set()  # ids of rewritten parts that have sites

    def switched(self, code: CodeType) -> CodeType:
        done = self._done.get(id(code))
        if done is not None:
            return done[1]
        plain = self._plain(code)
        body = rewritten(code, HOOKS, operators=True, nested=self._instrumented_nested)
        result = plain if not self._sites(body) else self._join(plain, body, code.co_stacksize)
        self._done[id(code)] = (code, result)
        return result

    def _plain(self, code: CodeType) -> CodeType:
        """``code`` as compiled, but with the functions it defines switchable."""
        consts = tuple(self._plain_nested(const) if isinstance(const, CodeType) else const
                       for const in code.co_consts)
        return code.replace(co_consts=consts)

    def _plain_nested(self, code: CodeType) -> CodeType:
        part = code.co_name in COMPREHENSIONS or not code.co_flags & _CO_NEWLOCALS  # class bodies lack it
        return self._plain(code) if part else self.switched(code)

    def _instrumented_nested(self, code: CodeType, part: bool) -> CodeType:
        if not part:
            return self.switched(code)

        def rewrite() -> CodeType:
            body = rewritten(code, HOOKS, operators=True, nested=self._instrumented_nested)
            result = assemble(body, code.co_stacksize + 2, code.co_name)
            if self._sites(body):
                self._has_sites.add(id(result))
            return result

        from . import rewrite_part

        return rewrite_part(code, rewrite)

    def _sites(self, body: Bytecode) -> bool:
        """Does the rewritten body call a hook, itself or in a part?"""
        for item in body:
            if isinstance(item, Instr) and item.name == "LOAD_GLOBAL":
                if global_name(item).startswith("__cassette_hook_"):
                    return True
            elif isinstance(item, Instr) and item.name == "LOAD_CONST" and id(item.arg) in self._has_sites:
                return True
        return False

    def _join(self, plain_code: CodeType, body: Bytecode, stacksize: int) -> CodeType:
        plain = Bytecode.from_code(plain_code, conserve_exception_block_stackdepth=True)
        items, rewritten_items = list(plain), list(body)
        start, rewritten_start = _prefix_length(items), _prefix_length(rewritten_items)
        # Only one of the two RESUMEs may run, but a try block opened in the prefix (3.12+
        # generators) covers the whole body, so the instrumented body opens its own.
        instrumented_body = [*(i for i in rewritten_items[:rewritten_start] if isinstance(i, TryBegin)),
                             *rewritten_items[rewritten_start:]]
        first = next((i for i in items[start:] if isinstance(i, Instr)), None)
        loc = first.location if first is not None else None  # the first line of the body: no line event of its own
        plain_label, check, instrumented = Label(), Label(), Label()
        switch = _family.switch
        plain[:] = [
            *items[:start],
            switch.load_global(ACTIVE, loc),
            switch.jump_if_true(check, loc),
            plain_label,
            *items[start:],
            check,
            switch.load_global_callee(ENTER, loc),
            Instr("LOAD_CONST", self.module, location=loc),
            *switch.call(1, loc),
            switch.jump_if_true(instrumented, loc),
            switch.jump_back(plain_label, loc),
            instrumented,
            *instrumented_body,
        ]
        plain.argnames = list(plain_code.co_varnames)
        # The switch needs three slots, at an empty stack; each body what it needed.
        return assemble(plain, max(stacksize + 2, 3), plain_code.co_name)


def _prefix_length(items: Sequence[object]) -> int:
    """How many leading items set up the frame (cells, generator) and must stay first.

    The switch goes after RESUME: that is where a frame starts for tracers and
    ``sys.monitoring`` (``call``/``PY_START``), and the hook it may call must not run earlier.
    A 3.12+ generator opens a try block (StopIteration to RuntimeError) just before RESUME.
    """
    for index, item in enumerate(items):
        if isinstance(item, TryBegin):
            continue
        if not isinstance(item, Instr) or item.name not in _PREFIX:
            return index
        if item.name == "RESUME":
            return index + 1
    return len(items)
