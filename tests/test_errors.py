"""Bad input to the public entry points says what the user did wrong, in the user's terms:
the function they called, what it takes, and what to write instead -- never one of
cassette_hook's internal names."""

import pytest

import cassette_hook as ch


class Ctx(ch.Context):
    pass


def double(x):
    return 2 * x


def message(run):
    with pytest.raises(TypeError) as info:
        run()
    return str(info.value)


@pytest.mark.parametrize("name", ["overdub", "prehook", "fallback", "execute", "recurse", "canrecurse"])
def test_giving_the_context_class_instead_of_an_instance_says_to_instantiate_it(name):
    assert message(lambda: getattr(ch, name)(Ctx, double, 1)) == (
        f"{name}() takes a context instance as its first argument, not the class Ctx; write {name}(Ctx(), ...)")


def test_posthook_given_the_context_class_says_to_instantiate_it():
    assert message(lambda: ch.posthook(Ctx, 2, double, 1)) == (
        "posthook() takes a context instance as its first argument, not the class Ctx; write posthook(Ctx(), ...)")


@pytest.mark.parametrize("name", ["similarcontext", "disablehooks"])
def test_copying_the_context_class_says_to_instantiate_it(name):
    assert message(lambda: getattr(ch, name)(Ctx)) == (
        f"{name}() takes a context instance as its first argument, not the class Ctx; write {name}(Ctx(), ...)")


def test_forgetting_the_context_says_a_context_comes_first():
    assert message(lambda: ch.overdub(double, 1)) == (
        f"overdub() takes a context as its first argument, not {double!r}; write overdub(ctx, ...)")


@pytest.mark.parametrize("name", ["overdub", "prehook", "fallback", "execute"])
def test_calling_a_generic_without_arguments_says_what_it_needs(name):
    assert message(lambda: getattr(ch, name)()) == (
        f"{name}() needs a context and a callable: {name}(ctx, f, *args, **kwargs)")


def test_calling_overdub_with_only_a_context_says_it_needs_a_callable():
    assert message(lambda: ch.overdub(Ctx())) == (
        "overdub() needs a context and a callable: overdub(ctx, f, *args, **kwargs)")


def test_calling_posthook_without_arguments_says_it_needs_the_result_too():
    assert message(lambda: ch.posthook()) == (
        "posthook() needs a context, a result and a callable: posthook(ctx, out, f, *args, **kwargs)")


def test_overdubbing_a_non_callable_names_it():
    assert message(lambda: ch.overdub(Ctx(), 3)) == "overdub(): f is not callable: 3"


@pytest.mark.parametrize("name", ["recurse", "canrecurse"])
def test_recurse_without_arguments_names_the_missing_ones(name):
    assert message(lambda: getattr(ch, name)()) == f"{name}() missing 2 required positional arguments: 'ctx' and 'f'"


def test_a_metadata_type_that_is_no_pattern_names_the_context_class():
    assert message(lambda: Ctx[3]) == "Ctx[3]: the metadata type must be a class, Is[...], a union, Any or Optional"


def test_is_of_nothing_says_it_needs_an_object():
    assert message(lambda: ch.Is[()]) == "Is[...] needs at least one object"


def test_registering_a_non_callable_says_so():
    assert message(lambda: ch.overdub.register(3)) == "overdub: cannot register 3: it is not callable"


def test_a_bad_call_leaves_no_context_active():
    message(lambda: ch.recurse(Ctx, double, 1))
    assert ch.current_context() is None


def test_a_bad_call_is_refused_every_time_not_only_the_first():
    for _ in range(2):
        assert message(lambda: ch.prehook(Ctx, double)).startswith("prehook() takes a context instance")
