"""Frames are the program's: code that looks at its own stack sees, under any context, what
it sees plainly (docs/api.md, "Overdubbing"; docs/internals.md, "What the design keeps";
issue 10).

Every program of ``tests/frames_program.py`` is run through its ``entry()`` plainly and
under each context of :data:`CONTEXTS`; the observations (function names, files and line
numbers of frames, counts, messages) must be equal.  Nothing is normalised but the stack
above ``entry()`` (the test's own frames, and ``overdub``'s one allowed frame), which the
programs cut off themselves.

Under :class:`RecurseOverload` the frames of its own ``overdub`` method are code the user
wrote, so they are the one allowed difference: exactly those frames are dropped from the
observed stacks before comparing.  The programs that *count* frames or name a frame by its
position (``warnings.warn(stacklevel=n)``, ``logging``'s caller fields, a depth counted
along ``f_back``, recursion probing, a traceback's length) see an overload's frame as it
is, so no filtering can make them equal there: they are compared under the other contexts
only.  That overload takes Python functions only (``f: FunctionType``), so that C functions
that read their caller's frame (``sys._getframe``, ``super()``) are called from the
program's frames.  :class:`RecurseAnyOverload` takes every callee, C functions included:
a C function called through it sees the overload's frame as its caller, which is harmless
where the program calls it itself (``sys._getframe()`` then names the overload's frame,
dropped, whose ``f_back`` is the program's) but not inside a library that asks for its
own caller (``inspect.stack``, ``inspect.currentframe``, ``traceback.extract_stack``), so
those three are compared under the narrower overload only.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import os
import sys
import types
from typing import Any, Callable

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import cassette_hook as ch
from cassette_hook import _native
from cassette_hook.importhook import lazy_mode
import frames_program as program

THIS_FILE = os.path.basename(__file__)


class Null(ch.Context):
    pass


class Counting(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        self.metadata[0] += 1


class Posthook(ch.Context):
    def posthook(self, out, f, /, *args, **kwargs):
        self.metadata[0] += 1


class Raisehook(ch.Context):
    def raisehook(self, exc, f, /, *args, **kwargs):
        self.metadata[0] += 1


class RecurseOverload(ch.Context):
    def overdub(self, f: types.FunctionType, /, *args, **kwargs):
        return ch.recurse(self, f, *args, **kwargs)


class RecurseAnyOverload(ch.Context):
    def overdub(self, f, /, *args, **kwargs):
        return ch.recurse(self, f, *args, **kwargs)


def _lines(code: types.CodeType) -> range:
    return range(code.co_firstlineno, max(line for _, _, line in code.co_lines() if line) + 1)


_OVERLOADS = [(code.co_name, _lines(code))
              for code in (RecurseOverload.overdub.__code__, RecurseAnyOverload.overdub.__code__)]


def is_overload_frame(item: object) -> bool:
    """A frame description ``(file, function, line)`` of one of the two overloads above."""
    return (isinstance(item, tuple) and len(item) == 3 and item[0] == THIS_FILE
            and any(item[1] == name and item[2] in lines for name, lines in _OVERLOADS))


def without_overload_frames(observed: Any) -> Any:
    if isinstance(observed, list):
        return [without_overload_frames(x) for x in observed if not is_overload_frame(x)]
    if isinstance(observed, tuple) and not is_overload_frame(observed):
        return tuple(without_overload_frames(x) for x in observed)
    return observed


Hooked = dict[str, types.ModuleType]  # "eager", "lazy", "under-a-context": the import hook's ways


@pytest.fixture(scope="module")
def hooked() -> Hooked:
    """``frames_program`` imported again, three times, through the import hook: the same
    file, so the same names and line numbers; switched at import; imported lazy (as
    compiled, its functions switched when the first of these tests activates a context, or
    where a function watcher is, when it first calls ``entry``); and imported lazy while a
    context is active (switched at import).

    Entries of earlier tests that only a collection frees (in a cycle with a traceback)
    are collected first: while one lives, a context is active, and the lazy import would
    be switched at import too."""
    gc.collect()
    plain = sys.modules.pop(program.__name__)
    modules: Hooked = {}
    try:
        for way in ("under-a-context", "eager", "lazy"):  # (lazy last: no activation here switches it)
            ch.install(include=[program.__name__], lazy=way != "eager")
            with ch.NullContext() if way == "under-a-context" else contextlib.nullcontext():
                modules[way] = importlib.import_module(program.__name__)
            del sys.modules[program.__name__]
    finally:
        ch.uninstall()
        sys.modules[program.__name__] = plain
    assert modules["eager"].entry.__code__.co_code != plain.entry.__code__.co_code
    watch = lazy_mode.watcher()  # (reading __code__ of a light function would switch it: docs/importhook.md)
    held = modules["lazy"].entry.__code__ if watch is None else watch.code_of(modules["lazy"].entry)
    assert held.co_code == plain.entry.__code__.co_code
    return modules


Runner = Callable[[types.ModuleType, Hooked, str], Any]


def _overdub(make: Callable[[], ch.Context]) -> Runner:
    return lambda plain, hooked, case: ch.overdub(make(), plain.entry, plain.CASES[case])


def _with(make: Callable[[], ch.Context], way: str = "eager") -> Runner:
    def run(plain: types.ModuleType, hooked: Hooked, case: str) -> Any:
        module = hooked[way]
        with make():
            out = module.entry(module.CASES[case])
            # switched by the activation, or (a function watcher) by its first call, the one above
            assert module.entry.__code__.co_code == hooked["eager"].entry.__code__.co_code
            return out
    return run


CONTEXTS: dict[str, Runner] = {
    "null": _overdub(Null),
    "counting-prehook": _overdub(lambda: Counting([0])),
    "posthook": _overdub(lambda: Posthook([0])),
    "raisehook": _overdub(lambda: Raisehook([0])),
    "tagging-counting-prehook": _overdub(lambda: ch.enabletagging(Counting([0]), program.entry)),
    "trace": _overdub(lambda: ch.TraceContext(io.StringIO())),
    "profile": _overdub(lambda: ch.ProfileContext(io.StringIO())),
    "recurse-overload": _overdub(RecurseOverload),
    "recurse-overload-any-callee": _overdub(RecurseAnyOverload),
    "import-hook-null": _with(Null),
    "import-hook-counting-prehook": _with(lambda: Counting([0])),
    "lazy-import-hook-null": _with(Null, "lazy"),
    "lazy-import-hook-counting-prehook": _with(lambda: Counting([0]), "lazy"),
    "import-hook-under-a-context-null": _with(Null, "under-a-context"),
    "import-hook-under-a-context-counting-prehook": _with(lambda: Counting([0]), "under-a-context"),
}
COUNTS_FRAMES = [name for name in CONTEXTS if not name.startswith("recurse-overload")]
LIBRARY_ASKS_ITS_CALLER = [name for name in CONTEXTS if name != "recurse-overload-any-callee"]


def observe(case: str, context: str, hooked: Hooked) -> tuple[Any, Any]:
    """What ``case`` sees plainly, and under ``context`` (its allowed difference dropped).

    For the import hook, contexts of earlier tests are collected first: whether one that
    counts operators is still alive changes how switched code runs operators, and the
    result must not depend on the order the tests run in."""
    if "import-hook" in context:
        gc.collect()
    plain = program.entry(program.CASES[case])
    observed = CONTEXTS[context](program, hooked, case)
    if context.startswith("recurse-overload"):
        observed = without_overload_frames(observed)
    return plain, observed


# -- where frames of ours are still seen ----------------------------------------------------
# docs/internals.md ("The C hot path", "Known limitations") says where the program still
# sees cassette_hook's frames.  There the test asserts the difference instead of equality,
# so that a change either way shows: a gap closed must be taken off this list.

C_PATH = _native.runtime.name == "C"
SEEN_THROUGH = {"getframe_by_depth", "warnings_stacklevel"}  # the emulated builtins see past our frames
RECURSION_PROBE = "recursion_depth_probe"  # the limit is emulated: the real one is raised while a context runs
OVERLOADS = {"recurse-overload", "recurse-overload-any-callee"}
HOOKED = {"counting-prehook", "import-hook-counting-prehook", "lazy-import-hook-counting-prehook",
          "import-hook-under-a-context-counting-prehook", "trace", "profile", "posthook", "raisehook",
          "tagging-counting-prehook"}
# A caught exception's traceback holds none of our frames on either path: each entry point
# of ours takes its entries off as the exception leaves it (docs/internals.md, "Tracebacks
# are the program's").
TRACEBACKS = {"extract_tb_of_a_caught_exception", "traceback_of_an_exception_raised_deep_inside",
              "traceback_of_an_exception_raised_in_a_callback_from_c", "traceback_of_an_exception_re_raised",
              "traceback_of_an_exception_chained_with_from",
              "traceback_of_exceptions_from_a_constructor_and_an_operator", "traceback_tb_next_of_code_run_by_exec",
              "type_error_of_a_call_with_wrong_arguments", "type_error_of_a_bad_constructor_call",
              "traceback_entry_count_of_a_bad_call_caught_by_depth"}
# A prehook alone, through ``overdub``: the twins' call sites with positional arguments
# only enter (``callsites.enter``), and the program's frame calls the callee itself; the
# others (keywords, stars, operators, constructions, callbacks from C, libraries' calls
# with keywords on the way) run the call site's Python closure as under any hook.
ENTERING = {"counting-prehook"}
ENTERED_PLAINLY = {"currentframe_f_back", "extract_stack", "inspect_stack", "stack_depth_along_f_back",
                   "type_error_of_a_call_with_wrong_arguments"}


# A tagging context runs the callbacks C makes, generators' and coroutines' frames and
# special methods through Python code of ``tagging`` on the C path too.
TAGGING = {"tagging-counting-prehook"}
TAGGING_SEEN = {"generator_frames", "coroutine_frames", "callbacks_from_map_and_sorted_key",
                "special_methods_called_by_c"}


def frames_of_ours_seen(case: str, context: str) -> bool:
    """Does ``case`` see cassette_hook's frames under ``context``, on this run's hot path?"""
    if case in SEEN_THROUGH or case in TRACEBACKS:
        return False
    if context in TAGGING and C_PATH and case in TAGGING_SEEN:
        return True
    if case == RECURSION_PROBE:
        return True
    if context in OVERLOADS:  # ``recurse`` is a Python frame between the overload and the callee, but in C
        return not C_PATH
    if not C_PATH:  # hooks run in the site's Python closure; on 3.10 every call site is a Python call
        if context in ENTERING and sys.version_info >= (3, 11):
            return case not in ENTERED_PLAINLY
        if context in HOOKED or sys.version_info < (3, 11):
            return True
        # a partial's call, a builtin's callbacks, a construction, a property's getter and
        # a special method C calls run through Python helpers (``call``,
        # ``call_primitive``, ``construct``, ``standins._PureSpecial``) under any context
        return case in {"call_through_functools_partial", "callbacks_from_map_and_sorted_key",
                        "type_error_of_a_bad_constructor_call", "methods_classmethods_properties_and_super",
                        "special_methods_called_by_c"}
    return False


def assert_sees_the_plain_stack(case: str, context: str, hooked: Hooked) -> None:
    plain, observed = observe(case, context, hooked)
    if frames_of_ours_seen(case, context):
        assert observed != plain, f"{case} under {context}: now the plain stack; take it off the list"
    else:
        assert observed == plain


@pytest.mark.parametrize("context", CONTEXTS)
def test_sys_getframe_by_depth_names_the_plain_frames(context, hooked):
    assert_sees_the_plain_stack("getframe_by_depth", context, hooked)


@pytest.mark.parametrize("context", LIBRARY_ASKS_ITS_CALLER)
def test_inspect_stack_names_the_plain_frames_and_lines(context, hooked):
    assert_sees_the_plain_stack("inspect_stack", context, hooked)


@pytest.mark.parametrize("context", LIBRARY_ASKS_ITS_CALLER)
def test_currentframe_f_back_chain_is_the_plain_one(context, hooked):
    assert_sees_the_plain_stack("currentframe_f_back", context, hooked)


@pytest.mark.parametrize("context", COUNTS_FRAMES)
def test_stack_depth_counted_along_f_back_is_the_plain_one(context, hooked):
    assert_sees_the_plain_stack("stack_depth_along_f_back", context, hooked)


@pytest.mark.parametrize("context", LIBRARY_ASKS_ITS_CALLER)
def test_traceback_extract_stack_is_the_plain_one(context, hooked):
    assert_sees_the_plain_stack("extract_stack", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_extract_tb_of_a_caught_exception_is_the_plain_one(context, hooked):
    assert_sees_the_plain_stack("extract_tb_of_a_caught_exception", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_tb_next_chain_of_an_exception_raised_deep_inside_is_the_plain_one(context, hooked):
    assert_sees_the_plain_stack("traceback_of_an_exception_raised_deep_inside", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_tb_next_chain_of_an_exception_raised_in_a_callback_from_c_is_the_plain_one(context, hooked):
    assert_sees_the_plain_stack("traceback_of_an_exception_raised_in_a_callback_from_c", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_tb_next_chain_of_a_re_raised_exception_is_the_plain_one(context, hooked):
    assert_sees_the_plain_stack("traceback_of_an_exception_re_raised", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_tb_next_chains_of_an_exception_and_its_cause_are_the_plain_ones(context, hooked):
    assert_sees_the_plain_stack("traceback_of_an_exception_chained_with_from", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_tb_next_chains_of_exceptions_from_init_and_an_operator_are_the_plain_ones(context, hooked):
    assert_sees_the_plain_stack("traceback_of_exceptions_from_a_constructor_and_an_operator", context, hooked)


@pytest.mark.parametrize("context", COUNTS_FRAMES)  # (an overload's frame would be the tb_next, as written)
def test_tb_next_of_code_run_by_exec_is_that_codes_frame(context, hooked):
    assert_sees_the_plain_stack("traceback_tb_next_of_code_run_by_exec", context, hooked)


@pytest.mark.parametrize("context", COUNTS_FRAMES)
def test_logging_records_name_the_plain_caller(context, hooked):
    assert_sees_the_plain_stack("logging_caller_fields", context, hooked)


@pytest.mark.parametrize("context", COUNTS_FRAMES)
def test_warnings_stacklevel_points_where_it_does_plainly(context, hooked):
    assert_sees_the_plain_stack("warnings_stacklevel", context, hooked)


@pytest.mark.parametrize("context", COUNTS_FRAMES)
def test_recursion_probe_reaches_the_plain_depth(context, hooked):
    assert_sees_the_plain_stack("recursion_depth_probe", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_type_error_of_a_call_with_wrong_arguments_has_the_plain_traceback(context, hooked):
    assert_sees_the_plain_stack("type_error_of_a_call_with_wrong_arguments", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_type_error_of_a_bad_constructor_call_has_the_plain_traceback(context, hooked):
    assert_sees_the_plain_stack("type_error_of_a_bad_constructor_call", context, hooked)


@pytest.mark.parametrize("context", COUNTS_FRAMES)
def test_arity_errors_are_told_from_inner_errors_by_traceback_length(context, hooked):
    assert_sees_the_plain_stack("traceback_entry_count_of_a_bad_call_caught_by_depth", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_generator_frames_are_resumed_from_the_plain_frames(context, hooked):
    assert_sees_the_plain_stack("generator_frames", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_coroutine_frames_are_awaited_from_the_plain_frames(context, hooked):
    assert_sees_the_plain_stack("coroutine_frames", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_methods_classmethods_properties_and_super_see_the_plain_frames(context, hooked):
    assert_sees_the_plain_stack("methods_classmethods_properties_and_super", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_functools_wraps_decorator_frames_are_the_plain_ones(context, hooked):
    assert_sees_the_plain_stack("decorators_with_functools_wraps", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_a_call_through_functools_partial_sees_the_plain_frames(context, hooked):
    assert_sees_the_plain_stack("call_through_functools_partial", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_callbacks_from_map_and_sorted_key_see_the_plain_frames(context, hooked):
    assert_sees_the_plain_stack("callbacks_from_map_and_sorted_key", context, hooked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_special_methods_called_by_c_see_the_plain_frames(context, hooked):
    assert_sees_the_plain_stack("special_methods_called_by_c", context, hooked)


def test_every_program_of_the_corpus_has_its_test():
    with open(__file__, encoding="utf-8") as fh:
        source = fh.read()
    assert [case for case in program.CASES if f'"{case}"' not in source] == []


# --- nesting composes ---------------------------------------------------------------------

def helper() -> str:
    return "helped"


def name_of(f: object) -> str:
    return getattr(f, "__name__", repr(f))


class Recording(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        self.metadata.append(name_of(f))


class Inner(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        helper()
        self.metadata.append(name_of(f))


def inner_program() -> int:
    return len(str(41 + 1))


def outer_program(inner: ch.Context) -> int:
    return ch.overdub(inner, inner_program)


def test_calls_made_by_an_inner_contexts_hook_are_seen_by_the_outer_context_only():
    outer, inner = Recording([]), Inner([])
    assert ch.overdub(outer, outer_program, inner) == 2
    assert "str" in inner.metadata and "len" in inner.metadata
    assert "helper" in outer.metadata
    assert "helper" not in inner.metadata


# --- overdub's own frame --------------------------------------------------------------------
# docs/api.md ("Frames"): ``ch.overdub(ctx, f)`` adds at most its own one frame between its
# caller and ``f``; an ``overdub`` overload's frame is the user's own, and on the pure-Python
# path the ``recurse`` it calls is a frame of ours (docs/internals.md, "Known limitations").

def frames_between(run: Callable[[Callable[[], list[str]]], list[str]]) -> list[str]:
    """Where ``run(f)`` calls ``f``: the names of the frames between ``run``'s and ``f``'s."""
    def f() -> list[str]:
        names, frame = [], sys._getframe().f_back
        while frame is not None and frame.f_code is not run.__code__:
            names.append(frame.f_code.co_name)
            frame = frame.f_back
        assert frame is not None, "run's frame is not on the stack"
        return names

    return run(f)


OVERDUB_FRAME_CONTEXTS = {"null": Null, "counting-prehook": lambda: Counting([0]),
                          "recurse-overload": RecurseOverload}


@pytest.mark.parametrize("context", OVERDUB_FRAME_CONTEXTS)
def test_overdub_adds_only_its_own_frame_above_f(context):
    assert frames_between(lambda f: f()) == []
    between = frames_between(lambda f: ch.overdub(OVERDUB_FRAME_CONTEXTS[context](), f))
    users = ["overdub"] if context == "recurse-overload" else []  # the overload's own frame
    recursing = ["recurse"] if users and not C_PATH else []
    assert between == [*recursing, *users, "__call__"]


# --- the frame below a callee that an overload's ``recurse`` runs ----------------------------
# docs/internals.md ("cassette_hook's frames are visible"): on the C path the callee has the
# overload's frame below it, with no frame of ours between, however the overload calls
# ``recurse`` (on 3.11 too, whose ``CALL`` inlines any Python function: "``recurse``
# without a frame"); without the C hot path ``recurse`` is a Python frame between them.
# (``f_back``, not ``sys._getframe(1)``: the program's ``sys._getframe`` is emulated in twins
# and skips the overload's frame and ours alike.)

class FixedArityRecurse(ch.Context):
    def overdub(self, f, x, /):
        return ch.recurse(self, f, x)


class StarRecurse(ch.Context):
    def overdub(self, f, /, *args):
        return ch.recurse(self, f, *args)


def name_of_the_frame_below_me(x: int) -> str:
    return sys._getframe().f_back.f_code.co_name


def calls_name_of_the_frame_below_me(x: int) -> str:
    return name_of_the_frame_below_me(x)


@pytest.mark.parametrize("overload", [FixedArityRecurse, StarRecurse], ids=["fixed-arity", "star"])
def test_the_callee_of_an_overloads_recurse_has_the_overload_frame_below_it(overload):
    below = ch.overdub(overload(), calls_name_of_the_frame_below_me, 1)
    assert below == ("overdub" if C_PATH else "recurse")
