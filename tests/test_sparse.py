"""Sparse plans: a context each of whose overloads and hooks names its callee with
``Is[...]`` (a mock of ``time.time``, a prehook that watches ``open``) runs, for every
other callee, what a context that overloads nothing runs (docs/internals.md, "The hot
path"; docs/performance.md, "Overloads that name their callees").  What runs and which
hooks see what must be what the same context written with an unconstrained callee gives;
an overload registered or removed while such a context is active applies at the next
call.  Tests run on the C and the pure-Python path (tox's ``py3XX`` and ``py3XX-pure``)."""

from __future__ import annotations

import functools
import operator
import runpy
import sys
import threading
import time
import types
import typing
from pathlib import Path
from typing import Any

import pytest

import cassette_hook as ch
from cassette_hook import context_stack
from cassette_hook.runtime import callees, callsites


def _plan(ctx: ch.Context) -> Any:
    return context_stack.plan_of(ctx)


def _named(x: int) -> int:
    return x + 1


def _also_named(x: int) -> int:
    return x + 2


def _depth_of_program_frames(n: int) -> int:
    """Recurse ``n`` deep, then count how many frames below are this function's before
    the first frame of other code."""
    if n:
        return _depth_of_program_frames(n - 1)
    frame, count = sys._getframe(), 0
    while frame is not None and frame.f_code.co_name == "_depth_of_program_frames":  # (the twin's code)
        count, frame = count + 1, frame.f_back
    return count


class Widget:
    def __init__(self, size: int) -> None:
        self.size = size

    def grown(self, by: int) -> Widget:
        return Widget(self.size + by)

    def __add__(self, other: Widget) -> Widget:
        return Widget(self.size + other.size)


def _program() -> Any:
    """Calls of every kind: functions, methods, classes, builtins and their methods,
    operators, callbacks from C, a generator, an exception."""
    items: list[int] = []
    for i in range(5):
        items.append(_named(i) * 2)
    w = Widget(1).grown(2) + Widget(len(items))
    key = sorted(items, key=lambda v: -v)
    gen = sum(x for x in map(_also_named, items) if x % 2)
    try:
        int("x")
    except ValueError as exc:
        err = type(exc).__name__
    return items, w.size, key, gen, err, max(items), str(w.size).upper(), time.time() > 0


def _shown(args: tuple[Any, ...]) -> str:
    """The arguments a hook saw, as they were then (an object of the program's by its class)."""
    plain = (int, str, list, tuple, float)
    return repr(tuple(a if isinstance(a, plain) else type(a).__name__ for a in args))


# -- which plans are sparse ------------------------------------------------------------------

_SHAPES = ["prehook", "posthook", "raisehook", "overdub", "execute", "fallback"]


def _register(generic: str, ctx_type: type, callee: Any, log: list[Any]) -> Any:
    """An overload of ``generic`` for ``ctx_type`` that names ``callee``, and logs."""
    if generic == "prehook":
        def method(ctx, f, *args, **kwargs):
            log.append(("pre", _shown(args)))
    elif generic in ("posthook", "raisehook"):
        def method(ctx, out, f, *args, **kwargs):
            log.append((generic, _shown(args)))
    elif generic == "fallback":
        def method(ctx, f, *args, **kwargs):
            log.append(("fallback", _shown(args)))
            return f(*args, **kwargs)
    else:
        def method(ctx, f, *args, **kwargs):
            log.append((generic, _shown(args)))
            return ch.recurse(ctx, f, *args, **kwargs) if generic == "overdub" else ch.OverdubInstead
    position = 2 if generic in ("posthook", "raisehook") else 1
    names = list(method.__code__.co_varnames[:position + 1])
    method.__annotations__ = {names[0]: ctx_type, names[position]: ch.Is[callee]}
    getattr(ch, generic).register(method)
    return method


@pytest.mark.parametrize("generic", _SHAPES)
def test_a_context_whose_overloads_all_name_their_callee_has_a_sparse_plan(generic: str) -> None:
    ctx_type = type(f"Names{generic}", (ch.Context,), {})
    method = _register(generic, ctx_type, len, [])
    try:
        plan = _plan(ctx_type())
        assert plan.sparse and not plan.fast and not plan.enters
    finally:
        getattr(ch, generic).unregister(method)


def test_an_overload_with_an_unconstrained_callee_keeps_the_plan_general() -> None:
    class Both(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Both, f: ch.Is[len], *args):
        return 0

    @ch.prehook.register
    def _(ctx: Both, f, *args, **kwargs):
        pass

    assert not _plan(Both()).sparse


def test_a_sparse_plan_sees_operators_only_where_it_names_one() -> None:
    class NamesLen(ch.Context):
        pass

    class NamesAdd(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: NamesLen, f: ch.Is[len], x):
        return 0

    @ch.overdub.register
    def _(ctx: NamesAdd, f: ch.Is[operator.add], a, b):
        return 0

    assert not _plan(NamesLen()).operators
    assert _plan(NamesAdd()).operators
    assert ch.overdub(NamesAdd(), lambda a, b: a + b, 1, 2) == 0


def test_an_overload_naming_a_special_method_keeps_the_operators() -> None:
    class NamesDunder(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: NamesDunder, f: ch.Is[Widget.__add__], a, b):
        return "added"

    assert _plan(NamesDunder()).operators
    assert ch.overdub(NamesDunder(), lambda: Widget(1) + Widget(2)) == "added"


# -- a callee no overload names runs as under a context that overloads nothing ----------------

@pytest.mark.parametrize("generic", _SHAPES)
def test_a_callee_no_overload_names_is_called_by_its_callers_frame(generic: str) -> None:
    """150 deep (past the C path's budget of Sites): the frames below are what they are
    under a context that overloads nothing (the program's, but for 3.10's pure-Python
    ``call``, a frame of ours there under any context)."""
    ctx_type = type(f"Deep{generic}", (ch.Context,), {})
    method = _register(generic, ctx_type, len, [])
    try:
        null = ch.overdub(ch.context("Null")(), _depth_of_program_frames, 150)
        assert ch.overdub(ctx_type(), _depth_of_program_frames, 150) == null
        assert null == 151 or sys.version_info < (3, 11)
    finally:
        getattr(ch, generic).unregister(method)


# -- differential: the same context written with an unconstrained callee -----------------------

def _general_twin(generic: str, ctx_type: type, callee: Any, log: list[Any]) -> None:
    """``_register``'s overload written for any callee, testing it in its body."""
    if generic == "prehook":
        def method(ctx, f, *args, **kwargs):
            if f is callee:
                log.append(("pre", _shown(args)))
    elif generic in ("posthook", "raisehook"):
        def method(ctx, out, f, *args, **kwargs):
            if f is callee:
                log.append((generic, _shown(args)))
    elif generic == "fallback":
        def method(ctx, f, *args, **kwargs):
            if f is callee:
                log.append(("fallback", _shown(args)))
            return f(*args, **kwargs)
    else:
        def method(ctx, f, *args, **kwargs):
            if f is callee:
                log.append((generic, _shown(args)))
            return ch.recurse(ctx, f, *args, **kwargs) if generic == "overdub" else ch.OverdubInstead
    method.__annotations__ = {method.__code__.co_varnames[0]: ctx_type}
    getattr(ch, generic).register(method)


@pytest.mark.parametrize("callee", [len, _named, Widget, Widget.grown, list.append, str.upper],
                         ids=["builtin", "function", "class", "method", "builtin-method", "method-descriptor"])
@pytest.mark.parametrize("generic", _SHAPES)
def test_a_sparse_context_runs_and_sees_what_its_general_twin_does(generic: str, callee: Any) -> None:
    sparse_log: list[Any] = []
    general_log: list[Any] = []
    sparse_type = type("Sparse", (ch.Context,), {"operators": False})
    general_type = type("General", (ch.Context,), {"operators": False})
    _register(generic, sparse_type, callee, sparse_log)
    _general_twin(generic, general_type, callee, general_log)
    assert _plan(sparse_type()).sparse and not _plan(general_type()).sparse
    plain = _program()
    assert ch.overdub(sparse_type(), _program) == plain
    assert ch.overdub(general_type(), _program) == plain
    assert sparse_log == general_log


def test_a_mock_named_callee_is_replaced_at_every_alias() -> None:
    class Frozen(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Frozen, f: ch.Is[time.time]):
        return 1e6

    from time import time as now

    def run():
        return time.time(), now(), len("ab"), _named(1)

    assert ch.overdub(Frozen(), run) == (1e6, 1e6, 2, 2)


def test_an_overload_on_a_base_context_class_names_its_callee_for_subclasses() -> None:
    class Base(ch.Context):
        pass

    class Derived(Base):
        pass

    @ch.overdub.register
    def _(ctx: Base, f: ch.Is[_named], x):
        return "base"

    assert _plan(Derived()).sparse
    assert ch.overdub(Derived(), lambda: (_named(1), _also_named(1))) == ("base", 3)


@pytest.mark.parametrize("pattern", ["Is of two", pytest.param("union of Is", marks=pytest.mark.skipif(
    sys.version_info < (3, 11), reason="3.10's typing.Union takes types only: no union of Is[...] to write"))])
def test_an_overload_naming_a_union_of_callees_applies_to_each(pattern: str) -> None:
    class Union(ch.Context):
        pass

    named = ch.Is[_named, len] if pattern == "Is of two" else typing.Union[ch.Is[_named], ch.Is[len]]

    def method(ctx, f, *args):
        return "named"

    method.__annotations__ = {"ctx": Union, "f": named}
    ch.overdub.register(method)
    assert _plan(Union()).sparse
    assert ch.overdub(Union(), lambda: (_named(1), len("a"), _also_named(1), abs(-1))) == ("named", "named", 3, 1)


def test_a_prehook_naming_a_builtin_method_sees_its_calls_and_only_theirs() -> None:
    seen: list[Any] = []

    class WatchAppend(ch.Context):
        pass

    @ch.prehook.register
    def _(ctx: WatchAppend, f: ch.Is[list.append], *args):
        seen.append(_shown(args))

    def run():
        items: list[int] = []
        items.append(1)
        items.extend([2])
        return str(items).upper()

    assert ch.overdub(WatchAppend(), run) == "[1, 2]"
    assert seen == ["([], 1)"]


# -- registering and unregistering while a sparse context is active ----------------------------

@pytest.mark.parametrize("generic", _SHAPES)
def test_an_overload_registered_while_a_sparse_context_runs_applies_at_the_next_call(generic: str) -> None:
    ctx_type = type(f"Later{generic}", (ch.Context,), {})
    log: list[Any] = []
    first = _register(generic, ctx_type, abs, [])
    later: list[Any] = []

    def run():
        before = (_named(1), len("ab"))
        later.append(_register(generic, ctx_type, _named, log))
        later.append(_register(generic, ctx_type, len, log))
        during = (_named(1), len("ab"))
        for method in later:
            getattr(ch, generic).unregister(method)
        after = (_named(1), len("ab"))
        return before, during, after

    try:
        assert ch.overdub(ctx_type(), run) == ((2, 2),) * 3
    finally:
        getattr(ch, generic).unregister(first)
    expected = {"prehook": "pre", "fallback": "fallback"}.get(generic, generic)
    if generic == "fallback":  # (a fallback runs for a callee with no Python body: len)
        assert log == [(expected, "('ab',)")]
    elif generic == "raisehook":  # (no call raised)
        assert log == []
    else:
        assert log == [(expected, "(1,)"), (expected, "('ab',)")]


@pytest.mark.parametrize("generic", ["prehook", "overdub"])
def test_an_overload_registered_while_a_sparse_context_runs_applies_at_a_methods_next_call(generic: str) -> None:
    # (the method's function, found unnamed at its first calls, is known so thereafter:
    # the registration must undo that)
    ctx_type = type(f"LaterMethod{generic}", (ch.Context,), {})
    log: list[Any] = []
    first = _register(generic, ctx_type, abs, [])

    def run():
        widget = Widget(1)
        before = [widget.grown(i).size for i in range(3)]
        later = _register(generic, ctx_type, Widget.grown, log)
        during = widget.grown(5).size
        getattr(ch, generic).unregister(later)
        return before, during, widget.grown(6).size

    try:
        assert ch.overdub(ctx_type(), run) == ([1, 2, 3], 6, 7)
    finally:
        getattr(ch, generic).unregister(first)
    assert log == [("pre" if generic == "prehook" else generic, "('Widget', 5)")]


_by_key = [1, 3, 2]


def test_a_key_given_to_a_lists_sort_is_a_call_site_under_a_sparse_plan() -> None:
    # (a global's sort: bound by the call site's own load, called as itself on the C path)
    class Negating(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Negating, f: ch.Is[_named], x):
        return -x

    def run():
        _by_key.sort(key=_named)
        return list(_by_key)

    assert ch.overdub(Negating(), run) == [3, 2, 1]
    assert run() == [1, 2, 3]


class Mocking(ch.Context):
    pass


def test_a_mock_registered_while_its_context_runs_replaces_the_next_call() -> None:
    @ch.overdub.register
    def _(ctx: Mocking, f: ch.Is[abs], x):
        return "abs"

    def run():
        before = _named(1)

        @ch.overdub.register
        def mock(ctx: Mocking, f: ch.Is[_named], x):
            return "mocked"

        during = _named(1)
        ch.overdub.unregister(mock)
        return before, during, _named(1)

    assert ch.overdub(Mocking(), run) == (2, "mocked", 2)


# -- the examples ------------------------------------------------------------------------------

_EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_the_freeze_time_example_freezes_the_clock_inside_the_context_only(capsys: Any) -> None:
    runpy.run_path(str(_EXAMPLES / "freeze_time.py"), run_name="__main__")
    frozen = "(1700000000.0, 1700000000.0, 42.0)"
    assert capsys.readouterr().out == f"({frozen}, {frozen})\nTrue\n"


def test_the_watch_open_example_sees_every_open_and_nothing_else(capsys: Any) -> None:
    runpy.run_path(str(_EXAMPLES / "watch_open.py"), run_name="__main__")
    assert capsys.readouterr().out.splitlines() == [
        "HELLO", "('open', 'notes.txt', 'w')", "('open', 'notes.txt', 'r')", "('open', 'notes.txt', 0)"]


# -- a registration while another thread resolves a callee -------------------------------------

def _registering_meanwhile(monkeypatch: Any, module: Any, name: str, register: Any) -> None:
    """Make ``module.name`` (a step of resolving a callee) run ``register`` in another
    thread, once, before it returns: the interleaving where a registration lands while a
    call site works out what a callee runs."""
    original = getattr(module, name)
    done: list[bool] = []

    def step(*args: Any) -> Any:
        out = original(*args)
        if not done:
            done.append(True)
            thread = threading.Thread(target=register)
            thread.start()
            thread.join()
        return out

    monkeypatch.setattr(module, name, step)


class _Built:
    def __init__(self) -> None:
        self.x = 1


class _BuiltByC(dict):  # type: ignore[type-arg]  # (constructed by C: no Python __new__ or __init__)
    pass


class Resolving(ch.Context):
    pass


@pytest.mark.parametrize("cls, module, step", [(_Built, callees, "runnable"), (_BuiltByC, callsites, "callable_for")],
                         ids=["python-init", "constructed-by-c"])
def test_an_overload_registered_while_a_class_is_resolved_applies_at_the_next_call(
        monkeypatch: Any, cls: type, module: Any, step: str) -> None:
    """The class's answer, worked out before the registration, is not kept in the plan's
    table of direct twins (docs/internals.md, "The hot path": a registration stales the
    plans in use)."""
    @ch.overdub.register
    def first(ctx: Resolving, f: ch.Is[abs], x):
        return "abs"

    methods = [first]

    def register() -> None:
        def mock(ctx, f, *args):
            return "mocked"

        mock.__annotations__ = {"ctx": Resolving, "f": ch.Is[cls]}
        ch.overdub.register(mock)
        methods.append(mock)

    _registering_meanwhile(monkeypatch, module, step, register)

    def run():
        return type(cls()).__name__, cls()

    try:
        assert ch.overdub(Resolving(), run) == (cls.__name__, "mocked")
    finally:
        for method in methods:
            ch.overdub.unregister(method)


# -- a named callee's overload, resolved once --------------------------------------------------

class _Number(int):
    pass


def _overloads_of(ctx_type: type) -> dict[int, Any]:
    overloads = _plan(ctx_type()).overloads
    assert overloads is not None
    return overloads  # type: ignore[no-any-return]


def test_a_named_callees_overload_is_resolved_at_its_first_call_only() -> None:
    """docs/internals.md, "The hot path": the plan keeps, per named callee, the overload
    every call of it runs, so later calls skip dispatch."""
    class Once(ch.Context):
        pass

    @ch.overdub.register
    def identity(ctx: Once, f: ch.Is[_named], *args):
        return ch.recurse(ctx, f, *args)

    ctx = Once()
    assert ch.overdub(ctx, lambda: (_named(1), _named(2))) == (2, 3)
    resolved = _overloads_of(Once)[id(_named)]
    assert resolved in ch.overdub.running_methods() and resolved.__qualname__ == identity.__qualname__


@pytest.mark.parametrize("argument, expected", [(1, "int"), (_Number(1), "int"), ("a", "a!"), (1.5, "float")],
                         ids=["matching", "subclass", "other-type", "other-overload"])
def test_an_overload_constraining_later_arguments_applies_where_their_types_match(argument: Any,
                                                                                  expected: str) -> None:
    """Resolved once for the callee, checked per call by the later arguments' types (a
    ``dispatch.Guard``); two overloads of one callee are dispatched per call."""
    def shout(x: Any) -> str:
        return f"{x}!"

    class Typed(ch.Context):
        pass

    class TwoTyped(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Typed, f: ch.Is[shout], x: int):
        return "int"

    @ch.overdub.register
    def _(ctx: TwoTyped, f: ch.Is[shout], x: int):
        return "int"

    @ch.overdub.register
    def _(ctx: TwoTyped, f: ch.Is[shout], x: float):
        return "float"

    one = ch.overdub(Typed(), lambda: [shout(argument) for _ in range(3)])
    two = ch.overdub(TwoTyped(), lambda: [shout(argument) for _ in range(3)])
    assert one == [expected if expected != "float" else "1.5!"] * 3
    assert two == [expected] * 3


def test_an_overload_applies_only_to_calls_of_the_lengths_it_takes() -> None:
    def either(a: Any, b: Any = 0, *rest: Any) -> Any:
        return a, b, rest

    class Lengths(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Lengths, f: ch.Is[either], a: int, b: int):
        return "two"

    assert ch.overdub(Lengths(), lambda: (either(1, 2), either(1), either(1, 2, 3), either(1, 2))) == (
        "two", (1, 0, ()), (1, 2, (3,)), "two")


def test_an_execute_overload_naming_its_callee_is_resolved_once_too() -> None:
    class Executes(ch.Context):
        pass

    @ch.execute.register
    def _(ctx: Executes, f: ch.Is[_named], x: int):
        return "executed"

    assert ch.overdub(Executes(), lambda: (_named(1), _named("a") if False else _named(2), _also_named(1))) == (
        "executed", "executed", 3)


@pytest.mark.parametrize("change", ["register", "unregister"])
def test_a_change_after_a_callees_overload_was_resolved_applies_at_the_next_call(change: str) -> None:
    class Changing(ch.Context):
        pass

    @ch.overdub.register
    def general(ctx: Changing, f: ch.Is[_named], *args):
        return "general"

    def specific(ctx, f, x):
        return "specific"

    specific.__annotations__ = {"ctx": Changing, "f": ch.Is[_named], "x": int}
    if change == "unregister":
        ch.overdub.register(specific)

    def run():
        first = _named(1)
        if change == "register":
            ch.overdub.register(specific)
        else:
            ch.overdub.unregister(specific)
        return first, _named(1)

    expected = ("general", "specific") if change == "register" else ("specific", "general")
    try:
        assert ch.overdub(Changing(), run) == expected
    finally:
        if change == "register":
            ch.overdub.unregister(specific)


# -- a named callee's overload at its later calls ----------------------------------------------
# (On the pure-Python path, from its second call, through ``callsites._named_route``'s
# closure; on the C path through its ``Site``: the same behaviour, docs/internals.md, "The
# hot path".)

_MANY = 4  # (calls enough that the later ones take the route found at the first)


def _fails(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative: {x}")
    return x


def _countdown(n: int) -> int:
    return 0 if n == 0 else 1 + _countdown(n - 1)


def _counting_up(n: int) -> Any:
    for i in range(n):
        yield _named(i)


class Matched(ch.Context):
    pass


@ch.overdub.register
def _matched_fails(ctx: Matched, f: ch.Is[_fails], x: int) -> Any:
    return ch.recurse(ctx, f, x)


@ch.overdub.register
def _matched_countdown(ctx: Matched, f: ch.Is[_countdown], n: int) -> Any:
    return ch.recurse(ctx, f, n)


@ch.overdub.register
def _matched_counting_up(ctx: Matched, f: ch.Is[_counting_up], n: int) -> Any:
    return ch.recurse(ctx, f, n)


@pytest.mark.skipif(not isinstance(callsites.resolve, types.FunctionType), reason="the pure-Python path's route")
def test_a_named_callees_later_calls_resolve_to_one_closure_found_by_one_look_up() -> None:
    """docs/internals.md, "The hot path": not a ``site`` closure made per call."""
    def run():
        _fails(1)
        return callsites.resolve(_fails), callsites.resolve(_fails), id(_fails) in _plan(ch.current_context()).named

    first, second, named = ch.overdub(Matched(), run)
    assert named and first is second and first is not _fails and first.__code__ is not callsites._OVERDUBBED_CODE


def test_an_exception_through_a_named_callees_later_calls_leaves_the_stack_as_it_was() -> None:
    ctx = Matched()

    def run():
        caught = []
        for x in (1, -1, 2, -2, 3, -3):
            try:
                _fails(x)
            except ValueError as exc:
                frames = [tb.tb_frame.f_code.co_name for tb in _walk(exc.__traceback__)]
                caught.append((str(exc), frames, ch.current_context() is ctx))
        return caught

    caught = ch.overdub(ctx, run)
    assert [c[0] for c in caught] == ["negative: -1", "negative: -2", "negative: -3"]
    assert all(c[2] for c in caught)  # (the context on top again after each)
    assert all(c[1] == ["run", "_matched_fails", "_fails"] for c in caught), caught


def _walk(tb: Any) -> Any:
    while tb is not None:
        yield tb
        tb = tb.tb_next


def test_a_named_callees_overload_recursing_into_itself_runs_at_every_level() -> None:
    levels: list[int] = []

    class Deep(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Deep, f: ch.Is[_countdown], n: int):
        levels.append(n)
        return ch.recurse(ctx, f, n)

    assert ch.overdub(Deep(), lambda: [_countdown(3) for _ in range(_MANY)]) == [3] * _MANY
    assert levels == [3, 2, 1, 0] * _MANY


def test_a_context_below_sees_a_named_callees_overload_and_its_calls_at_every_call() -> None:
    """The overload runs as an overdubbed call of the contexts below (``callees.seen_below``);
    the callee's own calls are the context's above."""
    seen: list[str] = []

    class Below(ch.Context):
        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            if getattr(f, "__name__", None) in ("_matched_countdown", "_countdown"):
                seen.append(f.__name__)

    def run():
        return [_countdown(1) for _ in range(_MANY)]

    assert ch.overdub(Below(), lambda: ch.overdub(Matched(), run)) == [1] * _MANY
    assert seen == ["_matched_countdown"] * 2 * _MANY  # (n = 1 and n = 0; the callee's calls are the inner one's)


def test_a_named_generator_functions_overload_runs_its_body_when_iterated_under_the_context() -> None:
    log: list[Any] = []

    class Watching(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Watching, f: ch.Is[_counting_up], n: int):
        return ch.recurse(ctx, f, n)

    @ch.overdub.register
    def _(ctx: Watching, f: ch.Is[_named], x: int):
        log.append(x)
        return ch.recurse(ctx, f, x)

    assert ch.overdub(Watching(), lambda: [list(_counting_up(2)) for _ in range(_MANY)]) == [[1, 2]] * _MANY
    assert log == [0, 1] * _MANY


def test_an_overload_registered_after_a_named_callees_later_calls_applies_at_the_next_call() -> None:
    class Later(ch.Context):
        pass

    @ch.overdub.register
    def general(ctx: Later, f: ch.Is[_named], x: int):
        return ("general", ch.recurse(ctx, f, x))

    def specific(ctx, f, x):
        return "specific"

    specific.__annotations__ = {"ctx": Later, "f": ch.Is[_named], "x": int}

    def run():
        before = [_named(1) for _ in range(_MANY)]
        ch.overdub.register(specific)
        return before, _named(1)

    try:
        assert ch.overdub(Later(), run) == ([("general", 2)] * _MANY, "specific")
    finally:
        ch.overdub.unregister(specific)


def test_an_overload_registered_by_a_named_callees_star_argument_applies_to_that_call() -> None:
    """A star call's site resolves the callee before its iterable runs: the call still
    sees the overload that registered."""
    class InArgument(ch.Context):
        pass

    @ch.overdub.register
    def general(ctx: InArgument, f: ch.Is[_named], x: int):
        return "general"

    def specific(ctx, f, x):
        return "specific"

    specific.__annotations__ = {"ctx": InArgument, "f": ch.Is[_named], "x": int}

    def registering(x: int) -> Any:
        ch.overdub.register(specific)
        yield x

    try:
        assert ch.overdub(InArgument(), lambda: ([_named(1) for _ in range(_MANY)], _named(*registering(1)))) == (
            ["general"] * _MANY, "specific")
    finally:
        ch.overdub.unregister(specific)


def test_a_named_callees_later_calls_of_other_types_or_lengths_run_its_body() -> None:
    def shout(x: Any, y: Any = "") -> str:
        return f"{x}{y}!"

    class Guarded(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Guarded, f: ch.Is[shout], x: int):
        return "int"

    calls = [(1,), (1,), ("a",), (1,), (1, 2), (True,), (1.5,), (1,)]
    assert ch.overdub(Guarded(), lambda: [shout(*c) for c in calls]) == [
        "int", "int", "a!", "int", "12!", "int", "1.5!", "int"]


def test_a_named_callees_later_calls_with_keywords_reach_its_overload() -> None:
    seen: list[Any] = []

    class Keywords(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Keywords, f: ch.Is[_also_named], *args: Any, **kwargs: Any):
        seen.append((args, kwargs))
        return ch.recurse(ctx, f, *args, **kwargs)

    assert ch.overdub(Keywords(), lambda: [_also_named(1), _also_named(x=2), _also_named(3), _also_named(x=4)]) == [
        3, 4, 5, 6]
    assert seen == [((1,), {}), ((), {"x": 2}), ((3,), {}), ((), {"x": 4})]


def test_an_execute_overloads_overdub_instead_at_a_named_callees_later_calls_runs_its_body() -> None:
    class Passing(ch.Context):
        pass

    @ch.execute.register
    def _(ctx: Passing, f: ch.Is[_named], x: int):
        return ch.OverdubInstead if x % 2 else "even"

    assert ch.overdub(Passing(), lambda: [_named(x) for x in range(5)]) == ["even", 2, "even", 4, "even"]


def test_a_named_callees_later_calls_from_threads_each_run_its_overload() -> None:
    seen: list[int] = []

    class Threaded(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Threaded, f: ch.Is[_named], x: int):
        seen.append(x)
        return ch.recurse(ctx, f, x)

    ctx = Threaded()
    results: list[Any] = []

    def worker(base: int) -> None:
        results.append(ch.overdub(ctx, lambda: [_named(base + i) for i in range(_MANY)]))

    threads = [threading.Thread(target=worker, args=(10 * k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [[10 * k + i + 1 for i in range(_MANY)] for k in range(3)]
    assert sorted(seen) == sorted(10 * k + i for k in range(3) for i in range(_MANY))


# -- overloads that take their callee by class ---------------------------------------------------

class Tool:
    """A callable object: an overload may take every tool as its callee (``f: Tool``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, x: int) -> str:
        return f"{self.name}({x})"


class SubTool(Tool):
    pass


class NotATool:
    def __call__(self, x: int) -> int:
        return x


def _tools() -> Any:
    return Tool("a")(1), SubTool("b")(2), NotATool()(3), _named(4), len("ab")


class ByClass(ch.Context):
    pass


@ch.overdub.register
def _by_class(ctx: ByClass, f: Tool, x):
    return f"overloaded {f.name}"


def test_a_context_whose_overloads_take_their_callee_by_class_has_a_sparse_plan() -> None:
    assert _plan(ByClass()).sparse


def test_an_overload_taking_its_callee_by_class_applies_to_its_instances_and_subclasses_only() -> None:
    assert ch.overdub(ByClass(), _tools) == ("overloaded a", "overloaded b", 3, 5, 2)


def test_a_callee_not_of_the_class_an_overload_takes_is_called_by_its_callers_frame() -> None:
    null = ch.overdub(ch.context("Null")(), _depth_of_program_frames, 150)
    assert ch.overdub(ByClass(), _depth_of_program_frames, 150) == null


@pytest.mark.parametrize("generic", _SHAPES)
def test_a_hook_taking_builtin_functions_by_class_sees_what_its_general_twin_does(generic: str) -> None:
    """``f: types.BuiltinFunctionType``: every builtin function presented as the callee
    (``items.append(x)`` is presented as ``list.append``, a method descriptor)."""
    sparse_log: list[Any] = []
    general_log: list[Any] = []
    sparse_type = type("SparseByClass", (ch.Context,), {"operators": False})
    general_type = type("GeneralByClass", (ch.Context,), {"operators": False})
    method = _register(generic, sparse_type, len, sparse_log)
    position = 2 if generic in ("posthook", "raisehook") else 1
    method.__annotations__[method.__code__.co_varnames[position]] = types.BuiltinFunctionType
    getattr(ch, generic).unregister(method)
    getattr(ch, generic).register(method)

    def general(ctx, *rest, **kwargs):
        f, args = rest[position - 1], rest[position:]
        if generic in ("prehook", "posthook", "raisehook"):
            if isinstance(f, types.BuiltinFunctionType):
                sparse_like = {"prehook": "pre"}.get(generic, generic)
                general_log.append((sparse_like, _shown(args)))
            return None
        if isinstance(f, types.BuiltinFunctionType):
            general_log.append((generic, _shown(args)))
        if generic == "fallback":
            return f(*args, **kwargs)
        return ch.recurse(ctx, f, *args, **kwargs) if generic == "overdub" else ch.OverdubInstead

    general.__annotations__ = {"ctx": general_type}
    getattr(ch, generic).register(general)
    try:
        assert _plan(sparse_type()).sparse and not _plan(general_type()).sparse
        plain = _program()
        assert ch.overdub(sparse_type(), _program) == plain
        assert ch.overdub(general_type(), _program) == plain
        assert sparse_log == general_log and (sparse_log or generic == "raisehook")
    finally:
        getattr(ch, generic).unregister(method)
        getattr(ch, generic).unregister(general)


class LaterByClass(ch.Context):
    pass


def test_an_overload_taking_its_callee_by_class_registered_while_its_context_runs_applies_at_the_next_call() -> None:
    @ch.overdub.register
    def _(ctx: LaterByClass, f: ch.Is[abs], x):
        return "abs"

    def run():
        before = _tools()

        @ch.overdub.register
        def by_class(ctx: LaterByClass, f: Tool, x):
            return "later"

        during = _tools()
        ch.overdub.unregister(by_class)
        return before, during, _tools()

    plain = ("a(1)", "b(2)", 3, 5, 2)
    assert ch.overdub(LaterByClass(), run) == (plain, ("later", "later", 3, 5, 2), plain)


def test_callable_objects_no_overload_names_run_their_bodies_under_a_mock() -> None:
    """A callable instance or a partial goes to the hooks under a sparse plan (nothing
    cheap says what it presents), where no overload applies to it."""
    class MocksNamed(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: MocksNamed, f: ch.Is[_named], x):
        return "mocked"

    def run():
        return [(NotATool()(3), functools.partial(_also_named, 1)(), _named(1)) for _ in range(3)]

    assert ch.overdub(MocksNamed(), run) == [(3, 3, "mocked")] * 3
