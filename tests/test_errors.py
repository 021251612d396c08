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


def test_overdubbing_a_non_callable_names_its_type_as_python_does():
    assert message(lambda: ch.overdub(Ctx(), 3)) == (
        "overdub(): 'int' object is not callable (f = 3, in overdub(ctx, f, *args, **kwargs))")


def test_overdubbing_a_non_callable_shows_it_without_calling_its_repr():
    class Inert:
        def __repr__(self):
            raise AssertionError("the message called __repr__")

    inert = Inert()
    assert message(lambda: ch.overdub(Ctx(), inert)) == (
        f"overdub(): 'Inert' object is not callable (f = <Inert object at {id(inert):#x}>, "
        "in overdub(ctx, f, *args, **kwargs))")


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


# -- contexts named in errors: short, and never by their metadata's own repr -------------

class Unprintable:
    def __repr__(self):
        raise ValueError("repr of metadata failed")


def nesting_error(outer, inner):
    """The error of leaving ``outer``'s ``with`` block while ``inner`` is still active."""
    with outer:
        inner.__enter__()
        try:
            with pytest.raises(RuntimeError) as info:
                outer.__exit__(None, None, None)
        finally:
            inner.__exit__(None, None, None)
    return str(info.value)


def test_a_nesting_error_names_contexts_with_huge_metadata_shortly():
    assert nesting_error(Ctx(metadata=[1] * 5_000_000), Ctx(metadata="inner")) == (
        "cannot deactivate Ctx(metadata=[1, 1, 1, 1, 1, 1, ...]): "
        "the innermost active context is Ctx(metadata='inner')")


def test_a_nesting_error_stays_one_when_the_metadatas_repr_raises():
    metadata = Unprintable()
    assert nesting_error(Ctx(), Ctx(metadata=metadata)) == (
        "cannot deactivate Ctx(metadata=None): the innermost active context is "
        f"Ctx(metadata=<Unprintable object at {id(metadata):#x}>)")


def test_tagging_errors_name_the_context_without_its_metadatas_repr():
    metadata = Unprintable()
    assert message(lambda: ch.tag(1.0, Ctx(metadata=metadata))) == (
        f"tag(): tagging is not enabled for Ctx(metadata=<Unprintable object at {id(metadata):#x}>); "
        "tag values for ch.enabletagging(ctx, f), the copy it returns")
