"""``raisehook(ctx, exc, f, *args, **kwargs)``: called after every overdubbed call that
raised, so that exactly one of ``posthook`` and ``raisehook`` ends each call a prehook
began (docs/api.md)."""

from __future__ import annotations

import traceback

import pytest

import cassette_hook as ch


def fail(x):
    raise ValueError(x)


def caught(x):
    try:
        fail(x)
    except ValueError:
        return "caught"


def once(x):
    return fail(x)


def fails_twice(x):
    caught(x)
    return fail(x)


def items(n):
    it = iter(range(n))
    out = []
    while True:
        try:
            out.append(next(it))
        except StopIteration:
            return out


def names(tb):
    return [(frame.name, frame.lineno) for frame in traceback.extract_tb(tb)]


class Events(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        self.metadata.append(("pre", f))

    def posthook(self, out, f, /, *args, **kwargs):
        self.metadata.append(("post", f))

    def raisehook(self, exc, f, /, *args, **kwargs):
        self.metadata.append(("raise", f, exc))


class WithoutRaisehook(ch.Context):
    """Hooks around each call, as ``Events`` has (a prehook alone would make its call
    sites enter: see ``Plan.enters``), but no raisehook."""

    def prehook(self, f, /, *args, **kwargs):
        pass

    def posthook(self, out, f, /, *args, **kwargs):
        pass


def test_raisehook_gets_the_exception_of_a_call_that_raised_and_posthook_is_not_called():
    ctx = Events([])
    assert ch.overdub(ctx, caught, 1) == "caught"
    assert [event[:2] for event in ctx.metadata] == [("pre", fail), ("pre", ValueError), ("post", ValueError),
                                                     ("raise", fail)]
    exc = ctx.metadata[-1][2]
    assert type(exc) is ValueError and exc.args == (1,)


def test_each_prehook_is_ended_by_exactly_one_posthook_or_raisehook():
    ctx = Events([])
    with pytest.raises(ValueError):
        ch.overdub(ctx, fails_twice, 2)
    ch.overdub(ctx, items, 3)
    depth = 0
    for event in ctx.metadata:
        depth += 1 if event[0] == "pre" else -1
        assert depth >= 0
    assert depth == 0
    assert sum(1 for e in ctx.metadata if e[0] == "raise" and e[1] is next) == 1  # the StopIteration


def test_the_exception_goes_on_unchanged_with_its_traceback():
    with pytest.raises(ValueError) as without:
        ch.overdub(WithoutRaisehook(), fails_twice, 3)
    ctx = Events([])
    with pytest.raises(ValueError) as raised:
        ch.overdub(ctx, fails_twice, 3)
    assert raised.value is ctx.metadata[-1][2]
    below_the_test = slice(1, None)  # (the test's own frame raised on another line)
    assert names(raised.value.__traceback__)[below_the_test] == names(without.value.__traceback__)[below_the_test]


def test_an_exception_raised_by_the_raisehook_replaces_the_calls_with_it_as_context():
    class Raising(ch.Context):
        def raisehook(self, exc, f, /, *args, **kwargs):
            raise KeyError("from the hook")

    with pytest.raises(KeyError) as raised:
        ch.overdub(Raising(), once, 4)
    assert type(raised.value.__context__) is ValueError and raised.value.__context__.args == (4,)


def test_a_raisehook_registered_for_an_exception_type_sees_only_those():
    class Picky(ch.Context):
        pass

    @ch.raisehook.register
    def _(ctx: Picky, exc: KeyError, f, /, *args, **kwargs):
        ctx.metadata.append(exc)

    def program():
        for exc in (KeyError("k"), ValueError("v")):
            try:
                ch_raise(exc)
            except Exception:
                pass

    ctx = Picky([])
    ch.overdub(ctx, program)
    assert [type(e) for e in ctx.metadata] == [KeyError]


def ch_raise(exc):
    raise exc


def test_a_raisehook_runs_with_its_context_popped_and_the_outer_context_sees_its_calls():
    def helper():
        return "helped"

    class Inner(ch.Context):
        def prehook(self, f, /, *args, **kwargs):
            self.metadata.append(f)

        def raisehook(self, exc, f, /, *args, **kwargs):
            helper()

    class Outer(ch.Context):
        def prehook(self, f, /, *args, **kwargs):
            self.metadata.append(f)

    inner = Inner([])

    def program():
        try:
            ch.overdub(inner, once, 5)
        except ValueError:
            pass

    outer = Outer([])
    ch.overdub(outer, program)
    assert fail in inner.metadata and helper not in inner.metadata
    assert helper in outer.metadata


def test_disablehooks_turns_the_raisehook_off_too():
    ctx = ch.disablehooks(Events([]))
    assert ch.overdub(ctx, caught, 6) == "caught"
    assert ctx.metadata == []


def test_an_operator_that_raises_reaches_the_raisehook():
    def divide(a, b):
        try:
            return a / b
        except ZeroDivisionError:
            return None

    ctx = Events([])
    assert ch.overdub(ctx, divide, 1, 0) is None
    assert [event[:2] for event in ctx.metadata if event[0] == "raise"] == [("raise", ch_operator_truediv())]


def ch_operator_truediv():
    import operator

    return operator.truediv


def test_a_raisehook_method_that_cannot_take_the_exception_is_refused_at_definition():
    with pytest.raises(TypeError, match=r"raisehook\(ctx, exc, f, \*args, \*\*kwargs\)"):
        class TooFew(ch.Context):
            def raisehook(self, exc):
                pass


def test_an_exception_the_raisehook_chains_itself_keeps_its_chain_with_the_calls_at_the_end():
    class Chaining(ch.Context):
        def raisehook(self, exc, f, /, *args, **kwargs):
            try:
                raise LookupError("inside the hook")
            except LookupError:
                raise KeyError("from the hook")  # noqa: B904 -- the implicit chain is what is tested

    with pytest.raises(KeyError) as raised:
        ch.overdub(Chaining(), once, 7)
    inner = raised.value.__context__
    assert type(inner) is LookupError
    assert type(inner.__context__) is ValueError and inner.__context__.args == (7,)


def test_a_raisehook_that_reraises_the_exception_lets_it_go_on_unchained():
    class Reraising(ch.Context):
        def raisehook(self, exc, f, /, *args, **kwargs):
            raise exc

    with pytest.raises(ValueError) as raised:
        ch.overdub(Reraising(), once, 8)
    assert raised.value.args == (8,) and raised.value.__context__ is None


def test_a_raisehook_exception_with_a_hand_made_context_cycle_still_goes_on():
    class Cyclic(ch.Context):
        def raisehook(self, exc, f, /, *args, **kwargs):
            first, second = KeyError("first"), LookupError("second")
            first.__context__, second.__context__ = second, first
            raise first

    with pytest.raises(KeyError, match="first"):
        ch.overdub(Cyclic(), once, 9)
