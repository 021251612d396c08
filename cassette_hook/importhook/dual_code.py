"""Code for the import hook: each body twice, plain and rewritten, behind a mode switch.

A module the import hook loads runs most of the time with no context active anywhere,
and must then run at (nearly) its plain speed.  So every function body is compiled into
one code object holding both versions::

    [prefix: MAKE_CELL, COPY_FREE_VARS, RETURN_GENERATOR, RESUME -- as compiled]
    LOAD_GLOBAL __cassette_hook_active__       # a bool among the builtins
    POP_JUMP_IF_FALSE plain
    LOAD_GLOBAL __cassette_hook_twin__         # false, but in a twin's builtins (``plan``)
    POP_JUMP_IF_TRUE instrumented
    __cassette_hook_enter__(<module name>)    # a context here, and this module in its scope?
    POP_JUMP_IF_TRUE instrumented
  plain:
    <the body as compiled>
  instrumented:
    <the body with its sites rewritten>

Idle, a call pays one global load and one jump.  Under a context, a call from a site of
the program runs the function (its frame reads the builtins, where the twin flag is
false) and asks the question; a call from a site of rewritten code runs the plan's twin,
which has the same code and reads builtins of its own where the flag is true, and skips
the question (CPython 3.12+ with the C accelerators; elsewhere twins ask it too).  The
choice is made once per call (for a generator, when it first runs): a frame stays in the
body it started in.  Every way through the switch goes forward, and all of it has the
body's first line: a line tracer sees that line once, as in the plain program.  (The
question used to sit after the plain body, answering no with a jump back to it, which a
tracer takes for a new line event: a thread with no context, while another had one, saw
each first line twice.)
Both bodies keep the compiled line numbers and positions, so tracebacks, ``inspect`` and
line tracing see the program as written.  Nested function bodies get the same treatment
(so functions defined later are switchable too); comprehensions and class bodies, which
run as part of their parent, are plain in the plain body and rewritten in the other.
Everything is loaded by name, never as a Python object constant, so the result can be
written to a ``.pyc`` file.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from types import CodeType
from typing import Sequence, cast

from bytecode import Bytecode, Instr, Label
from bytecode.instr import InstrLocation, TryBegin, TryEnd

from ..rewrite import RESOURCE_ERRORS, rewrite_part
from ..rewrite._instr import Location, global_name, make
from ..rewrite._names import ACTIVE, ENTER, TWIN, is_annotate, is_part, switched_hooks
from ..rewrite._family import family
from ..rewrite._rewriter import assemble, decode, items_of, rewritten, set_items
from ..rewrite._stack import Item

# (what the runtime needs to know of switched code is in ``_names``, which does not
# import ``bytecode``)
__all__ = ["plain_body", "switched", "switched_body", "switched_functions"]

_PREFIX = frozenset({"MAKE_CELL", "COPY_FREE_VARS", "RETURN_GENERATOR", "POP_TOP", "GEN_START", "RESUME"})


def plain_body(code: CodeType) -> CodeType:
    """The body as compiled, out of a switched code object: its prefix and the plain body,
    without the switch and the rewritten body (a context with a pass rewrites this one).

    The plain body's nested functions stay switchable, as :func:`switched` made them.
    """
    bc = decode(code)
    items = list(bc)
    start = next(index for index, item in enumerate(items)
                 if isinstance(item, Instr) and item.name == "LOAD_GLOBAL" and global_name(item) == ACTIVE)
    jump = items[start + 1]  # to the plain body, after the question, whose last jump is to the other
    plain = items.index(jump.arg) if isinstance(jump, Instr) and isinstance(jump.arg, Label) else -1
    asked = items[plain - 1] if plain > 0 else None
    if not (isinstance(asked, Instr) and isinstance(asked.arg, Label)):
        raise ValueError(f"{code.co_name} is not a switched code object")
    bc[:] = [*items[:start], *items[plain + 1:items.index(asked.arg)]]
    bc.argnames = list(code.co_varnames)
    return assemble(bc, code.co_stacksize, code.co_name)


def switched(code: CodeType, module: str) -> CodeType:
    """``code`` (a module's, or any function's) with every body behind a mode switch.

    Raises ``UnsupportedCode`` when the top-level body cannot be rewritten; a nested part
    that cannot is kept as compiled, with a warning.
    """
    return _Switcher(module).switched(code)


def switched_body(code: CodeType, module: str) -> CodeType:
    """A module's ``code`` with its own body and the parts that run with it (class bodies,
    comprehensions) behind a mode switch, and the functions it defines as compiled: what a
    module imported while a context is active runs where its functions are switched at the
    first call of one of them (``lazy_mode.arm_module``).

    Raises ``UnsupportedCode`` as :func:`switched` does.
    """
    return _Switcher(module, functions=False).switched(code)


def switched_functions(functions: Sequence[CodeType], module: str) -> list[CodeType | Exception]:
    """Each of a light module's ``functions`` (``lazy_mode.functions``) switched, or the
    exception that kept it from being switched (it then stays as it is)."""
    switcher = _Switcher(module)
    out: list[CodeType | Exception] = []
    for code in functions:
        try:
            out.append(switcher.switched(code))
        except RESOURCE_ERRORS:
            raise
        except Exception as exc:
            out.append(exc)
    return out


class _Switcher:
    def __init__(self, module: str, functions: bool = True) -> None:
        self.module = module
        self.functions = functions  # switch the functions a code defines too (else: left as compiled)
        self.hooks = switched_hooks()
        self._done: dict[int, tuple[CodeType, CodeType]] = {}  # id(code) -> (code, result)
        # The rewritten parts that have sites, by id, each held: a part no longer held by
        # anything else would free its id for another code object, which ``_sites`` would
        # then take for one (a nested function's, a class body's, which the allocation
        # pattern decided).
        self._has_sites: dict[int, CodeType] = {}

    def switched(self, code: CodeType) -> CodeType:
        if is_annotate(code):
            return code
        done = self._done.get(id(code))
        if done is not None:
            return done[1]
        # Decoding is a fifth of the work, and was done twice: now the body is decoded once.
        # Where the family's assembler copies the plain half as compiled (3.12, 3.13), that
        # is all; elsewhere the plain half is a copy of the decoding (new labels and
        # handlers, the same other instructions).
        decoded = decode(code)
        plain = None if family.assembler is not None else self._plain_items(items_of(decoded))
        body = rewritten(code, self.hooks, operators=True, nested=self._instrumented_nested, decoded=decoded)
        if not self._sites(body):
            result = self._plain(code)
        else:
            joined = self._join_compiled(body, code) if plain is None else None
            if joined is None:
                joined = self._join(self._plain_items(items_of(decode(code))) if plain is None else plain, body, code)
            result = joined
        self._done[id(code)] = (code, result)
        return result

    def _plain_items(self, items: list[Item]) -> list[Item]:
        """A copy of a decoded body that can be joined with it: labels and exception
        handlers are objects of their own, which no two places may share; code constants
        are as :meth:`_plain` makes them.  Other instructions are shared (nothing mutates them)."""
        labels: dict[int, Label] = {}
        blocks: dict[int, TryBegin] = {}

        def label(old: Label) -> Label:
            new = labels.get(id(old))
            if new is None:
                new = labels[id(old)] = Label()
            return new

        def block(old: TryBegin) -> TryBegin:  # (a TryEnd may come before its TryBegin in the list)
            new = blocks.get(id(old))
            if new is None:
                assert isinstance(old.target, Label)  # (a Bytecode's handlers are labels, not blocks)
                new = blocks[id(old)] = TryBegin(label(old.target), old.push_lasti, old.stack_depth)
            return new

        out: list[Item] = []
        for item in items:
            if isinstance(item, Instr):
                arg = item.arg
                if isinstance(arg, Label):
                    item = make(item.name, label(arg), item.location)
                elif isinstance(arg, CodeType):
                    replacement = self._plain_nested(arg)
                    if replacement is not arg:
                        item = make(item.name, replacement, item.location)
            elif isinstance(item, Label):
                item = label(item)
            elif isinstance(item, TryBegin):
                item = block(item)
            elif isinstance(item, TryEnd):
                item = TryEnd(block(item.entry))
            out.append(item)
        return out

    def _plain(self, code: CodeType) -> CodeType:
        """``code`` as compiled, but with the functions it defines switchable."""
        return _with_consts(code, tuple(self._plain_nested(const) if isinstance(const, CodeType) else const
                                        for const in code.co_consts))

    def _plain_nested(self, code: CodeType) -> CodeType:
        if is_part(code):
            return self._plain(code)
        return self.switched(code) if self.functions else code

    def _instrumented_nested(self, code: CodeType, part: bool) -> CodeType:
        if not part:
            return self.switched(code) if self.functions else code

        def rewrite() -> CodeType:
            body = rewritten(code, self.hooks, operators=True, nested=self._instrumented_nested)
            result = assemble(body, code.co_stacksize + 2, code.co_name)
            if self._sites(body):
                self._has_sites[id(result)] = result
            return result

        return rewrite_part(code, rewrite)

    def _sites(self, body: Bytecode) -> bool:
        """Does the rewritten body call a hook, itself or in a part?"""
        has_sites = self._has_sites
        for item in items_of(body):
            if type(item) is Instr or isinstance(item, Instr):  # (its name read under bytecode's property)
                name = item._name
                if name == "LOAD_GLOBAL":
                    if global_name(item).startswith("__cassette_hook_"):
                        return True
                elif name == "LOAD_CONST" and id(item._arg) in has_sites:
                    return True
        return False

    def _join_compiled(self, body: Bytecode, code: CodeType) -> CodeType | None:
        """As :meth:`_join`, the plain half being ``code``'s own units, copied rather than
        assembled again (``_assembler.Verbatim``: 3.12+, where jumps are relative), or None
        where the family's assembler cannot do that (:meth:`_join` then does).  The same
        switched code, but for the numbering of constants and names."""
        assembler = family.assembler
        assert assembler is not None
        halves = assembler.halves(code, self._plain(code).co_consts)
        rewritten_items = items_of(body)
        rewritten_start = _prefix_length(rewritten_items)
        prefix = [i for i in rewritten_items[:rewritten_start] if isinstance(i, Instr)]
        if halves is None or not halves[1].runs or halves[2] != len(prefix):
            return None
        compiled_prefix, compiled_body, _ = halves
        first = compiled_body.first_position  # (as the decoded plain body's first instruction has it)
        loc = None if first is None else InstrLocation(first.lineno, first.end_lineno, first.col_offset,
                                                        first.end_col_offset)
        plain, instrumented = Label(), Label()
        set_items(body, cast(list[Item], [  # (the assembler's Verbatim blocks among bytecode's items)
            compiled_prefix,
            *self._switch(plain, instrumented, loc),
            plain,
            compiled_body,
            instrumented,
            *(i for i in rewritten_items[:rewritten_start] if isinstance(i, TryBegin)),
            *rewritten_items[rewritten_start:],
        ]))
        result = assembler.code(body, max(code.co_stacksize + 2, 3))
        if result is None:
            set_items(body, rewritten_items)
        return result

    def _join(self, items: list[Item], body: Bytecode, code: CodeType) -> CodeType:
        """The plain ``items`` behind the switch, then ``body``, as one code object (in
        ``body``, which has ``code``'s names and flags)."""
        rewritten_items = items_of(body)
        start, rewritten_start = _prefix_length(items), _prefix_length(rewritten_items)
        # Only one of the two RESUMEs may run, but a try block opened in the prefix (3.12+
        # generators) covers the whole body, so the instrumented body opens its own.
        instrumented_body = [*(i for i in rewritten_items[:rewritten_start] if isinstance(i, TryBegin)),
                             *rewritten_items[rewritten_start:]]
        first = next((i for i in items[start:] if isinstance(i, Instr)), None)
        loc = first.location if first is not None else None  # the first line of the body: no line event of its own
        plain, instrumented = Label(), Label()
        set_items(body, [
            *items[:start],
            *self._switch(plain, instrumented, loc),
            plain,
            *items[start:],
            instrumented,
            *instrumented_body,
        ])
        # The switch needs three slots, at an empty stack; each body what it needed.
        return assemble(body, max(code.co_stacksize + 2, 3), code.co_name)

    def _switch(self, plain: Label, instrumented: Label, loc: Location) -> list[Instr]:
        """The question that chooses a body, at the position of the plain body's first
        instruction (a tracer sees no line event of its own)."""
        return [
            family.load_global(ACTIVE, loc),
            family.jump_if_false(plain, loc),
            family.load_global(TWIN, loc),
            family.jump_if_true(instrumented, loc),
            family.load_global_callee(ENTER, loc),
            make("LOAD_CONST", self.module, loc),
            *family.call(1, loc),
            family.jump_if_true(instrumented, loc),
        ]


def _with_consts(code: CodeType, consts: tuple[object, ...]) -> CodeType:
    """``code`` with ``consts``: itself if they are the ones it has."""
    same = all(new is old for new, old in zip(consts, code.co_consts))
    return code if same else code.replace(co_consts=consts)


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
