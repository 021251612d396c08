"""Cassette.jl's documented examples, in Python.

Julia's ``/(1, 2)`` calls ``float`` and friends; the Python versions overdub a small
function that does the same kind of work, so each example checks the same idea: what the
hooks see, in what order, and what overloads change.
"""

import math
import operator
from dataclasses import dataclass

import pytest

import cassette_hook as ch


def divide(a, b):
    return float(a) / float(b)


class PrintCtx(ch.Context):
    def prehook(self, f, *args, **kwargs):
        self.metadata.append((f, args))


def test_printctx_prehook_sees_every_call_in_order():
    seen = []
    assert ch.overdub(PrintCtx(metadata=seen), divide, 1, 2) == 0.5
    assert seen == [(float, (1,)), (float, (2,)), (operator.truediv, (1.0, 2.0))]


class PostPrintCtx(ch.Context):
    def posthook(self, out, f, *args, **kwargs):
        self.metadata.append((out, f, args))


def test_posthook_sees_outputs_innermost_first():
    def outer(x):
        return inner(x) + 1

    def inner(x):
        return abs(x)

    seen = []
    assert ch.overdub(PostPrintCtx(metadata=seen), outer, -2) == 3
    assert seen == [(2, abs, (-2,)), (2, inner, (-2,)), (3, operator.add, (2, 1))]


@dataclass
class Count:
    kind: type
    count: int = 0


CountCtx = ch.context("CountCtx")


@ch.prehook.register
def _count_calls_with_float_arguments(ctx: CountCtx[Count], f, *args: float):
    if args and all(isinstance(a, ctx.metadata.kind) for a in args):
        ctx.metadata.count += 1


def test_countctx_counts_calls_whose_arguments_are_all_floats():
    ctx = CountCtx(metadata=Count(float))
    assert ch.overdub(ctx, divide, 1, 2) == 0.5
    assert ctx.metadata.count == 1  # only truediv(1.0, 2.0); float(1) has an int argument


def test_countctx_overload_does_not_apply_to_other_metadata_types():
    ctx = CountCtx(metadata=[])
    assert ch.overdub(ctx, divide, 1, 2) == 0.5
    assert ctx.metadata == []


@dataclass
class Accum:
    x: float = 0.0


AccumCtx = ch.context("AccumCtx")


@ch.posthook.register
def _accumulate_numeric_outputs(ctx: AccumCtx[Accum], out: float, f, *args):
    ctx.metadata.x += out


def test_accumctx_sums_numeric_outputs():
    ctx = AccumCtx(metadata=Accum())
    ch.overdub(ctx, divide, 1, 2)
    assert ctx.metadata.x == 1.0 + 2.0 + 0.5


class SinToCos(ch.Context):
    pass


@ch.overdub.register
def _sin_to_cos(ctx: SinToCos, f: ch.Is[math.sin], x: float):
    return math.cos(x)


def test_sin_to_cos_replaces_calls_inside_the_context_only():
    def wave(x):
        return 2 * math.sin(x)

    assert ch.overdub(SinToCos(), wave, 0.0) == 2.0
    assert wave(0.0) == 0.0


def test_overdub_of_the_overloaded_function_itself_uses_the_overload():
    assert ch.overdub(SinToCos(), math.sin, 0.0) == 1.0


class MemoCtx(ch.Context):
    pass


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@ch.overdub.register
def _memoized_fib(ctx: MemoCtx, f: ch.Is[fib], n):
    cache = ctx.metadata
    if n not in cache:
        cache[n] = ch.recurse(ctx, f, n)
    return cache[n]


def test_memoized_fib_computes_each_value_once():
    calls = []

    class CountingMemo(MemoCtx):
        def prehook(self, f, *args, **kwargs):
            if f is fib:
                calls.append(args[0])

    ctx = CountingMemo(metadata={})
    assert ch.overdub(ctx, fib, 30) == 832040
    assert sorted(ctx.metadata) == list(range(31))
    assert len(calls) < 2 * 31  # plain fib(30) makes 2.7 million calls


class TraceCtx(ch.Context):
    operators = False


@ch.overdub.register
def _nested_trace(ctx: TraceCtx, f, *args):
    subtrace = []
    ctx.metadata.append((f, args, subtrace))
    if ch.canrecurse(ctx, f, *args):
        return ch.recurse(ch.similarcontext(ctx, metadata=subtrace), f, *args)
    return ch.fallback(ctx, f, *args)


def test_nested_trace_with_recurse_and_similarcontext_builds_the_call_tree():
    def leaf(x):
        return abs(x)

    def middle(x):
        return leaf(x) + leaf(-x)

    def top(x):
        return middle(x)

    trace = []
    assert ch.overdub(TraceCtx(metadata=trace), top, 3) == 6
    # As in Cassette, calling the overloaded ``overdub`` directly records the top call too.
    assert trace == [
        (top, (3,), [
            (middle, (3,), [
                (leaf, (3,), [(abs, (3,), [])]),
                (leaf, (-3,), [(abs, (-3,), [])]),
            ]),
        ]),
    ]


def test_overdub_does_not_hook_the_top_level_call():
    seen = []
    ch.overdub(PrintCtx(metadata=seen), abs, -1)
    assert seen == []


def test_execute_overload_makes_a_call_primitive():
    class Ctx(ch.Context):
        pass

    @ch.execute.register
    def _(ctx: Ctx, f: ch.Is[abs], x):
        return "primitive"

    def g(x):
        return abs(x)

    assert ch.overdub(Ctx(), g, -1) == "primitive"


def test_execute_returning_overdubinstead_overdubs_the_call():
    class Ctx(ch.Context):
        def execute(self, f, *args, **kwargs):
            return ch.OverdubInstead

    def g(x):
        return abs(x)

    assert ch.overdub(Ctx(), g, -1) == 1
    assert ch.OverdubInstead() is ch.OverdubInstead


def test_canoverdub_is_canrecurse():
    assert ch.canoverdub is ch.canrecurse
    assert ch.canrecurse(PrintCtx(), divide, 1, 2)
    assert not ch.canrecurse(PrintCtx(), math.sin, 1.0)


@pytest.mark.parametrize("make", [lambda: ch.context("Dyn"), lambda: type("Sub", (ch.Context,), {})])
def test_contexts_made_dynamically_work_like_classes(make):
    Ctx = make()
    assert issubclass(Ctx, ch.Context)
    assert ch.overdub(Ctx(), divide, 1, 4) == 0.25
