"""Nesting composes: the calls an inner context's hooks and overloads make are seen by
the contexts below it on the stack, and never by the inner context itself."""

from __future__ import annotations

import math
from typing import Any

import pytest

import cassette_hook as ch


def helper(x: Any) -> Any:
    return x


def g(x: float) -> float:
    return math.sqrt(x) + 1


def _names(record: list[Any]) -> list[str]:
    return [getattr(f, "__name__", repr(f)) for f in record]


class Outer(ch.Context):
    operators = False

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.metadata.append(f)


class Bystander(ch.Context):
    """A context with nothing to do: a ``with`` block of it pushes and pops an entry."""

    operators = False


class InnerPrehook(ch.Context):
    operators = False

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        helper(f)
        self.metadata.append(f)


class InnerPosthook(ch.Context):
    operators = False

    def posthook(self, out: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        helper(out)
        self.metadata.append(f)


class InnerOverdub(ch.Context):
    operators = False


@ch.overdub.register
def _(ctx: InnerOverdub, f: ch.Is[math.sqrt], x: float) -> float:
    ctx.metadata.append(helper(f))
    return math.sqrt(x)


class InnerFallback(ch.Context):
    operators = False


@ch.fallback.register
def _(ctx: InnerFallback, f: ch.Is[math.sqrt], x: float) -> float:
    ctx.metadata.append(helper(f))
    return math.sqrt(x)


@pytest.mark.parametrize("inner_type", [InnerPrehook, InnerOverdub, InnerFallback],
                         ids=["prehook", "overdub overload", "fallback overload"])
def test_an_outer_context_sees_the_calls_an_inner_hook_or_overload_makes(inner_type: type[ch.Context]) -> None:
    outer, inner = Outer([]), inner_type([])
    with outer:
        assert ch.overdub(inner, g, 4.0) == 3.0
    assert "helper" in _names(outer.metadata)
    assert _names(inner.metadata) == ["sqrt"]


def test_an_outer_context_sees_the_calls_an_inner_posthook_makes() -> None:
    outer, inner = Outer([]), InnerPosthook([])
    with outer:
        ch.overdub(inner, g, 4.0)
    assert _names(outer.metadata).count("helper") == 1
    assert _names(inner.metadata) == ["sqrt"]


def test_nesting_through_overdub_is_the_same_as_through_with() -> None:
    outer, inner = Outer([]), InnerPrehook([])
    ch.overdub(outer, lambda: ch.overdub(inner, g, 4.0))
    assert "helper" in _names(outer.metadata)
    assert _names(inner.metadata) == ["sqrt"]


def test_a_hook_with_no_context_below_it_runs_plain() -> None:
    inner = InnerPrehook([])
    assert ch.overdub(inner, g, 4.0) == 3.0
    assert ch.current_context() is None
    assert _names(inner.metadata) == ["sqrt"]


def test_an_inner_context_sees_nothing_of_the_outer_ones_hooks() -> None:
    seen_by_inner: list[Any] = []

    class LoudOuter(ch.Context):
        operators = False

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            helper(f)

    class Quiet(ch.Context):
        operators = False

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            seen_by_inner.append(f)

    with LoudOuter():
        ch.overdub(Quiet(), g, 4.0)
    assert _names(seen_by_inner) == ["sqrt"]


def test_a_hook_sees_the_context_below_as_current() -> None:
    seen: list[Any] = []

    class Asking(ch.Context):
        operators = False

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            seen.append(ch.current_context())

    outer = Outer([])
    with outer:
        ch.overdub(Asking(), g, 4.0)
    assert seen == [outer]


def test_a_with_block_in_a_hook_leaves_the_hooks_context_active_after_the_hook() -> None:
    class Nesting(ch.Context):
        operators = False

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            with Bystander():
                helper(f)
            self.metadata.append(f)

    def two_calls(x: float) -> float:
        return math.sqrt(x) + abs(-x)

    ctx = Nesting([])
    assert ch.overdub(ctx, two_calls, 4.0) == 6.0
    assert _names(ctx.metadata) == ["sqrt", "abs"]  # the second call is seen: the block popped what it pushed
    assert ch.current_context() is None


def test_a_hook_that_runs_an_event_loop_is_seen_by_the_contexts_below_it() -> None:
    import asyncio

    async def work(x: float) -> float:
        return helper(x)

    class Looping(ch.Context):
        operators = False

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            if f is math.sqrt:
                asyncio.run(work(1.0))  # a task, in a copy of the hook's contextvars.Context
            self.metadata.append(f)

    outer, inner = Outer([]), Looping([])
    with outer:
        assert ch.overdub(inner, g, 4.0) == 3.0
    assert "helper" in _names(outer.metadata)
    assert "helper" not in _names(inner.metadata)
    assert _names(inner.metadata) == ["sqrt"]


def test_a_hook_that_raises_leaves_its_context_active() -> None:
    class Raising(ch.Context):
        operators = False

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            if f is math.sqrt:
                raise LookupError("from the hook")

    ctx = Raising()
    with ctx:
        with pytest.raises(LookupError, match="from the hook"):
            ch.overdub(ctx, g, 4.0)
        assert ch.current_context() is ctx


def test_an_overload_that_catches_what_recurse_raised_keeps_seeing_the_calls_after() -> None:
    seen: list[Any] = []

    class Catching(ch.Context):
        operators = False

        def overdub(self, f: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(f)
            try:
                return ch.recurse(self, f, *args, **kwargs)
            except LookupError:
                return "caught"

    def failing() -> None:
        raise LookupError("from the callee")

    def program() -> tuple[Any, ...]:
        return failing(), abs(-1), ch.current_context()

    ctx = Catching()
    assert ch.overdub(ctx, program) == ("caught", 1, ctx)
    assert _names(seen) == ["program", "failing", "LookupError", "abs", "current_context"]
    assert ch.current_context() is None


def test_recurse_under_a_with_block_in_the_overload_runs_above_that_block() -> None:
    class Wrapping(ch.Context):
        operators = False

        def overdub(self, f: Any, *args: Any, **kwargs: Any) -> Any:
            with Bystander():
                return ch.recurse(self, f, *args, **kwargs)

    def asks() -> Any:
        return ch.current_context()

    ctx = Wrapping()
    assert ch.overdub(ctx, asks) is ctx  # pushed again, above the Bystander's block
    assert ch.current_context() is None


def _callers_code() -> Any:
    import sys

    return sys._getframe(1).f_code


def _named_by_the_overload() -> str:
    return "plain"


def test_a_callee_of_overdub_called_by_an_overload_has_the_overload_as_its_caller() -> None:
    """The frame-sensitive emulations skip an overload's frame where it handed a call on,
    and keep it where the overload started a context of its own: the call was made there."""
    class Hooked(ch.Context):
        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            pass

    class Starting(ch.Context):
        def overdub(self, f: ch.Is[_named_by_the_overload], *args: Any, **kwargs: Any) -> Any:
            return ch.overdub(Hooked(), _callers_code)

    def program() -> Any:
        return _named_by_the_overload()

    caller = ch.overdub(Starting(), program)
    overload = Starting.overdub.__code__
    assert (caller.co_name, caller.co_filename, caller.co_firstlineno) == (
        overload.co_name, overload.co_filename, overload.co_firstlineno)
