"""Tagging: values that carry metadata through code run under one context (docs/tagging.md;
docs/api.md, "Tagging")."""

from __future__ import annotations

import contextlib
import copy
import gc
import math
import operator
import pickle
import sys
import warnings
import weakref
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import cassette_hook as ch
from cassette_hook.runtime import plan as _plan
from cassette_hook import tagging as _tagging

sys.path.insert(0, __import__("os").path.dirname(__file__))
import corpus


class Plain(ch.Context):
    pass


class Meta(ch.Context):
    """Values may carry any metadata."""


@ch.metadatatype.register
def _any_metadata(ctx: Meta, value: object) -> type:
    return object


class Doubling(ch.Context):
    """``*`` on tagged values doubles the metadata of the left operand."""


@ch.metadatatype.register
def _doubling_metadata(ctx: Doubling, value: object) -> type:
    return int


@ch.overdub.register
def _double_mul(ctx: Doubling, f: ch.Is[operator.mul], a, b):  # type: ignore[no-untyped-def]
    out = ch.untag(a, ctx) * ch.untag(b, ctx)
    return ch.tag(out, ctx, 2 * ch.metadata(a, ctx)) if ch.hasmetadata(a, ctx) else out


def tagging(ctx_type: type[ch.Context] = Meta) -> ch.Context:
    return ch.enabletagging(ctx_type(), lambda: None)


def inside(ctx: ch.Context, f: Any, *args: Any) -> Any:
    """Run ``f(*args)`` overdubbed and keep its result's tags."""
    return ch.overdub_tagged(ctx, f, *args)


# -- enabling ----------------------------------------------------------------------------

def test_tag_attribute_is_none_unless_tagging_is_enabled() -> None:
    assert Plain().tag is None
    assert tagging(Plain).tag is not None


def test_enabletagging_returns_a_copy_and_leaves_the_context_as_it_was() -> None:
    ctx = Plain(metadata=[1])
    tagged = ch.enabletagging(ctx, len)
    assert tagged is not ctx and ctx.tag is None and not ch.hastagging(ctx)
    assert tagged.metadata is ctx.metadata and isinstance(tagged, Plain)


def test_hastagging_answers_for_instances_and_classes() -> None:
    ctx = tagging(Plain)
    assert ch.hastagging(ctx) and ch.hastagging(type(ctx))
    assert not ch.hastagging(Plain()) and not ch.hastagging(Plain)


def test_each_enabletagging_makes_a_tag_of_its_own() -> None:
    assert ch.enabletagging(Plain(), len).tag is not ch.enabletagging(Plain(), len).tag


def test_similarcontext_keeps_the_tag() -> None:
    ctx = tagging()
    assert ch.similarcontext(ctx, metadata=3).tag is ctx.tag


def test_a_tagging_context_never_runs_the_fast_plan() -> None:
    assert _plan.plan_for(Plain()).fast
    assert not _plan.plan_for(tagging(Plain)).fast


def test_enabletagging_refuses_what_is_not_a_context() -> None:
    with pytest.raises(TypeError, match="enabletagging"):
        ch.enabletagging(Plain, len)  # type: ignore[arg-type]


# -- tag, untag, metadata ----------------------------------------------------------------

def test_tag_needs_tagging_enabled() -> None:
    with pytest.raises(TypeError, match=r"tagging is not enabled for Plain\(.*enabletagging"):
        ch.tag(1.0, Plain())


def test_metadata_is_refused_by_default_naming_the_value_type_and_the_context() -> None:
    with pytest.raises(TypeError, match=r"value of type float may carry no metadata in context Plain"):
        ch.tag(1.0, tagging(Plain), "m")


def test_tag_without_metadata_is_always_allowed() -> None:
    ctx = tagging(Plain)
    x = ch.tag(1.0, ctx)
    assert ch.istagged(x, ctx) and not ch.hasmetadata(x, ctx) and ch.metadata(x, ctx) is ch.NoMetaData


def test_a_metadatatype_overload_allows_metadata() -> None:
    ctx = tagging()
    x = ch.tag(1.5, ctx, {"d": 1})
    assert ch.hasmetadata(x, ctx) and ch.metadata(x, ctx) == {"d": 1}


def test_metadata_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError, match=r"may carry metadata of type int in context Doubling, and 'x' \(str\)"):
        ch.tag(1.0, tagging(Doubling), "x")


def test_untag_gives_the_value_back() -> None:
    ctx = tagging()
    value = [1, 2]
    assert ch.untag(ch.tag(value, ctx, 0), ctx) is value


def test_untag_of_a_plain_value_is_the_value() -> None:
    value = object()
    assert ch.untag(value, tagging()) is value


def test_tag_untag_and_metadata_take_their_arguments_by_keyword_too() -> None:
    ctx = tagging()
    x = ch.tag(value=1.5, ctx=ctx, metadata="m")
    assert ch.untag(x=x, ctx=ctx) == 1.5 and ch.metadata(x, ctx=ctx) == "m"
    assert ch.istagged(x=x, ctx=ctx) and ch.hasmetadata(x, ctx=ctx)


def test_tag_and_untag_called_wrongly_raise_pythons_type_errors() -> None:
    ctx = tagging()
    with pytest.raises(TypeError, match="ctx"):
        ch.untag(1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'meta'"):
        ch.tag(1.0, ctx, meta="m")
    with pytest.raises(TypeError, match="multiple values for argument 'ctx'"):
        ch.tag(1.0, ctx, ctx=ctx)


def test_the_extent_counts_only_the_wrappers_still_alive() -> None:
    ctx = tagging()
    with ctx:
        kept = ch.tag(1.0, ctx, "kept")
        for i in range(10):
            ch.tag(float(i), ctx, i)  # made and gone at once
        assert ctx.tag.live == 1
        del kept
        assert ctx.tag.live == 0


def test_tagging_a_tagged_value_tags_its_plain_value_anew() -> None:
    ctx = tagging()
    x = ch.tag(ch.tag(2.0, ctx, "a"), ctx, "b")
    assert ch.metadata(x, ctx) == "b" and type(ch.untag(x, ctx)) is float


def test_tags_belong_to_one_context_instance() -> None:
    ctx, other = tagging(), tagging()
    x = ch.tag(1.0, ctx, "m")
    assert not ch.istagged(x, other) and ch.metadata(x, other) is ch.NoMetaData and ch.untag(x, other) is x
    assert not ch.istagged(x, Meta())


def test_a_new_context_at_a_dead_contexts_address_has_its_own_tag() -> None:
    """The C path remembers the last context whose tag it read; a context made where a
    collected one lived is another context, and its values are not the dead one's."""
    base, reused = Meta(), 0
    for _ in range(50):
        ctx = ch.enabletagging(base, tagging)
        x = ch.tag(1.0, ctx, "m")
        assert ch.istagged(x, ctx)
        address, ref = id(ctx), weakref.ref(ctx)
        del ctx
        assert ref() is None
        other = ch.enabletagging(base, tagging)
        reused += id(other) == address
        assert not ch.istagged(x, other) and ch.untag(x, other) is x
        assert ch.metadata(ch.tag(2.0, other, "n"), other) == "n"
        del other
    assert reused, "no context was ever made at a dead one's address: the test checks nothing"


def test_nometadata_is_a_singleton_callable_as_in_cassette() -> None:
    assert ch.NoMetaData() is ch.NoMetaData and repr(ch.NoMetaData) == "NoMetaData"


def test_istaggedtype_and_untagtype() -> None:
    ctx = tagging()
    t = type(ch.tag(1.0, ctx))
    assert ch.istaggedtype(t, ctx) and not ch.istaggedtype(float, ctx)
    assert ch.untagtype(t, ctx) is float and ch.untagtype(float, ctx) is float


# -- metadatatype ------------------------------------------------------------------------

class Typed(ch.Context):
    pass


class TypedChild(Typed):
    pass


@ch.metadatatype.register
def _typed_numbers(ctx: Typed, value: int | float) -> type:
    return float


@ch.metadatatype.register
def _typed_bool(ctx: TypedChild, value: ch.Is[bool]) -> type:
    return bool


def test_metadatatype_is_called_with_classes() -> None:
    assert ch.metadatatype(Typed, float) is float
    assert ch.metadatatype(Typed, str) is ch.NoMetaData


def test_metadatatype_applies_to_subclasses_of_the_annotations() -> None:
    assert ch.metadatatype(TypedChild, int) is float


def test_metadatatype_picks_the_most_specific_method() -> None:
    assert ch.metadatatype(TypedChild, bool) is bool
    assert ch.metadatatype(Typed, bool) is float  # bool is an int; the Is[bool] method is TypedChild's


def test_metadatatype_is_exact_for_is() -> None:
    class Flag(int):
        pass

    assert ch.metadatatype(TypedChild, Flag) is float


def test_metadatatype_resolve_answers_for_classes() -> None:
    assert ch.metadatatype.resolve((Meta, float)) is _any_metadata
    with pytest.raises(TypeError, match="takes a context class and a value class"):
        ch.metadatatype.resolve((Meta, float, 1))


def test_metadatatype_refuses_an_instance_for_the_context_class() -> None:
    with pytest.raises(TypeError, match="context class first"):
        ch.metadatatype(Typed(), float)


def test_metadatatype_ambiguity_names_both_methods() -> None:
    class Amb(ch.Context):
        pass

    class Left:
        pass

    class Right:
        pass

    class Both(Left, Right):
        pass

    def left(ctx: Amb, value: Left) -> type:
        return int

    def right(ctx: Amb, value: Right) -> type:
        return str

    ch.metadatatype.register(left)
    ch.metadatatype.register(right)
    try:
        with pytest.raises(ch.AmbiguityError, match="left.*right|right.*left"):
            ch.metadatatype(Amb, Both)
    finally:
        ch.metadatatype.unregister(left)
        ch.metadatatype.unregister(right)


def test_metadatatype_refuses_a_parametric_context_annotation() -> None:
    def parametric(ctx: Typed[int], value: float) -> type:  # type: ignore[type-arg]
        return float

    with pytest.raises(TypeError, match="called with classes"):
        ch.metadatatype.register(parametric)


def test_registering_metadatatype_takes_effect_at_once() -> None:
    class Late(ch.Context):
        pass

    ctx = ch.enabletagging(Late(), len)
    with pytest.raises(TypeError):
        ch.tag(1.0, ctx, 1.0)

    def late(ctx: Late, value: float) -> type:
        return float

    ch.metadatatype.register(late)
    try:
        assert ch.metadata(ch.tag(1.0, ctx, 2.0), ctx) == 2.0
    finally:
        ch.metadatatype.unregister(late)


@contextlib.contextmanager
def _float_metadata_allowed() -> Iterator[ch.Context]:
    """A tagging context whose floats may carry float metadata while the block runs."""
    class Floats(ch.Context):
        pass

    def floats(ctx: Floats, value: float) -> type:
        return float

    ch.metadatatype.register(floats)
    try:
        yield ch.enabletagging(Floats(), len)
    finally:
        ch.metadatatype.unregister(floats)


def test_unregistering_metadatatype_takes_effect_at_once() -> None:
    with _float_metadata_allowed() as ctx:
        assert ch.metadata(ch.tag(1.0, ctx, 2.0), ctx) == 2.0
    with pytest.raises(TypeError, match="no metadata"):
        ch.tag(1.0, ctx, 2.0)


def test_metadata_of_another_class_than_allowed_is_refused_after_an_allowed_one() -> None:
    with _float_metadata_allowed() as ctx:
        assert ch.metadata(ch.tag(1.0, ctx, 2.0), ctx) == 2.0
        with pytest.raises(TypeError, match="str"):
            ch.tag(1.0, ctx, "two")


# -- what a tagged value looks like -------------------------------------------------------

def test_isinstance_sees_the_value_class() -> None:
    x = ch.tag(1.0, tagging())
    assert isinstance(x, float) and not isinstance(x, int)


def test_type_is_the_wrapper_class_outside_overdubbed_code() -> None:
    x = ch.tag(True, tagging())
    assert type(x) is ch.Tagged[bool] and issubclass(type(x), ch.Tagged[int]) and x.__class__ is bool


def test_type_called_by_overdubbed_code_is_the_value_class() -> None:
    ctx = tagging()
    assert ch.overdub(ctx, lambda: type(ch.tag(1.0, ctx))) is float


def test_repr_says_tagged_outside_the_program() -> None:
    ctx = tagging()
    assert repr(ch.tag(1.5, ctx, "dx")) == "Tagged(1.5, metadata='dx')"
    assert repr(ch.tag(1.5, ctx)) == "Tagged(1.5)"


def test_the_program_sees_its_values_repr_and_str() -> None:
    ctx = tagging()

    def show(x: Any) -> tuple[str, str, str]:
        return repr([x]), str(x), f"{x:>5}"

    assert ch.overdub(ctx, show, ch.tag(1.5, ctx, "dx")) == ("[1.5]", "1.5", "  1.5")


def test_wrappers_compute_on_their_values_in_plain_code() -> None:
    ctx = tagging()
    x, y = ch.tag(3, ctx), ch.tag(4.0, ctx)
    assert (x + y, 1 - x, -x, x ** 2, x < y, hash(x) == hash(3), int(y), abs(-x)) == (7.0, -2, -3, 9, True, True, 4, 3)


def test_wrappers_have_only_the_dunders_of_their_value() -> None:
    from collections.abc import Sized

    ctx = tagging()
    assert not isinstance(ch.tag(1.0, ctx), Sized) and isinstance(ch.tag("ab", ctx), Sized)


def test_unhashable_values_give_unhashable_wrappers() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        hash(ch.tag([], tagging()))


def test_tagged_annotation_dispatches_on_tagged_values() -> None:
    class Ann(ch.Context):
        pass

    seen = []

    @ch.overdub.register
    def _(ctx: Ann, f: ch.Is[abs], x: ch.Tagged[int]):  # type: ignore[no-untyped-def]
        seen.append(ch.untag(x, ctx))
        return 0

    ctx = ch.enabletagging(Ann(), abs)
    assert ch.overdub(ctx, lambda: (abs(ch.tag(True, ctx)), abs(-2))) == (0, 2)
    assert seen == [True]


# -- flow through ordinary code ------------------------------------------------------------

class Point:
    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = x, y

    def scaled_x(self) -> Any:
        return self.x * 2


def _flows(x: Any) -> dict[str, Any]:
    items = [x]
    items.append(x)
    table = {"k": x}
    table["j"] = x
    point = Point(x, 0)
    captured = (lambda: x)()

    def star(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return args[0], kwargs["k"]

    def gen() -> Any:
        got = yield x
        yield got

    g = gen()
    first = next(g)
    sent = g.send(x)
    return {"local": x, "list literal": items[0], "append": items[1], "dict literal": table["k"],
            "setitem": table["j"], "attribute": point.x, "closure": captured, "*args": star(x, k=x)[0],
            "**kwargs": star(x, k=x)[1], "yield": first, "send": sent, "setattr+getattr": _set_get(x)}


def _set_get(x: Any) -> Any:
    box = Point(0, 0)
    setattr(box, "y", x)  # noqa: B010 -- the builtins themselves are what is tested
    return getattr(box, "y")  # noqa: B009


def test_tagged_values_flow_through_ordinary_code() -> None:
    ctx = tagging()
    seen = ch.overdub(ctx, lambda: {k: ch.metadata(v, ctx) for k, v in _flows(ch.tag(2.0, ctx, "m")).items()})
    assert seen == {k: "m" for k in seen} and len(seen) == 12


def test_comparisons_and_conditionals_use_the_value() -> None:
    ctx = tagging()

    def branch(x: Any) -> str:
        if x > 1 and x != 3 and x:
            return "big" if x == 2.0 else "other"
        return "small"

    assert ch.overdub(ctx, lambda: [branch(ch.tag(v, ctx, 0)) for v in (2.0, 0.0, 3.0)]) == ["big", "small", "small"]


def test_an_operator_overload_sees_tagged_operands_and_returns_a_tagged_result() -> None:
    ctx = tagging(Doubling)

    def run() -> Any:
        y = ch.tag(3, ctx, 5) * 2
        return ch.untag(y, ctx), ch.metadata(y, ctx)

    assert ch.overdub(ctx, run) == (6, 10)


def test_an_operator_nobody_overloads_computes_on_the_values() -> None:
    ctx = tagging()

    def run() -> Any:
        y = ch.tag(3, ctx, 5) + 1
        return type(y) is int, ch.istagged(y, ctx)

    assert ch.overdub(ctx, run) == (True, False)


def test_primitives_get_untagged_arguments() -> None:
    ctx = tagging()
    # float.hex and str.join refuse anything but a float / strs: a wrapper would be a TypeError.
    assert ch.overdub(ctx, lambda: (float.hex(ch.tag(1.0, ctx)), "-".join([ch.tag("a", ctx), "b"]))) == \
        ("0x1.0000000000000p+0", "a-b")


class Recursing(ch.Context):
    """Its one overload hands ``float.hex`` on to ``recurse``."""


@ch.overdub.register
def _recursing_hex(ctx: Recursing, f: ch.Is[float.hex], x: Any) -> Any:
    return ch.recurse(ctx, f, x)


def test_a_recurse_under_a_tagging_context_after_one_under_its_untagged_original_gives_primitives_untagged_arguments(
) -> None:
    """The C path remembers the last context it found untagged, for an overload's
    ``recurse`` (docs/performance.md, "A matched identity overload at the price of a
    prehook"): the tagging copy ``enabletagging`` makes of that context is another
    context, whose ``recurse`` still untags what a primitive gets (both paths)."""
    plain = Recursing()
    assert ch.overdub(plain, lambda: float.hex(1.0)) == "0x1.0000000000000p+0"
    tagged, other = ch.enabletagging(plain, float.hex), ch.enabletagging(Recursing(), float.hex)

    def run() -> str:
        value = ch.tag(1.0, tagged)
        ch.istagged(value, other)  # (the last tagging context read is another one)
        return float.hex(value)

    assert ch.overdub(tagged, run) == "0x1.0000000000000p+0"
    assert ch.overdub(plain, lambda: float.hex(2.0)) == "0x1.0000000000000p+1"


def test_a_fallback_overload_sees_the_tagged_arguments() -> None:
    class Fb(ch.Context):
        def fallback(self, f: ch.Is[len], *args, **kwargs):  # type: ignore[no-untyped-def,valid-type]
            return [ch.istagged(a, self) for a in args]

    ctx = ch.enabletagging(Fb(), len)
    assert ch.overdub(ctx, lambda: len(ch.tag("ab", ctx))) == [True]


def test_an_attribute_of_a_tagged_object_is_the_fields_own_tagged_value() -> None:
    ctx = tagging()

    def run() -> Any:
        p = ch.tag(Point(1.0, 2.0), ctx, "point")
        p.x = ch.tag(3.0, ctx, "x")
        return ch.metadata(p, ctx), ch.metadata(p.x, ctx), ch.istagged(p.y, ctx), ch.metadata(p.y, ctx)

    assert ch.overdub(ctx, run) == ("point", "x", True, ch.NoMetaData)


def test_a_method_of_a_tagged_object_sees_a_tagged_self() -> None:
    ctx = tagging(Doubling)

    def run() -> Any:
        p = ch.tag(Point(ch.tag(3, ctx, 1), 0), ctx)
        n = p.scaled_x()
        return ch.untag(n, ctx), ch.metadata(n, ctx)

    assert ch.overdub(ctx, run) == (6, 2)


def test_a_builtin_method_call_on_a_tagged_value_is_presented_with_the_tagged_receiver() -> None:
    class Upper(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Upper, f: ch.Is[str.upper], s):  # type: ignore[no-untyped-def]
        return ch.tag(str.upper(ch.untag(s, ctx)), ctx)

    ctx = ch.enabletagging(Upper(), str.upper)
    assert ch.overdub(ctx, lambda: ch.istagged(ch.tag("ab", ctx).upper(), ctx)) is True


# -- nothing leaks -------------------------------------------------------------------------

def test_overdub_returns_the_plain_value() -> None:
    ctx = tagging()
    out = ch.overdub(ctx, lambda: ch.tag(1.5, ctx, "m"))
    assert type(out) is float and out == 1.5


def test_overdub_tagged_returns_the_tagged_value() -> None:
    ctx = tagging()
    out = ch.overdub_tagged(ctx, lambda: ch.tag(1.5, ctx, "m"))
    assert ch.metadata(out, ctx) == "m"


def test_overdub_tagged_needs_tagging() -> None:
    with pytest.raises(TypeError, match="overdub_tagged"):
        ch.overdub_tagged(Plain(), len, "a")


def test_wrappers_in_the_result_are_replaced_by_their_values() -> None:
    ctx = tagging()
    out = ch.overdub(ctx, lambda: ([ch.tag(1, ctx)], {"k": ch.tag(2, ctx)}, (ch.tag(3, ctx),)))
    assert out == ([1], {"k": 2}, (3,))
    assert [type(x) for x in (out[0][0], out[1]["k"], out[2][0])] == [int, int, int]


_STORE: list[Any] = []


def _store(x: Any) -> None:
    _STORE.append(x)
    _STORE.append(Point(x, (x,)))


def test_wrappers_stored_where_the_result_does_not_lead_are_replaced_at_the_end_of_the_extent() -> None:
    ctx = tagging()
    _STORE.clear()
    ch.overdub(ctx, lambda: _store(ch.tag(7.0, ctx, "m")))
    point = _STORE[1]
    assert type(_STORE[0]) is float and type(point.x) is float and type(point.y[0]) is float
    assert list(_tagging.wrappers_of(ctx)) == []


def test_a_returned_wrapper_that_the_program_also_stored_is_replaced_where_it_was_stored() -> None:
    ctx = tagging()
    _STORE.clear()

    def program() -> Any:
        value = ch.tag(4.0, ctx, "m")
        _STORE.append(value)
        return value

    assert type(ch.overdub(ctx, program)) is float and type(_STORE[0]) is float


def test_a_with_block_is_an_extent_too() -> None:
    ctx = tagging()
    kept: list[Any] = []
    with ctx:
        kept.append(ch.tag(1, ctx))
    assert type(kept[0]) is int


def test_an_exit_stacks_exit_of_a_tagging_context_ends_the_extent_too() -> None:
    # ExitStack calls type(ctx).__exit__(ctx, ...): the class's with exit, which ends the
    # extent after its pop (docs/internals.md, "Interrupts").
    ctx = tagging()
    kept: list[Any] = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(ctx)
        kept.append(ch.tag(1, ctx))
    assert type(kept[0]) is int and ch.current_context() is None and ctx.tag.depth == 0


def test_nested_activations_keep_tags_until_the_outermost_ends() -> None:
    ctx = tagging()

    def inner() -> Any:
        return ch.tag(1, ctx, "m")

    def outer() -> Any:
        y = ch.overdub(ctx, inner)
        return ch.metadata(y, ctx)

    assert ch.overdub(ctx, outer) == "m"


def test_a_wrapper_made_by_the_caller_outside_the_extent_stays_the_callers() -> None:
    ctx = tagging()
    x = ch.tag(2.0, ctx, "m")
    assert ch.overdub(ctx, lambda v: v * 2, x) == 4.0
    assert ch.metadata(x, ctx) == "m"


# -- the plain program's results -----------------------------------------------------------

def _corpus_cases() -> list[Any]:
    return [pytest.param(c, id=c.name) for c in corpus.CASES if sys.version_info >= c.min_version
            and c.name not in _FRAME_CASES]


# Cases about frames and tracebacks: a tagged argument changes nothing there, and the
# differential suite covers them under every context.
_FRAME_CASES = {c.name for c in corpus.CASES if c.name.startswith("traceback") or "frame" in c.name
                or "stack" in c.name or c.name in ("logging_records_caller", "running_code_is_the_functions_code")}


def _outcome(run: Any) -> Any:
    try:
        return ("returned", run())
    except Exception as e:  # noqa: BLE001 -- the outcome is what is compared
        return ("raised", type(e), str(e))


def _compare(case: Any, args: tuple[Any, ...]) -> None:
    def plain() -> Any:
        out = case.func(*copy.deepcopy(args))
        return case.post(out) if case.post else out

    ctx = ch.enabletagging(Plain(), case.func)

    def tagged() -> Any:
        values = copy.deepcopy(args)
        out = ch.overdub(ctx, lambda: case.func(*(ch.tag(v, ctx) for v in values)))
        return case.post(out) if case.post else out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected, got = _outcome(plain), _outcome(tagged)
    assert got == expected, f"{case.name}{args!r}:\n  plain:  {expected!r}\n  tagged: {got!r}"


@pytest.mark.parametrize("case", _corpus_cases())
def test_a_tagging_context_that_overloads_nothing_gives_the_plain_results(case: Any) -> None:
    """Every corpus function, its arguments tagged, returns what it returns plainly."""
    if case.given is None:
        _compare(case, case.args)
        return

    @settings(max_examples=5, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
              suppress_health_check=list(HealthCheck))
    @given(case.given)
    def run(args: tuple[Any, ...]) -> None:
        _compare(case, args)

    run()


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6), min_size=1,
                max_size=8))
@settings(max_examples=30, deadline=None)
def test_numeric_code_on_tagged_inputs_gives_the_plain_results(xs: list[float]) -> None:
    def program(values: list[float]) -> Any:
        total, best = 0.0, None
        for i, v in enumerate(values):
            total += v * (i + 1) - abs(v) / 3
            if best is None or v > best:
                best = v
        return round(total, 6), best, sorted(values), max(values), math.fsum(values), str(values[0])

    ctx = ch.enabletagging(Plain(), program)
    got = ch.overdub(ctx, lambda: program([ch.tag(v, ctx) for v in xs]))
    assert got == program(xs)


def test_no_wrapper_survives_the_flow_function() -> None:
    ctx = ch.enabletagging(Meta(), _flows)
    ch.overdub(ctx, lambda: _flows(ch.tag(1.0, ctx, None)))
    gc.collect()
    assert list(_tagging.wrappers_of(ctx)) == []


@pytest.mark.parametrize("constant", [ch.NoMetaData, ch.OverdubInstead], ids=repr)
def test_the_constants_survive_copying_and_pickling(constant):
    assert copy.deepcopy(constant) is constant
    assert pickle.loads(pickle.dumps(constant)) is constant
    assert type(constant)() is constant
