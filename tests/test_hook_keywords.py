"""The program's keyword arguments reach hooks and overloads as keywords, whatever they
are called: a hook written ``def prehook(self, f, *args, **kwargs)`` (as docs/tutorial.md,
"Hooks: prehook and posthook", writes it) still works for the program's call ``g(f=1)`` or ``namespace(self=...)``.  The
leading parameters -- the context, the result, the callee -- are only ever passed by
position, so the registered method treats them as positional-only."""

import cassette_hook as ch


def g(f=None, self=None, ctx=None, out=None):
    return (f, self, ctx, out)


def calls_g_with_keywords_named_like_hook_parameters():
    return g(f=1, self=2, ctx=3, out=4)


class Recording(ch.Context):
    def prehook(self, f, *args, **kwargs):
        if f is g:
            self.metadata.append(kwargs)


def test_a_prehook_method_gets_keywords_named_like_its_own_parameters():
    ctx = Recording(metadata=[])
    assert ch.overdub(ctx, calls_g_with_keywords_named_like_hook_parameters) == (1, 2, 3, 4)
    assert ctx.metadata == [{"f": 1, "self": 2, "ctx": 3, "out": 4}]


class Posthooked(ch.Context):
    pass


def test_a_registered_posthook_gets_keywords_named_like_its_own_parameters():
    seen = []

    @ch.posthook.register
    def record(ctx: Posthooked, out, f, *args, **kwargs):
        if f is g:
            seen.append((out, kwargs))

    try:
        result = ch.overdub(Posthooked(), calls_g_with_keywords_named_like_hook_parameters)
    finally:
        ch.posthook.unregister(record)
    assert result == (1, 2, 3, 4)
    assert seen == [((1, 2, 3, 4), {"f": 1, "self": 2, "ctx": 3, "out": 4})]


class Replacing(ch.Context):
    pass


def test_an_overdub_overload_that_recurses_passes_keywords_named_like_its_parameters_on():
    @ch.overdub.register
    def through(ctx: Replacing, f: ch.Is[g], *args, **kwargs):
        return ch.recurse(ctx, f, *args, **kwargs)

    try:
        assert ch.overdub(Replacing(), calls_g_with_keywords_named_like_hook_parameters) == (1, 2, 3, 4)
    finally:
        ch.overdub.unregister(through)


def test_the_registered_function_is_what_methods_lists_and_unregister_takes():
    def hook(ctx: Posthooked, f, *args, **kwargs):
        pass

    ch.prehook.register(hook)
    assert hook in ch.prehook.methods()
    ch.prehook.unregister(hook)
    assert hook not in ch.prehook.methods()


def test_registering_leaves_the_users_function_as_it_was():
    def hook(ctx: Posthooked, f, *args, **kwargs):
        return (ctx, f, args, kwargs)

    ch.prehook.register(hook)
    try:
        assert hook.__code__.co_posonlyargcount == 0
        assert hook(ctx=1, f=2) == (1, 2, (), {})
    finally:
        ch.prehook.unregister(hook)
