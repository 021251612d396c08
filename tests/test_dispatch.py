"""Specification of cassette_hook.dispatch: multiple dispatch with Julia's rules.

One behaviour per test. The property tests at the end check the cache against a
cache-free resolution and the pattern order against its laws. No
``from __future__ import annotations`` here: the methods below annotate with local
objects (``Is[target]``), which string annotations could not see.
"""

import fractions
import functools
import gc
import math
import numbers
import operator
import sys
import threading
import typing
import warnings
from typing import Any, Optional, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cassette_hook import dispatch
from cassette_hook.dispatch import AmbiguityError, Generic, Is, NoMethodError, Parametric, Pattern


def where(func: Any) -> str:
    return f"{func.__qualname__} ({func.__code__.co_filename}:{func.__code__.co_firstlineno})"


class Base:
    pass


class Sub(Base):
    pass


class SubSub(Sub):
    pass


META = "metadata"  # a name, not a literal, in annotations: linters read strings there as forward references


class Ctx:
    def __init__(self, metadata: object = None) -> None:
        self.metadata = metadata


class SubCtx(Ctx):
    pass


# --- choosing a method -------------------------------------------------------------------


def test_dispatches_on_the_class_of_a_single_argument() -> None:
    g = Generic("g")
    g.register(lambda x: "any")

    @g.register
    def _(x: int) -> str:
        return "int"

    assert (g(1), g("s")) == ("int", "any")


def test_dispatches_on_every_positional_argument() -> None:
    g = Generic("g")

    @g.register
    def _(x: int, y: str, z: float) -> str:
        return "isf"

    @g.register
    def _(x: int, y: int, z: float) -> str:
        return "iif"

    assert (g(1, "a", 1.0), g(1, 2, 1.0)) == ("isf", "iif")


def test_a_subclass_beats_its_base() -> None:
    g = Generic("g")
    g.register(lambda x: "base", self_type=Base)
    g.register(lambda x: "sub", self_type=Sub)
    assert (g(Base()), g(Sub()), g(SubSub())) == ("base", "sub", "sub")


def test_abc_annotations_match_virtual_subclasses() -> None:
    g = Generic("g")

    @g.register
    def _(x: numbers.Number) -> str:
        return "number"

    assert [g(v) for v in (1, 1.5, 2j, fractions.Fraction(1, 2))] == ["number"] * 4
    with pytest.raises(NoMethodError):
        g("not a number")


def test_a_concrete_class_beats_an_abc_it_is_registered_with() -> None:
    g = Generic("g")

    @g.register
    def _(x: numbers.Number) -> str:
        return "number"

    @g.register
    def _(x: int) -> str:
        return "int"

    assert (g(1), g(1.0)) == ("int", "number")


def test_a_missing_annotation_means_any() -> None:
    g = Generic("g")

    @g.register
    def _(x, y: int) -> str:  # type: ignore[no-untyped-def]
        return "ok"

    assert g(object(), 1) == "ok"


def test_any_object_and_no_annotation_make_the_same_signature() -> None:
    g = Generic("g")

    @g.register
    def first(x: Any) -> str:
        return "any"

    @g.register
    def second(x: object) -> str:
        return "object"

    assert g.methods() == [second]

    @g.register
    def third(x):  # type: ignore[no-untyped-def]
        return "unannotated"

    assert g.methods() == [third]


def test_dispatch_looks_at_the_exact_type_not_at_a_faked_dunder_class() -> None:
    class Liar:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return int

    g = Generic("g", default=lambda x: "default")
    g.register(lambda x: "int", self_type=int)
    assert isinstance(Liar(), int)
    assert g(Liar()) == "default"


def test_keyword_arguments_are_passed_to_the_method_but_not_dispatched_on() -> None:
    g = Generic("g")

    @g.register
    def _(x: int, y: int = 0, *, z: str = "") -> tuple[int, int, str]:
        return (x, y, z)

    assert g(1, y=2, z=3) == (1, 2, 3)


def test_keyword_only_and_var_keyword_parameters_never_take_part() -> None:
    g = Generic("g")

    @g.register
    def _(x: int, *, k: str, **rest: bytes) -> str:
        return "ok"

    assert g(1, k=2, other=3) == "ok"
    assert g.resolve((1,)) is g.methods()[0]


def test_a_keyword_that_fills_a_positional_parameter_does_not_count_as_positional() -> None:
    g = Generic("g", default=lambda *a, **k: "default")
    g.register(lambda x, y: "two")
    assert (g(1, 2), g(1, y=2)) == ("two", "default")


def test_a_method_call_passes_through_exceptions_from_the_method_unchanged() -> None:
    g = Generic("g")
    error = KeyError("from the method")

    @g.register
    def _(x: int) -> None:
        raise error

    for _ in range(2):  # on a miss and on a cache hit
        with pytest.raises(KeyError) as info:
            g(1)
        assert info.value is error


@pytest.mark.parametrize("arity", range(8))
def test_every_arity_dispatches_the_same_way(arity: int) -> None:
    g = Generic("g")
    g.register(lambda *args: "any")

    @g.register
    def _(*args: int) -> str:
        return "ints"

    ints, mixed = tuple(range(arity)), tuple(range(arity - 1)) + ("s",)
    for _ in range(2):
        assert g(*ints) == "ints"
        if arity:
            assert g(*mixed) == "any"


# --- Is[...] ---------------------------------------------------------------------------------


def test_is_beats_any_class() -> None:
    g = Generic("g")
    g.register(lambda f, x: "function")

    @g.register
    def _(f: Is[math.sin], x: float) -> float:
        return math.cos(x)

    assert g(math.sin, 0.0) == 1.0
    assert g(math.cos, 0.0) == "function"


def test_keyword_arguments_reach_methods_chosen_by_identity() -> None:
    g = Generic("g")
    g.register(lambda f, *, scale=1.0: -scale)

    @g.register
    def _(f: Is[math.sin], *, scale: float = 1.0) -> float:
        return scale

    assert (g(math.sin, scale=2.0), g(math.cos, scale=2.0)) == (2.0, -2.0)


def test_is_beats_the_class_of_its_object() -> None:
    g = Generic("g")
    g.register(lambda x: "none type", self_type=type(None))

    @g.register
    def _(x: Is[None]) -> str:
        return "None itself"

    assert g(None) == "None itself"


def test_is_means_identity_not_equality() -> None:
    target = [1, 2]
    g = Generic("g", default=lambda x: "other")

    @g.register
    def _(x: Is[target]) -> str:
        return "target"

    assert (g(target), g([1, 2])) == ("target", "other")


def test_is_accepts_unhashable_objects() -> None:
    a, b = {"k": 1}, [1]
    g = Generic("g", default=lambda x: "other")

    @g.register
    def _(x: Is[a, b]) -> str:
        return "one of them"

    assert (g(a), g(b), g({"k": 1})) == ("one of them", "one of them", "other")


def test_is_with_several_objects_matches_each_of_them() -> None:
    g = Generic("g", default=lambda f: "other")

    @g.register
    def _(f: Is[math.sin, math.cos, len]) -> str:
        return "listed"

    assert [g(f) for f in (math.sin, math.cos, len, math.tan)] == ["listed"] * 3 + ["other"]


def test_is_never_confuses_objects_of_the_same_type_on_cache_hits() -> None:
    g = Generic("g", default=lambda f: "other")

    @g.register
    def _(f: Is[math.sin]) -> str:
        return "sin"

    @g.register
    def _(f: Is[math.cos]) -> str:
        return "cos"

    calls = [math.sin, math.cos, math.tan, math.sin, math.tan, math.cos] * 2
    assert [g(f) for f in calls] == ["sin", "cos", "other", "sin", "other", "cos"] * 2



def test_is_refinement_answers_each_of_many_objects_by_identity() -> None:
    """Many objects through one Is refiner, named and not, alternating and short-lived:
    each gets its own answer (the C refiner remembers recent arguments by address)."""
    g = Generic("g", default=lambda f: "other")
    named = [lambda i=i: i for i in range(8)]

    @g.register
    def _(f: Is[tuple(named)]) -> str:
        return "named"

    for _ in range(3):
        passing = [lambda: None for _ in range(40)]  # unnamed, made and dropped each round
        calls = [f for pair in zip(named * 5, passing) for f in pair]
        assert [g(f) for f in calls] == ["named", "other"] * 40
        del passing, calls
        gc.collect()

def test_is_of_a_tuple_subscript_lists_its_members() -> None:
    assert Is[(1, 2)].objects == (1, 2)
    assert Is((1, 2)).objects == ((1, 2),)


def test_is_needs_at_least_one_object() -> None:
    with pytest.raises(TypeError, match="at least one"):
        Is[()]


def test_a_smaller_is_set_is_more_specific() -> None:
    g = Generic("g")

    @g.register
    def _(f: Is[math.sin, math.cos]) -> str:
        return "two"

    @g.register
    def _(f: Is[math.sin]) -> str:
        return "one"

    assert (g(math.sin), g(math.cos)) == ("one", "two")


# --- unions, Optional, None ------------------------------------------------------------------


@pytest.mark.parametrize("annotation", [int | str, Union[int, str], Union[int, "str"]],
                         ids=["pipe", "Union", "forward"])
def test_union_annotations_match_any_member(annotation: object) -> None:
    def method(x):  # type: ignore[no-untyped-def]
        return "member"

    method.__annotations__ = {"x": annotation}
    g = Generic("g", default=lambda x: "other")
    g.register(method)
    assert (g(1), g("s"), g(1.0)) == ("member", "member", "other")


@pytest.mark.parametrize("annotation", [Optional[int], int | None, None, type(None)])
def test_none_in_an_annotation_means_nonetype(annotation: object) -> None:
    def method(x):  # type: ignore[no-untyped-def]
        return "matched"

    method.__annotations__ = {"x": annotation}
    g = Generic("g", default=lambda x: "other")
    g.register(method)
    assert (g(None), g("s")) == ("matched", "other")


def test_a_union_is_as_specific_as_its_least_specific_member() -> None:
    g = Generic("g")

    @g.register
    def union(x: int | str) -> str:
        return "union"

    @g.register
    def integer(x: int) -> str:
        return "int"

    @g.register
    def number(x: numbers.Number) -> str:
        return "number"

    # int beats int | str; int | str and Number are incomparable (str is not a Number).
    assert (g(1), g("s"), g(1.0)) == ("int", "union", "number")
    g.unregister(integer)
    with pytest.raises(AmbiguityError):
        g(1)


def test_a_union_containing_any_is_any() -> None:
    g = Generic("g")

    @g.register
    def first(x: Union[int, Any]) -> None:
        pass

    @g.register
    def second(x) -> None:  # type: ignore[no-untyped-def]
        pass

    assert g.methods() == [second]


# --- Parametric --------------------------------------------------------------------------------


def test_parametric_matches_on_the_attribute() -> None:
    g = Generic("g", default=lambda c: "other")

    @g.register
    def _(c: Parametric(Ctx, META, int)) -> str:
        return "int metadata"

    assert (g(Ctx(1)), g(Ctx("s")), g(SubCtx(2)), g(3)) == ("int metadata", "other", "int metadata", "other")


def test_parametric_beats_its_plain_class() -> None:
    g = Generic("g")
    g.register(lambda c: "plain", self_type=Ctx)

    @g.register
    def _(c: Parametric(Ctx, META, Any)) -> str:
        return "parametric"

    assert g(Ctx(None)) == "parametric"


def test_parametric_is_ordered_by_class_and_inner_pattern() -> None:
    g = Generic("g")

    @g.register
    def _(c: Parametric(Ctx, META, numbers.Number)) -> str:
        return "ctx number"

    @g.register
    def _(c: Parametric(Ctx, META, int)) -> str:
        return "ctx int"

    @g.register
    def _(c: Parametric(SubCtx, META, int)) -> str:
        return "subctx int"

    assert (g(Ctx(1.0)), g(Ctx(1)), g(SubCtx(1)), g(SubCtx(1.0))) == (
        "ctx number", "ctx int", "subctx int", "ctx number")


def test_parametric_with_a_subclass_and_a_wider_inner_is_ambiguous_against_the_reverse() -> None:
    g = Generic("g")

    @g.register
    def a(c: Parametric(SubCtx, META, numbers.Number)) -> str:
        return "A"

    @g.register
    def b(c: Parametric(Ctx, META, int)) -> str:
        return "B"

    with pytest.raises(AmbiguityError):
        g(SubCtx(1))


def test_parametric_never_matches_when_the_attribute_is_missing() -> None:
    g = Generic("g", default=lambda c: "other")
    bare = Ctx()
    del bare.metadata

    @g.register
    def _(c: Parametric(Ctx, META, Any)) -> str:
        return "has metadata"

    assert (g(bare), g(Ctx())) == ("other", "has metadata")


def test_parametric_cache_follows_the_attribute_of_each_call() -> None:
    g = Generic("g", default=lambda c: "other")

    @g.register
    def _(c: Parametric(Ctx, META, int)) -> str:
        return "int"

    @g.register
    def _(c: Parametric(Ctx, META, str)) -> str:
        return "str"

    ctx = Ctx(1)
    results = []
    for metadata in (1, "s", 1.0, 2, "t"):
        ctx.metadata = metadata
        results.append(g(ctx))
    assert results == ["int", "str", "other", "int", "str"]


def test_parametric_inner_may_be_is_or_parametric() -> None:
    sentinel = object()
    g = Generic("g", default=lambda c: "other")

    @g.register
    def _(c: Parametric(Ctx, META, Is[sentinel])) -> str:
        return "sentinel"

    @g.register
    def _(c: Parametric(Ctx, META, Parametric(Ctx, META, int))) -> str:
        return "nested"

    assert [g(Ctx(m)) for m in (sentinel, object(), Ctx(1), Ctx("s"))] == ["sentinel", "other", "nested", "other"]


def test_parametric_rejects_an_inner_that_is_not_an_annotation() -> None:
    with pytest.raises(TypeError, match=r"Parametric\(Ctx, 'metadata', \.\.\.\): inner 3 which is not a class"):
        Parametric(Ctx, META, 3)


def test_parametric_needs_a_class_and_an_attribute_name() -> None:
    with pytest.raises(TypeError, match="needs a class and a str"):
        Parametric("Ctx", META, int)  # type: ignore[arg-type]


def test_parametric_attribute_lookup_may_reenter_the_generic() -> None:
    g = Generic("g", default=lambda c: "other")

    class Reentrant(Ctx):
        def __init__(self) -> None:
            pass

        @property
        def metadata(self) -> int:
            g(1)  # a miss inside a miss, on the same generic
            return 1

    @g.register
    def _(c: Parametric(Ctx, META, int)) -> str:
        return "int"

    assert g(Reentrant()) == "int"


# --- arity: varargs and defaults ---------------------------------------------------------------


def test_varargs_annotation_constrains_every_extra_argument() -> None:
    g = Generic("g", default=lambda *a: "other")

    @g.register
    def _(f, *args: int) -> str:  # type: ignore[no-untyped-def]
        return "ints"

    assert (g(len), g(len, 1, 2, 3), g(len, 1, "s", 3)) == ("ints", "ints", "other")


def test_fixed_arity_beats_varargs() -> None:
    g = Generic("g")

    @g.register
    def _(x: int, *args: int) -> str:
        return "varargs"

    @g.register
    def _(x: int) -> str:
        return "fixed"

    assert (g(1), g(1, 2)) == ("fixed", "varargs")


def test_a_narrower_varargs_pattern_beats_a_wider_one() -> None:
    g = Generic("g")
    g.register(lambda *args: "any")

    @g.register
    def _(*args: int) -> str:
        return "ints"

    assert (g(), g(1, 2)) == ("ints", "ints")


def test_parameters_with_defaults_make_a_method_apply_to_a_range_of_arities() -> None:
    g = Generic("g", default=lambda *a: "other")

    @g.register
    def _(x: int, y: int = 0, z: int = 0) -> str:
        return "1 to 3"

    assert [g(*range(n)) for n in range(5)] == ["other", "1 to 3", "1 to 3", "1 to 3", "other"]


def test_a_method_without_defaults_beats_one_with_defaults_at_the_same_arity() -> None:
    g = Generic("g")

    @g.register
    def _(x, y=0):  # type: ignore[no-untyped-def]
        return "with default"

    @g.register
    def _(x):  # type: ignore[no-untyped-def]
        return "exact"

    assert (g(1), g(1, 2)) == ("exact", "with default")


def test_a_more_specific_position_beats_fixed_arity() -> None:
    g = Generic("g")
    g.register(lambda x: "fixed any")

    @g.register
    def _(*args: int) -> str:
        return "varargs int"

    assert g(1) == "varargs int"


# --- default, errors ---------------------------------------------------------------------------


def test_the_default_runs_when_no_method_applies() -> None:
    g = Generic("g", default=lambda *a, **k: ("default", a, k))
    g.register(lambda x: "int", self_type=int)
    assert g("s", k=1) == ("default", ("s",), {"k": 1})


def test_the_default_never_takes_part_in_specificity() -> None:
    g = Generic("g", default=lambda x: "default")
    g.register(lambda x: "any")
    assert g(1) == "any"


def test_no_method_error_names_the_generic_and_the_argument_types() -> None:
    g = Generic("prehook")
    g.register(lambda x: "int", self_type=int)
    with pytest.raises(NoMethodError, match=r"prehook: no method matches argument types \(str, float\)"):
        g("s", 1.0)


def test_ambiguity_error_names_both_methods_and_the_argument_types() -> None:
    g = Generic("overdub")

    @g.register
    def left(x: int, y) -> None:  # type: ignore[no-untyped-def]
        pass

    @g.register
    def right(x, y: int) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(AmbiguityError) as info:
        g(1, 2)
    message = str(info.value)
    assert message.startswith("overdub: ambiguous call with argument types (int, int)")
    assert where(left) in message and where(right) in message


def test_a_third_more_specific_method_resolves_an_ambiguity() -> None:
    g = Generic("g")
    g.register(lambda x, y: "left", self_type=int)

    @g.register
    def _(x, y: int) -> str:  # type: ignore[no-untyped-def]
        return "right"

    @g.register
    def _(x: int, y: int) -> str:
        return "both"

    assert (g(1, 2), g(1, "s"), g("s", 2)) == ("both", "left", "right")


def test_dispatch_errors_are_type_errors() -> None:
    assert issubclass(AmbiguityError, TypeError) and issubclass(NoMethodError, TypeError)


def test_dispatch_errors_do_not_chain_onto_internal_exceptions() -> None:
    g = Generic("g")
    with pytest.raises(NoMethodError) as info:
        g(1, 2, 3)
    assert info.value.__context__ is None and info.value.__cause__ is None


def test_dispatch_errors_are_raised_again_on_every_call() -> None:
    g = Generic("g")
    for _ in range(3):
        with pytest.raises(NoMethodError):
            g(1)


# --- registration ------------------------------------------------------------------------------


def test_register_returns_the_function_unchanged() -> None:
    g = Generic("g")

    def f(x: int) -> int:
        return x

    assert g.register(f) is f
    assert g.register(self_type=str)(f) is f


def test_registering_an_equal_signature_replaces_the_old_method() -> None:
    g = Generic("g")

    @g.register
    def old(x: int | str) -> str:
        return "old"

    @g.register
    def new(x: Union[str, int]) -> str:
        return "new"

    assert (g.methods(), g(1)) == ([new], "new")


def test_self_type_types_the_first_positional_parameter_whatever_its_annotation() -> None:
    g = Generic("prehook", default=lambda *a: "default")

    class PrintCtx:
        def prehook(self: str, f, *args):  # type: ignore[no-untyped-def,misc]
            return "method"

    g.register(PrintCtx.prehook, self_type=PrintCtx)
    assert (g(PrintCtx(), len, 1, 2), g("s", len)) == ("method", "default")


def test_self_type_needs_a_positional_parameter() -> None:
    g = Generic("g")
    with pytest.raises(TypeError, match="self_type given"):
        g.register(lambda *args: None, self_type=int)


def test_string_annotations_are_resolved_against_the_function_globals() -> None:
    namespace: dict[str, Any] = {}
    source = (
        "from __future__ import annotations\n"
        "import math\n"
        "from cassette_hook.dispatch import Is\n"
        "class Local: pass\n"
        "def f(x: Local, g: Is[math.sin], *rest: int | None): return 'resolved'\n"
    )
    exec(compile(source, "fake_module.py", "exec"), namespace)
    g = Generic("g", default=lambda *a: "other")
    g.register(namespace["f"])
    assert g(namespace["Local"](), math.sin, 1, None) == "resolved"
    assert g(namespace["Local"](), math.cos) == "other"


def test_an_unresolvable_string_annotation_is_rejected_at_registration() -> None:
    g = Generic("g")

    def f(x: "NoSuchName") -> None:  # type: ignore[name-defined] # noqa: F821
        pass

    with pytest.raises(TypeError,
                       match=r"parameter 'x' has annotation 'NoSuchName', which does not resolve \(NameError"):
        g.register(f)


@pytest.mark.parametrize("annotation", [3, list[int], typing.List[int], typing.Callable, "3", typing.Literal[1]],
                         ids=["int", "list[int]", "List[int]", "Callable", "string 3", "Literal"])
def test_an_annotation_that_is_no_pattern_is_rejected_naming_generic_function_and_parameter(annotation: object) -> None:
    def f(x):  # type: ignore[no-untyped-def]
        pass

    f.__annotations__ = {"x": annotation}
    g = Generic("prehook")
    expected = (f"prehook: cannot register {where(f)}: parameter 'x' has annotation {annotation!r}, "
                "which is not a class, Is[...], a union, Any or Optional")
    with pytest.raises(TypeError) as info:
        g.register(f)
    assert str(info.value) == expected
    assert g.methods() == []


def test_an_unsubscripted_is_is_rejected_at_registration() -> None:
    def f(x: Is) -> None:
        pass

    with pytest.raises(TypeError, match=r"parameter 'x' has annotation .*Is'>, which is a pattern class"):
        Generic("g").register(f)


def test_a_callable_object_can_be_a_method() -> None:
    class Method:
        def __call__(self, x: int) -> str:
            return "object"

    g = Generic("g")
    g.register(Method())
    assert g(1) == "object"


def test_registering_a_non_callable_is_a_clear_type_error() -> None:
    g = Generic("g")
    with pytest.raises(TypeError, match="g: cannot register 3: it is not callable"):
        g.register(3)  # type: ignore[arg-type]


def test_a_callable_without_a_readable_signature_is_a_clear_type_error() -> None:
    class Opaque:
        __signature__ = "not a signature"

        def __call__(self) -> None:
            pass

    with pytest.raises(TypeError, match="its signature cannot be read"):
        Generic("g").register(Opaque())


def test_unregister_removes_the_method() -> None:
    g = Generic("g", default=lambda x: "default")

    def f(x: int) -> str:
        return "f"

    g.register(f)
    assert g(1) == "f"
    g.unregister(f)
    assert (g(1), g.methods()) == ("default", [])


def test_unregistering_an_unknown_function_is_a_value_error_naming_it() -> None:
    g = Generic("g")

    def stranger(x: int) -> None:
        pass

    with pytest.raises(ValueError, match=rf"g: cannot unregister {stranger.__qualname__} \(.*test_dispatch.py:\d+\)"):
        g.unregister(stranger)


def test_generation_counts_every_registration_and_unregistration_on_any_generic() -> None:
    g, h = Generic("g"), Generic("h")
    before = dispatch.generation
    f = g.register(lambda x: None)
    h.register(lambda x: None, self_type=int)
    g.unregister(f)
    assert dispatch.generation == before + 3


def test_registration_invalidates_the_cache() -> None:
    g = Generic("g")
    g.register(lambda x: "any")
    assert g(1) == "any"
    g.register(lambda x: "int", self_type=int)
    assert g(1) == "int"


def test_unregistration_invalidates_the_cache() -> None:
    g = Generic("g")
    g.register(lambda x: "any")
    specific = g.register(lambda x: "int", self_type=int)
    assert g(1) == "int"
    g.unregister(specific)
    assert g(1) == "any"


def test_registration_invalidates_refined_cache_entries() -> None:
    g = Generic("g", default=lambda f: "default")

    @g.register
    def _(f: Is[math.sin]) -> str:
        return "sin"

    assert g(math.sin) == "sin"

    @g.register
    def _(f: Is[math.sin, math.cos]) -> str:
        return "sin or cos"

    assert (g(math.sin), g(math.cos)) == ("sin", "sin or cos")


def test_registration_from_other_threads_is_consistent() -> None:
    g = Generic("g", default=lambda x: -1)
    classes = [type(f"C{i}", (), {}) for i in range(40)]

    def register(i: int) -> None:
        g.register(lambda x, i=i: i, self_type=classes[i])

    threads = [threading.Thread(target=register, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [g(c()) for c in classes] == list(range(40))


# --- introspection -----------------------------------------------------------------------------


def test_resolve_returns_the_method_without_calling_it() -> None:
    g = Generic("g", default=lambda x: None)

    def f(x: Is[math.sin]) -> None:
        raise AssertionError("called")

    g.register(f)
    assert (g.resolve((math.sin,)), g.resolve((math.sin,)), g.resolve((1,))) == (f, f, g.default)


def test_methods_lists_the_registered_methods_without_the_default() -> None:
    g = Generic("g", default=lambda x: None)
    f = g.register(lambda x: None)
    assert g.methods() == [f]


def test_a_generic_keeps_its_name_default_and_doc() -> None:
    default = lambda x: None  # noqa: E731
    g = Generic("prehook", default, "Called before each call.")
    assert (g.name, g.default, g.__doc__) == ("prehook", default, "Called before each call.")
    assert "prehook" in repr(g)


def test_a_generic_stored_on_a_class_is_not_bound_to_instances() -> None:
    class Holder:
        hook = Generic("hook")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 3.13 warns about partial objects used as methods
        assert Holder().hook is Holder.hook


def test_a_generic_can_be_wrapped_in_functools_partial() -> None:
    g = Generic("g")
    g.register(lambda x, y: "int first", self_type=int)
    assert functools.partial(g, 1)("s") == "int first"


@pytest.mark.parametrize(("annotation", "first_type", "expected"), [
    (Any, str, True),
    (Base, Sub, True),
    (Sub, Base, False),
    (numbers.Number, float, True),
    (Parametric(Ctx, META, int), SubCtx, True),
    (Parametric(Ctx, META, int), Base, False),
    (Is[math.sin], type(math.sin), True),
    (Is[math.sin], type(len), True),
    (Is[math.sin], int, False),
    (int | Sub, Sub, True),
    (int | Sub, Base, False),
])
def test_has_methods_for_answers_by_the_first_parameter(annotation: object, first_type: type, expected: bool) -> None:
    def method(x, *rest):  # type: ignore[no-untyped-def]
        pass

    method.__annotations__ = {"x": annotation}
    g = Generic("g")
    g.register(method)
    assert g.has_methods_for(first_type) is expected


def test_has_methods_for_ignores_the_default() -> None:
    assert Generic("g", default=lambda *a: None).has_methods_for(object) is False


def test_has_methods_for_uses_a_varargs_pattern_for_the_first_argument() -> None:
    g = Generic("g")
    g.register(lambda *args: None, self_type=None)

    def ints(*args: int) -> None:
        pass

    h = Generic("h")
    h.register(ints)
    assert (g.has_methods_for(str), h.has_methods_for(str), h.has_methods_for(bool)) == (True, False, True)


def test_has_methods_for_is_false_for_methods_that_take_no_arguments() -> None:
    g = Generic("g")
    g.register(lambda: None)
    assert g.has_methods_for(int) is False


def test_has_methods_for_follows_registration() -> None:
    g = Generic("g")
    assert g.has_methods_for(int) is False
    f = g.register(lambda x: None, self_type=int)
    assert g.has_methods_for(int) is True
    g.unregister(f)
    assert g.has_methods_for(int) is False


def test_an_is_pattern_keeps_its_objects_alive_so_ids_stay_unique() -> None:
    g = Generic("g", default=lambda x: "other")

    class Thing:
        pass

    thing = Thing()

    def f(x: Is[thing]) -> str:  # evaluated now, with thing in scope
        return "thing"

    g.register(f)
    del thing
    gc.collect()
    assert [g(Thing()) for _ in range(50)] == ["other"] * 50


# --- properties --------------------------------------------------------------------------------

SIN, COS = math.sin, math.cos
SHARED_LIST: list[int] = []
VALUES = [1, True, 1.5, "s", None, SIN, COS, len, SHARED_LIST, [], Base(), Sub(), SubSub(),
          Ctx(1), Ctx("s"), SubCtx(2.0), SubCtx(None)]
PATTERNS: list[object] = [
    Any, int, bool, float, str, numbers.Number, Base, Sub, SubSub, Ctx, SubCtx, type(None),
    int | str, Sub | float, Optional[Base], Is[SIN], Is[SIN, COS], Is[SHARED_LIST], Is[None, SIN],
    Parametric(Ctx, META, Any), Parametric(Ctx, META, int), Parametric(SubCtx, META, numbers.Number),
    Parametric(Ctx, META, int | None),
]


def as_pattern(annotation: object) -> Pattern:
    return dispatch._to_pattern(annotation, {})


patterns = st.sampled_from(PATTERNS).map(as_pattern)


@given(patterns)
def test_pattern_order_is_reflexive(p: Pattern) -> None:
    assert p <= p and not p < p


@given(patterns, patterns, patterns)
def test_pattern_order_is_transitive(a: Pattern, b: Pattern, c: Pattern) -> None:
    if a <= b and b <= c:
        assert a <= c


@given(patterns, patterns)
def test_a_subpattern_matches_only_values_its_superpattern_matches(a: Pattern, b: Pattern) -> None:
    if a <= b:
        assert all(b.matches(v) for v in VALUES if a.matches(v))


@given(patterns)
def test_any_is_the_top_pattern(p: Pattern) -> None:
    assert p <= dispatch.ANY and (dispatch.ANY <= p) == (p is dispatch.ANY)


@given(patterns)
def test_has_methods_for_agrees_with_matching_on_plain_values(p: Pattern) -> None:
    for v in VALUES:
        if p.matches(v):
            assert p.could_match_type(type(v))


signatures = st.lists(st.sampled_from(PATTERNS), min_size=0, max_size=3)
tables = st.lists(st.tuples(signatures, st.sampled_from([None, *PATTERNS])), min_size=1, max_size=6)
calls = st.lists(st.lists(st.sampled_from(VALUES), max_size=4).map(tuple), min_size=1, max_size=25)


def build(table: list[tuple[list[object], object | None]]) -> Generic:
    g = Generic("g", default=lambda *a: "default")
    for i, (params, varargs) in enumerate(table):
        names = [f"p{j}" for j in range(len(params))]
        source = f"def m{i}({', '.join(names + (['*rest'] if varargs is not None else []))}): pass"
        namespace: dict[str, Any] = {}
        exec(source, namespace)
        m = namespace[f"m{i}"]
        m.__annotations__ = dict(zip(names, params)) | ({"rest": varargs} if varargs is not None else {})
        g.register(m)
    return g


def outcome(g: Generic, args: tuple[object, ...]) -> object:
    """The name of the method that runs, or the dispatch error raised."""
    try:
        return g.resolve(args).__name__
    except (AmbiguityError, NoMethodError) as e:
        return type(e)


@settings(max_examples=300, deadline=None)
@given(tables, calls)
def test_cached_dispatch_agrees_with_a_fresh_resolution_for_every_call(table: Any, args_list: Any) -> None:
    g = build(table)
    for args in args_list:
        expected = outcome(build(table), args)  # a new generic: nothing cached
        assert outcome(g, args) == expected
        assert outcome(g, args) == expected  # and again, from the cache


@settings(max_examples=300, deadline=None)
@given(tables, st.lists(st.sampled_from(VALUES), max_size=4).map(tuple))
def test_the_winner_applies_and_is_more_specific_than_every_other_applicable_method(table: Any, args: Any) -> None:
    g = build(table)
    try:
        winner = g.resolve(args)
    except (AmbiguityError, NoMethodError):
        return
    applicable = [m for m in g._methods if m.applies(args)]
    if winner is g.default:
        assert applicable == []
        return
    (best,) = [m for m in applicable if m.func is winner]
    assert all(dispatch._more_specific(best, m, len(args)) for m in applicable if m is not best)


def test_operator_functions_can_be_dispatched_on_by_identity() -> None:
    g = Generic("overdub", default=lambda f, *a: f(*a))

    @g.register
    def _(f: Is[operator.mul], x: float, y: float) -> float:
        return x + y

    assert (g(operator.mul, 2.0, 3.0), g(operator.add, 2.0, 3.0), g(operator.mul, 2, 3)) == (5.0, 5.0, 6)


def test_string_annotations_resolve_local_classes_of_the_registering_function():
    namespace: dict = {}
    exec(
        "from __future__ import annotations\n"
        "from cassette_hook.dispatch import Generic\n"
        "def build():\n"
        "    class Local:\n"
        "        pass\n"
        "    g = Generic('g', default=lambda x: 'default')\n"
        "    @g.register\n"
        "    def _(x: Local):\n"
        "        return 'local'\n"
        "    return g, Local\n",
        namespace,
    )
    g, Local = namespace["build"]()
    assert g(Local()) == "local" and g(1) == "default"


def test_sole_method_is_the_method_that_takes_anything_after_the_first_argument():
    class A:
        pass

    class B(A):
        pass

    g = Generic("g", default=lambda *args: "default")

    def any_rest(a: A, f, *args):
        return "any"

    g.register(any_rest)
    assert g.sole_method(B, 2) is any_rest
    assert g.sole_method(int, 2) is None  # nothing but the default applies

    def typed(a: B, f, *args: int):
        return "typed"

    g.register(typed)
    assert g.sole_method(B, 2) is None  # two candidates: dispatch decides per call
    assert g.sole_method(A, 2) is any_rest


# -- deferred annotations (3.14: PEP 649/749) ----------------------------------------------

deferred = pytest.mark.skipif(sys.version_info < (3, 14), reason="annotations are deferred from 3.14 on")


def _defined(source: str) -> dict[str, Any]:
    """``source`` run as a module of its own would run it (annotations deferred on 3.14; no
    ``from __future__ import annotations``, which this file has)."""
    namespace: dict[str, Any] = {"Generic": Generic}
    exec(source, namespace)  # noqa: S102
    return namespace


@deferred
def test_an_overload_may_name_a_class_defined_after_it() -> None:
    namespace = _defined(
        "g = Generic('g', default=lambda x: 'default')\n"
        "@g.register\n"
        "def later(x: Later):\n"
        "    return 'later'\n"
        "class Later:\n"
        "    pass\n")
    g = namespace["g"]
    assert g(namespace["Later"]()) == "later" and g(1) == "default"


@deferred
def test_a_name_an_overload_uses_that_is_never_defined_is_an_error_naming_the_overload_at_dispatch() -> None:
    g = _defined("g = Generic('g', default=lambda x: 'default')\n"
                 "@g.register\n"
                 "def never(x: NoSuchName):\n"
                 "    return 'never'\n")["g"]
    with pytest.raises(TypeError, match=r"cannot register never .*parameter 'x'.*NoSuchName.*does not resolve"):
        g(1)
    with pytest.raises(TypeError, match="NoSuchName"):  # (every dispatch, until it is defined or unregistered)
        g(1)


@deferred
def test_an_overload_waiting_for_a_name_can_be_unregistered() -> None:
    namespace = _defined("g = Generic('g', default=lambda x: 'default')\n"
                         "@g.register\n"
                         "def never(x: NoSuchName):\n"
                         "    return 'never'\n")
    g = namespace["g"]
    g.unregister(namespace["never"])
    assert g(1) == "default" and g.methods() == []
