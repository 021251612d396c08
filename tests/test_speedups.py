"""The C hot path (``cassette_hook/_speedups/``) and its pure-Python reference.

The whole suite runs on both (tox's ``py3XX`` and ``py3XX-pure`` environments); these
tests pin what only one of them, or the choice between them, can show.
"""

from __future__ import annotations

import array
import builtins
import contextlib
import contextvars
import dis
import functools
import gc
import itertools
import operator
import os
import re
import subprocess
import sys
import textwrap
import traceback
import types
import typing
import warnings
import weakref

import pytest

import cassette_hook as ch
from cassette_hook import _native, context_stack, rewrite
from cassette_hook.runtime import callees, callsites, operators, primitives
from cassette_hook.runtime import plan as _plan

C_PATH = _native.runtime.name == "C"
needs_c = pytest.mark.skipif(not C_PATH, reason="the C hot path is not in use in this run (the -pure environment)")


class Null(ch.Context):
    pass


class Counting(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        self.metadata[0] += 1


class Recording(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        self.metadata.append(f.__name__)


def test_the_c_path_is_in_use_where_the_run_requires_it():
    if os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS"):
        assert C_PATH, "cassette_hook._speedups was not built or not imported"


def test_a_directory_of_sources_named_like_an_extension_is_not_taken_for_it(tmp_path, monkeypatch):
    # A source checkout where _speedups is not built has cassette_hook/_speedups/ (its C
    # sources), which imports as a namespace package: the pure-Python path must run.
    (tmp_path / "ch_unbuilt_speedups").mkdir()
    (tmp_path / "ch_unbuilt_speedups" / "module.c").write_text("/* a source, not an extension */\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_native, "PURE_PYTHON", False)
    assert _native.optional("ch_unbuilt_speedups") is None


def test_the_runtime_is_not_chosen_from_a_directory_of_sources(monkeypatch):
    # (the same, for the chooser: such a namespace has no __file__ and none of the functions)
    import importlib
    import types

    real = importlib.import_module
    monkeypatch.setattr(_native, "PURE_PYTHON", False)
    monkeypatch.setattr(importlib, "import_module", lambda name, package=None: types.ModuleType(
        "cassette_hook._speedups") if name == "._speedups" else real(name, package))
    assert _native.choose().name == "Python"


@needs_c
def test_a_second_instance_of_the_accelerator_is_refused_with_import_error(tmp_path):
    # Its state is read through one static pointer (docs/internals.md, "The C hot path"):
    # a second exec of the module (here: imported again after its removal from
    # sys.modules) raises ImportError, which the package takes as "no accelerator".
    code = textwrap.dedent("""
        import importlib, sys
        import cassette_hook._speedups
        del sys.modules["cassette_hook._speedups"]
        try:
            importlib.import_module("cassette_hook._speedups")
        except ImportError as error:
            print("ImportError", "loaded once per process" in str(error))
    """)
    # (run elsewhere than the checkout, whose cassette_hook/_speedups/ holds only sources)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.split() == ["ImportError", "True"]


def test_the_pure_python_variable_keeps_the_python_path():
    code = ("from cassette_hook.runtime import callsites; "
            "from cassette_hook import _native; print(_native.runtime.name, callsites.resolve.__module__)")
    env = {**os.environ, "CASSETTE_HOOK_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["Python", "cassette_hook.runtime.callsites"]


@needs_c
def test_resolve_and_call_are_the_c_functions():
    assert type(callsites.resolve).__name__ == "builtin_function_or_method"
    assert callsites.HOOKS.resolve is _native.runtime.module.resolve
    assert callsites.HOOKS.call is _native.runtime.module.call


def test_resolve_with_no_context_is_the_callee():
    assert callsites.resolve(len) is len
    assert callsites.resolve(test_resolve_with_no_context_is_the_callee) is test_resolve_with_no_context_is_the_callee


def test_resolve_under_a_fast_plan_is_the_twin_until_the_function_changes():
    def f(x=1):
        return abs(x)  # (a call: a body with none would be its own twin's)

    with Null():
        twin = callsites.resolve(f)
        assert twin is not f and twin.__code__ is not f.__code__ and twin() == 1
        assert callsites.resolve(f) is twin
        f.__defaults__ = (2,)
        replaced = callsites.resolve(f)
        assert replaced is not twin and replaced() == 2


@pytest.mark.skipif(sys.version_info < (3, 11), reason="CPython specializes calls from 3.11 on")
def test_calls_to_a_twin_specialize_as_calls_to_its_function_do():
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    ch.overdub(Null(), fib, 15)
    with Null():
        twin = callsites.resolve(fib)
    # (3.13 versions only what MAKE_FUNCTION makes: on the C path, _speedups.version_like
    # gives a twin its version; the Python path's call sites call a closure of its own)
    assert "CALL_PY_EXACT_ARGS" in {i.opname for i in dis.get_instructions(twin, adaptive=True)}


def _closure(value):
    def read():
        return value
    return read


def test_a_closure_made_where_a_dead_one_lived_gets_a_twin_of_its_own():
    """Twins are found by the callee's address (C remembers recent lookups, for as long as
    the table is unchanged).  Closures of one code object, made and dropped in turn, take
    the same address; and a tuple shaped like the dead one's table entry takes the
    entry's memory, so a lookup remembered past the table's change would find it."""
    addresses, decoys = set(), []
    code = _closure(0).__code__

    def decoy():
        return "decoy"

    with Null():
        for value in range(200):
            read = _closure(value)
            addresses.add(id(read))
            assert callsites.resolve(read)() == value
            assert callsites.resolve(read)() == value  # (found in the table this time)
            del read
            decoys.append((decoy, code, None, None))
    assert len(addresses) < 200, "no address was reused: the test checks nothing"


def _closure_made_per_call(value):  # (its own code: no other test has two of its functions alive at once)
    def read():
        return value
    return read


@needs_c
def test_a_closure_a_variable_holds_keeps_its_twin_for_its_life_outside_the_twin_table(monkeypatch):
    # (a closure made per call: one function of its code alive at a time, its twin kept by
    # the code's slot, not entered in the table -- docs/internals.md, "Twins")
    # (no lazy import hook's light code around, whose functions share no twin: Plan.shared)
    monkeypatch.setattr(_plan, "switch_before_twin", None)
    ctx = Null()
    gc.disable()  # (a full collection empties Plan.shared: the next twin would be Python's, in the table)
    try:
        with ctx:
            callsites.resolve(_closure_made_per_call(0))  # (the code's first twin: made by Python, shared)
            read = _closure_made_per_call(1)
            # (star calls: the site's reference to ``read`` owned, as in rewritten code, where
            # 3.14's borrowed load of a callee is made plain -- docs/internals.md, "Borrowed
            # loads"; the test's own borrowed one would make the variable's look like the only
            # reference)
            twin = callsites.resolve(*(read,))
            assert twin is not read and twin() == 1 and callsites.resolve(*(read,)) is twin
            assert id(read) not in context_stack.plan_of(ctx).twins.values
    finally:
        gc.enable()


class _Other(ch.Context):
    pass


@needs_c
@pytest.mark.skipif(sys.version_info < (3, 12), reason="function watchers are 3.12's: before, a weak reference")
def test_a_closure_a_slot_holds_is_followed_by_the_function_watcher_not_a_weak_reference(monkeypatch):
    # (docs/internals.md, "Twins": the slot learns the function's death from the watcher's
    # PyFunction_EVENT_DESTROY; a weak reference and its callback cost a closure made per
    # call a fifth of what it paid over plain)
    monkeypatch.setattr(_plan, "switch_before_twin", None)
    gc.disable()  # (a full collection empties Plan.shared, slots and all)
    try:
        with Null():
            callsites.resolve(_closure_made_per_call(0))
            read = _closure_made_per_call(1)
            assert callsites.resolve(*(read,))() == 1
            assert weakref.getweakrefcount(read) == 0
    finally:
        gc.enable()


@needs_c
def test_a_closure_the_slots_of_two_plans_hold_lets_its_cells_go_from_both_at_its_death(monkeypatch):
    # (one function in the watcher's table once per slot that holds it: each entry found and
    # removed at its death)
    class Held:
        pass

    monkeypatch.setattr(_plan, "switch_before_twin", None)
    held = Held()
    gone = weakref.ref(held)
    gc.disable()
    try:
        for ctx in (Null(), _Other()):
            with ctx:
                callsites.resolve(_closure_made_per_call(0))
        read = _closure_made_per_call(held)
        for ctx in (Null(), _Other()):
            with ctx:
                assert callsites.resolve(*(read,))() is held
        del held, read
        assert gone() is None
    finally:
        gc.enable()


def test_the_twin_of_a_closure_made_per_call_lets_its_cells_go_with_the_closure():
    class Held:
        pass

    held = Held()
    gone = weakref.ref(held)
    with Null():
        callsites.resolve(_closure(0))
        read = _closure(held)
        assert callsites.resolve(read)() is held
        del held, read
        assert gone() is None  # (no collection: the twin went with its function)


def test_closures_of_one_code_alive_at_once_each_keep_their_own_twin():
    with Null():
        callsites.resolve(_closure(0))
        first, second = _closure(1), _closure(2)
        # (star calls: the site's reference owned, as above)
        for _ in range(3):
            assert callsites.resolve(*(first,))() == 1 and callsites.resolve(*(second,))() == 2
        twin = callsites.resolve(*(first,))
        assert callsites.resolve(*(first,)) is twin
        first.__defaults__ = ()  # (a twin follows its function's defaults)
        assert callsites.resolve(*(first,)) is not twin and callsites.resolve(*(first,))() == 1


def _lambda_made_per_call(value, made):  # (its own code, as _closure_made_per_call's)
    function = lambda step=1: value + step  # noqa: E731
    made.append(id(function))
    return function


@needs_c
def test_a_lambda_only_its_call_site_holds_is_made_its_own_twin(monkeypatch):
    # (docs/internals.md, "Twins": no function made and freed per call for `(lambda: i)()`)
    monkeypatch.setattr(_plan, "switch_before_twin", None)
    made: list[int] = []
    plain = _lambda_made_per_call(0, made).__code__
    gc.disable()  # (a full collection empties Plan.shared)
    try:
        with Null():
            callsites.resolve(_lambda_made_per_call(0, made))  # (the code's first twin: made by Python, shared)
            twin = callsites.resolve(_lambda_made_per_call(1, made))
            assert id(twin) == made[-1] and twin.__code__ is not plain
            assert twin() == 2 and twin(5) == 6 and twin.__name__ == "<lambda>"
    finally:
        gc.enable()


def _calls_a_lambda_its_variable_holds(made):
    function = _lambda_made_per_call(1, made)
    return function(), function.__code__  # (the call's load of ``function``: borrowed by 3.14's compiler)


def test_a_lambda_a_variable_of_the_program_holds_keeps_its_code_under_a_context(monkeypatch):
    # (a twin never borrows a callee's load, 3.14+: the site's count of 2 tells that the
    # variable holds the function too, which is then not made its own twin)
    monkeypatch.setattr(_plan, "switch_before_twin", None)
    made: list[int] = []
    plain = _lambda_made_per_call(0, made).__code__
    gc.disable()
    try:
        ctx = Null()
        with ctx:
            callsites.resolve(_lambda_made_per_call(0, made))  # (the code's first twin: made by Python, shared)
        results = [ch.overdub(ctx, _calls_a_lambda_its_variable_holds, made) for _ in range(3)]
        assert [(value, code is plain) for value, code in results] == [(2, True)] * 3
    finally:
        gc.enable()


@needs_c
def test_a_lambda_a_weak_reference_sees_keeps_its_code_and_gets_a_twin(monkeypatch):
    monkeypatch.setattr(_plan, "switch_before_twin", None)
    made: list[int] = []
    plain = _lambda_made_per_call(0, made).__code__
    refs = []

    def watched(value):
        function = _lambda_made_per_call(value, made)
        refs.append(weakref.ref(function))
        return function

    gc.disable()
    try:
        with Null():
            callsites.resolve(watched(0))
            twin = callsites.resolve(watched(1))
            # (the function itself would be alive, as the twin: a new twin was made while
            # it lived, so their addresses differ)
            assert id(twin) != made[-1] and twin() == 2 and twin.__code__ is not plain
    finally:
        gc.enable()


def _lambdas_made_per_call(n):
    values = [(lambda: i)() for i in range(n)]
    values += [(lambda x=i, *, y=2: x * y)() for i in range(n)]
    values += [list((lambda: (yield i))()) for i in range(n)]
    values += [(lambda: sys._getframe().f_code.co_name)() for _ in range(2)]
    try:
        (lambda: 1 / 0)()
    except ZeroDivisionError as error:
        values.append([(frame.name, frame.lineno) for frame in traceback.extract_tb(error.__traceback__)])
    return values


def test_lambdas_made_per_call_under_a_null_context_give_what_they_give_plain():
    plain = _lambdas_made_per_call(50)
    assert ch.overdub(Null(), _lambdas_made_per_call, 50) == plain


@needs_c
@pytest.mark.skipif(sys.version_info < (3, 12), reason="3.11 gives each function a version of its own, plain alike")
def test_calls_of_lambdas_made_per_call_stay_specialized_under_a_null_context(monkeypatch):
    # (a lambda made its own twin gets its twin code's co_version, as MAKE_FUNCTION gives
    # the plain lambdas their code's: one version for all, which the call site's guard keeps;
    # 3.13+ give none but in MAKE_FUNCTION, so a version left cleared leaves the site generic)
    monkeypatch.setattr(_plan, "switch_before_twin", None)

    def loop(n):
        for i in range(n):
            (lambda: i)()

    gc.disable()
    try:
        ctx = Null()
        for _ in range(3):
            ch.overdub(ctx, loop, 200)
        with ctx:
            twin = callsites.resolve(loop)
        assert "CALL_PY_EXACT_ARGS" in {i.opname for i in dis.get_instructions(twin, adaptive=True)}
    finally:
        gc.enable()


def test_a_twin_replaced_in_its_table_is_the_one_the_next_call_finds():
    """C remembers recent lookups for as long as their table is unchanged (on 3.10-3.13 by
    the dict's version tag, on 3.14+ by a dict watcher over the tables): a change of the
    entry itself, with the function unchanged, is seen at once."""
    def f():
        return "f"

    def first():
        return "first"

    def other():
        return "other"

    with Null():
        twins = _plan.plan_for(ch.current_context()).twins
        twins.set(f, (first, f.__code__, None, None))
        assert callsites.resolve(f) is first  # (found in C, and remembered)
        twins.set(f, (other, f.__code__, None, None))
        assert callsites.resolve(f) is other


class _Greeter:
    def greet(self, x=1):
        return (self, abs(x))  # (a call: a body with none would be its own twin's)


def test_resolve_of_a_bound_method_under_a_fast_plan_is_its_twin_bound_until_the_function_changes():
    obj = _Greeter()
    with Null():
        first = callsites.resolve(obj.greet)
        twin = first.__func__
        assert twin is not _Greeter.greet and first.__self__ is obj and first() == (obj, 1)
        assert callsites.resolve(obj.greet).__func__ is twin
        _Greeter.greet.__defaults__ = (2,)
        try:
            replaced = callsites.resolve(obj.greet)
            assert replaced.__func__ is not twin and replaced() == (obj, 2)
        finally:
            _Greeter.greet.__defaults__ = (1,)


def test_a_bound_method_the_program_holds_keeps_its_function_when_resolved_or_called():
    # The C path rebinds the bound method a call site's attribute load made to the twin,
    # in place, when the site's stack holds the only reference; a held one is not touched.
    obj = _Greeter()
    held = obj.greet

    def program():
        return held(), obj.greet()

    with Null():
        resolved = callsites.resolve(held)
    assert ch.overdub(Null(), program) == ((obj, 1), (obj, 1))
    assert held.__func__ is _Greeter.greet and resolved.__func__ is not _Greeter.greet


def test_resolve_of_a_builtin_under_a_fast_plan_is_the_builtin_unless_it_may_take_callbacks():
    items = [3, 1, 2]
    with Null():
        assert callsites.resolve(len) is len and callsites.resolve(items.append) == items.append
        by_sorted, by_sort = callsites.resolve(sorted), callsites.resolve(items.sort)
        assert by_sorted is not sorted and by_sorted(items, key=lambda v: -v) == [3, 2, 1]
        assert by_sort != items.sort and by_sort(key=lambda v: v) is None
    assert items == [1, 2, 3]


@needs_c
def test_a_c_method_that_takes_callbacks_bound_for_its_call_alone_is_called_as_itself():
    # items.sort, made by the call's own load (nothing else holds it): called as it is, and
    # its key still made a call site (docs/internals.md, "Callee kinds"; docs/performance.md,
    # "Callee kinds").
    items = [3, 1, 2]
    with Null():
        run = callsites.resolve(items.sort)
        assert type(run) is types.BuiltinMethodType and run.__self__ is items and run.__name__ == "sort"
        assert run(key=lambda v: -v) is None
    assert items == [3, 2, 1]


@needs_c
def test_a_c_method_that_takes_callbacks_held_elsewhere_is_left_as_it_is():
    items = [3, 1, 2]
    held = items.sort
    with Null():
        # (this frame is no twin, whose call sites never borrow a callee: the tuple holds one)
        run = callsites.resolve(*(held,))
        assert run(key=lambda v: v) is None
    assert items == [1, 2, 3] and held == items.sort and held.__self__ is items


def _sorts_by_the_method_its_variable_holds(items):
    held = items.sort
    held(key=lambda v: -v)  # (the site's load of ``held``: borrowed by 3.14's compiler)
    return held


def test_a_c_method_a_variable_of_the_program_holds_is_left_as_it_is_under_a_context():
    items = [3, 1, 2]
    held = ch.overdub(Null(), _sorts_by_the_method_its_variable_holds, items)
    assert items == [3, 2, 1] and held == items.sort and held.__self__ is items


class _Noted:
    def note(self):
        return abs(-1)  # (a call: a body with none would be its own twin's)


def _calling_a_constant(callee):
    """A twin's body that calls ``callee`` loaded as a constant (as a pass may write it),
    with no other code holding the constant: the twin's code, as a function."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # ("'str' object is not callable")
        module = compile('def program():\n    return "callee"()\n', "<constant callee>", "exec")
    (plain,) = [const for const in module.co_consts if isinstance(const, types.CodeType)]
    plain = plain.replace(co_consts=tuple(callee if const == "callee" else const for const in plain.co_consts))
    return types.FunctionType(rewrite.rewrite_code(plain, callsites.HOOKS, operators=False), globals())


def _constants_of(function):
    return [const for held in function.__code__.co_consts for const in (held if type(held) is tuple else (held,))]


@pytest.mark.parametrize("kind", ["bound method", "bound C method", "function"])
def test_a_callee_only_a_twins_constants_hold_is_not_taken_for_one_made_for_its_call(monkeypatch, kind):
    # (3.15's LOAD_CONST borrows the constant: the site's count would be the code's alone,
    # docs/internals.md, "CPython 3.15")
    monkeypatch.setattr(_plan, "switch_before_twin", None)
    items, made = [3, 1, 2], []
    plain_lambda = _lambda_made_per_call(0, made).__code__
    ctx = Null()
    gc.disable()
    try:
        with ctx:  # (the first twins, which Python makes: the callees' own are found after)
            callsites.resolve(_Noted().note)
            callsites.resolve(_lambda_made_per_call(0, made))
            if kind == "bound method":
                program = _calling_a_constant(_Noted().note)
            elif kind == "bound C method":
                program = _calling_a_constant(items.sort)
            else:
                program = _calling_a_constant(_lambda_made_per_call(1, made))
            results = [program(), program()]
    finally:
        gc.enable()
    if kind == "bound method":
        (method,) = [const for const in _constants_of(program) if type(getattr(const, "__self__", None)) is _Noted]
        assert results == [1, 1] and method.__func__ is _Noted.note
    elif kind == "bound C method":
        (method,) = [const for const in _constants_of(program) if getattr(const, "__self__", None) is items]
        assert results == [None, None] and items == [1, 2, 3] and method == items.sort
    else:
        (function,) = [const for const in _constants_of(program) if getattr(const, "__name__", None) == "<lambda>"]
        assert results == [2, 2] and function.__code__ is plain_lambda


_sorted_globally = [3, 1, 2]
_subbed = re.compile(r"\d")


def _sort_and_sub():
    """list.sort and re.Pattern.sub (METH_METHOD) bound by the site's own load (a global's
    method: no method site), with and without callbacks, and with their errors."""
    _sorted_globally.sort()
    ascending = list(_sorted_globally)
    _sorted_globally.sort(key=lambda v: -v)
    errors = []
    for bad in (lambda: _sorted_globally.sort(1), lambda: _sorted_globally.sort(key=1),
                lambda: _subbed.sub(), lambda: _subbed.sub(lambda m: 1, "a1")):
        try:
            bad()
        except TypeError as exc:
            errors.append(str(exc))
    return (ascending, list(_sorted_globally), _subbed.sub("#", "a1b22"),
            _subbed.sub(lambda m: str(int(m.group()) + 1), "a1b22"), errors)


def _sort_held():
    held = _sorted_globally.sort
    held()
    held(key=lambda v: -v)
    return held == _sorted_globally.sort, held.__self__ is _sorted_globally


def test_a_c_method_that_takes_callbacks_a_variable_holds_is_unchanged_by_its_calls():
    # (3.14+ loads a local borrowed: the count of 1 a call of it sees is the variable's)
    assert ch.overdub(Null(), _sort_held) == (True, True)


@pytest.mark.parametrize("ctx", [Null(), Counting([0])], ids=["fast plan", "hooked"])
def test_a_c_method_that_takes_callbacks_bound_by_its_call_runs_as_plain(ctx):
    plain = _sort_and_sub()
    _sorted_globally[:] = [3, 1, 2]
    assert ch.overdub(ctx, _sort_and_sub) == plain
    assert len(plain[-1]) == 4


def test_resolve_of_a_class_under_a_fast_plan_is_the_same_constructor_each_time():
    with Null():
        constructor = callsites.resolve(_Greeter)
        assert callsites.resolve(_Greeter) is constructor and type(constructor()) is _Greeter

def test_under_a_fast_plan_an_lru_cache_wrapper_is_called_as_it_is_its_type_asked_about_once(monkeypatch):
    # (both paths: the answer for a C object whose __call__ is its type's slot holds for
    # every instance of such a type, and is entered per type -- callees.note_called_as_is)
    asked = []
    special_call = callees._special_call

    def counting(plan, obj, kind):
        asked.append(kind)
        return special_call(plan, obj, kind)

    monkeypatch.setattr(callees, "_special_call", counting)

    @functools.cache
    def first(x):
        return x

    @functools.cache
    def second(x):
        return -x

    method = _CachedMethods().method
    with Null():
        assert callsites.resolve(first) is first and callsites.resolve(first) is first
        assert callsites.resolve(second) is second and callsites.resolve(method) is method
        assert callsites.resolve_star(first) is first and callsites.call(method, 3) == 5
    assert len(asked) <= 1  # (none if an earlier test had the answer entered)
    assert id(type(first)) in callees.CALLED_AS_IS.values


def test_under_a_fast_plan_a_partial_of_a_function_still_reaches_its_twin_past_c_objects_called_as_they_are():
    def f(a, b):
        return a - b

    made = functools.partial(f, 5)
    with Null():
        assert callsites.resolve(_cached) is _cached
        run = callsites.resolve(made)
        assert run is not made and run(2) == 3
    assert id(functools.partial) not in callees.CALLED_AS_IS.values


class _Callable:
    def __call__(self, x):
        return x


_bound_slot = (1).__lt__  # a method-wrapper: int's C slot bound to 1
_pattern = re.compile(r"\d+")
_array = array.array("i")
_items = [2, 1]


def _sorted_local():
    items = [2, 1]
    items.sort()  # (a local: on 3.11+ a method site, which loads list.sort unbound)
    return items


def _closure_made(x):
    def closure():
        return x

    return closure()


def _star(*args):
    return args


@functools.cache
def _cached(x):
    return x + 1


class _CachedMethods:
    @functools.cache  # noqa: B019 -- a module-level instance: nothing leaks
    def method(self, x):
        return x + 2


_cached_methods = _CachedMethods()


# Callees a call site meets often, each in a program that calls one.
_CALLS_WITHOUT_OUR_PYTHON = {
    "a class constructed by C": lambda: dict(a=1),
    "a builtin that takes callbacks": lambda: min(3, 1),
    "a callable instance": lambda: _Callable()(1),
    "a C slot": lambda: object.__init__(_Callable()),
    "a C slot bound to an object": lambda: _bound_slot(2),
    "a builtin method that takes callbacks": lambda: _items.sort(),
    "a builtin method that takes callbacks, at a method site": _sorted_local,
    "a class with a Python __new__ (a NamedTuple)": lambda: _Pair(1, 2),
    "a star call": lambda: _star(*(1, 2)),
    # builtin_method (METH_METHOD), a subclass of the builtin function type:
    "a builtin method that takes its class": lambda: _pattern.match("abc123", 3).group(),
    "a builtin method that takes its class, bound": lambda: _array.extend(()),
    # a function object made anew (of a code whose twin the plan has made before):
    "a closure made per call": lambda: _closure_made(1),
    "a lambda made per call": lambda: (lambda: 1)(),
    # a C object whose __call__ is its type's slot (docs/performance.md, "Callable C objects"):
    "an lru_cache wrapper": lambda: _cached(1),
    "an lru_cache wrapper, star call": lambda: _cached(*(1,)),
    "an lru_cache on a method (a bound method of the wrapper)": lambda: _cached_methods.method(1),
}


@needs_c
@pytest.mark.parametrize("program", _CALLS_WITHOUT_OUR_PYTHON.values(), ids=_CALLS_WITHOUT_OUR_PYTHON.keys())
def test_under_a_fast_plan_a_call_runs_no_python_code_of_ours_once_its_callee_is_known(program, monkeypatch):
    # (no lazy import hook's light code around, whose functions share no twin: Plan.shared)
    monkeypatch.setattr(_plan, "switch_before_twin", None)
    ours = []

    def profile(frame, event, arg):
        if event == "call" and "cassette_hook" in frame.f_code.co_filename:
            ours.append(frame.f_code.co_name)

    def twice():
        first = program()  # (twins made, answers entered in the plan's tables)
        sys.setprofile(profile)
        second = program()
        sys.setprofile(None)
        return first, second

    first, second = ch.overdub(Null(), twice)
    assert first == second == program()
    assert ours == []


@pytest.mark.parametrize("ctx", [None, Null(), Counting([0])], ids=["no context", "fast plan", "hooked"])
def test_call_passes_positional_and_keyword_arguments(ctx):
    def f(a, /, b, *rest, c, **more):
        return a, b, rest, c, more

    with ctx or contextlib.nullcontext():
        assert callsites.call(f, 1, 2, 3, c=4, d=5) == (1, 2, (3,), 4, {"d": 5})


def test_call_without_a_callee_is_a_type_error():
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        callsites.call()


def test_call_under_hooks_runs_the_prehook_once_per_call():
    def leaf(x):
        return x + 1

    def f(x):
        return leaf(x) * 2

    ctx = Counting([0])
    with ctx:
        assert callsites.call(f, 3) == 8
    assert ctx.metadata[0] >= 2  # f and leaf (and the operators)


def test_call_of_a_frame_sensitive_builtin_sees_the_callers_locals():
    def f():
        x = 7  # noqa: F841 -- what locals() must see
        return callsites.call(locals)

    with Counting([0]):
        assert callsites.call(f) == {"x": 7}


@needs_c
def test_a_callee_called_by_call_has_the_program_frame_below_it():
    def callee():
        return sys._getframe(1).f_code.co_name

    def program():
        return _native.runtime.module.call(callee)

    with Counting([0]):
        assert program() == "program"


@needs_c
def test_bind_takes_only_a_context_variable():
    with pytest.raises(TypeError, match="ContextVar"):
        _native.runtime.module.bind(object())


@needs_c
def test_bind_follows_the_stack_variable():
    saved = context_stack.active
    replacement: contextvars.ContextVar[context_stack.Entry | None] = contextvars.ContextVar("replacement",
                                                                                               default=None)
    entry = context_stack.Entry(Null(), None)
    token = replacement.set(entry)
    _native.runtime.module.bind(replacement)
    try:
        assert _native.runtime.module.top() is entry  # the replacement's value
        assert saved.get() is None
    finally:
        _native.runtime.module.bind(saved)
        replacement.reset(token)


@needs_c
def test_configure_names_what_is_missing():
    with pytest.raises(TypeError, match="entry_type, plan_type and id_table_type"):
        _native.runtime.module.configure(resolve_direct=None)


@needs_c
def test_configure_refuses_a_class_without_the_slots():
    class NotAnEntry:
        pass

    with pytest.raises(TypeError, match="NotAnEntry.ctx is not a slot"):
        _native.runtime.module.configure(entry_type=NotAnEntry, plan_type=NotAnEntry, id_table_type=NotAnEntry)


# 3.10 runs every Python call on the C stack, plain too: there the plain program's own
# limit is lower.
DEPTH = 5_000 if sys.version_info < (3, 11) else 20_000
# 3.11 does not inline the overload's star calls, and overflows the C stack between 5,000
# and 6,000 levels under an overload calling recurse (docs/internals.md, "The C hot path").
RECURSE_DEPTH = 3_000 if sys.version_info < (3, 12) else 20_000


def deep_program(hook: str, depth: int) -> str:
    """A program printing ``down(depth)`` plain and overdubbed by a context with ``hook``."""
    return textwrap.dedent(f"""
        import sys
        import cassette_hook as ch

        class Deep(ch.Context):
            {hook}

        def down(n):
            return 0 if n == 0 else 1 + down(n - 1)

        sys.setrecursionlimit({depth} + 100)
        print(down({depth}), ch.overdub(Deep(), down, {depth}))
    """)


def printed_by_deep(hook: str, depth: int) -> list[str]:
    out = subprocess.run([sys.executable, "-c", deep_program(hook, depth)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_deep_recursion_under_hooks_runs_as_deep_as_plain():
    """A hooked Python callee is called from C (a ``Site``) only so many levels deep at
    once; deeper, the program's frame calls the site's Python closure, so as deep as the
    plain program recurses, it recurses under hooks (C trampolines all the way down would
    overflow the C stack, or hit 3.12's C recursion limit of about 1,500)."""
    assert printed_by_deep("def prehook(self, f, *args, **kwargs): pass", DEPTH) == [str(DEPTH)] * 2


def test_deep_recursion_under_an_overload_calling_recurse_runs_as_deep_as_plain():
    """``recurse`` calls the callee from C only within the thread's budget of C levels;
    deeper it runs its Python code, whose call CPython inlines: a C call per level would
    meet 3.12's C recursion limit about 1,000 levels down."""
    hook = "def overdub(self, f, *args, **kwargs): return ch.recurse(self, f, *args, **kwargs)"
    assert printed_by_deep(hook, RECURSE_DEPTH) == [str(RECURSE_DEPTH)] * 2


class CallersOfCallees(ch.Context):
    """An overload handing every Python function on (the builtins are called from the
    program's frames: ``sys._getframe``), under which ``caller_of_me`` records the name of
    the frame below each callee's."""

    def overdub(self, f: types.FunctionType, *args, **kwargs):
        return ch.recurse(self, f, *args, **kwargs)


def caller_of_me(depth: int, seen: list[str]) -> int:
    seen.append(sys._getframe().f_back.f_code.co_name)
    return depth if depth == 0 else 1 + caller_of_me(depth - 1, seen)


@needs_c
def test_the_callee_of_recurse_has_the_overload_frame_below_it():
    seen: list[str] = []
    assert ch.overdub(CallersOfCallees(), caller_of_me, 3, seen) == 3
    assert seen[1:] == ["overdub"] * 3  # (the first is called by ch.overdub's own frame)


@needs_c
def test_recurse_past_the_threads_budget_shows_its_frame_then_gives_it_up():
    """Past ``RECURSE_BUDGET`` (100) calls from C at once on a thread, ``recurse`` runs its
    Python code (its frame between the overload and the callee), and once no thread is
    that deep it calls from C again."""
    deep: list[str] = []
    ch.overdub(CallersOfCallees(), caller_of_me, 300, deep)
    assert deep[1:100] == ["overdub"] * 99
    assert deep[-1] == "recurse"
    shallow: list[str] = []
    ch.overdub(CallersOfCallees(), caller_of_me, 3, shallow)
    assert shallow[1:] == ["overdub"] * 3


@needs_c
def test_a_thread_past_its_budget_leaves_the_others_correct():
    """``recurse`` runs its Python code for every thread while one is past its budget: a
    shallow call on another thread then shows ``recurse``'s frame, and returns the same.
    On 3.11 ``recurse`` is a C object with no budget (docs/internals.md, "``recurse``
    without a frame"), so the other thread's callees still have the overload's frame below."""
    import threading

    at_bottom, done = threading.Event(), threading.Event()

    def deep_then_wait(depth: int) -> int:
        if depth == 0:
            at_bottom.set()
            assert done.wait(10)
            return 0
        return 1 + deep_then_wait(depth - 1)

    results: list[int] = []
    thread = threading.Thread(target=lambda: results.append(ch.overdub(CallersOfCallees(), deep_then_wait, 300)))
    thread.start()
    try:
        assert at_bottom.wait(10)
        meanwhile: list[str] = []
        assert ch.overdub(CallersOfCallees(), caller_of_me, 3, meanwhile) == 3
    finally:
        done.set()
        thread.join()
    assert results == [300]
    assert meanwhile[1:] == ["overdub" if sys.version_info[:2] == (3, 11) else "recurse"] * 3
    after: list[str] = []
    ch.overdub(CallersOfCallees(), caller_of_me, 3, after)
    assert after[1:] == ["overdub"] * 3


class CallerOfHook(ch.Context):
    """A prehook and a posthook (every call a ``Site``), the prehook recording the name of
    the frame below it."""

    operators = False

    def prehook(self, f, *args, **kwargs):
        if f is down_by_one:
            self.metadata.append(sys._getframe(1).f_code.co_name)

    def posthook(self, out, f, *args, **kwargs):
        pass


def down_by_one(n: int) -> int:
    return 0 if n == 0 else 1 + down_by_one(n - 1)


@needs_c
def test_a_hook_past_the_budget_of_sites_has_the_closures_frame_below_it_and_no_other_of_ours():
    """Past ``SITE_BUDGET`` (100) the program's frame calls ``callsites.site``'s closure
    (3.11+: on 3.10 the C ``call`` runs every call's steps, the hooks' frame below them the
    program's at any depth), which runs the hook from C (``_speedups.popped_call``), as a
    ``Site`` does: the hook has the closure's frame below it, no frame of a Python helper
    of ours."""
    ctx = CallerOfHook(metadata=[])
    ch.overdub(ctx, down_by_one, 150)
    assert set(ctx.metadata[:99]) == {"down_by_one"}
    assert set(ctx.metadata[100:]) == {"down_by_one" if sys.version_info < (3, 11) else "overdubbed"}


class Made:
    def __init__(self, value):
        self.value = value
        self.caller = sys._getframe(1).f_code.co_name


class MadeByNew:
    def __new__(cls, value):
        obj = super().__new__(cls)
        obj.new_saw = value
        return obj

    def __init__(self, value):
        self.value = value


@needs_c
def test_init_of_a_python_class_has_the_program_frame_below_it():
    def program():
        return Made(1)

    made = ch.overdub(Null(), program)
    assert (made.value, made.caller) == (1, "program")


def test_a_class_with_its_own_new_is_constructed_as_plain():
    made = ch.overdub(Null(), MadeByNew, 5)
    assert (type(made), made.new_saw, made.value) == (MadeByNew, 5, 5)


class _Pair(typing.NamedTuple):
    left: int
    right: int = 0


class _Callers:
    def __new__(cls, value):
        obj = super().__new__(cls)
        obj.new_caller = sys._getframe(1).f_code.co_name
        return obj


class _Subclassing:
    def __new__(cls, value):
        return super().__new__(_Subclass if value else cls)

    def __init__(self, value):
        self.inits = getattr(self, "inits", ()) + ("base",)


class _Subclass(_Subclassing):
    def __init__(self, value):
        self.inits = getattr(self, "inits", ()) + ("subclass",)


class _NotMine:
    def __new__(cls, value):
        return value

    def __init__(self, value):
        raise AssertionError("type.__call__ runs no __init__ for an object not of the class")


def _first_init(self, value):
    self.inited = "first"


def _second_init(self, value):
    self.inited = "second"


class _Replacing:
    def __new__(cls, value):
        cls.__init__ = _second_init  # type.__call__ looks __init__ up after __new__
        return super().__new__(cls)


def _constructions():
    _Replacing.__init__ = _first_init
    return (_Pair(1), _Pair(1, right=2), _Pair(left=3), type(_Callers(1)), _Subclassing(0).inits,
            _Subclassing(1).inits, type(_Subclassing(1)), _NotMine("itself"), _Replacing(1).inited)


@pytest.mark.parametrize("ctx", [Null(), Counting([0])], ids=["fast plan", "hooked"])
def test_classes_with_a_python_new_are_constructed_as_plain(ctx):
    assert ch.overdub(ctx, _constructions) == _constructions()


@needs_c
def test_new_of_a_python_class_has_the_program_frame_below_it():
    def program():
        return _Callers(1)

    assert ch.overdub(Null(), program).new_caller == "program"


def test_a_bad_call_of_a_class_with_a_python_new_is_the_plain_type_error():
    def program():
        return _Pair(1, 2, 3)

    with pytest.raises(TypeError) as plain:
        program()
    with pytest.raises(TypeError) as overdubbed:
        ch.overdub(Null(), program)
    assert str(overdubbed.value) == str(plain.value)


def test_init_that_returns_a_value_is_the_plain_type_error():
    class Bad:
        def __init__(self):
            return 1

    with pytest.raises(TypeError, match="__init__\\(\\) should return None, not 'int'"):
        ch.overdub(Null(), lambda: Bad())


@needs_c
def test_a_bad_constructor_call_has_the_plain_traceback():
    def program():
        return Made()

    def entries(run):
        with pytest.raises(TypeError) as caught:
            run()
        names = [entry.name for entry in traceback.extract_tb(caught.value.__traceback__)]
        return names[names.index("program"):], str(caught.value)

    assert entries(lambda: ch.overdub(Null(), program)) == entries(program)


@pytest.mark.parametrize("ctx", [Null(), Counting([0])], ids=["fast plan", "hooked"])
@needs_c
def test_a_sorted_key_callback_has_the_program_frame_below_it(ctx):
    callers = []

    def key(v):
        callers.append(sys._getframe(1).f_code.co_name)
        return -v

    def program():
        return sorted([1, 3, 2], key=key)

    assert ch.overdub(ctx, program) == [3, 2, 1]
    assert callers == ["program"] * 3


class _Made:
    def __init__(self):
        self.below = sys._getframe().f_back.f_code.co_name  # the frame below, as it is


class NamesOthers(ch.Context):
    pass


@ch.overdub.register
def _named(ctx: NamesOthers, f: ch.Is[len], x):
    return 0


@needs_c
def test_a_class_no_overload_names_is_constructed_from_the_program_frame():
    def run():
        return _Made().below

    assert ch.overdub(NamesOthers(), run) == "run"


@needs_c
def test_a_builtin_under_an_overload_has_the_program_frame_below_its_overload():
    class Below(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Below, f: ch.Is[abs], x):
        return sys._getframe().f_back.f_code.co_name

    try:
        assert ch.overdub(Below(), lambda: abs(-1)) == "<lambda>"
    finally:
        ch.overdub.unregister(_)


@needs_c
def test_a_hooked_python_callee_has_the_program_frame_below_it():
    def callee():
        return sys._getframe().f_back.f_code.co_name  # the frame below, as it is

    def program():
        return callee()

    ctx = Recording([])
    assert ch.overdub(ctx, program) == "program"
    assert ctx.metadata == ["callee", "_getframe"]  # (the emulated _getframe() is its caller's own frame)


@needs_c
def test_a_generator_resumed_by_next_under_hooks_has_the_program_frame_below_it():
    def gen():
        yield sys._getframe().f_back.f_code.co_name  # the frame below, as it is

    def program():
        return next(gen())

    assert ch.overdub(Counting([0]), program) == "program"


@needs_c
def test_a_map_callback_under_hooks_has_the_program_frame_below_it():
    def callback(v):
        return sys._getframe().f_back.f_code.co_name  # the frame below, as it is

    def program():
        return list(map(callback, [1]))

    assert ch.overdub(Counting([0]), program) == program() == ["program"]


class _Indexed:
    def __getitem__(self, key):
        return sys._getframe().f_back.f_code.co_name  # the frame below, as it is


@needs_c
def test_a_python_dunder_of_an_operator_under_hooks_has_the_program_frame_below_it():
    def program(obj):
        return obj[0]

    ctx = Recording([])
    assert ch.overdub(ctx, program, _Indexed()) == "program"
    assert ctx.metadata[0] == "getitem"  # the subscript was seen (operators are on)


def test_the_callees_the_c_path_finds_no_body_in_have_none_in_the_reference():
    # _speedups.body_of answers these kinds itself (C code, whose calls have no body)
    plan = _plan.plan_for(Null())
    assert [callees.runnable(plan, f) for f in (len, list.append, object.__init__)] == [None, None, None]


C_OPERAND_VALUES = [1, 1.5, 1j, True, "s", b"b", None, (1,), [1], {1: 2}, {1}, frozenset({1}), range(2), slice(1),
                    len]


def test_every_c_operand_value_is_in_the_class_set_the_c_path_reads():
    assert {type(v) for v in C_OPERAND_VALUES} == operators.C_OPERANDS


@pytest.mark.parametrize("value", C_OPERAND_VALUES, ids=lambda v: type(v).__name__)
def test_values_of_c_operand_classes_are_left_alone_by_every_preparer(value):
    # so the C path calls such a builtin without asking its preparer (run_primitive)
    for prepare in primitives.PREPARERS.values():
        for args in [(value,), (value, value)]:
            prepared, kwargs = prepare(args, {})
            assert kwargs == {} and all(p is a for p, a in zip(prepared, args, strict=True))


@pytest.mark.parametrize("value", C_OPERAND_VALUES, ids=lambda v: type(v).__name__)
def test_values_of_c_operand_classes_have_no_operator_body(value):
    # so the C path runs such an operator without asking operators.body (no_body)
    unary = [*operators._ON_FIRST]
    binary = [*operators._BINARY, *operators._INPLACE, *operators._COMPARE, operator.contains]
    assert [operators.body(op, (value,)) for op in unary] == [None] * len(unary)
    assert [operators.body(op, (value, value)) for op in binary] == [None] * len(binary)


def _operand_classes():
    """Operand classes, made in a function so that no ``Special`` stands in for their
    dunders: a Python dunder is seen by the hooks only when an operator site runs it."""

    class Plain:
        pass

    class IntLike(int):
        pass

    class CDunders:
        __eq__, __lt__, __add__ = object.__eq__, int.__lt__, int.__add__

    class Python:
        def __init__(self, v=1):
            self.v = v

        def __add__(self, other):
            return "add"

        def __radd__(self, other):
            return "radd"

        def __iadd__(self, other):
            return "iadd"

        def __eq__(self, other):
            return "eq"

        def __lt__(self, other):
            return "lt"

        def __gt__(self, other):
            return "gt"

        def __neg__(self):
            return "neg"

        def __getitem__(self, key):
            return "getitem"

        def __contains__(self, item):
            return True

        def __iter__(self):
            return iter([self.v])

        __hash__ = object.__hash__

    class Inherited(Python):
        pass

    class StaticDunder:
        __neg__ = staticmethod(lambda: "static neg")

    class Declining:
        """Every dunder declines: the operator's own error, or identity for ``==``."""

        def __add__(self, other):
            return NotImplemented

        __eq__ = __lt__ = __gt__ = __add__
        __hash__ = object.__hash__

    class BadIterator:
        def __iter__(self):
            return [1]

    class OnlyGreater:
        def __gt__(self, other):
            return "gt"

    def generator():
        yield 1

    return [1, "s", generator(), Plain(), IntLike(2), CDunders(), Python(), Inherited(), StaticDunder(), Declining(),
            BadIterator(), OnlyGreater()]


def _add(a, b):
    return a + b


def _eq(a, b):
    return a == b


def _lt(a, b):
    return a < b


def _iadd(a, b):
    a += b
    return a


def _neg(a, b):
    return -a


def _getitem(a, b):
    return a[b]


def _contains(a, b):
    return b in a


def _first_iterated(a, b):
    for x in a:
        return x


_OPERATOR_PROGRAMS = {operator.add: _add, operator.eq: _eq, operator.lt: _lt, operator.iadd: _iadd,
                      operator.neg: _neg, operator.getitem: _getitem, operator.contains: _contains,
                      iter: _first_iterated}


class _RecordingDunders(ch.Context):
    """Records the Python functions called, but the operator programs themselves."""

    def prehook(self, f, /, *args, **kwargs):
        if isinstance(f, types.FunctionType) and f not in _OPERATOR_PROGRAMS.values():
            self.metadata.append(f.__qualname__)


class _RecordingDundersHooked(_RecordingDunders):
    """The same, with a raisehook: its sites are Sites (the entering one's are not)."""

    def raisehook(self, exc, f, /, *args, **kwargs):
        pass


def _outcome(program, i, j, ctx=None):
    """``program`` on fresh operands ``i`` and ``j`` of ``_operand_classes()``, plain or
    overdubbed by ``ctx``: its result, or its error."""
    operands = _operand_classes()
    try:
        return program(operands[i], operands[j]) if ctx is None else ch.overdub(ctx, program, operands[i], operands[j])
    except Exception as exc:  # the error is part of the outcome
        return type(exc), str(exc)


@pytest.mark.parametrize("context", [_RecordingDunders, _RecordingDundersHooked], ids=["entering", "hooked"])
@pytest.mark.parametrize("op", list(_OPERATOR_PROGRAMS), ids=lambda op: op.__name__)
def test_an_operator_runs_its_operands_python_dunders_as_calls_exactly_where_operators_body_finds_them(context, op):
    # The C path asks operators.body only where a class's lookup may find Python code
    # (python_dunders), and runs a single dunder itself: it must run one exactly where
    # the reference would, with the plain program's result or error.
    program, kinds = _OPERATOR_PROGRAMS[op], len(_operand_classes())
    for i, j in itertools.product(range(kinds), repeat=2):
        operands = _operand_classes()
        args = (operands[i],) if op in (operator.neg, iter) else (operands[i], operands[j])
        expected_seen = operators.body(op, args) is not None
        ctx = context([])
        assert _outcome(program, i, j, ctx) == _outcome(program, i, j)
        assert bool(ctx.metadata) == expected_seen, (op.__name__, type(args[0]).__name__, type(args[-1]).__name__)


@needs_c
def test_an_operator_site_is_one_c_object_per_operator_calling_it_as_a_call_site():
    site = callsites.operator_site(operator.add)
    assert callsites.operator_site(operator.add) is site and site.op is operator.add
    assert "operator site" in repr(site)
    assert site(2, 3) == 5  # no context: the operator itself
    ctx = Recording([])
    with ctx:
        assert site(2, 3) == 5
    assert ctx.metadata == ["add"]


@needs_c
def test_yield_from_takes_a_generator_as_it_is_and_iterates_anything_else_as_a_call_site():
    def gen():
        yield 1

    g, ctx = gen(), Recording([])
    with ctx:
        assert callsites.HOOKS.yield_from(g) is g
        assert list(callsites.HOOKS.yield_from([1, 2])) == [1, 2]
    assert ctx.metadata == ["iter"]


class _Sequence(list):
    """A callable whose class is a sequence (what a method site's code tests its result for)."""

    def __call__(self, x):
        return ("sequence", x)


class _Attributes:
    """Every kind of attribute a call ``obj.name(...)`` may find."""

    as_class_attribute = _Sequence()
    plain_len = len  # a builtin function on the class: no descriptor, not bound

    def __init__(self):
        self.as_instance_attribute = lambda x: ("instance", x)
        self.as_sequence = _Sequence()

    def method(self, x, k=0):
        return ("method", self is not None, x, k)

    @classmethod
    def klass(cls, x):
        return ("classmethod", cls.__name__, x)

    @staticmethod
    def static(x):
        return ("staticmethod", x)

    @property
    def made(self):
        return lambda x: ("property", x)

    def __getattr__(self, name):
        if name == "dynamic":
            return lambda x: ("__getattr__", x)
        raise AttributeError(f"no {name} here")


class _Shadowing(_Attributes):
    def __init__(self):
        super().__init__()
        self.method = lambda x, k=0: ("shadowed", x, k)  # the instance's own, over the class's


class _Derived(_Attributes):
    def method(self, x, k=0):
        return ("derived", super().method(x, k=k), [self.static(i) for i in range(2)])


def _sent_through(obj):
    received = obj.method((yield "ready"), k=(yield "again"))
    yield received


def _call_every_kind_of_attribute(obj, d, items):
    out = [obj.method(1), obj.method(2, k=3), obj.klass(4), obj.static(5), obj.as_instance_attribute(6),
           obj.made(7), obj.dynamic(8), obj.as_sequence(9), obj.as_class_attribute(10), obj.plain_len("ab"),
           types.SimpleNamespace(f=abs).f(-11), operator.neg(12), d.get(13, "d"), d.__eq__(d), items.index(2),
           "-".join(["a", "b"]), _Shadowing().method(14), _Derived().method(15), obj.method(*(16,), **{"k": 17}),
           obj.method(obj.method(18)[2]).count(True), [obj.static(i) for i in range(3)]]
    generator = _sent_through(obj)
    out += [next(generator), generator.send(19), generator.send(20)]
    for failing in (lambda: obj.missing(1), lambda: d.missing(), lambda: _Attributes.method()):
        try:
            failing()
        except (AttributeError, TypeError) as exc:
            out.append((type(exc).__name__, str(exc)))
    return out


class _SeenEntering(ch.Context):
    """A prehook alone: a plan that enters, whose twins load bound methods."""

    def prehook(self, f, /, *args, **kwargs):
        self.metadata.append((f, args, kwargs))


class _SeenBothWays(_SeenEntering):
    """A prehook and a posthook: a plan that does not enter, whose twins have method sites."""

    def posthook(self, result, f, /, *args, **kwargs):
        pass


@pytest.mark.parametrize("context", [Null, _SeenEntering, _SeenBothWays], ids=["null", "entering", "hooked"])
def test_a_method_call_of_every_kind_of_attribute_runs_as_plain(context):
    args = (_Attributes(), {13: "thirteen"}, [1, 2, 3])
    assert ch.overdub(context([]), _call_every_kind_of_attribute, *args) == _call_every_kind_of_attribute(*args)


def _switched_copy(function):
    """A copy of ``function`` given switched code, as the import hook would load it."""
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__)
    return ch.instrument(copy)


@pytest.mark.parametrize("context", [Null, _SeenEntering, _SeenBothWays], ids=["null", "entering", "hooked"])
def test_a_method_call_of_every_kind_of_attribute_in_switched_code_runs_as_plain(context):
    args, program = (_Attributes(), {13: "thirteen"}, [1, 2, 3]), _switched_copy(_call_every_kind_of_attribute)
    with context([]):
        seen = program(*args)
    assert seen == _call_every_kind_of_attribute(*args)


def test_switched_code_has_method_sites_where_the_c_path_runs_it():
    from cassette_hook.rewrite import _names

    program = _switched_copy(_call_every_kind_of_attribute)
    assert (_names.METHOD in program.__code__.co_names) == (C_PATH and sys.version_info >= (3, 11))


def test_hooks_see_a_method_call_in_switched_code_as_in_a_twin():
    args, program = (_Attributes(), {13: "thirteen"}, [1, 2, 3]), _switched_copy(_call_every_kind_of_attribute)
    in_twin, in_switched = _SeenBothWays([]), _SeenBothWays([])
    ch.overdub(in_twin, _call_every_kind_of_attribute, *args)
    with in_switched:
        program(*args)
    assert _named(in_switched.metadata) == _named(in_twin.metadata)


def _named(seen):
    """What hooks saw, the objects and lambdas each run makes compared by kind."""
    def kind(x):
        return x if type(x) in (int, str, dict, list, _Attributes) else type(x).__qualname__

    return [(f.__qualname__ if isinstance(f, types.FunctionType) else f, tuple(map(kind, a)), k) for f, a, k in seen]


def test_hooks_see_a_method_call_the_same_whether_its_site_enters_or_resolves():
    # An entering plan's twins load a bound method and hand it to the prehook unbound,
    # receiver first; other twins' method sites find the unbound callee: the same view.
    args = (_Attributes(), {13: "thirteen"}, [1, 2, 3])
    entering, hooked = _SeenEntering([]), _SeenBothWays([])
    ch.overdub(entering, _call_every_kind_of_attribute, *args)
    ch.overdub(hooked, _call_every_kind_of_attribute, *args)
    assert (_Attributes.method, (args[0], 2), {"k": 3}) in hooked.metadata
    assert (dict.get, (args[1], 13, "d"), {}) in hooked.metadata

    assert _named(entering.metadata) == _named(hooked.metadata)


@needs_c
@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10's call sites hand their callee to hooks.call")
def test_a_twins_method_call_on_a_local_goes_through_a_method_site_where_its_plan_does_not_enter():
    def program(obj):  # (a load on a global or an attribute of one stays plain: most likely no method)
        return os.path.join(str(operator.neg(obj.method(1))))

    def sites(ctx):
        twin = _plan.plan_for(ctx).twin(program)
        return [c for c in twin.__code__.co_consts if isinstance(c, _native.runtime.module.MethodSite)]

    assert [site.name for site in sites(Null())] == ["method"] and sites(Null()) == sites(_SeenBothWays([]))
    assert sites(_SeenEntering([])) == []  # (an entering site copies its callee: it loads the bound method)


_BEFORE_CONFIGURE = """
import sys
import cassette_hook._speedups as speedups

def function(x=0):
    return x

function_ = getattr(speedups, sys.argv[1])
for arguments in [(), (len,), (len, 1), (len, [1]), ([1], "append"), (None,), ((None, len),), (len, ()), ("x",),
                  (function, 1), (function, (1,), {}), (int, "3"), ((function, 1),), (iter([1]),)]:
    try:
        function_(*arguments)
    except Exception:
        pass
"""


@needs_c
def test_the_c_module_alone_raises_or_runs_plain_before_the_runtime_sets_it_up(tmp_path):
    # It is private, but importable: a direct import may call it before callsites configures it.
    # (Run away from the repository, where ``-c`` would import the sources, unbuilt.)
    names = [name for name in dir(_native.runtime.module) if not name.startswith("_")
             and callable(getattr(_native.runtime.module, name))]
    crashed = [name for name in names if subprocess.run([sys.executable, "-c", _BEFORE_CONFIGURE, name],
                                                        capture_output=True, cwd=tmp_path).returncode]
    assert crashed == []


@needs_c
def test_a_twins_method_site_is_one_c_object_per_name():
    (site,) = callsites.HOOKS.method_site("method")
    assert callsites.HOOKS.method_site("method") == (site,) and site.name == "method"
    assert "method site of .method" in repr(site)


def _twins_site(name):
    (site,) = callsites.HOOKS.method_site(name)
    return site


def _switched_codes_site(name):  # (what switched code's method site calls: the name as a constant)
    return lambda obj: _native.runtime.module.method_of(obj, name)


@needs_c
@pytest.mark.parametrize("method_site", [_twins_site, _switched_codes_site], ids=["twin", "switched"])
def test_a_method_site_gives_a_method_unbound_and_anything_else_alone(method_site):
    greeter, attributes = _Greeter(), _Attributes()
    assert method_site("greet")(greeter) is _Greeter.greet  # (no context: what a method load finds)
    assert method_site("get")({}) is dict.get
    assert method_site("static")(_Attributes()) == (_Attributes.static,)
    assert method_site("neg")(operator) == (operator.neg,)
    assert method_site("method")(attributes) == (attributes.method,)  # (a class with __getattr__: found bound)
    with pytest.raises(AttributeError, match="no missing here"):
        method_site("missing")(_Attributes())
    with pytest.raises(AttributeError, match="'object' object has no attribute 'missing'"):
        method_site("missing")(object())
    with Null():
        twin = method_site("greet")(greeter)
        assert twin is not _Greeter.greet and twin.__code__ is not _Greeter.greet.__code__
        assert twin(greeter, 2) == (greeter, 2)


@needs_c
def test_switched_codes_method_site_takes_an_object_and_a_str():
    with pytest.raises(TypeError, match=r"method_of\(obj, name\) takes an object and a str"):
        _native.runtime.module.method_of(object(), 3)
    with pytest.raises(TypeError, match=r"method_of\(obj, name\) takes an object and a str"):
        _native.runtime.module.method_of(object())


def _mirror():
    from cassette_hook.rewrite import _names

    return _native.runtime.module.mirror_builtins(vars(builtins), {_names.TWIN: True})


@needs_c
def test_the_builtins_are_mirrored_for_twins_where_cpython_has_dict_watchers():
    assert (_mirror() is not None) == (sys.version_info >= (3, 12))


@needs_c
@pytest.mark.skipif(sys.version_info < (3, 12), reason="no dict watchers: twins read the builtins (test above)")
def test_the_builtins_mirror_follows_every_change_of_the_builtins_but_its_pinned_names(monkeypatch):
    from cassette_hook.rewrite import _names

    mirror = _mirror()
    assert mirror is _mirror()  # (one per process)
    monkeypatch.setattr(builtins, "cassette_hook_test_builtin", "added", raising=False)
    assert mirror["cassette_hook_test_builtin"] == "added"
    builtins.cassette_hook_test_builtin = "changed"
    assert mirror["cassette_hook_test_builtin"] == "changed"
    monkeypatch.delattr(builtins, "cassette_hook_test_builtin")
    assert "cassette_hook_test_builtin" not in mirror
    monkeypatch.setattr(builtins, _names.TWIN, "changed")
    assert mirror[_names.TWIN] is True
    assert {key: value for key, value in mirror.items() if key != _names.TWIN} == {
        key: value for key, value in vars(builtins).items() if key != _names.TWIN}


@needs_c
def test_the_builtins_mirror_and_a_functions_builtins_take_dicts_and_a_function():
    with pytest.raises(TypeError, match=r"mirror_builtins\(builtins, pinned\) takes two dicts"):
        _native.runtime.module.mirror_builtins(vars(builtins))
    with pytest.raises(TypeError, match=r"set_builtins\(function, builtins\) takes a function and a dict"):
        _native.runtime.module.set_builtins(len, {})
    if _mirror() is not None:
        with pytest.raises(ValueError, match="mirrored already"):
            _native.runtime.module.mirror_builtins({}, {})


class _OnlyApp(ch.Context):
    include = ["app"]


class _NotApp(ch.Context):
    exclude = ["app"]


@needs_c
def test_a_switched_bodys_question_is_answered_in_c_as_the_plan_answers_it():
    from cassette_hook.importhook import switch

    def answers(ask):
        out = [ask("app.core")]
        for context in (Null(), _OnlyApp(), _NotApp()):
            with context:
                out += [ask("app.core"), ask("other"), ask("app.core")]  # (the second time: the plan's record)
        return out

    assert answers(_native.runtime.module.runs_here) == answers(switch.enter)
    assert answers(_native.runtime.module.runs_here) == [False, True, True, True, True, False, True, False, True, False]


def _negated(x):
    return -x


class _RecurseEverywhere(ch.Context):
    """An overload that recurses into every call, and a fallback overload for ``abs``."""

    def overdub(self, f, /, *args, **kwargs):
        self.metadata.append(getattr(f, "__name__", type(f).__name__))
        return ch.recurse(self, f, *args, **kwargs)

    def fallback(self, f: ch.Is[abs], /, *args, **kwargs):  # type: ignore[valid-type]
        return "fallback"


def test_recurse_into_a_builtin_runs_its_callbacks_under_the_context_and_its_fallback_overload():
    def program():
        return sorted([3, 1, 2], key=_negated), abs(-1), len([1]), [].append(1)

    seen: list[str] = []
    assert ch.overdub(_RecurseEverywhere(seen), program) == ([3, 2, 1], "fallback", 1, None)
    assert seen == ["program", "sorted", "_negated", "neg", "_negated", "neg", "_negated", "neg", "abs", "len",
                    "append"]
