"""A fixed-seed sample of the differential fuzzer (``fuzz/differential.py``), and the
divergences it found, as regression tests.

The sample generates a few dozen programs with a fixed hypothesis seed and checks each in
a worker process: plain, with import-hook (switched) code and no context, under a null
context and under a counting context, as a module and as a function body (see
``fuzz/worker.py``).  The full campaign and its results are in ``docs/fuzzing.md``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
import warnings
from typing import Any

import pytest

import cassette_hook as ch
from cassette_hook.importhook import finder

FUZZ_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz")
sys.path.insert(0, FUZZ_DIR)

import differential  # noqa: E402
import shapes  # noqa: E402


def test_fixed_seed_sample_behaves_the_same_in_every_mode() -> None:
    sources = differential.generate(24, seed_=0)
    campaign = differential.check_all(sources, sys.executable)
    assert not campaign.divergences, campaign.divergences
    # The sample compares programs, it does not only skip them.
    assert campaign.counts["same"] >= len(sources) // 2, campaign.counts


def _compiles(source: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            compile(source, "<fuzz>", "exec")
    except SyntaxError:
        return False
    return True


def test_program_of_each_shape_newer_compilers_make_specially_behaves_the_same_in_every_mode() -> None:
    """``fuzz/shapes.py``: inlined ``all``/``tuple``/... of a generator, template strings,
    ``except A, B:``, lazy imports, inlined comprehensions, ``EXTENDED_ARG`` jumps ...; each
    program this Python compiles is compared, none only skipped."""
    names = {source: name for name, source in shapes.SHAPES.items()}
    campaign = differential.check_all(list(names), sys.executable)
    assert [names[d["source"]] for d in campaign.divergences] == [], campaign.divergences
    assert campaign.counts["same"] == sum(map(_compiles, names)), campaign.counts


def test_program_that_hits_recursion_error_is_not_compared() -> None:
    """On 3.12+ the limit hit may be C's, which raising the recursion limit does not move:
    the fuzzer found programs whose ``RecursionError`` came a few frames earlier under a
    context (and plain runs that differ by a frame)."""
    caught_and_printed = "def r():\n    r()\ntry:\n    r()\nexcept RecursionError as e:\n    print(e)\n"
    campaign = differential.check_all([caught_and_printed], sys.executable)
    assert campaign.counts == {"depth-sensitive": 1}


# -- divergences found by the fuzzer ------------------------------------------------------

class Null(ch.Context):
    pass


def _error_lines(code: Any, ctx: ch.Context | None) -> list[int]:
    try:
        with ctx if ctx is not None else contextlib.nullcontext():
            exec(code, {"__name__": "fuzz_regression"})
    except NameError as e:
        return [line for frame, line in traceback.walk_tb(e.__traceback__) if frame.f_code.co_filename == "<fuzz>"]
    raise AssertionError("the program should raise NameError")


# bytecode 0.19 wrote the one-line location form for end columns up to 255; CPython reads
# a byte of 128 or more as the start of the next entry, so on 3.11+ the instruction after
# such an entry could get the line of an earlier one in tracebacks (here: line 1 for line 2).
LONG_COLUMN_PROGRAM = (  # the fuzzer's program, minimised: its line 3 ends past column 127
    'def _():(())' "\n"
    'd+{[()or a in ()for b in d](([2]))}' "\n"
    "try:b= K(sum(''[1:] for d in range(3))); a.v = divmod({'k': None}.get(range(3), 0), "
    "[(a, b) for a in range(2) for b in (1, 'x')])" "\n"
    'except():((((()<[]))))' "\n"
)


def test_rewritten_code_keeps_line_numbers_of_columns_past_127() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "'list' object is not callable"
        code = compile(LONG_COLUMN_PROGRAM, "<fuzz>", "exec")
    switched = finder.switch_or_warn(code, "fuzz_regression")
    if sys.version_info >= (3, 11):  # the line table and the position table agree
        lines = {}
        for start, end, line in switched.co_lines():
            lines.update(dict.fromkeys(range(start, end, 2), line))
        positions = list(switched.co_positions())
        assert all(lines[offset] == positions[offset // 2][0] for offset in lines)
    assert _error_lines(switched, Null()) == _error_lines(code, None) == [2]


# bytecode 0.17 lost line numbers on 3.10 after an instruction that has none: a
# generator expression (whose first instruction, GEN_START, has no line) lost them all,
# and its frame showed line -1 in tracebacks under a context.

def _sums_a_generator_of(a: Any) -> Any:
    return sum(list(enumerate(a)) for d in range(3))


def _traceback_lines(run: Any) -> list[tuple[str, int]]:
    try:
        run()
    except TypeError as e:
        return [(frame.f_code.co_name, line) for frame, line in traceback.walk_tb(e.__traceback__)
                if frame.f_code.co_filename == __file__][-2:]
    raise AssertionError("the program should raise TypeError")


def test_generator_expression_keeps_its_line_in_tracebacks_under_a_context() -> None:
    plain = _traceback_lines(lambda: _sums_a_generator_of(1))
    assert plain[-1][0] == "<genexpr>"
    assert _traceback_lines(lambda: ch.overdub(Null(), _sums_a_generator_of, 1)) == plain


LINES_PROGRAM = """
def gen(xs):
    return sum(x for x in xs if x), [y
        for y in xs]

def cleanup(path):
    with open(path) as f:
        try:
            return f.read()
        finally:
            print(
                path)
"""


def _line_runs(code: Any) -> list[int | None]:
    runs: list[int | None] = []
    for _start, _end, line in code.co_lines():
        if not runs or runs[-1] != line:
            runs.append(line)
    return runs


def test_rewritten_code_keeps_the_line_of_every_instruction() -> None:
    from cassette_hook import rewrite
    from cassette_hook.runtime.callsites import HOOKS

    def codes(code: Any) -> Any:
        yield code
        for const in code.co_consts:
            if hasattr(const, "co_lines"):
                yield from codes(const)

    for code in list(codes(compile(LINES_PROGRAM, "<lines>", "exec")))[1:]:
        assert _line_runs(rewrite.rewrite_code(code, HOOKS, operators=True)) == _line_runs(code), code.co_name


class Counting(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        pass


class Seen(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        self.metadata.append(f)


# Rewriting recurses (in ``bytecode``): a function first called under a context near the
# recursion limit could not be rewritten, and was then warned about and kept as a
# primitive for good, its calls never overdubbed again even at a shallow depth.

def _first_met_deep() -> list[int]:
    return [abs(x) for x in (-1, -2)]


def _descend_then_call_first_met_deep() -> None:
    try:
        _descend_then_call_first_met_deep()
    except RecursionError:  # a frame or so from the limit
        _first_met_deep()


def test_function_first_met_deep_in_a_recursion_is_overdubbed_later() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ch.overdub(Seen([]), _descend_then_call_first_met_deep)
        seen: list[Any] = []
        ch.overdub(Seen(seen), _first_met_deep)
    assert [str(w.message) for w in caught] == []
    assert seen.count(abs) == 2


def test_module_switched_deep_in_a_recursion_is_instrumented() -> None:
    code = compile("def f(xs):\n    return [abs(x) for x in xs]\n", "<deep>", "exec")
    switched: list[Any] = []

    def descend() -> None:
        try:
            descend()
        except RecursionError:
            if not switched:
                switched.append(finder.switch_or_warn(code, "fuzz_deep"))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        descend()
    assert [str(w.message) for w in caught] == []
    namespace: dict[str, Any] = {"__name__": "fuzz_deep"}
    exec(switched[0], namespace)
    seen: list[Any] = []
    assert ch.overdub(Seen(seen), namespace["f"], [-1]) == [1]
    assert abs in seen


class _LengthRaises:
    """``list()`` asks ``__len__`` for a length hint before it iterates."""

    def __len__(self) -> int:
        raise NameError("from __len__")

    def __iter__(self) -> Any:
        yield 1


def _listed() -> list[int]:
    return list(_LengthRaises())


def test_list_of_an_object_whose_len_raises_under_a_context_with_hooks() -> None:
    with pytest.raises(NameError, match="from __len__"):
        _listed()
    with pytest.raises(NameError, match="from __len__"):
        ch.overdub(Counting(), _listed)


# Builtins that iterate an argument whose class defines ``__iter__`` in Python get a
# stand-in whose iteration is a call site; they must see it as they see the object:
# the same calls of ``__len__`` and ``__length_hint__``, in the same order, with the
# same results and errors.

class _Logged:
    """Logs every protocol call made on it; ``length`` and ``hint`` are what ``__len__``
    and ``__length_hint__`` return (or raise, if an exception class: a new exception each
    time, so that no traceback leads back to it and keeps the context's frames alive)."""

    def __init__(self, log: list[str], length: Any = 2, hint: Any = 2) -> None:
        self.log, self.length, self.hint = log, length, hint

    def _answer(self, what: str, value: Any) -> Any:
        self.log.append(what)
        if isinstance(value, type) and issubclass(value, BaseException):
            raise value(f"from {what}")
        return value

    def __iter__(self) -> Any:
        self.log.append("iter")
        yield from (2, 1)


class _LoggedSized(_Logged):
    def __len__(self) -> Any:
        return self._answer("len", self.length)


class _LoggedHinted(_Logged):
    def __length_hint__(self) -> Any:
        return self._answer("hint", self.hint)


class _LoggedBoth(_LoggedSized, _LoggedHinted):
    pass


class _LoggedList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        yield "z"


class _LoggedSet(set):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        yield "z"


CONSUMERS: dict[str, Any] = {
    "list": list, "tuple": tuple, "set": lambda x: sorted(set(x)), "frozenset": lambda x: sorted(frozenset(x)),
    "sorted": sorted, "sum": sum, "any": any, "all": all, "min": min, "max": max,
    "enumerate": lambda x: list(enumerate(x)), "zip": lambda x: list(zip(x, x)), "map": lambda x: list(map(str, x)),
    "filter": lambda x: list(filter(None, x)), "join": lambda x: "-".join(x), "str.join": lambda x: str.join("", x),
    "extend": lambda x: [0].extend(x), "list.extend": lambda x: list.extend([0], x),
}
ITERABLES: dict[str, Any] = {
    "no length": lambda log: _Logged(log),
    "len": lambda log: _LoggedSized(log), "hint": lambda log: _LoggedHinted(log),
    "len and hint": lambda log: _LoggedBoth(log),
    "len raises": lambda log: _LoggedSized(log, length=NameError),
    "len raises TypeError": lambda log: _LoggedBoth(log, length=TypeError),
    "len not an int": lambda log: _LoggedBoth(log, length="2"),
    "len negative": lambda log: _LoggedSized(log, length=-1),
    "hint raises": lambda log: _LoggedHinted(log, hint=NameError),
    "hint NotImplemented": lambda log: _LoggedHinted(log, hint=NotImplemented),
    "hint not an int": lambda log: _LoggedHinted(log, hint=2.0),
}


def _consumed(consumer: Any, iterable: Any, ctx: ch.Context | None) -> tuple[Any, list[str]]:
    log: list[str] = []
    try:
        result = consumer(iterable(log)) if ctx is None else ch.overdub(ctx, consumer, iterable(log))
    except Exception as e:
        return (type(e), str(e)), log
    return result, log


@pytest.mark.parametrize("iterable", list(ITERABLES.values()), ids=list(ITERABLES))
@pytest.mark.parametrize("consumer", list(CONSUMERS.values()), ids=list(CONSUMERS))
@pytest.mark.parametrize("ctx_type", [Counting, Null])  # Null: higher-order builtins (sorted, map ...) only
def test_builtin_iterating_an_argument_asks_it_the_same_under_a_context(consumer: Any, iterable: Any,
                                                                         ctx_type: type[ch.Context]) -> None:
    assert _consumed(consumer, iterable, ctx_type()) == _consumed(consumer, iterable, None)


@pytest.mark.parametrize("consumer", list(CONSUMERS.values()), ids=list(CONSUMERS))
def test_builtin_iterating_an_argument_overdubs_its_python_iter(consumer: Any) -> None:
    seen: list[Any] = []
    with contextlib.suppress(TypeError):  # joining ints fails, once iterated
        ch.overdub(Seen(seen), consumer, _LoggedBoth([]))
    assert _Logged.__iter__ in [getattr(f, "__func__", f) for f in seen]


def _extend_itself() -> list[str]:
    xs = _LoggedList(["y"])
    list.extend(xs, xs)
    xs.extend(xs)
    return xs[:]


def test_list_extended_by_itself_under_a_context_with_hooks() -> None:
    """``xs.extend(xs)`` may copy ``xs`` without iterating it (3.13 does)."""
    assert ch.overdub(Counting(), _extend_itself) == _extend_itself()


def _sets_of_a_set_subclass() -> tuple[list[int], list[int]]:
    return sorted(set(_LoggedSet({1, 2}))), sorted(frozenset(_LoggedSet({3})))


def test_set_of_a_set_subclass_copies_it_under_a_context_with_hooks() -> None:
    """``set(s)`` of a ``set`` subclass copies its table, never calling its ``__iter__``."""
    assert ch.overdub(Counting(), _sets_of_a_set_subclass) == _sets_of_a_set_subclass() == ([1, 2], [3])
