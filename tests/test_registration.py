"""Registering an overload on a contextual generic refuses, at once, a signature that no
call could run, naming the function (qualname, file:line) and what is wrong with it."""

import random
import time
from random import random as random_function
from time import time as time_function

import pytest

import cassette_hook as ch
from cassette_hook.dispatch import Generic


class Ctx(ch.Context):
    pass


def where(func):
    return f"{func.__qualname__} ({func.__code__.co_filename}:{func.__code__.co_firstlineno})"


def refusal(generic, func):
    with pytest.raises(TypeError) as info:
        generic.register(func)
    assert func not in generic.methods()
    return str(info.value)


def test_required_keyword_only_parameter_is_refused_naming_it():
    def needs_key(ctx: Ctx, f, *, key):
        pass

    assert refusal(ch.prehook, needs_key) == (
        f"prehook: cannot register {where(needs_key)}: keyword-only parameter 'key' has no default; "
        "the keyword arguments of a call take no part in dispatch, so a call without key= would choose "
        "this method and fail: give it a default")


def test_required_keyword_only_parameter_is_accepted_by_a_generic_of_ones_own():
    def needs_key(x, *, key):  # its caller is the user's own code, which may always pass key=
        pass

    g = Generic("g")
    g.register(needs_key)
    assert g.methods() == [needs_key]


def test_keyword_only_parameter_with_a_default_is_accepted():
    def scaled(ctx: Ctx, f, *, scale=1):
        pass

    ch.prehook.register(scaled)
    try:
        assert scaled in ch.prehook.methods()
    finally:
        ch.prehook.unregister(scaled)


def test_overload_without_parameters_is_refused():
    def nothing():
        pass

    assert refusal(ch.overdub, nothing) == (
        f"overdub: cannot register {where(nothing)}: it takes no positional parameters, but it is "
        "called as overdub(ctx, f, *args, **kwargs): give it at least ctx, f")


def test_posthook_without_room_for_the_callee_is_refused():
    def no_callee(ctx: Ctx, out):
        pass

    assert refusal(ch.posthook, no_callee) == (
        f"posthook: cannot register {where(no_callee)}: it takes 2 positional parameters, but it is "
        "called as posthook(ctx, out, f, *args, **kwargs): give it at least ctx, out, f")


def test_hook_method_of_a_context_class_without_the_callee_is_refused_at_class_creation():
    with pytest.raises(TypeError, match=r"prehook: cannot register .*Bad\.prehook \(.*test_registration\.py:\d+\): "
                                        r"it takes 1 positional parameter, .* give it at least self, f"):
        class Bad(ch.Context):
            def prehook(self):
                pass


def test_metadatatype_overload_with_fewer_than_two_positional_parameters_is_refused():
    def context_only(ctx: Ctx):
        return object

    assert refusal(ch.metadatatype, context_only) == (
        f"metadatatype: cannot register {where(context_only)}: it takes 1 positional parameter, but it is "
        "called as metadatatype(ctx_type, value_type): give it two, (ctx, value)")


def test_metadatatype_overload_that_needs_more_than_two_arguments_is_refused():
    def three(ctx: Ctx, value, extra):
        return object

    assert refusal(ch.metadatatype, three) == (
        f"metadatatype: cannot register {where(three)}: it needs 3 positional arguments, but it is called "
        "with two, as metadatatype(ctx_type, value_type): give the parameters after the second defaults")


@pytest.mark.parametrize("source", ["def m(ctx, value, extra=None): return object",
                                    "def m(ctx, *rest): return object", "def m(*classes): return object"])
def test_metadatatype_overload_that_can_take_two_arguments_is_accepted(source):
    namespace = {}
    exec(source, namespace)  # noqa: S102 -- a signature under test
    ch.metadatatype.register(namespace["m"])
    try:
        assert namespace["m"] in ch.metadatatype.methods()
    finally:
        ch.metadatatype.unregister(namespace["m"])


def test_first_parameter_annotated_with_a_non_context_class_is_refused_naming_it():
    def on_ints(x: int, f):
        pass

    assert refusal(ch.prehook, on_ints) == (
        f"prehook: cannot register {where(on_ints)}: its first parameter 'x' is annotated int, which is "
        "not a context type; it is called as prehook(ctx, f, *args, **kwargs) with a context first: "
        "annotate it with a Context subclass, Ctx[M], or nothing")


def test_first_parameter_of_a_union_with_a_non_context_member_is_refused():
    def either(ctx: Ctx | str, f):
        pass

    assert "its first parameter 'ctx' is annotated" in refusal(ch.fallback, either)


def test_first_parameter_is_of_an_object_that_is_no_context_is_refused():
    def this_one(ctx: ch.Is[print], f):
        pass

    assert "which is not a context type" in refusal(ch.execute, this_one)


@pytest.mark.parametrize("annotation", [Ctx, ch.Context, Ctx[int], ch.Is[Ctx()], object],
                         ids=["Ctx", "Context", "Ctx[int]", "Is[ctx]", "object"])
def test_first_parameter_annotated_with_a_context_type_is_accepted(annotation):
    def overload(ctx, f):
        pass

    overload.__annotations__ = {"ctx": annotation}
    ch.overdub.register(overload)
    try:
        assert overload in ch.overdub.methods()
    finally:
        ch.overdub.unregister(overload)


def test_varargs_only_overload_is_accepted():
    def anything(*args):
        pass

    ch.prehook.register(anything)
    try:
        assert anything in ch.prehook.methods()
    finally:
        ch.prehook.unregister(anything)


class Factory:
    @classmethod
    def make(cls, x):
        return ("made", x)

    def method(self, x):
        return ("method", x)


class SubFactory(Factory):
    pass


def use_factories(obj, other):
    return Factory.make(1), SubFactory.make(2), obj.method(3), other.method(4)


def test_is_of_a_bound_method_is_refused_saying_what_to_write():
    obj = Factory()

    def over(ctx: Ctx, f: ch.Is[obj.method], self, x):
        pass

    assert refusal(ch.overdub, over) == (
        f"overdub: cannot register {where(over)}: parameter 'f' is Is[...] of the bound method {obj.method!r}, "
        "which no call is: a call site presents obj.method(...) as (Factory.method, obj, ...); write "
        "f: Is[Factory.method], and self: Is[obj] to match only the calls on that object")


def test_is_of_a_classmethod_is_refused_saying_what_to_write():
    def over(ctx: Ctx, f: ch.Is[Factory.make], cls, x):
        pass

    assert refusal(ch.overdub, over) == (
        f"overdub: cannot register {where(over)}: parameter 'f' is Is[...] of the bound method "
        f"{Factory.make!r}, which no call is: a call site presents Factory.make(...) as "
        "(Factory.make.__func__, Factory, ...); write f: Is[Factory.make.__func__], and cls: Is[Factory] "
        "to leave out calls on subclasses")


def test_is_of_a_builtin_method_bound_to_an_object_is_refused():
    items = []

    def over(ctx: Ctx, f: ch.Is[items.append], xs, x):
        pass

    assert "write f: Is[list.append], and xs: Is[obj]" in refusal(ch.prehook, over)


def test_is_of_a_bound_method_for_the_posthooks_callee_is_refused():
    def after(ctx: Ctx, out, f: ch.Is[Factory.make], *args):
        pass

    assert "parameter 'f' is Is[...] of the bound method" in refusal(ch.posthook, after)


def test_is_of_a_bound_method_for_an_argument_is_accepted():
    callback = Factory().method  # a program may pass this very object on: map(callback, xs)

    def over(ctx: Ctx, f, g: ch.Is[callback], xs):
        pass

    ch.overdub.register(over)
    try:
        assert over in ch.overdub.methods()
    finally:
        ch.overdub.unregister(over)


def test_the_suggested_patterns_match_the_calls_they_name():
    obj, other = Factory(), Factory()

    class Suggested(ch.Context):
        pass

    @ch.overdub.register
    def only_make_on_factory(ctx: Suggested, f: ch.Is[Factory.make.__func__], cls: ch.Is[Factory], x):
        return ("overloaded make", x)

    @ch.overdub.register
    def only_method_on_obj(ctx: Suggested, f: ch.Is[Factory.method], self: ch.Is[obj], x):
        return ("overloaded method", x)

    try:
        assert ch.overdub(Suggested(), use_factories, obj, other) == (
            ("overloaded make", 1), ("made", 2), ("overloaded method", 3), ("method", 4))
    finally:
        ch.overdub.unregister(only_make_on_factory)
        ch.overdub.unregister(only_method_on_obj)


# -- Is of a bound method that a module holds: this function on this receiver (docs/tutorial.md)

class FixedRandom(ch.Context):
    pass


@ch.overdub.register
def _fixed(ctx: FixedRandom, f: ch.Is[random.random]):
    return 0.25


def draws(generator):
    return random.random(), random_function(), generator.random()


def test_is_of_a_modules_bound_method_matches_the_calls_of_that_function_on_that_receiver():
    own = random.Random(7)
    expected = random.Random(7).random()
    assert ch.overdub(FixedRandom(), draws, own) == (0.25, 0.25, expected)  # (another Random: its own)
    assert ch.overdub(FixedRandom(), draws, random.Random(7))[2] == expected


class FixedClock(ch.Context):
    pass


@ch.overdub.register
def _clock(ctx: FixedClock, f: ch.Is[time.time]):
    return 1e9


def test_is_of_a_modules_builtin_function_matches_its_calls():
    assert ch.overdub(FixedClock(), lambda: (time.time(), time_function())) == (1e9, 1e9)


class Scaled(ch.Context):
    pass


@ch.overdub.register
def _scaled(ctx: Scaled, f: ch.Is[random.uniform], a, b):
    return f(a, b) * 0 + a  # the overload's f is the bound method as named: it calls the real one


def test_the_overload_of_a_bound_method_gets_it_as_its_callee_and_the_calls_arguments():
    assert ch.overdub(Scaled(), lambda: random.uniform(3, 4)) == 3


def test_hooks_take_a_modules_bound_method_too():
    seen = []

    class Watch(ch.Context):
        pass

    @ch.prehook.register
    def _(ctx: Watch, f: ch.Is[random.random]):
        seen.append(f)

    ch.overdub(Watch(), lambda: (random.random(), random.Random(1).random()))
    assert seen == [random.random]
