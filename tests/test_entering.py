"""Entering call sites: under a context whose only hook is a prehook (``Plan.enters``),
a twin's call site with positional arguments only hands ``callsites.enter`` the callee and
its arguments; the prehook runs there, and the site's own frame calls the twin.  What the
prehook sees, what runs and what the program sees must be what a hooked call site (a
``Site``, under any other hook) gives."""

from __future__ import annotations

import sys
import weakref
from typing import Any

import pytest

import cassette_hook as ch
from cassette_hook import context_stack, _native, passes
from cassette_hook.runtime import hotpath


def _name(f: Any) -> str:
    return getattr(f, "__qualname__", None) or type(f).__qualname__


class Recording(ch.Context):
    operators = False

    def prehook(self, f, /, *args, **kwargs):
        self.metadata.append((_name(f), tuple(type(a).__name__ for a in args), tuple(sorted(kwargs))))


class RecordingHooked(Recording):
    """The same prehook, and a raisehook: its call sites are Sites."""

    def raisehook(self, exc, f, /, *args, **kwargs):
        pass


def _plan(ctx: ch.Context) -> Any:
    return context_stack.plan_of(ctx)


# -- which plans enter -----------------------------------------------------------------------

def test_a_context_whose_only_hook_is_a_prehook_enters() -> None:
    assert _plan(Recording([])).enters


@pytest.mark.parametrize("hook", ["posthook", "raisehook", "overdub", "execute", "fallback"])
def test_any_other_hook_or_overload_makes_the_sites_hooked_ones(hook: str) -> None:
    def method(self, *args, **kwargs):  # (a hook that does nothing; overdub's would be a primitive's)
        return ch.recurse(self, *args, **kwargs) if hook == "overdub" else ch.OverdubInstead

    ctx_type = type(f"With{hook}", (Recording,), {hook: method})
    assert not _plan(ctx_type([])).enters


def test_a_context_with_a_pass_or_its_hooks_disabled_does_not_enter() -> None:
    assert not _plan(Recording([], pass_=passes.Pass(lambda ctx_type, func, code: code))).enters
    assert not _plan(ch.disablehooks(Recording([]))).enters


def test_a_tagging_context_does_not_enter() -> None:
    assert not _plan(ch.enabletagging(Recording([]), abs)).enters


# -- the call sites --------------------------------------------------------------------------

def _callee(x, y=0, *rest, **named):
    return x + y + len(rest) + len(named)


def _calls_in_every_way(x):
    many = list(range(20))
    return [_callee(x), _callee(x, y=1), _callee(*[x, 2]), _callee(x, **{"k": 1}), _callee(*many)]


def test_positional_call_sites_of_a_twin_enter_and_the_others_resolve() -> None:
    ctx = Recording([])
    plan = _plan(ctx)
    with ctx:
        twin = plan.twin(_calls_in_every_way)
    consts = twin.__code__.co_consts
    hooks = hotpath.hooks
    if sys.version_info >= (3, 11):  # (a 3.10 site hands ``call`` the arguments already)
        assert hooks.enter in consts and hooks.resolve in consts and hooks.resolve_star in consts
    assert ch.overdub(ctx, _calls_in_every_way, 3) == _calls_in_every_way(3)


class _Shape:
    def __init__(self, side):
        self.side = side

    def area(self):
        return self.side * self.side

    @classmethod
    def unit(cls):
        return cls(1)

    @staticmethod
    def double(x):
        return 2 * x


class _Sized:
    def __len__(self):
        return _callee(4)


class _Iterable:
    def __iter__(self):
        return iter([_callee(5)])


def _program(n):
    shapes = [_Shape(i) for i in range(n)]
    total = sum(s.area() for s in shapes) + _Shape.unit().area() + _Shape.double(n)
    squares = sorted(map(lambda s: s.area(), shapes), key=lambda v: -v)
    gen = (s.side for s in shapes)
    sizes = []
    sizes.append(len(_Sized()))  # a builtin method, and a builtin whose operand has a Python dunder
    sizes.append(abs(-n))
    sizes.extend(iter(_Iterable()))
    return (total, squares, list(gen), max(n, 3), _callee(n, 1, 2, 3), _calls_in_every_way(n), len(str(n)),
            sizes, sys._getframe().f_code.co_name)


def test_entering_sites_show_the_prehook_the_calls_hooked_sites_show() -> None:
    entering, hooked = Recording([]), RecordingHooked([])
    assert ch.overdub(entering, _program, 5) == ch.overdub(hooked, _program, 5) == _program(5)
    assert _plan(entering).enters and not _plan(hooked).enters
    assert entering.metadata == hooked.metadata
    assert ("_Shape.area", ("_Shape",), ()) in entering.metadata  # a method, seen as (function, self, ...)


def test_a_prehook_that_raises_stops_the_call_before_its_callee_runs() -> None:
    ran = []

    class Refusing(ch.Context):
        def prehook(self, f, /, *args, **kwargs):
            if f is _callee:
                raise PermissionError("no")

    def program():
        ran.append("before")
        _callee(1)
        ran.append("after")

    with pytest.raises(PermissionError):
        ch.overdub(Refusing(), program)
    assert ran == ["before"]


def test_a_bound_method_the_program_holds_is_never_rebound_to_a_twin() -> None:
    shape = _Shape(3)
    held = shape.area
    watched = shape.area
    ref = weakref.ref(watched)

    def program():
        return held() + watched() + shape.area()

    assert ch.overdub(Recording([]), program) == 27
    assert held.__func__ is _Shape.area and watched.__func__ is _Shape.area and ref() is watched


def test_a_function_whose_code_is_replaced_runs_its_new_code_entered() -> None:
    def f(x):
        return x + 1

    def program(x):
        return f(x)

    ctx = Recording([])
    assert ch.overdub(ctx, program, 1) == 2
    f.__code__ = (lambda x: x * 10).__code__
    assert ch.overdub(ctx, program, 1) == 10
    assert [name for name, _, _ in ctx.metadata].count(f.__qualname__) == 2


def _down(n):
    return 0 if n == 0 else 1 + _down(n - 1)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 has no entering call sites: there every Python call "
                    "of a hooked site is made from C, or from the site's Python closure, one C level a frame")
def test_recursion_thousands_of_levels_deep_runs_entered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "getrecursionlimit", sys.getrecursionlimit)  # (restored by monkeypatch)
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(12_000)
    try:
        ctx = Recording([])
        assert ch.overdub(ctx, _down, 10_000) == _down(10_000) == 10_000
    finally:
        sys.setrecursionlimit(before)
    assert len(ctx.metadata) == 10_000


def test_under_another_context_an_entering_site_runs_that_contexts_hooks() -> None:
    inner = RecordingHooked([])

    def program():
        with inner:
            return _callee(1)

    outer = Recording([])
    assert ch.overdub(outer, program) == 1
    assert ("_callee", ("int",), ()) in inner.metadata
    assert ("_callee", ("int",), ()) not in outer.metadata


@pytest.mark.skipif(_native.runtime.name == "Python", reason="the C hot path is not in use in this run")
def test_a_builtin_at_an_entering_site_is_handed_back_for_the_sites_frame_to_call() -> None:
    """What a ``Site`` would only have called from C with the same arguments: the prehook
    runs in ``enter``, and the program's frame calls the builtin itself."""
    enter, items = _native.optional("._speedups").enter, [1]
    ctx = Recording([])
    with ctx:
        assert enter(len, items) is len
        append = items.append
        assert enter(append, 2) is append
    assert ctx.metadata == [("len", ("list",), ()), ("list.append", ("list", "int"), ())]


@pytest.mark.skipif(_native.runtime.name == "Python", reason="the C hot path is not in use in this run")
@pytest.mark.parametrize("call", [
    pytest.param((iter, _Iterable()), id="an-operator-like-builtin-whose-operand-has-a-python-dunder"),
    pytest.param((sorted, [2, 1]), id="a-builtin-whose-arguments-are-prepared"),
    pytest.param((sys._getframe, 0), id="a-frame-sensitive-builtin"),
    pytest.param(([2, 1].sort,), id="a-bound-method-whose-descriptor-is-emulated"),
])
def test_a_builtin_the_plain_call_needs_help_with_is_not_handed_back(call: tuple[Any, ...]) -> None:
    f, *args = call
    with Recording([]):
        assert _native.optional("._speedups").enter(f, *args) is not f


@pytest.mark.skipif(_native.runtime.name == "Python", reason="the C hot path is not in use in this run")
def test_the_c_enter_takes_every_argument_an_entering_site_hands_it() -> None:
    from cassette_hook.rewrite._nullslot import MAX_ENTERED

    assert _native.optional("._speedups").ENTERED_MAX >= MAX_ENTERED


def test_a_call_with_more_arguments_than_a_site_copies_resolves_and_is_seen() -> None:
    from cassette_hook.rewrite._nullslot import MAX_ENTERED

    many = tuple(range(MAX_ENTERED + 1))

    def program():
        return _callee(*many[:1], *many[1:]), _callee(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

    ctx = Recording([])
    assert ch.overdub(ctx, program) == program()
    assert [name for name, _, _ in ctx.metadata].count("_callee") == 2
