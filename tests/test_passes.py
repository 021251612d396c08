"""Passes (Cassette's contextual pass injection): ``ch.Pass``, ``pass_=``, the helpers
``replace_match`` and ``insert_statements``, the markers ``nooverdub`` and
``contextslot``, and the errors a broken pass gets."""

from __future__ import annotations

import contextlib
import copy
import io
import math
import os
import runpy
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from bytecode import Bytecode, FreeVar, Instr, Label

sys.path.insert(0, os.path.dirname(__file__))

import cassette_hook as ch
from cassette_hook.rewrite import _names, _stack
from test_differential import DOCUMENTED, Counting, Null, _cases, run_overdubbed, run_plain
import test_importhook
from test_importhook import write

ROOT = Path(__file__).resolve().parent.parent


class Plain(ch.Context):
    pass


class Seen(ch.Context):
    def prehook(self, f, *args, **kwargs):
        self.metadata.append(getattr(f, "__name__", repr(f)))


def identity(ctx_type, func, code):
    return code


def call_statement(f, *args):
    """The instructions of the statement ``f(*args)`` (constants), result dropped."""
    loads = [Instr("LOAD_CONST", arg) for arg in args]
    if sys.version_info < (3, 11):
        return [Instr("LOAD_CONST", f), *loads, Instr("CALL_FUNCTION", len(args)), Instr("POP_TOP")]
    callee = [Instr("LOAD_CONST", f), Instr("PUSH_NULL")]
    if sys.version_info < (3, 13):
        callee.reverse()
    precall = [Instr("PRECALL", len(args))] if sys.version_info < (3, 12) else []
    return [*callee, *loads, *precall, Instr("CALL", len(args)), Instr("POP_TOP")]


def before_each_statement(make):
    """A pass that puts the statement ``make(stmt, i)`` before every statement."""
    def transform(ctx_type, func, code):
        ch.insert_statements(code, lambda stmt, i: 2, lambda stmt, i: [make(stmt, i), stmt])
        return code

    return ch.Pass(transform)


def constant_pass(old, new):
    """A pass that loads the constant ``new`` where the code loads ``old``."""
    def transform(ctx_type, func, code):
        ch.replace_match(lambda y: Instr("LOAD_CONST", new, location=y.location),
                         lambda y: isinstance(y, Instr) and y.name == "LOAD_CONST" and y.arg == old, code)
        return code

    return ch.Pass(transform)


def instructions(code):
    return [(i.name, i.arg) for i in code if isinstance(i, Instr)]


def add_one(x):
    y = x + 1
    return y


def first(code, name):
    return next(index for index, item in enumerate(code) if isinstance(item, Instr) and item.name == name)


# -- Pass and pass_= -------------------------------------------------------------------

def test_pass_must_be_a_pass_or_none():
    with pytest.raises(TypeError, match=r"pass_ must be a cassette_hook.Pass .* ch.Pass\(transform\)"):
        Plain(pass_=identity)


def test_similarcontext_checks_the_pass_too():
    with pytest.raises(TypeError, match="pass_ must be a cassette_hook.Pass"):
        ch.similarcontext(Plain(), pass_="not a pass")


def test_pass_wraps_a_callable_only():
    with pytest.raises(TypeError, match="Pass\\(\\) takes a callable"):
        ch.Pass(42)


# What 3.14 compiles to that a pass is given as 3.13's forms (docs/passes.md).
AS_313 = {"LOAD_FAST_BORROW": "LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW": "LOAD_FAST_LOAD_FAST",
          "LOAD_SMALL_INT": "LOAD_CONST"}


@pytest.mark.skipif(sys.version_info < (3, 14), reason="template strings (PEP 750) are 3.14's")
def test_a_pass_is_given_a_template_strings_interpolations_with_their_compiled_arguments():
    """BUILD_INTERPOLATION's argument as CPython encodes it (docs/passes.md): the pass's
    body assembles back into the plain template."""
    namespace = {"abs": abs}
    exec("def g(x, w):\n    return t'{abs(x)!r:>{w}}{x}{x!a:3}'\n", namespace)  # (a SyntaxError before 3.14)
    g, got = namespace["g"], []

    def look(ctx_type, func, code):
        got.append([arg for name, arg in instructions(code) if name == "BUILD_INTERPOLATION"])
        return code

    ctx = Seen([], pass_=ch.Pass(look))
    template, plain = ch.overdub(ctx, g, -2, 4), g(-2, 4)
    assert got == [[11, 2, 15]]  # (2: no spec, no conversion; bit 0: a spec; conversion << 2)
    assert [(i.value, i.conversion, i.format_spec) for i in template.interpolations] == [
        (i.value, i.conversion, i.format_spec) for i in plain.interpolations]
    assert "abs" in ctx.metadata


def test_pass_sees_the_original_bytecode_of_the_function():
    got = []

    def look(ctx_type, func, code):
        got.append(code)
        return code

    assert ch.overdub(Seen([], pass_=ch.Pass(look)), add_one, 1) == 2
    assert isinstance(got[0], Bytecode)
    compiled = instructions(Bytecode.from_code(add_one.__code__))
    assert instructions(got[0]) == [(AS_313.get(name, name), arg) for name, arg in compiled]


def _all_positive(xs):
    return all(x > 0 for x in xs)


def test_pass_sees_all_of_a_generator_expression_as_a_call_on_every_version():
    """3.14 compiles ``all(genexp)`` as a loop behind a test that ``all`` is the builtin; a
    pass is given the call, which the loop stands for (docs/passes.md)."""
    got = []

    def look(ctx_type, func, code):
        got.append(code)
        return code

    assert ch.overdub(Seen([], pass_=ch.Pass(look)), _all_positive, [1, 2]) is True
    reachable = [item for item, depth in zip(got[0], _stack.stack_depths(list(got[0])))
                 if isinstance(item, Instr) and depth is not None]
    assert "FOR_ITER" not in {item.name for item in reachable}
    assert any(name == "LOAD_GLOBAL" and (arg[-1] if isinstance(arg, tuple) else arg) == "all"
               for name, arg in instructions(reachable))


def test_pass_gets_the_context_class_and_the_function():
    got = []

    def look(ctx_type, func, code):
        got.append((ctx_type, func))
        return code

    ch.overdub(Plain(pass_=ch.Pass(look)), add_one, 1)
    assert got == [(Plain, add_one)]


def test_pass_is_not_run_until_a_function_is_entered():
    ran = []
    ctx = Plain(pass_=ch.Pass(lambda c, f, code: ran.append(f) or code))
    assert ran == []
    ch.overdub(ctx, add_one, 1)
    assert ran == [add_one]


def caller(x):
    return add_one(x) * 2


def test_calls_a_pass_inserts_are_overdubbed():
    def noted(stmt, i):
        return call_statement(math.floor, 1.5)

    seen = Seen([], pass_=before_each_statement(noted))
    assert ch.overdub(seen, caller, 1) == 4
    assert seen.metadata == ["floor", "add_one", "floor", "add", "floor", "mul"]


def test_pass_runs_once_per_code_object():
    runs = []
    pass_ = ch.Pass(lambda c, f, code: runs.append(f.__code__) or code)

    def make(k):
        def inner(x):
            return x + k
        return inner

    one, two = make(1), make(2)  # two functions, one code object
    for ctx in (Plain(pass_=pass_), Seen([], pass_=pass_), Seen([], pass_=pass_)):
        assert ch.overdub(ctx, lambda: one(1) + two(1)) == 5
    assert runs.count(one.__code__) == 1


def test_threads_entering_one_function_run_the_pass_once():
    runs = []

    def slow(ctx_type, func, code):
        runs.append(func)
        time.sleep(0.05)  # both threads get here at once if nothing stops the second
        return code

    ctx = Plain(pass_=ch.Pass(slow))
    threads = [threading.Thread(target=ch.overdub, args=(ctx, add_one, 1)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert runs == [add_one]


def test_pass_applies_to_the_functions_it_calls():
    assert caller(1) == 4
    assert ch.overdub(Plain(pass_=constant_pass(1, 2)), caller, 1) == 6  # add_one adds 2: (1 + 2) * 2


def with_comprehension(xs):
    return [math.sin(x) for x in xs]


def test_pass_sees_comprehensions_as_part_of_the_body():
    def sin_to_cos(ctx_type, func, code):
        ch.replace_match(lambda y: "cos", lambda y: y == "sin", code)
        return code

    assert ch.overdub(Plain(pass_=ch.Pass(sin_to_cos)), with_comprehension, [0.0]) == [1.0]


def defines_and_calls(x):
    def inner(y):
        return math.sin(y)
    return inner(x)


def test_functions_defined_in_a_passed_body_get_the_pass_when_called():
    def sin_to_cos(ctx_type, func, code):
        ch.replace_match(lambda y: "cos", lambda y: y == "sin", code)
        return code

    assert ch.overdub(Plain(pass_=ch.Pass(sin_to_cos)), defines_and_calls, 0.0) == 1.0


def test_contexts_with_different_passes_do_not_share_twins():
    ten, hundred = constant_pass(1, 10), constant_pass(1, 100)
    assert ch.overdub(Plain(pass_=ten), add_one, 0) == 10
    assert ch.overdub(Plain(pass_=hundred), add_one, 0) == 100
    assert ch.overdub(Plain(), add_one, 0) == 1
    assert ch.overdub(Plain(pass_=ten), add_one, 0) == 10


def test_two_passes_around_one_transform_are_two_passes():
    runs = []
    transform = lambda c, f, code: runs.append(f) or code  # noqa: E731
    ch.overdub(Plain(pass_=ch.Pass(transform)), add_one, 1)
    ch.overdub(Plain(pass_=ch.Pass(transform)), add_one, 1)
    assert runs == [add_one, add_one]


def test_similarcontext_switches_the_pass():
    plain = Plain("metadata")
    passed = ch.similarcontext(plain, pass_=constant_pass(1, 10))
    assert passed.metadata == "metadata" and plain.pass_ is None
    assert ch.overdub(passed, add_one, 0) == 10
    assert ch.overdub(ch.similarcontext(passed, pass_=None), add_one, 0) == 1
    assert ch.similarcontext(passed, metadata=2).pass_ is passed.pass_


# -- the markers --------------------------------------------------------------------------

def helper(x):
    return abs(x)


def calls_helper(x):
    return helper(x) + 1


def plain_helper(ctx_type, func, code):
    """Load nooverdub(helper) where ``helper`` is loaded."""
    out = []
    for y in code:
        names = y.arg if isinstance(y, Instr) and isinstance(y.arg, tuple) else (getattr(y, "arg", None),)
        if isinstance(y, Instr) and y.name == "LOAD_GLOBAL" and "helper" in names:
            marker = Instr("LOAD_CONST", ch.nooverdub(helper), location=y.location)
            if sys.version_info < (3, 11) or not y.arg[0]:
                out.append(marker)
            else:
                null = Instr("PUSH_NULL", location=y.location)
                out += [marker, null] if sys.version_info >= (3, 13) else [null, marker]
        else:
            out.append(y)
    code[:] = out
    return code


def test_nooverdub_call_is_plain_hooks_see_neither_it_nor_what_it_calls():
    seen = Seen([])
    ch.overdub(seen, calls_helper, -2)
    assert seen.metadata == ["helper", "abs", "add"]
    seen = Seen([], pass_=ch.Pass(plain_helper))
    assert ch.overdub(seen, calls_helper, -2) == 3
    assert seen.metadata == ["add"]


def test_nooverdub_call_runs_the_original_function_not_its_twin():
    def sin_to_cos_and_plain_helper(ctx_type, func, code):
        ch.replace_match(lambda y: "cos", lambda y: y == "abs", code)  # helper would call cos
        return plain_helper(ctx_type, func, code)

    assert ch.overdub(Plain(pass_=ch.Pass(sin_to_cos_and_plain_helper)), calls_helper, -2) == 3


def returns_marker():
    value = "MARKER"
    return value


def test_nooverdub_loaded_as_a_value_is_the_callable_itself():
    def load_marker(ctx_type, func, code):
        ch.replace_match(lambda y: ch.nooverdub(helper), lambda y: y == "MARKER", code)
        return code

    assert ch.overdub(Plain(pass_=ch.Pass(load_marker)), returns_marker) is helper


def test_nooverdub_takes_a_callable():
    with pytest.raises(TypeError, match="nooverdub\\(\\) takes a callable"):
        ch.nooverdub(3)


def returns_slot():
    return "SLOT"


def test_contextslot_loads_the_running_context():
    def slot(ctx_type, func, code):  # a LOAD_CONST, or 3.12+'s RETURN_CONST
        ch.replace_match(lambda y: ch.contextslot, lambda y: y == "SLOT", code)
        return code

    for ctx in (Plain(pass_=ch.Pass(slot)), Seen([], pass_=ch.Pass(slot))):
        assert ch.overdub(ctx, returns_slot) is ctx
        assert ch.overdub(ctx, lambda: [returns_slot()])[0] is ctx


def test_contextslot_reads_metadata_of_the_context():
    def metadata(ctx_type, func, code):
        ch.replace_match(lambda y: ch.contextslot, lambda y: y == "SLOT", code)
        return code

    def reads():
        return "SLOT".metadata

    ctx = Plain({"count": 3}, pass_=ch.Pass(metadata))
    assert ch.overdub(ctx, reads) == {"count": 3}


# -- a broken pass ----------------------------------------------------------------------

def broken(transform):
    """What overdubbing add_one under ``transform`` raises."""
    with pytest.raises(ch.PassError) as info:
        ch.overdub(Plain(pass_=ch.Pass(transform)), add_one, 1)
    return str(info.value)


def insert(code, index, *new):
    code[index:index] = list(new)
    return code


def test_error_names_the_pass_and_the_function():
    def my_pass(ctx_type, func, code):
        return None

    message = broken(my_pass)
    assert "Pass(test_error_names_the_pass_and_the_function.<locals>.my_pass)" in message
    assert f"add_one ({__file__}:" in message


def test_pass_returning_something_else_than_bytecode():
    assert "returned list [" in broken(lambda c, f, code: list(code))
    assert "not a bytecode.Bytecode" in broken(lambda c, f, code: None)


def test_pass_that_raises():
    def fails(ctx_type, func, code):
        raise KeyError("nope")

    with pytest.raises(ch.PassError, match="raised KeyError: 'nope'") as info:
        ch.overdub(Plain(pass_=ch.Pass(fails)), add_one, 1)
    assert isinstance(info.value.__cause__, KeyError)


def test_pass_leaving_a_value_on_the_stack_at_return():
    message = broken(lambda c, f, code: insert(code, first(code, "STORE_FAST"), Instr("LOAD_CONST", 1)))
    assert "returns with 2 values on the stack, not 1" in message


def test_pass_taking_more_from_the_stack_than_it_holds():
    message = broken(lambda c, f, code: insert(code, first(code, "STORE_FAST"), Instr("POP_TOP"), Instr("POP_TOP")))
    assert "(POP_TOP) needs 1 values on the stack, which holds 0" in message


def test_pass_joining_two_paths_with_different_stack_depths():
    def uneven(ctx_type, func, code):
        join = Label()
        return insert(code, first(code, "STORE_FAST") + 1,
                      Instr("LOAD_FAST", "x"), Instr("POP_JUMP_IF_TRUE" if sys.version_info >= (3, 12) or
                                                     sys.version_info < (3, 11) else "POP_JUMP_FORWARD_IF_TRUE", join),
                      Instr("LOAD_CONST", 1), join, Instr("LOAD_CONST", 2), Instr("POP_TOP"))

    assert "its stack does not balance" in broken(uneven)


def test_pass_jumping_to_a_label_that_is_not_in_the_code():
    forward = "JUMP_FORWARD"
    message = broken(lambda c, f, code: insert(code, first(code, "STORE_FAST") + 1, Instr(forward, Label())))
    assert "jumps to a label that is not in the code" in message


def test_pass_loading_a_local_variable_nothing_assigns():
    message = broken(lambda c, f, code: insert(code, first(code, "STORE_FAST") + 1,
                                               Instr("LOAD_FAST", "nowhere"), Instr("POP_TOP")))
    assert "loads the local variable 'nowhere', which nothing assigns" in message


def test_pass_using_a_cell_the_function_does_not_have():
    message = broken(lambda c, f, code: insert(code, first(code, "STORE_FAST") + 1,
                                               Instr("LOAD_DEREF", FreeVar("k")), Instr("POP_TOP")))
    assert "uses the cell 'k', which the function does not have" in message


def test_pass_whose_code_runs_off_its_end():
    assert "execution runs past its last instruction" in broken(lambda c, f, code: Bytecode([Instr("LOAD_CONST", 1)]))


def null_then_pop():
    """Instructions that leave a NULL on the stack (or may), then take it as an object: a
    ``UNARY_INVERT`` of it (3.15's ``POP_TOP`` pops a ``NULL`` safely, as its compiler has
    a ``break`` pop a loop's index slot)."""
    if sys.version_info < (3, 11):  # 3.10: only a method load has one
        return [[Instr("LOAD_CONST", "a"), Instr("LOAD_METHOD", "upper"), Instr("POP_TOP"), Instr("POP_TOP")]]
    method = Instr("LOAD_METHOD", "upper") if sys.version_info < (3, 12) else Instr("LOAD_ATTR", (True, "upper"))
    # 3.13 has the NULL on top of the callee, 3.11 and 3.12 below it
    inverted = ([Instr("UNARY_INVERT"), Instr("POP_TOP"), Instr("POP_TOP")] if sys.version_info >= (3, 13)
                else [Instr("POP_TOP"), Instr("UNARY_INVERT"), Instr("POP_TOP")])
    return [[Instr("PUSH_NULL"), Instr("UNARY_INVERT"), Instr("POP_TOP")],
            [Instr("LOAD_CONST", "a"), method, *inverted],
            [Instr("LOAD_GLOBAL", (True, "len")), *inverted]]


@pytest.mark.parametrize("sequence", null_then_pop(),
                         ids=lambda seq: seq[1].name if seq[0].name == "LOAD_CONST" else seq[0].name)
def test_pass_popping_a_null_slot(sequence):
    message = broken(lambda c, f, code: insert(code, first(code, "STORE_FAST") + 1, *sequence))
    assert "takes a NULL (left for a call) as an object" in message


def sums(xs):
    t = 0
    for x in xs:
        t += x
    return t


def test_code_put_at_a_for_loops_exit_runs_or_is_refused_never_wrong():
    def at_exit(ctx_type, func, code):
        exit_label = next(i.arg for i in code if isinstance(i, Instr) and i.name == "FOR_ITER")
        index = code.index(exit_label) + 1
        return insert(code, index, Instr("LOAD_CONST", 1), Instr("POP_TOP"))

    ctx = Plain(pass_=ch.Pass(at_exit))
    if sys.version_info < (3, 12):
        assert ch.overdub(ctx, sums, [1, 2]) == 3
    else:  # an exhausted FOR_ITER skips the END_FOR it expects at its target
        with pytest.raises(ch.PassError, match="exits the loop to LOAD_CONST"):
            ch.overdub(ctx, sums, [1, 2])


def test_error_is_raised_each_time_the_function_is_entered_and_the_pass_runs_once():
    runs = []

    def bad(ctx_type, func, code):
        runs.append(func)
        return "nonsense"

    ctx = Plain(pass_=ch.Pass(bad))
    for _ in range(2):
        with pytest.raises(ch.PassError):
            ch.overdub(ctx, caller, 1)
    assert runs == [caller]


def test_inner_function_with_a_broken_pass_raises_at_its_call_site():
    def breaks_add_one(ctx_type, func, code):
        return None if func is add_one else code

    with pytest.raises(ch.PassError, match="add_one") as info:
        ch.overdub(Seen([], pass_=ch.Pass(breaks_add_one)), caller, 1)
    assert any(frame.name == "caller" for frame in traceback.extract_tb(info.value.__traceback__))


def test_load_moved_before_its_assignment_raises_unbound_local_error():
    def early(ctx_type, func, code):
        return insert(code, first(code, "STORE_FAST"), Instr("LOAD_FAST", "y"), Instr("POP_TOP"))

    with pytest.raises(UnboundLocalError):
        ch.overdub(Plain(pass_=ch.Pass(early)), add_one, 1)


# -- replace_match ------------------------------------------------------------------------

def test_replace_match_replaces_matching_elements_in_place_and_returns_the_list():
    items = [1, 2, [3, 2], (2, 4)]
    out = ch.replace_match(lambda y: y * 10, lambda y: y == 2, items)
    assert out is items
    assert items == [1, 20, [3, 20], (20, 4)]


def test_replace_match_does_not_search_inside_a_replacement():
    items = [[1]]
    ch.replace_match(lambda y: [y], lambda y: isinstance(y, list), items)
    assert items == [[[1]]]


def test_replace_match_searches_an_instructions_argument():
    instr = Instr("LOAD_ATTR", "sin") if sys.version_info < (3, 12) else Instr("LOAD_ATTR", (False, "sin"))
    [new] = ch.replace_match(lambda y: "cos", lambda y: y == "sin", [instr])
    assert new is not instr and new.location == instr.location
    assert new.arg == ("cos" if sys.version_info < (3, 12) else (False, "cos"))


def test_replace_match_keeps_unchanged_instructions():
    instr = Instr("LOAD_CONST", (1, 2))
    assert ch.replace_match(lambda y: 0, lambda y: y == 3, [instr])[0] is instr


# -- insert_statements --------------------------------------------------------------------

def branches(n):
    total = 0
    for i in range(n):
        if i % 2:
            total += i
        else:
            total -= 1
    return total


def test_insert_statements_calls_back_once_per_statement_with_its_index():
    got = []

    def note(ctx_type, func, code):
        ch.insert_statements(code, lambda stmt, i: got.append((i, stmt[0].lineno)), lambda stmt, i: [])
        return code

    ch.overdub(Plain(pass_=ch.Pass(note)), branches, 3)
    first_line = branches.__code__.co_firstlineno
    assert [i for i, _ in got] == list(range(len(got)))
    assert {line - first_line for _, line in got} == {1, 2, 3, 4, 6, 7}


def test_insert_statements_keeps_jumps_and_results():
    hits = []
    pass_ = before_each_statement(lambda stmt, i: call_statement(ch.nooverdub(hits.append), stmt[0].lineno))
    assert ch.overdub(Plain(pass_=pass_), branches, 5) == branches(5)
    first_line = branches.__code__.co_firstlineno
    counts = {line - first_line: hits.count(line) for line in set(hits)}
    # the for line: the loop's start (and, on 3.12+, nothing at its END_FOR exit)
    assert counts[1] == 1 and counts[3] == 5 and counts[4] == 2 and counts[6] == 3 and counts[7] == 1


def test_insert_statements_count_must_match_the_new_statements():
    def wrong(ctx_type, func, code):
        ch.insert_statements(code, lambda stmt, i: 3, lambda stmt, i: [stmt])
        return code

    with pytest.raises(ch.PassError, match="stmtcount said 3 statements for statement 0, newstmts gave 1"):
        ch.overdub(Plain(pass_=ch.Pass(wrong)), add_one, 1)


def test_insert_statements_gives_new_instructions_the_statements_location():
    where = {}

    def located(ctx_type, func, code):
        def make(stmt, i):
            where[i] = stmt[0].location
            return [[Instr("LOAD_CONST", ("new", i)), Instr("POP_TOP")], stmt]

        ch.insert_statements(code, lambda stmt, i: 2, make)
        got = {item.arg[1]: item.location for item in code
               if isinstance(item, Instr) and isinstance(item.arg, tuple) and item.arg[0] == "new"}
        assert got == where and len(where) == 2
        return code

    assert ch.overdub(Plain(pass_=ch.Pass(located)), add_one, 1) == 2


def raises_in_try(x):
    try:
        y = 1 / x
    except ZeroDivisionError:
        y = -1
    finally:
        x = 0
    return y + x


def test_insert_statements_keeps_exception_handlers():
    pass_ = before_each_statement(lambda stmt, i: call_statement(ch.nooverdub(len), ()))
    assert [ch.overdub(Seen([], pass_=pass_), raises_in_try, x) for x in (0, 2)] == [-1, 0.5]


def fails_on_line_three(x):
    y = x * 2
    return {}[y]


def test_insert_statements_keeps_line_numbers_in_tracebacks():
    pass_ = before_each_statement(lambda stmt, i: call_statement(ch.nooverdub(len), ()))
    with pytest.raises(KeyError) as info:
        ch.overdub(Plain(pass_=pass_), fails_on_line_three, 1)
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (frame.name, frame.lineno) == ("fails_on_line_three", fails_on_line_three.__code__.co_firstlineno + 2)


# -- the corpus, under passes that change nothing it can observe ---------------------------

PASSES = {
    "identity": ch.Pass(identity),
    # a plain call before every statement: every shape of the corpus gets statements inserted
    "statements": before_each_statement(lambda stmt, i: call_statement(ch.nooverdub(len), ())),
}


def same_as_plain(case, args, ctx):
    plain = run_plain(case, copy.deepcopy(args))
    overdubbed = run_overdubbed(case, copy.deepcopy(args), ctx)
    applies, instead = DOCUMENTED.get(case.name, (lambda ctx: False, None))
    if applies(ctx):
        assert instead(plain, overdubbed)
    else:
        assert overdubbed == plain


@pytest.mark.parametrize("ctx_type", [Null, Counting], ids=["Null", "Counting"])
@pytest.mark.parametrize("pass_name", sorted(PASSES))
@pytest.mark.parametrize("case", _cases())
def test_corpus_runs_the_same_under_a_pass_that_changes_nothing(case, pass_name, ctx_type):
    ctx = ctx_type([0], pass_=PASSES[pass_name])
    if case.given is None:
        same_as_plain(case, case.args, ctx)
        return

    @settings(max_examples=3, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
              suppress_health_check=list(HealthCheck))
    @given(case.given)
    def run(args):
        same_as_plain(case, args, ctx)

    run()


# -- code loaded by the import hook -----------------------------------------------------------

HOOKED = """
import math

def wave(x):
    return math.sin(x) + helper(x)

def helper(x):
    return math.sin(x)
"""


def sin_to_cos(ctx_type, func, code):
    ch.replace_match(lambda y: "cos", lambda y: y == "sin", code)
    return code


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """test_importhook's: a directory on sys.path, the hook and its modules removed afterwards."""
    yield from test_importhook.tree.__wrapped__(tmp_path, monkeypatch)


def test_import_hook_code_runs_the_pass_over_its_plain_body(tree):
    write(tree, "passes_hooked_a.py", HOOKED)
    ch.install(include=["passes_hooked_a"], lazy=False)
    import passes_hooked_a as mod

    assert _names.is_switched(mod.wave.__code__)
    seen_code = []

    def look(ctx_type, func, code):
        seen_code.append(instructions(code))
        return sin_to_cos(ctx_type, func, code)

    assert ch.overdub(Seen([], pass_=ch.Pass(look)), mod.wave, 0.0) == 2.0
    names = {str(arg) for instrs in seen_code for _, arg in instrs}
    assert not any("__cassette_hook" in name for name in names)  # the plain body: no switch, no hooks


def test_import_hook_code_and_a_pass_context_do_not_share_code(tree):
    write(tree, "passes_hooked_b.py", HOOKED)
    ch.install(include=["passes_hooked_b"], lazy=False)
    import passes_hooked_b as mod

    seen = Seen([])
    assert ch.overdub(seen, mod.wave, 0.0) == 0.0
    assert ch.overdub(Seen([], pass_=ch.Pass(sin_to_cos)), mod.wave, 0.0) == 2.0
    assert ch.overdub(seen, mod.wave, 0.0) == 0.0 and mod.wave(0.0) == 0.0


def test_import_hook_code_called_plainly_under_a_pass_context_runs_plain(tree):
    write(tree, "passes_hooked_c.py", HOOKED)
    ch.install(include=["passes_hooked_c"], lazy=False)
    import passes_hooked_c as mod

    seen = Seen([], pass_=ch.Pass(sin_to_cos))
    with seen:
        assert mod.wave(0.0) == 0.0  # not a call site: as for any other code, the pass needs overdub
    assert seen.metadata == []


# -- the examples ----------------------------------------------------------------------------

EXAMPLES = ["sin_to_cos.py", "statement_coverage.py", "plain_print.py"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_and_the_docs_show_it_with_its_output(name):
    path = ROOT / "examples" / name
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(path), run_name="__main__")
    page = (ROOT / "docs" / "passes.md").read_text()
    assert f"```python\n{path.read_text()}```\n\n```text\n{out.getvalue()}```" in page


def test_examples_print_what_they_promise():
    outputs = {}
    for name in EXAMPLES:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(ROOT / "examples" / name), run_name="__main__")
        outputs[name] = out.getvalue().splitlines()
    assert outputs["sin_to_cos.py"] == ["0.0 3.0", "True"]
    assert outputs["statement_coverage.py"][0] == "2 small, 1 big" and "line 8: 0" in outputs["statement_coverage.py"]
    assert outputs["plain_print.py"][1].endswith("['print', 'str', 'zfill']")
    assert outputs["plain_print.py"][3].endswith("['str', 'zfill']")


def test_pass_objects_are_public_names():
    for name in ("Pass", "PassError", "replace_match", "insert_statements", "nooverdub", "contextslot"):
        assert name in ch.__all__


@pytest.mark.parametrize("func", [add_one, branches, raises_in_try, sums, with_comprehension, calls_helper])
def test_twin_of_a_pass_that_changes_nothing_is_the_twin_without_a_pass(func):
    from cassette_hook import passes, rewrite
    from cassette_hook.runtime.callsites import HOOKS

    passed = passes.rewrite_with_pass(ch.Pass(identity), Plain, func, func.__code__, HOOKS, operators=True)
    # (but for 3.14's borrowed loads, which a twin without a pass keeps, and one made with a
    # pass reads plain: docs/internals.md, "CPython 3.14")
    assert _as_plain_loads(passed) == _as_plain_loads(rewrite.rewrite_code(func.__code__, HOOKS, operators=True))


def _as_plain_loads(code):
    import dis

    borrowed = {"LOAD_FAST_BORROW": "LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW": "LOAD_FAST_LOAD_FAST"}
    return [(borrowed.get(i.opname, i.opname), i.arg) for i in dis.get_instructions(code)]
