"""An interrupt anywhere in cassette_hook's own code reaches the program unchanged and
leaves no state behind (docs/internals.md, "Interrupts").

Tested the way it broke: a trace function raises ``KeyboardInterrupt`` at the N-th
``call`` or ``line`` event of the package's own code (the events at which CPython checks
for signals, or close to them), and a profile function at the N-th return of a C function
that code calls (``c_return``: where CPython checks for signals after a call to C, and
where, from 3.14 on, a ``with`` statement checks after a C ``__enter__``, outside its
block) -- and, since on the C path an interrupt inside C can only come from Python code
that C calls, at the N-th event of the hooks and overloads the workload gives the
runtime -- for N = 1, 2, 3 ... until a run completes uninterrupted, each run after an
uninterrupted one, so that N counts along the same run every time.
After each interrupted run the interrupt must have arrived (not a ``RuntimeError``, not
swallowed), and the stack, the recursion limit and the import hook's switch must be as
they were: a fresh ``with Count():`` over import-hooked code counts what it counted
before.  Runs on whichever hot path the suite runs on (tox: ``py3XX`` and ``py3XX-pure``).
"""

from __future__ import annotations

import builtins
import contextlib
import dis
import gc
import inspect
import os
import signal
import sys
from types import CodeType, FrameType
from typing import Any

import pytest
from _thread import RLock as CRLock

import cassette_hook as ch
from cassette_hook import _native
from cassette_hook.importhook import lazy_mode, switch
from cassette_hook.rewrite import _names
from test_importhook import tree, write  # noqa: F401  # (the fixture)

PACKAGE = os.path.dirname(ch.__file__) + os.sep

MODULE = """
def leaf(x):
    return x + 1

def g(x):
    return leaf(x) * 2
"""


class Count(ch.Context):
    """Counts the calls it sees (a prehook)."""

    operators = False

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.metadata[0] += 1


class Inner(ch.Context):
    """Nested inside ``Count``: its own prehook."""

    operators = False

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.metadata.append(getattr(f, "__name__", None))


class Over(ch.Context):
    """An ``overdub`` overload that calls ``recurse``."""

    operators = False


def square(x: int) -> int:
    return x * x


def twice_square(x: int) -> int:
    return square(x) + square(x + 1)


@ch.overdub.register
def _over(ctx: Over, f: ch.Is[square], x: int) -> int:
    return ch.recurse(ctx, f, x) + 0


HOOKS = {Count.prehook.__code__, Inner.prehook.__code__, _over.__code__}


def workload(module: Any) -> int:
    """A context with a prehook over nested contexts, an overload calling ``recurse``,
    and ``with`` blocks over import-hooked code."""
    with Count([0]) as count:
        with Inner([]):
            module.g(1)
        total = ch.overdub(Over(), twice_square, 3)
        with Over():
            total += module.g(2)
        total += ch.overdub(ch.NullContext(), module.g, 3)
    return total + count.metadata[0]


BOUND = 60.0
"""Seconds a run and the checks after it may take before the test fails (they take
milliseconds): a lock an interrupt left held would have the next ``with`` over it wait
for ever (a plain ``threading.Lock`` in this very thread), and the test must fail, naming
the event, rather than hang."""


class Hung(Exception):
    """What the watchdog raises in a run, or in the checks after it, that has not ended."""


class Interrupted:
    """Where the interrupt was raised, and how many events of ours the run had."""

    def __init__(self) -> None:
        self.seen, self.where = 0, ""


def leaving_with(frame: FrameType) -> bool:
    """Is this line event the one CPython's tracing gives a ``with`` statement's line as its
    block ends, before ``__exit__`` is called?  It comes outside the block's protection,
    where no signal is checked (CPython checks after the call of ``__exit__``): an
    exception raised there would leave a lock of ours held, which no interrupt can do.
    (A ``with`` statement starts at ``SETUP_WITH`` on 3.10, ``BEFORE_WITH`` on 3.11-3.13,
    and from 3.14 on at its ``LOAD_SPECIAL`` of ``__enter__``, which a ``CALL`` follows.)"""
    withs = _with_lines.get(frame.f_code)
    if withs is None:
        withs = _with_lines[frame.f_code] = {}
        line = None
        for instruction in dis.get_instructions(frame.f_code):
            if sys.version_info >= (3, 11):
                line = instruction.positions.lineno  # type: ignore[union-attr]  # (3.11+)
            elif instruction.starts_line is not None:  # (3.10: on a line's first instruction only)
                line = instruction.starts_line
            if line is not None and (instruction.opname in ("SETUP_WITH", "BEFORE_WITH")
                                     or instruction.opname == "LOAD_SPECIAL" and instruction.argrepr == "__enter__"):
                withs[line] = instruction.offset
    start = withs.get(frame.f_lineno)
    return start is not None and frame.f_lasti > start


_with_lines: dict[Any, dict[int, int]] = {}


def resumed(frame: FrameType) -> bool:
    """Is this call event a generator's resumption rather than its start?  Resumed by a
    throw (``close()``, as a generator expression of ours is collected unfinished), the
    frame gets a call event where CPython checks no signal (3.13 gives none), and what is
    raised there CPython swallows ("Exception ignored while closing generator"), which no
    interrupt can make it do.  (Resumed by ``next()``, CPython checks at the ``RESUME``,
    as it does after any return: the trace cannot tell the two apart, so neither is
    interrupted; the resumed frame's lines are.)"""
    code = frame.f_code
    if not code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return False
    start = _starts.get(code)
    if start is None:  # (where a fresh frame's call event is: 3.10 before the first instruction)
        start = _starts[code] = -1 if sys.version_info < (3, 11) else next(
            instruction.offset for instruction in dis.get_instructions(code) if instruction.opname == "RESUME")
    return frame.f_lasti > start


_starts: dict[Any, int] = {}


def interrupter(at: int, record: Interrupted) -> tuple[Any, Any]:
    """A trace function and a profile function that raise KeyboardInterrupt at the
    ``at``-th event of the package's code or of the workload's hooks and overloads: a
    call or line event (the trace), or the return of a C function called from there (the
    profile: the signal check after a call to C).  (Functions: a class's ``__call__``
    would be made a stand-in once a context reached this module, see ``standins``, and
    the tracer would trace itself.)"""

    def ours(frame: FrameType) -> bool:
        code = frame.f_code
        return code.co_filename.startswith(PACKAGE) or code in HOOKS

    def interrupt(frame: FrameType, event: str) -> None:
        record.seen += 1
        if record.seen == at:
            code = frame.f_code
            record.where = f"{os.path.basename(code.co_filename)}:{frame.f_lineno} {code.co_name} ({event})"
            raise KeyboardInterrupt(f"event {at}", record.where)

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if not ours(frame):
            return None
        if event == "call" and not resumed(frame) or event == "line" and not leaving_with(frame):
            interrupt(frame, event)
        return trace

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_return" and ours(frame):
            interrupt(frame, event)

    return trace, profile


def counted(module: Any) -> int:
    """What a fresh context sees of import-hooked code."""
    with Count([0]) as count:
        module.g(5)
    return count.metadata[0]


def reentrant_locks() -> list[Any]:
    """Every reentrant lock of the process: the package's (its modules', each generic
    function's; ``_locks.rlock``'s and the recursion budget's C lock) and others', none of
    which the test's own thread holds between two runs."""
    return [obj for obj in gc.get_objects() if isinstance(obj, CRLock)]


def state(locks: list[Any]) -> tuple[Any, ...]:
    return (ch.current_context(), sys.getrecursionlimit(), switch.active(),
            getattr(builtins, _names.ACTIVE), getattr(builtins, _names.OPERATORS_ON),
            [repr(lock) for lock in locks if lock._is_owned()])


def settled(module: Any, locks: list[Any]) -> tuple[Any, ...]:
    """The state once the flags no live entry needs are off: at once on the C path, at the
    next call of import-hooked code (or change of the stack) on the pure-Python one
    (docs/importhook.md)."""
    if _native.runtime.name == "Python":
        module.leaf(0)
    return state(locks)


def run_interrupted(module: Any, at: int, workload: Any = workload) -> tuple[type[BaseException] | None, str, int, str]:
    """The workload, interrupted at the ``at``-th event: what it raised, and how many
    events it ran.  (Only the exception's type and text are kept: its traceback would
    keep the interrupted frames, and the entries they hold, alive.)  No collection starts
    during the run: the collector's callbacks (``dispatch._forget_before_full_collections``)
    run wherever it starts, which differs from run to run, and CPython swallows what they
    raise (docs/internals.md, Known limitations)."""
    record = Interrupted()
    trace, profile = interrupter(at, record)
    gc.disable()  # (no collection starts in the run: see the docstring)
    sys.setprofile(profile)
    sys.settrace(trace)
    try:
        workload(module)
    except BaseException as exc:  # noqa: BLE001  # (KeyboardInterrupt, or what it became)
        sys.settrace(None)
        sys.setprofile(None)
        gc.enable()
        return type(exc), str(exc), record.seen, record.where
    sys.settrace(None)
    sys.setprofile(None)
    gc.enable()
    return None, "", record.seen, record.where  # (where: an interrupt swallowed)


def damage_of_interrupts_everywhere(tree: Any, monkeypatch: Any, workload: Any) -> tuple[int, list[Any]]:  # noqa: F811
    """Run ``workload`` interrupted at each event in turn (see the module's docstring):
    how many events it was interrupted at, and the damage each interrupt did."""
    # Idle spells do not give the import hook's functions their light code back here: the
    # pass that switches them again visits every object of the heap, tens of thousands of
    # line events per run.  (An interrupt in it leaves them to the next activation's pass.)
    monkeypatch.setattr(lazy_mode, "RESTORE_AFTER", None)
    write(tree, "interrupted_module.py", MODULE)
    ch.install(include=["interrupted_module"])
    import interrupted_module as module

    workload(module)  # (warm: the interrupts fall where a running program's would)
    sees = counted(module)
    assert sees == 1
    locks = reentrant_locks()
    gc.collect()  # (entries that earlier tests left in cycles)
    before = settled(module, locks)
    assert before[0] is None and not any(before[2:])
    damaged = []
    at = 0
    checking = [""]

    def hung(signum: int, frame: Any) -> None:
        raise Hung(f"{checking[0]} did not end in {BOUND} s: a lock of ours left held?")

    previous = signal.signal(signal.SIGALRM, hung)
    try:
        while True:
            at += 1
            checking[0] = f"the run interrupted at event {at}"
            signal.setitimer(signal.ITIMER_REAL, BOUND)
            workload(module)  # (warm: so that the run interrupted at event N is the same run for every N)
            raised, message, seen, where = run_interrupted(module, at, workload)
            if raised is Hung:
                pytest.fail(message)
            if raised is None and seen < at:
                break  # the run ended before the at-th event: every event has been interrupted
            checking[0] = f"the checks after the run interrupted at event {at} ({where})"
            after = settled(module, locks)
            if after != before:  # (entries the interrupted run left in cycles go at a collection)
                gc.collect()
                after = settled(module, locks)
            arrived = raised is KeyboardInterrupt and message.startswith(f"('event {at}'")
            damage = [] if arrived else [f"raised {raised}: {message}"]
            if after != before:
                damage.append(f"state {after} (was {before})")
            if counted(module) != sees:
                damage.append("a fresh context no longer sees the import-hooked calls")
            if damage:
                damaged.append((at, where, damage))
                while ch.current_context() is not None:  # (repaired, to see the next event's own damage)
                    ch.current_context().__exit__(None, None, None)
                for lock in locks:  # (so that what one event left held fails this test, not a later one)
                    while lock._is_owned():
                        lock.release()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return at, damaged


def test_an_interrupt_anywhere_in_the_runtime_reaches_the_program_and_leaves_no_state_behind(tree, monkeypatch):  # noqa: F811
    at, damaged = damage_of_interrupts_everywhere(tree, monkeypatch, workload)
    assert at > 50  # (the workload runs that many events of ours)
    assert damaged == [], "\n".join(map(str, damaged))


TAGS: list[Any] = []
"""The tags of the tagging contexts :func:`tagging_workload` made: each extent ended."""


def tagging_workload(module: Any) -> int:
    """A ``with`` block of a tagging context (``enabletagging``), whose exit also ends the
    tag's extent (docs/internals.md, "Interrupts")."""
    ctx = ch.enabletagging(Count([0]), module.g)
    TAGS.append(ctx.tag)
    with ctx:
        module.g(1)
    return ctx.metadata[0]


def test_an_interrupt_anywhere_in_a_tagging_contexts_with_block_reaches_the_program_and_leaves_no_state_behind(
        tree, monkeypatch):  # noqa: F811
    at, damaged = damage_of_interrupts_everywhere(tree, monkeypatch, tagging_workload)
    assert at > 20  # (the workload runs that many events of ours)
    assert damaged == [], "\n".join(map(str, damaged))
    assert [tag for tag in TAGS if tag.depth] == []  # (no extent left open)


# -- a with block's exit: on the pure-Python path, bound as the block is entered and
# resumed from C as it ends (docs/internals.md, "Interrupts"); its other uses, on both paths

def test_a_with_blocks_exit_read_and_never_called_leaves_the_context_active():
    with Count([0]) as ctx:
        unused = ctx.__exit__
        del unused
        gc.collect()
        assert ch.current_context() is ctx
    assert ch.current_context() is None


def test_a_with_blocks_exit_read_off_the_class_pops_as_exit_stack_calls_it():
    ctx = Count([0])
    with contextlib.ExitStack() as stack:
        stack.enter_context(ctx)
        assert ch.current_context() is ctx
    assert ch.current_context() is None


def test_a_with_blocks_exit_returns_false_so_that_the_exception_goes_on():
    ctx = Count([0])
    ctx.__enter__()
    assert not ctx.__exit__(ValueError, ValueError("raised in the block"), None)
    assert ch.current_context() is None


def protections(code: CodeType, offset: int) -> set[int]:
    """The handlers that an exception raised at ``offset`` runs on its way out of the
    frame: the one covering it, the one covering that handler, and so on."""
    entries = dis.Bytecode(code).exception_entries  # type: ignore[attr-defined]  # (3.11+)
    found: set[int] = set()
    covering = next((e.target for e in entries if e.start <= offset < e.end), None)
    while covering is not None and covering not in found:
        found.add(covering)
        covering = next((e.target for e in entries if e.start <= covering < e.end), None)
    return found


def unprotected_back_edges(code: CodeType) -> list[int]:
    """The lines of ``code``'s loops whose back edge (``JUMP_BACKWARD``, where CPython
    checks for signals) runs fewer of the handlers around the loop than the loop's head
    does: more than one fewer, as an inlined comprehension's own handler (which only puts
    its variable back) may be left out without harm.  A generator's outermost handler
    (StopIteration to RuntimeError) does not count."""
    instructions = list(dis.get_instructions(code))
    entries = dis.Bytecode(code).exception_entries  # type: ignore[attr-defined]  # (3.11+)
    generator = code.co_flags & inspect.CO_GENERATOR and entries
    outermost = max(entries, key=lambda e: e.end - e.start).target if generator else None
    lines = []
    for instruction in instructions:
        if instruction.opname.startswith("JUMP_BACKWARD"):
            missing = protections(code, instruction.argval) - protections(code, instruction.offset) - {outermost}
            if len(missing) >= 2:
                lines.append(instruction.positions.lineno)  # type: ignore[union-attr]  # (3.11+)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            lines.extend(unprotected_back_edges(const))
    return lines


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 has no exception table: its blocks are pushed at run time")
def test_no_loop_of_the_package_leaves_the_protection_of_the_with_or_try_around_it():
    # CPython 3.13 and 3.14 leave some back edges out of the exception table: a loop body
    # ending in an ``if`` (a filtered comprehension, ``any(genexp)`` on 3.14, a loop
    # whose last statement is ``if ...: return``) jumps back from an instruction no entry
    # covers, and checks for signals there.  Inside ``with lock:`` or ``try/finally``, an
    # interrupt at that check leaves without ``__exit__`` or the ``finally``: measured, a
    # SIGALRM handler raising into ``with lock: [x for x in xs if x < 0]`` left the lock
    # held 19 or 20 times of 20 on 3.13 and 3.14, never on 3.12 (which checks after jumping) or
    # 3.15.  So a loop under protection lives in a function of its own (docs/internals.md,
    # "Loops under a with block on 3.13 and 3.14"); checked here on every Python.
    modules = [os.path.join(directory, name) for directory, _, files in os.walk(PACKAGE)
               for name in files if name.endswith(".py")]
    assert len(modules) > 50  # (the installed package's, found)
    found = []
    for path in modules:
        with open(path, encoding="utf-8") as source:
            code = compile(source.read(), path, "exec")
        found.extend(f"{os.path.relpath(path, PACKAGE)}:{line}" for line in unprotected_back_edges(code))
    assert found == []
