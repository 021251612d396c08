"""Differential tests: under a context that overloads nothing, results are the same.

Every function of ``tests/corpus.py`` is run plainly, ``f(*args)``, and overdubbed,
``ch.overdub(ctx, f, *args)``, by three contexts:

- ``Null``: overloads nothing (the fast path: twins only, operators not rewritten);
- ``Counting``: a prehook that counts calls (the full path: ``site``, ``present``, hooks,
  operator sites);
- ``CountingNoOperators``: the same with ``operators = False``.

What is compared: the return value (after the case's ``post`` step, run outside any
context), or the exception -- type, message, cause and context -- and the user frames of
its traceback as ``(function name, line number)``, leaving out cassette_hook's own frames
and this file's.  Rewriting a corpus function must also not fall back to running it
uninstrumented (the engine's ``cannot rewrite`` warning).

``test_prehook_sees_every_call_of_the_probe`` checks the other direction on a few corpus
functions: every call of ``corpus._probe`` that runs is seen by a prehook, whatever the
shape of its call site (star calls, methods, partials, C callbacks, class bodies ...).
"""

from __future__ import annotations

import copy
import os
import sys
import traceback
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

sys.path.insert(0, os.path.dirname(__file__))

import cassette_hook as ch
from cassette_hook import _native, context_stack
import corpus

PACKAGE_DIR = os.path.dirname(os.path.abspath(ch.__file__)) + os.sep
THIS_FILE = os.path.abspath(__file__)
ACCELERATED = _native.runtime.name == "C"  # the C hot path is built and in use


class Null(ch.Context):
    pass


class Counting(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        self.metadata[0] += 1


class CountingNoOperators(Counting):
    operators = False


class CountingHooked(CountingNoOperators):
    """A raisehook too (no corpus case makes it matter): the plan's call sites are
    ``Site``s, where ``Counting``'s hand ``callsites.enter`` the callee and its arguments."""

    def raisehook(self, exc, f, /, *args, **kwargs):
        pass


class Recursing(ch.Context):
    """An ``overdub`` overload that hands every call on: its frames sit between the
    program's, which frame-sensitive builtins (``eval``, ``locals``, ``super``,
    ``sys._getframe``) must see through.  Written as users write it, ``f`` not
    positional-only: the frames then run the copy registration makes (``tests/test_frames.py``
    has the positional-only form)."""

    def overdub(self, f, *args, **kwargs):
        self.metadata[0] += 1
        return ch.recurse(self, f, *args, **kwargs)


CONTEXTS = [Null, Counting, CountingNoOperators, CountingHooked, Recursing]


# -- running and describing one call ---------------------------------------------------

def user_frames(tb: Any) -> list[tuple[str, int]]:
    """(function, line) of each traceback entry that is neither cassette_hook's nor ours."""
    frames = []
    for frame, lineno in traceback.walk_tb(tb):
        filename = os.path.abspath(frame.f_code.co_filename) if not frame.f_code.co_filename.startswith("<") \
            else frame.f_code.co_filename
        if filename.startswith(PACKAGE_DIR) or filename == THIS_FILE:
            continue
        frames.append((frame.f_code.co_name, lineno))
    return frames


def describe_exception(e: BaseException | None) -> Any:
    if e is None:
        return None
    return (type(e), str(e))


def outcome(run: Any) -> tuple[Any, ...]:
    try:
        value = run()
    except Exception as e:  # noqa: BLE001 - any exception is an outcome to compare
        return ("raised", type(e).__name__, str(e), describe_exception(e.__cause__),
                describe_exception(e.__context__), e.__suppress_context__, user_frames(e.__traceback__))
    return ("returned", value)


def run_plain(case: corpus.Case, args: tuple[Any, ...]) -> tuple[Any, ...]:
    def run() -> Any:
        value = case.func(*args)
        return case.post(value) if case.post else value

    return outcome(run)


def run_overdubbed(case: corpus.Case, args: tuple[Any, ...], ctx: ch.Context) -> tuple[Any, ...]:
    def run() -> Any:
        value = ch.overdub(ctx, case.func, *args)
        assert ch.current_context() is None, "overdub left its context active"
        return case.post(value) if case.post else value

    return outcome(run)


_UNINSTRUMENTED: dict[str, list[str]] = {}


# -- documented differences ----------------------------------------------------------------
# Where docs/internals.md ("Known limitations") says the overdubbed program differs, the
# test asserts that documented behaviour instead of equality, so a change either way shows.

def _extra_frames(ctx: ch.Context) -> bool:
    """Frames other than the program's sit between user frames: under an overload (its
    own, and without the C hot path ``recurse``'s), and, without the C hot path, at a
    3.11+ call site under hooks (the call site's Python closure) and at every 3.10 call
    site.  Not at a 3.11+ call site with positional arguments under a prehook alone: it
    enters (``Plan.enters``), and the program's frame calls the callee itself."""
    if type(ctx) is Recursing:
        return True
    if ACCELERATED:
        return False
    plan = context_stack.plan_of(ctx)
    return sys.version_info < (3, 11) or not (plan.fast or plan.enters)


def _extra_frames_in_keyword_calls(ctx: ch.Context) -> bool:
    """As :func:`_extra_frames`, for a call with keywords on the way (``logging``'s own):
    without the C hot path, every hooked one runs the site's Python closure."""
    if type(ctx) is Recursing:
        return True
    return not ACCELERATED and (sys.version_info < (3, 11) or not context_stack.plan_of(ctx).fast)


OWN_FRAME_NAMES = {"call", "overdubbed", "recurse"}
OVERLOAD_NAMES = {"overdub"}  # Recursing's overload: the user's frames that may sit between
BETWEEN_NAMES = OVERLOAD_NAMES if ACCELERATED else OWN_FRAME_NAMES | OVERLOAD_NAMES
"""What a walk outwards meets between the program's frames under Recursing: on the C hot
path the overload's frames alone (``recurse`` has none), else cassette_hook's too."""


def _walk_meets_our_frames(plain: Any, overdubbed: Any) -> bool:
    """The innermost frame is right; walking outwards meets the frames between (and, left
    out, those are the program's in order)."""
    names = overdubbed[1]
    program = [name for name in names if name not in BETWEEN_NAMES]
    return (names[0] == plain[1][0] and set(names) - set(program) <= BETWEEN_NAMES
            and program == plain[1][:len(program)] and len(program) < len(names))


def _log_caller_is_our_frame(plain: Any, overdubbed: Any) -> bool:
    """The records are the same but for the caller: logging's walk stops at a frame between."""
    same_messages = [r[2] for r in overdubbed[1]] == [r[2] for r in plain[1]]
    return same_messages and {r[0] for r in overdubbed[1]} <= BETWEEN_NAMES


DOCUMENTED: dict[str, tuple[Any, Any]] = {  # case -> (when it applies, what holds instead)
    "getframe_f_back_walk": (_extra_frames, _walk_meets_our_frames),
    "inspect_stack_names": (_extra_frames, _walk_meets_our_frames),
    "logging_records_caller": (_extra_frames_in_keyword_calls, _log_caller_is_our_frame),
    # A twin runs a rewritten copy of the function's code.
    "running_code_is_the_functions_code": (
        lambda ctx: True, lambda plain, overdubbed: plain[1] is True and overdubbed[1] is False),
}


def check(case: corpus.Case, args: tuple[Any, ...], ctx_type: type[ch.Context]) -> None:
    plain = run_plain(case, copy.deepcopy(args))
    ctx = ctx_type([0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        overdubbed = run_overdubbed(case, copy.deepcopy(args), ctx)
    fallbacks = [str(w.message) for w in caught
                 if "cassette_hook: cannot rewrite" in str(w.message) and "corpus" in str(w.message)]
    applies, instead = DOCUMENTED.get(case.name, (lambda ctx: False, None))
    if applies(ctx):
        assert instead(plain, overdubbed), f"{case.name}: documented difference no longer holds: {overdubbed!r}"
        return
    assert overdubbed == plain, (
        f"{case.name}{args!r} under {ctx_type.__name__}:\n  plain:      {plain!r}\n  overdubbed: {overdubbed!r}")
    # The engine warns only the first time it fails to rewrite a code object (the result
    # is cached), so remember it: every later run of the case is uninstrumented too.
    if fallbacks:
        _UNINSTRUMENTED.setdefault(case.name, fallbacks)
    assert case.name not in _UNINSTRUMENTED, f"corpus code ran uninstrumented: {_UNINSTRUMENTED[case.name]}"


# -- the tests ----------------------------------------------------------------------------

def _cases() -> list[Any]:
    params = []
    for c in corpus.CASES:
        marks = []
        if sys.version_info < c.min_version:
            marks.append(pytest.mark.skip(reason=f"needs Python {'.'.join(map(str, c.min_version))}+"))
        params.append(pytest.param(c, id=c.name, marks=marks))
    return params


@pytest.mark.parametrize("ctx_type", CONTEXTS, ids=[c.__name__ for c in CONTEXTS])
@pytest.mark.parametrize("case", _cases())
def test_same_result_under_context(case: corpus.Case, ctx_type: type[ch.Context]) -> None:
    if case.given is None:
        check(case, case.args, ctx_type)
        return

    # No shrinking: a failing example is printed as found (the inputs are small anyway), and
    # shrinking a slow case under a context could take minutes.
    @settings(max_examples=case.max_examples, deadline=None, database=None,
              phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
    @given(case.given)
    def run(args: tuple[Any, ...]) -> None:
        check(case, args, ctx_type)

    run()


# -- hooks see every call site -------------------------------------------------------------

class Probe(ch.Context):
    """Records the calls of ``corpus._probe`` that the prehook sees."""

    def prehook(self, f, /, *args, **kwargs):
        if f is corpus._probe:
            self.metadata.append(args)


@pytest.mark.parametrize("probe", corpus.PROBES, ids=[p.__name__ for p in corpus.PROBES])
def test_prehook_sees_every_call_of_the_probe(probe: Any) -> None:
    corpus.PROBE_RUNS[0] = 0
    plain = probe(3) if probe.__code__.co_argcount else probe()
    plain_runs = corpus.PROBE_RUNS[0]
    corpus.PROBE_RUNS[0] = 0
    ctx = Probe([])
    args = (3,) if probe.__code__.co_argcount else ()
    assert ch.overdub(ctx, probe, *args) == plain
    assert corpus.PROBE_RUNS[0] == plain_runs
    assert len(ctx.metadata) == plain_runs, f"the prehook saw {len(ctx.metadata)} of {plain_runs} calls"


# -- sanity of the harness itself -----------------------------------------------------------

def test_corpus_case_names_are_unique() -> None:
    names = [c.name for c in corpus.CASES]
    assert len(names) == len(set(names))


def test_counting_context_takes_the_hooked_path() -> None:
    ctx = Counting([0])
    assert ch.overdub(ctx, corpus._fib, 6) == 8
    assert ctx.metadata[0] > 0
    no_ops = CountingNoOperators([0])
    ch.overdub(no_ops, corpus._fib, 6)
    assert 0 < no_ops.metadata[0] < ctx.metadata[0]  # operator sites are calls only with operators on


def test_null_context_overloads_nothing() -> None:
    ctx = Null()
    assert ch.overdub(ctx, corpus._fib, 10) == corpus._fib(10)
    assert ch.current_context() is None


def test_traceback_frames_compared_are_the_users() -> None:
    plain = run_plain(corpus.Case("t", corpus.traceback_through_plain_calls, (5,)), (5,))
    assert plain[0] == "raised"
    names = [name for name, _ in plain[-1]]
    assert names == ["traceback_through_plain_calls", "_level1", "_level2", "_level3"]
