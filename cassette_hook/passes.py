"""Passes: Cassette's contextual pass injection, on CPython bytecode.

A :class:`Pass` wraps ``transform(ctx_type, func, code) -> code``, where ``code`` is a
``bytecode.Bytecode`` of the function's body as compiled.  A context given ``pass_=`` runs
every function it recurses into as a twin made from ``transform``'s result: the pass runs
first, then the call sites of what it returned are rewritten (so the calls it inserts are
overdubbed like the program's own), except the calls of a :class:`nooverdub` marker, and
each :data:`contextslot` constant loads the running context.

The result is checked before anything runs it (:func:`_checked`): what is not valid
bytecode -- a stack that does not balance, a jump to a label that is not there, a local
variable nothing assigns, a cell the function does not have -- raises :class:`PassError`
naming the pass and the function, when the function is first entered under the context.
The pass runs once per code object: its result, or its failure, is remembered (weakly, by
the code object) and shared by every context that has the pass.

The helpers :func:`replace_match` and :func:`insert_statements` have Cassette's semantics
on lists of ``bytecode`` items; see ``docs/passes.md``.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from types import CodeType, FunctionType
from typing import Any, Callable, Iterator, MutableSequence, Sequence

from bytecode import Bytecode, ControlFlowGraph, Instr, Label
from bytecode.instr import UNSET, CellVar, FreeVar, SetLineno, TryBegin, TryEnd

from . import rewrite
from ._locks import rlock
from ._weakid import WeakIdCache
from .rewrite import UnsupportedCode, _names
from .importhook import dual_code
from .rewrite._markers import contextslot, nooverdub
from .rewrite._family import family
from .rewrite._rewriter import assemble, rewritten
from .rewrite._stack import Item, _effect, jumps, stack_depths

__all__ = ["Pass", "PassError", "contextslot", "insert_statements", "nooverdub", "replace_match"]

Transform = Callable[[type, FunctionType, Bytecode], Bytecode]


class PassError(Exception):
    """A pass failed, or returned something that is not valid bytecode for the function."""


class Pass:
    """``Pass(transform)``: a compiler pass to give a context as ``Ctx(pass_=...)``.

    ``transform(ctx_type, func, code)`` gets the context's class, the function about to be
    entered and a ``bytecode.Bytecode`` of its body as compiled (its own copy, to change
    or replace), and returns the body to run.  It runs once per code object, however many
    contexts, functions or threads share the code, so it must be "relatively pure", as in
    Cassette: the same code gives an equivalent result.  Two ``Pass`` objects are two
    passes, even around the same ``transform``: contexts with different passes never
    share rewritten code.
    """

    __slots__ = ("transform", "_results", "_lock", "__weakref__")

    def __init__(self, transform: Transform) -> None:
        if not callable(transform):
            raise TypeError(f"Pass() takes a callable transform(ctx_type, func, code), not {transform!r}")
        self.transform = transform
        # id(code) -> (checked body, stack size, code given) or the failure: the pass's memo.
        self._results: WeakIdCache[_Result | _Failure] = WeakIdCache()
        self._lock = rlock()  # two threads entering one function run the pass once

    def __repr__(self) -> str:
        name = getattr(self.transform, "__qualname__", None) or repr(self.transform)
        return f"Pass({name})"


_Result = tuple[Bytecode, int, CodeType]


class _Failure:
    __slots__ = ("what", "cause")

    def __init__(self, what: str, cause: BaseException | None = None) -> None:
        self.what, self.cause = what, cause


def rewrite_with_pass(pass_: Pass, ctx_type: type, func: FunctionType, code: CodeType, hooks: rewrite.Hooks,
                      *, operators: bool) -> CodeType:
    """``code`` (a function's, or a part of its body) with ``pass_`` applied, then its call
    sites rewritten; raises :class:`PassError` for anything wrong with the pass's result."""
    try:
        body, stacksize, base = _transformed(pass_, ctx_type, func, code)
    except rewrite.RESOURCE_ERRORS as exc:  # running as a primitive would run it without the pass
        short = "memory" if isinstance(exc, MemoryError) else "stack"
        raise PassError(f"{pass_!r} on {_name(func, code)}: ran out of {short} applying the pass") from exc

    def nested(const: CodeType, part: bool) -> CodeType:
        # Comprehensions and class bodies run as part of the function: the pass sees them
        # too (3.12+ inlines most comprehensions anyway).  Functions it defines get their
        # own twins, with the pass, when they are called.
        return rewrite_with_pass(pass_, ctx_type, func, const, hooks, operators=operators) if part else const

    try:
        out = rewritten(base, hooks, operators=operators, nested=nested, decoded=body, compiled=False)
        # The rewritten sites need two slots more at most, a contextslot one.
        new = assemble(out, stacksize + 3, base.co_name)
    except rewrite.RESOURCE_ERRORS:
        raise
    except PassError:
        raise
    except Exception as exc:
        raise PassError(f"{pass_!r} on {_name(func, code)}: returned code that cannot be rewritten: {exc}") from exc
    if new.co_freevars != base.co_freevars:
        raise PassError(f"{pass_!r} on {_name(func, code)}: returned code with the free variables "
                        f"{new.co_freevars}, not the function's {base.co_freevars}")
    return new


def _transformed(pass_: Pass, ctx_type: type, func: FunctionType, code: CodeType) -> _Result:
    """The pass's checked result for ``code`` (a fresh copy: rewriting consumes it), its
    stack size and the code the pass was given (a switched body's plain half); run once."""
    with pass_._lock:
        result = pass_._results.get(code)
        if result is None:
            result = _run(pass_, ctx_type, func, code)
            pass_._results.set(code, result)
    if isinstance(result, _Failure):
        raise PassError(f"{pass_!r} on {_name(func, code)}: {result.what}") from result.cause
    body, stacksize, base = result
    return body.copy(), stacksize, base


def _run(pass_: Pass, ctx_type: type, func: FunctionType, code: CodeType) -> _Result | _Failure:
    try:
        base = dual_code.plain_body(code) if _names.is_switched(code) else code
        given = family.decode(base)
        given[:] = family.plain_forms(list(given))  # (what 3.13 would give it: see rewrite._family)
    except rewrite.RESOURCE_ERRORS:
        raise
    except Exception as exc:  # (code neither decoder reads: _rewriter.decode)
        return _Failure(f"cannot be given the body: the bytecode package cannot decode it ({type(exc).__name__}: "
                        f"{exc}); it cannot run without the pass either", exc)
    try:
        body = pass_.transform(ctx_type, func, given)
    except rewrite.RESOURCE_ERRORS:
        raise
    except Exception as exc:
        return _Failure(f"raised {type(exc).__name__}: {exc}", exc)
    if not isinstance(body, Bytecode):
        return _Failure(f"returned {type(body).__qualname__} {_short(body)}, not a bytecode.Bytecode")
    try:
        return (*_checked(body, base), base)
    except _Invalid as exc:
        return _Failure(f"returned invalid bytecode: {exc}")
    except rewrite.RESOURCE_ERRORS:
        raise
    except Exception as exc:  # bytecode's own checks
        return _Failure(f"returned invalid bytecode: {type(exc).__name__}: {exc}", exc)


def _name(func: FunctionType, code: CodeType) -> str:
    where = f"{code.co_filename}:{code.co_firstlineno}"
    if code is func.__code__:
        return f"{func.__qualname__} ({where})"
    return f"{code.co_name} in {func.__qualname__} ({where})"  # a comprehension or class body


def _short(obj: object) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


# -- checking a pass's result ----------------------------------------------------------

class _Invalid(Exception):
    """What is wrong with a pass's result (the message says where)."""


_FAST_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_LOAD_FAST"})
_FAST_STORES = frozenset({"STORE_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST", "LOAD_FAST_AND_CLEAR",
                          "DELETE_FAST"})


def _checked(body: Bytecode, base: CodeType) -> tuple[Bytecode, int]:
    """``body``, checked to be something CPython can run safely, with its stack size.

    Raises ``_Invalid`` (or ``bytecode``'s own errors) for what is not.
    """
    items = list(body)
    _check_items(items)
    _check_names(items, body, base)
    try:  # every path reaches each instruction with the same depth
        depths = stack_depths(items)
    except UnsupportedCode as exc:
        raise _Invalid(f"its stack does not balance: {exc}") from None
    for item, depth in zip(items, depths):
        if isinstance(item, TryBegin) and item.stack_depth is UNSET:  # a try block the pass opened
            item.stack_depth = 0 if depth is None else depth
    _check_nulls(items, family.start_depth(base))  # and no instruction takes more than the stack holds
    _check_flow(items, depths, base)
    try:  # bytecode's own check of the same, and its stack size
        stacksize = ControlFlowGraph.from_bytecode(body).compute_stacksize(
            check_pre_and_post=True, compute_exception_stack_depths=False)
    except RuntimeError as exc:
        raise _Invalid(f"its stack does not balance: {exc}") from None
    stacksize = max(stacksize, _peak(items, depths))
    if family.loads_trust_binding:
        body[:] = _checked_loads(items, body)
    return body, stacksize


def _peak(items: Sequence[Item], depths: Sequence[int | None]) -> int:
    """The deepest the stack gets."""
    peak = 0
    for item, depth in zip(items, depths):
        if isinstance(item, Instr) and depth is not None:
            jumped = item.stack_effect(jump=True) if jumps(item) else 0
            peak = max(peak, depth, depth + _effect(item), depth + jumped)
    return peak


def _where(index: int, item: object) -> str:
    """``item N (NAME arg, line L)``: where in the pass's result."""
    if isinstance(item, Instr):
        arg = "" if not item.require_arg() else " label" if isinstance(item.arg, Label) else f" {item.arg!r}"
        line = f", line {item.lineno}" if isinstance(item.lineno, int) and item.lineno > 0 else ""
        return f"item {index} ({item.name}{arg}{line})"
    return f"item {index} ({type(item).__name__})"


def _check_items(items: Sequence[object]) -> None:
    labels: set[int] = set()
    begins: set[int] = set()
    for index, item in enumerate(items):
        if isinstance(item, Label):
            if id(item) in labels:
                raise _Invalid(f"item {index}: the same label is placed twice")
            labels.add(id(item))
        elif isinstance(item, TryBegin):
            begins.add(id(item))
        elif not isinstance(item, (Instr, SetLineno, TryEnd)):
            raise _Invalid(f"item {index} ({_short(item)}) is not an instruction, a label or a try marker")
    for index, item in enumerate(items):
        if isinstance(item, Instr) and item.has_jump() and id(item.arg) not in labels:
            raise _Invalid(f"{_where(index, item)} jumps to a label that is not in the code")
        if isinstance(item, TryBegin) and id(item.target) not in labels:
            raise _Invalid(f"{_where(index, item)}: its handler's label is not in the code")
        if isinstance(item, TryEnd) and id(item.entry) not in begins:
            raise _Invalid(f"{_where(index, item)} ends a try block that does not begin in the code")


def _fast_names(instr: Instr) -> tuple[str, ...]:
    """The local variables a ``*_FAST*`` instruction names (3.13 loads cells with
    ``LOAD_FAST`` too, for closures: those are not local variables)."""
    arg = instr.arg
    if isinstance(arg, tuple):
        return arg
    return (arg,) if isinstance(arg, str) else ()


def _check_names(items: Sequence[Item], body: Bytecode, base: CodeType) -> None:
    """Every local variable loaded is one the function has or the pass assigns; every
    cell or free variable is one the function has (its closure cannot change)."""
    assigned = set(base.co_varnames) | set(body.argnames)
    for item in items:
        if isinstance(item, Instr) and item.name in _FAST_STORES:
            names = _fast_names(item)
            assigned.update(names[:1] if item.name == "STORE_FAST_LOAD_FAST" else names)
    cells = set(base.co_cellvars) | set(base.co_freevars)
    for index, item in enumerate(items):
        if not isinstance(item, Instr):
            continue
        if isinstance(item.arg, (CellVar, FreeVar)):
            if item.arg.name not in cells:
                raise _Invalid(f"{_where(index, item)} uses the cell {item.arg.name!r}, "
                               "which the function does not have")
        elif item.name in _FAST_LOADS or item.name == "STORE_FAST_LOAD_FAST":
            for name in _fast_names(item)[1:] if item.name == "STORE_FAST_LOAD_FAST" else _fast_names(item):
                if name not in assigned:
                    raise _Invalid(f"{_where(index, item)} loads the local variable {name!r}, which nothing assigns")


def _check_flow(items: Sequence[Item], depths: Sequence[int | None], base: CodeType) -> None:
    """Returns leave nothing else on the stack, and no path runs off the end."""
    start = family.start_depth(base)  # (stack_depths counts from 0)
    labels = {id(item): index for index, item in enumerate(items) if isinstance(item, Label)}
    last = None
    for index, item in enumerate(items):
        if not isinstance(item, Instr):
            continue
        last = index
        depth = depths[index]
        if depth is None:
            continue
        expected = {"RETURN_VALUE": 1, "RETURN_CONST": 0}.get(item.name)
        if expected is not None and depth + start != expected:
            raise _Invalid(f"{_where(index, item)} returns with {depth + start} values on the stack, not {expected}")
        if item.name == "FOR_ITER" and family.for_iter_exit:
            after = _next_instr(items, labels.get(id(item.arg), len(items)))
            if family.for_iter_exit[:len(after)] != after:
                raise _Invalid(f"{_where(index, item)} exits the loop to {' '.join(after) or 'nothing'}, not to "
                               f"{' '.join(family.for_iter_exit)} (which CPython skips over when the iterator is done)")
    if last is None:
        raise _Invalid("it has no instructions")
    end = items[last]
    assert isinstance(end, Instr)
    if depths[last] is not None and not (end.is_final() or end.is_uncond_jump()):
        raise _Invalid(f"execution runs past its last instruction, {_where(last, end)}")


_ROTATIONS = {"ROT_TWO": 2, "ROT_THREE": 3, "ROT_FOUR": 4}
# Instructions that pop their operands (this many) and then add them to the container
# ``oparg`` deep, leaving what lies between as it was (a loop's iterator and, on 3.15, the
# ``NULL`` beside it): ``bytecode`` counts them as popping and pushing all of it.
_INTO_CONTAINER = {"LIST_APPEND": 1, "SET_ADD": 1, "MAP_ADD": 2, "LIST_EXTEND": 1, "SET_UPDATE": 1,
                   "DICT_UPDATE": 1, "DICT_MERGE": 1}


def _next_instr(items: Sequence[Item], index: int) -> tuple[str, ...]:
    """The names of the instructions from ``index`` on (as many as ``for_iter_exit`` has)."""
    names = tuple(item.name for item in items[index:] if isinstance(item, Instr))
    return names[:len(family.for_iter_exit)]


def _check_nulls(items: Sequence[Item], start: int) -> None:
    """No ``NULL`` reaches an instruction that would take it for an object.

    ``PUSH_NULL``, a flagged ``LOAD_GLOBAL`` or a method load leave a ``NULL`` (or may)
    beside a callee, for the call to consume; ``SWAP`` and the rotations move it and
    ``STORE_FAST`` may store it.  CPython trusts its compiler on this: a ``NULL`` popped,
    copied, returned or passed as an argument crashes the interpreter.  A forward walk
    carries, for each stack slot, whether it may hold a ``NULL``.
    """
    labels = {id(item): index for index, item in enumerate(items) if isinstance(item, Label)}
    states: list[tuple[bool, ...] | None] = [None] * len(items)
    pending: list[tuple[int, tuple[bool, ...]]] = [(0, (False,) * start)]
    while pending:
        index, state = pending.pop()
        while index < len(items):
            known = states[index]
            if known is not None:
                merged = tuple(a or b for a, b in zip(known, state))
                if merged == known:
                    break
                state = merged
            states[index] = state
            item = items[index]
            if isinstance(item, TryBegin):
                depth = int(item.stack_depth)
                pending.append((labels[id(item.target)], state[:depth] + (False,) * (1 + int(item.push_lasti))))
            if isinstance(item, Instr):
                if jumps(item):
                    pending.append((labels[id(item.arg)], _nulls_after(index, item, state, jump=True)))
                if item.is_uncond_jump() or item.is_final():
                    break
                state = _nulls_after(index, item, state, jump=False)
            index += 1


def _nulls_after(index: int, instr: Instr, state: tuple[bool, ...], *, jump: bool) -> tuple[bool, ...]:
    stack, name = list(state), instr.name

    def need(count: int) -> None:
        if count > len(stack):
            raise _Invalid(f"{_where(index, instr)} needs {count} values on the stack, which holds {len(stack)}")

    def taken(position: int) -> None:
        need(position)
        if stack[-position]:
            raise _Invalid(f"{_where(index, instr)} takes a NULL (left for a call) as an object: "
                           "the interpreter would crash")

    if name == "SWAP":
        n = int(instr.arg)  # type: ignore[arg-type]
        need(n)
        stack[-1], stack[-n] = stack[-n], stack[-1]
        return tuple(stack)
    if name in _ROTATIONS or name == "ROT_N":
        n = _ROTATIONS.get(name) or int(instr.arg)  # type: ignore[arg-type]
        need(n)
        stack[-n:] = [stack[-1], *stack[-n:-1]]
        return tuple(stack)
    if name in ("COPY", "DUP_TOP", "DUP_TOP_TWO"):
        copied = int(instr.arg) if name == "COPY" else 1  # type: ignore[arg-type]
        for position in ([copied] if name != "DUP_TOP_TWO" else [1, 2]):
            taken(position)
    if name == "RETURN_GENERATOR":  # the frame resumes with the sent value pushed (see _stack._effect)
        return (*state, False)
    if name in _INTO_CONTAINER:
        popped, deep = _INTO_CONTAINER[name], int(instr.arg)  # type: ignore[arg-type]
        for position in (*range(1, popped + 1), popped + deep):
            taken(position)
        return tuple(stack[:-popped])
    accepts, leaves = family.null_slots(instr)
    pre, post = instr.pre_and_post_stack_effect(jump=jump)
    consumed = -pre if pre < 0 else 0
    need(consumed)
    for position in range(1, consumed + 1):
        if position not in accepts:
            taken(position)
    stack = stack[:len(stack) - consumed] + [False] * (post + max(pre, 0))
    for position in leaves:
        stack[-position] = True
    return tuple(stack)


def _checked_loads(items: list[Item], body: Bytecode) -> list[Item]:
    """3.12+: ``LOAD_FAST`` trusts the compiler that the variable is bound (an unbound one
    crashes the interpreter), so a load the pass may have moved before the assignment
    becomes ``LOAD_FAST_CHECK``, which raises ``UnboundLocalError`` as Python does."""
    bound = _definitely_bound(items, frozenset(body.argnames))
    out: list[Item] = []
    for index, item in enumerate(items):
        state = bound[index]
        if not isinstance(item, Instr) or state is None or item.name not in ("LOAD_FAST", "LOAD_FAST_LOAD_FAST"):
            out.append(item)
            continue
        names = _fast_names(item)
        if not names or all(name in state for name in names):
            out.append(item)
        else:
            out += [Instr("LOAD_FAST_CHECK", name, location=item.location) for name in names]
    return out


def _definitely_bound(items: Sequence[Item], arguments: frozenset[str]) -> list[frozenset[str] | None]:
    """The local variables surely bound before each item (``None``: unreachable).

    A forward walk over the control flow, intersecting at joins; an exception handler
    gets what was bound where its try block began, less what anything deletes.
    """
    labels = {id(item): index for index, item in enumerate(items) if isinstance(item, Label)}
    deleted = {name for item in items if isinstance(item, Instr) and item.name in ("DELETE_FAST", "LOAD_FAST_AND_CLEAR")
               for name in _fast_names(item)}
    states: list[frozenset[str] | None] = [None] * len(items)
    pending: list[tuple[int, frozenset[str]]] = [(0, arguments)]
    while pending:
        index, state = pending.pop()
        while index < len(items):
            known = states[index]
            if known is not None:
                if known <= state:
                    break
                state = known & state
            states[index] = state
            item = items[index]
            if isinstance(item, TryBegin):
                pending.append((labels[id(item.target)], state - deleted))
            if isinstance(item, Instr):
                name = item.name
                if name in ("DELETE_FAST", "LOAD_FAST_AND_CLEAR"):
                    state = state - set(_fast_names(item))
                elif name in ("STORE_FAST", "STORE_FAST_STORE_FAST"):
                    state = state | set(_fast_names(item))
                elif name == "STORE_FAST_LOAD_FAST":
                    state = state | {_fast_names(item)[0]}
                if jumps(item):
                    pending.append((labels[id(item.arg)], state))
                if item.is_uncond_jump() or item.is_final():
                    break
            index += 1
    return states


# -- helpers for pass authors -----------------------------------------------------------

Statement = list[Item]


def replace_match(replace: Callable[[Any], Any], ismatch: Callable[[Any], bool], x: Any) -> Any:
    """Return ``x`` with every sub-element ``y`` for which ``ismatch(y)`` replaced by
    ``replace(y)`` (Cassette's ``replace_match!``).

    ``x`` is a list of ``bytecode`` items (a ``Bytecode`` is one), changed in place.  A
    sub-element that does not match is searched in turn if it is a list (changed in
    place), a tuple (rebuilt) or an instruction: an ``Instr`` is to a pass what an
    ``Expr`` is to Cassette, with its argument as its one sub-element (so
    ``replace_match(lambda y: "cos", lambda y: y == "sin", code)`` renames ``sin`` in
    ``LOAD_GLOBAL (True, 'sin')`` on 3.11+ as in ``LOAD_GLOBAL 'sin'`` on 3.10).  An
    instruction whose argument changed is a new ``Instr`` with the old one's location.
    """
    if isinstance(x, list):
        for index, y in enumerate(x):
            x[index] = replace(y) if ismatch(y) else replace_match(replace, ismatch, y)
        return x
    if isinstance(x, tuple):
        new = tuple(replace(y) if ismatch(y) else replace_match(replace, ismatch, y) for y in x)
        return x if all(a is b for a, b in zip(new, x)) else new
    if isinstance(x, Instr):
        arg = x.arg
        new_arg = replace(arg) if ismatch(arg) else replace_match(replace, ismatch, arg)
        return x if new_arg is arg else Instr(x.name, new_arg, location=x.location)
    return x


# Instructions that must stay right after the one before them: a statement never starts there.
_CONTINUATIONS = frozenset({"END_FOR", "RESUME"})
_PREFIX = frozenset({"MAKE_CELL", "COPY_FREE_VARS", "RETURN_GENERATOR", "GEN_START", "RESUME"})


def _statements(instrs: Sequence[Item]) -> Iterator[tuple[int, int]]:
    """The statements of ``instrs``, as ``(start, end)`` index ranges (see
    :func:`insert_statements`)."""
    start = _prefix_end(instrs)
    line: object = None
    begin: int | None = None
    previous = ""
    pending = start  # where the pseudo-items before the next instruction begin
    for index in range(start, len(instrs)):
        item = instrs[index]
        if not isinstance(item, Instr):
            continue
        glued = item.name in _CONTINUATIONS or previous == "END_FOR"  # 3.13: END_FOR, POP_TOP
        if item.lineno != line and isinstance(item.lineno, int) and not glued:
            if begin is not None:
                yield begin, pending
            begin, line = index, item.lineno
        pending, previous = index + 1, item.name
    if begin is not None:
        yield begin, pending


def _prefix_end(items: Sequence[Item]) -> int:
    """Items that set up the frame come before the first statement: cells, the generator,
    ``RESUME`` (and the 3.12+ generator's try block around the body)."""
    end = 0
    for index, item in enumerate(items):
        if isinstance(item, Instr):
            if item.name not in _PREFIX and not (item.name == "POP_TOP" and index > 0
                                                  and getattr(items[index - 1], "name", None) == "RETURN_GENERATOR"):
                return end
            end = index + 1
            if item.name == "RESUME":
                return end
    return end


def insert_statements(instrs: MutableSequence[Item], stmtcount: Callable[[Statement, int], int | None],
                      newstmts: Callable[[Statement, int], Sequence[Statement]]) -> MutableSequence[Item]:
    """For every statement ``stmt`` (the ``i``-th, from 0) of ``instrs`` for which
    ``stmtcount(stmt, i)`` returns an int, put the statements ``newstmts(stmt, i)`` in its
    place (Cassette's ``insert_statements!``); leave it alone where it returns ``None``.

    A *statement* is what Python's tracing calls a line: the instructions from one where
    the source line changes up to the next such one (the frame's set-up instructions
    before the first, and the labels and try markers in front of the next, are not part
    of it, so a jump to a statement runs what is put before it).  ``stmt`` is that list of
    items; each new statement is a list of items too, and must leave the value stack as it
    found it (the check of a pass's result catches one that does not).  Instructions
    without a location get the location of the statement's first instruction, as
    Cassette's new statements get its ``codeloc``.  ``len(newstmts(stmt, i))`` must equal
    ``stmtcount(stmt, i)``.  Changes ``instrs`` in place and returns it.
    """
    ranges = list(_statements(instrs))
    out: list[Item] = list(instrs[:ranges[0][0]]) if ranges else list(instrs)
    for i, (start, end) in enumerate(ranges):
        stmt = list(instrs[start:end])
        count = stmtcount(stmt, i)
        if count is None:
            out += stmt
        else:
            new = list(newstmts(stmt, i))
            if len(new) != count:
                raise ValueError(f"insert_statements: stmtcount said {count} statements for statement {i}, "
                                 f"newstmts gave {len(new)}")
            location = stmt[0].location if isinstance(stmt[0], Instr) else None
            for statement in new:
                out += [_located(item, location) for item in statement]
        nxt = ranges[i + 1][0] if i + 1 < len(ranges) else len(instrs)
        out += instrs[end:nxt]
    instrs[:] = out
    return instrs


def _located(item: Item, location: Any) -> Item:
    if isinstance(item, Instr) and item.location is None and location is not None:
        item = item.copy()
        item.location = location
    return item

