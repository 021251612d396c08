"""What an overdubbed call does (docs/tutorial.md; docs/api.md, "Overdubbing" and "Hooks,
primitives and Cassette 0.1's execute"), one behaviour per test."""

import asyncio
import contextvars
import functools
import gc
import itertools
import math
import operator
import re
import sys
import threading
import traceback
import types
import warnings
import weakref

import pytest

import cassette_hook as ch
from cassette_hook import _native, context_stack
from cassette_hook.runtime import plan as plan_module
from cassette_hook.runtime.plan import Plan


class Null(ch.Context):
    """Overloads nothing."""


class Seen(ch.Context):
    """Records (f, args, kwargs) of every call it sees in ``metadata``."""

    def prehook(self, f, *args, **kwargs):
        self.metadata.append((f, args, kwargs))


class SeenCalls(Seen):
    operators = False


def seen_functions(fn, *args, ctx_type=SeenCalls, **kwargs):
    ctx = ctx_type(metadata=[])
    result = ch.overdub(ctx, fn, *args, **kwargs)
    return result, [f for f, _, _ in ctx.metadata]


# -- calls and how hooks see them ------------------------------------------------------

class Point:
    def __init__(self, x):
        self.x = x

    def shifted(self, dx):
        return Point(self.x + dx)

    @staticmethod
    def origin():
        return Point(0)

    @classmethod
    def at(cls, x):
        return cls(x)


def test_method_call_is_seen_as_the_function_with_the_receiver_first():
    p = Point(1)
    _, seen = seen_functions(lambda: p.shifted(2))
    assert seen[0] is Point.shifted
    ctx = SeenCalls(metadata=[])
    ch.overdub(ctx, lambda: p.shifted(2))
    assert ctx.metadata[0][1] == (p, 2)


def test_builtin_method_call_is_seen_as_the_method_of_the_type():
    def g(items):
        items.append(3)
        return ", ".join(map(str, items))

    ctx = SeenCalls(metadata=[])
    assert ch.overdub(ctx, g, [1, 2]) == "1, 2, 3"
    calls = [(f, args) for f, args, _ in ctx.metadata]
    assert calls[0] == (list.append, ([1, 2, 3], 3))
    assert calls[2][0] is str.join and calls[2][1][0] == ", "


def test_a_builtin_method_that_takes_its_class_is_seen_as_the_method_of_the_type():
    # pat.match is of type builtin_method (METH_METHOD), a subclass of the builtin
    # function type: presented as items.append is.
    pat = re.compile(r"\d+")
    ctx = SeenCalls(metadata=[])
    assert ch.overdub(ctx, lambda: pat.match("abc123", 3).group()) == "123"
    calls = [(f, args) for f, args, _ in ctx.metadata]
    assert type(pat.match).__name__ == "builtin_method"
    assert calls[0] == (re.Pattern.match, (pat, "abc123", 3))


def test_super_call_to_a_builtin_method_is_seen_as_that_method():
    class Recording(list):
        def append(self, x):
            super().append(x * 2)

    def g():
        items = Recording()
        items.append(1)
        return items

    ctx = SeenCalls(metadata=[])
    assert ch.overdub(ctx, g) == [2]
    calls = [f for f, _, _ in ctx.metadata if f is not super]  # a call before 3.12 only
    assert calls == [Recording, Recording.append, list.append]


def test_class_construction_is_seen_and_recurses_into_init():
    _, seen = seen_functions(lambda: Point(1))
    assert seen == [Point, Point.__init__]


def test_construction_with_python_new_runs_new_and_init_overdubbed():
    class Cached:
        instances = {}

        def __new__(cls, key):
            return cls.instances.setdefault(key, super().__new__(cls))

        def __init__(self, key):
            self.key = key

    result, seen = seen_functions(lambda: Cached("a") is Cached("a"))
    assert result is True
    assert seen.count(Cached.__new__) == 2 and seen.count(Cached.__init__) == 2


def test_init_returning_a_value_raises_as_in_plain_python():
    class Bad:
        def __init__(self):
            return 1

    with pytest.raises(TypeError, match=r"__init__\(\) should return None, not 'int'"):
        ch.overdub(Null(), lambda: Bad())


def test_static_and_class_methods_are_seen_as_their_functions():
    result, seen = seen_functions(lambda: (Point.origin().x, Point.at(5).x, Point(1).at(2).x))
    assert result == (0, 5, 2)
    assert Point.origin.__func__ if hasattr(Point.origin, "__func__") else Point.origin in seen
    assert Point.at.__func__ in seen


def test_callable_instance_recurses_into_its_call_method():
    class Adder:
        def __init__(self, n):
            self.n = n

        def __call__(self, x):
            return helper(x, self.n)

    def helper(a, b):
        return a + b

    add = Adder(2)
    result, seen = seen_functions(lambda: add(3))
    assert result == 5
    assert seen == [add, helper]


def test_partial_is_seen_and_its_function_call_is_overdubbed():
    def power(base, exp):
        return base**exp

    square = functools.partial(power, exp=2)
    result, seen = seen_functions(lambda: square(7))
    assert result == 49
    assert seen == [square, power]


def test_closures_share_cells_with_the_plain_function():
    def counter():
        count = 0

        def bump():
            nonlocal count
            count += 1
            return count

        return bump

    bump = counter()
    assert ch.overdub(Null(), bump) == 1
    assert bump() == 2
    assert ch.overdub(Null(), lambda: bump() + bump()) == 3 + 4


def test_keyword_and_star_calls_reach_hooks_with_their_arguments():
    def target(a, b=0, *rest, c, **extra):
        return (a, b, rest, c, extra)

    args, kwargs = (1, 2, 3), {"c": 4, "d": 5}
    ctx = SeenCalls(metadata=[])
    result = ch.overdub(ctx, lambda: (target(1, c=2), target(*args, **kwargs)))
    assert result == ((1, 0, (), 2, {}), (1, 2, (3,), 4, {"d": 5}))
    assert ctx.metadata == [(target, (1,), {"c": 2}), (target, (1, 2, 3), {"c": 4, "d": 5})]


def test_star_call_errors_are_those_of_the_plain_call():
    def g(x):
        return abs(*x)

    with pytest.raises(TypeError) as plain:
        g(5)
    with pytest.raises(TypeError) as overdubbed:
        ch.overdub(Null(), g, 5)
    assert str(overdubbed.value) == str(plain.value)


def test_comprehensions_and_generator_expressions_are_part_of_the_body():
    def square(x):
        return x * x

    def g(xs):
        return [square(x) for x in xs], {square(x) for x in xs}, sum(square(x) for x in xs)

    result, seen = seen_functions(g, [1, 2])
    assert result == ([1, 4], {1, 4}, 5)
    assert seen.count(square) == 6


def test_generators_run_overdubbed_when_iterated_under_the_context():
    def numbers(n):
        for i in range(n):
            yield abs(-i)

    def g():
        return list(numbers(3))

    result, seen = seen_functions(g)
    assert result == [0, 1, 2]
    assert seen.count(abs) == 3


def test_coroutines_run_overdubbed():
    async def fetch(x):
        await asyncio.sleep(0)
        return abs(x)

    async def main():
        return await asyncio.gather(fetch(-1), fetch(-2))

    result, seen = seen_functions(lambda: asyncio.run(main()))
    assert result == [1, 2]
    assert seen.count(abs) == 2


def test_async_generators_run_overdubbed():
    async def agen():
        for i in range(3):
            yield abs(-i)

    async def main():
        return [x async for x in agen()]

    result, seen = seen_functions(lambda: asyncio.run(main()))
    assert result == [0, 1, 2]
    assert seen.count(abs) == 3


# -- operators -------------------------------------------------------------------------

def test_operators_are_calls_to_operator_functions():
    def g(a, b):
        c = a + b
        c += 1
        items = [c, -a]
        items[0] = items[1] < b
        del items[1]
        return items, 3 in items, 4 not in items

    ctx = Seen(metadata=[])
    assert ch.overdub(ctx, g, 1, 2) == ([True], False, True)
    ops = [f for f, _, _ in ctx.metadata if f is not iter]
    assert ops == [operator.add, operator.iadd, operator.neg, operator.getitem, operator.lt,
                   operator.setitem, operator.delitem, operator.contains, operator.contains]


def test_for_loops_call_iter_and_recurse_into_a_python_iter():
    class Countdown:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n, 0, -1))

    def g():
        return [x for x in Countdown(3)]

    ctx = Seen(metadata=[])
    assert ch.overdub(ctx, g) == [3, 2, 1]
    calls = [f for f, _, _ in ctx.metadata]
    assert calls[calls.index(iter):][:2] == [iter, Countdown.__iter__]


def test_builtins_that_iterate_reach_a_python_iter():
    class Countdown:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            for i in range(self.n, 0, -1):
                yield abs(-i)

    def g():
        c = Countdown(3)
        return sum(c), list(c), sorted(c), max(c), max(1, 2), ",".join(map(str, c)), list(zip(c, c))

    ctx = SeenCalls(metadata=[])
    assert ch.overdub(ctx, g) == g()
    assert [f for f, _, _ in ctx.metadata].count(Countdown.__iter__) == 7


def test_a_builtin_reaches_a_python_iter_and_callback_given_after_builtin_arguments():
    class Countdown:
        def __iter__(self):
            yield from (3, 2, 1)

    def add(a, b):
        return a + b

    def g():
        return (list(map(add, (10, 20, 30), Countdown())),
                list(itertools.accumulate((1, 2, 3), add)), list(zip([1], (2,), Countdown())))

    ctx = SeenCalls(metadata=[])
    assert ch.overdub(ctx, g) == g()
    seen = [f for f, _, _ in ctx.metadata]
    assert seen.count(Countdown.__iter__) == 2 and seen.count(add) == 5


def test_iter_returning_a_non_iterator_fails_as_in_plain_python():
    class Broken:
        def __iter__(self):
            return 5

    with pytest.raises(TypeError) as plain:
        [x for x in Broken()]
    with pytest.raises(TypeError) as overdubbed:
        ch.overdub(Seen(metadata=[]), lambda: [x for x in Broken()])
    assert str(overdubbed.value) == str(plain.value)  # (3.15 names the class, 3.14 does not)


def test_operators_false_makes_operators_invisible():
    def g(a, b):
        return abs(a + b)

    _, seen = seen_functions(g, 1, 2, ctx_type=SeenCalls)
    assert seen == [abs]


def test_operator_overload_replaces_an_operator_inside_the_context():
    class Saturating(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Saturating, f: ch.Is[operator.add], a: int, b: int):
        return min(a + b, 10)

    def total(xs):
        s = 0
        for x in xs:
            s = s + x
        return s

    assert ch.overdub(Saturating(), total, [4, 4, 4]) == 10
    assert total([4, 4, 4]) == 12


def test_an_overload_of_all_runs_for_all_of_a_generator_expression():
    """3.14 compiles ``all(genexp)`` as an inline loop; under a context it is the call."""
    class Vacuous(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: Vacuous, f: ch.Is[all], xs):
        return "overloaded"

    def g(xs):
        return all(x for x in xs)

    assert ch.overdub(Vacuous(), g, [0]) == "overloaded"
    assert g([0]) is False


class Money:
    def __init__(self, cents):
        self.cents = cents

    def __add__(self, other):
        return Money(self.cents + other.cents) if isinstance(other, Money) else NotImplemented

    def __radd__(self, other):
        return Money(self.cents + other)

    def __lt__(self, other):
        return self.cents < other.cents

    def __getitem__(self, key):
        return self.cents if key == "cents" else None


class Euros(Money):
    def __radd__(self, other):
        return "euros first"


def test_operators_recurse_into_python_dunders():
    def g():
        a, b = Money(1), Money(2)
        return (a + b).cents, (5 + a).cents, a < b, a["cents"]

    ctx = Seen(metadata=[])
    assert ch.overdub(ctx, g) == g() == (3, 6, True, 1)
    dunders = [f for f, _, _ in ctx.metadata if getattr(f, "__qualname__", "").startswith("Money.__")]
    # ``5 + a`` starts with int.__add__, C code: that protocol stays C's, which calls
    # Money.__radd__ through the class's stand-in for it (``standins``).
    assert dunders == [Money.__init__, Money.__init__, Money.__add__, Money.__init__,
                       Money.__radd__, Money.__init__, Money.__lt__, Money.__getitem__]


def test_operator_protocol_matches_plain_python():
    cases = [
        lambda: Money(1) + Euros(2),  # a subclass overriding the reflected method goes first
        lambda: Money(1) + "x",
        lambda: Money(1) == Money(1),  # no __eq__: identity
        lambda: Money(1) < 3,
        lambda: "x" < Money(1),
    ]
    def outcome(run):
        try:
            result = run()
        except Exception as exc:
            return type(exc), str(exc)
        return "ok", result.cents if isinstance(result, Money) else result

    for case in cases:
        assert outcome(lambda: ch.overdub(Seen(metadata=[]), case)) == outcome(case)  # noqa: B023 -- called at once


def _add_in_place(a, b):
    a += b
    return a


def _power_in_place(a, b):
    a **= b
    return a


@pytest.mark.parametrize("program", [_add_in_place, _power_in_place])
def test_an_in_place_operator_no_dunder_takes_names_itself_in_its_error(program):
    with pytest.raises(TypeError) as plain:
        program(Money(1), "x")
    with pytest.raises(TypeError) as overdubbed:
        ch.overdub(Seen(metadata=[]), program, Money(1), "x")
    assert str(overdubbed.value) == str(plain.value)  # "... for +=: 'Money' and 'str'"


def test_slices_are_getitem_and_setitem_of_slice_objects():
    def g(xs):
        xs[1:2] = [9]
        return xs[::2]

    ctx = Seen(metadata=[])
    assert ch.overdub(ctx, g, [1, 2, 3]) == [1, 3]
    calls = [(f, args[1]) for f, args, _ in ctx.metadata]
    assert calls == [(operator.setitem, slice(1, 2)), (operator.getitem, slice(None, None, 2))]


# -- the plain program's view of itself ------------------------------------------------

class Base:
    def who(self):
        return "base"


class Derived(Base):
    def who(self):
        return "derived+" + super().who()

    @classmethod
    def kind(cls):
        return super().__name__ if False else cls.__mro__[1].__name__


def test_zero_argument_super_works():
    assert ch.overdub(Null(), lambda: Derived().who()) == "derived+base"
    assert ch.overdub(Seen(metadata=[]), lambda: Derived().who()) == "derived+base"


def test_locals_vars_dir_globals_see_the_users_frame():
    def g(a):
        b = a + 1
        return locals(), vars(), dir(), globals() is sys.modules[__name__].__dict__

    for ctx in (Null(), Seen(metadata=[])):
        assert ch.overdub(ctx, g, 1) == ({"a": 1, "b": 2}, {"a": 1, "b": 2}, ["a", "b"], True)


def test_eval_and_exec_without_namespaces_use_the_users_frame():
    def g(a):
        exec("import math")
        return eval("a * 2")

    for ctx in (Null(), Seen(metadata=[])):
        assert ch.overdub(ctx, g, 21) == 42


# Source that eval, exec and compile compile, and what it shows of the ``__future__``
# imports it was compiled with: exec's function's annotations (strings under
# ``annotations``), eval's code flags, compile's function's annotations.
_FUTURE_PROBE = """
def probe():
    namespace = {}
    exec("def f(x: int) -> str: pass", namespace)
    compiled = {}
    exec(compile("def f(x: int) -> str: pass", "<probe>", "exec"), compiled)
    flags = eval("(lambda: 0).__code__.co_flags")
    return namespace["f"].__annotations__, compiled["f"].__annotations__, bool(flags & ANNOTATIONS)
"""


@pytest.mark.parametrize("future", [0, __import__("__future__").annotations.compiler_flag],
                         ids=["plain module", "module with from __future__ import annotations"])
def test_eval_exec_and_compile_of_source_get_the_users_future_imports_not_cassette_hooks(future):
    # (cassette_hook's own modules import annotations from __future__: source compiled from
    # one of their frames got it, docs/peers.md finding 10; the C and the pure path)
    namespace = {"ANNOTATIONS": __import__("__future__").annotations.compiler_flag}
    exec(compile(_FUTURE_PROBE, "<user>", "exec", flags=future, dont_inherit=True), namespace)
    probe = namespace["probe"]
    plain = probe()
    assert plain == (({"x": "int", "return": "str"},) * 2 + (True,) if future
                     else ({"x": int, "return": str},) * 2 + (False,))
    for ctx in (Null(), Seen(metadata=[])):
        assert ch.overdub(ctx, probe) == plain


def test_sys_getframe_sees_user_frames_only():
    def inner():
        return sys._getframe(0).f_code.co_name, sys._getframe(1).f_code.co_name

    def outer():
        return inner()

    for ctx in (Null(), Seen(metadata=[])):
        assert ch.overdub(ctx, outer) == ("inner", "outer")


# -- hooks, overloads and the stack ----------------------------------------------------

def test_hooks_run_with_their_own_context_popped():
    inside = []

    class Ctx(ch.Context):
        def prehook(self, f, *args, **kwargs):
            inside.append(ch.current_context())

    with Null() as outer:
        ch.overdub(Ctx(), lambda: abs(1))
    assert inside == [outer]


def test_calls_made_by_hooks_are_not_overdubbed_by_their_context():
    def helper():
        return abs(-1)

    class Ctx(ch.Context):
        operators = False

        def prehook(self, f, *args, **kwargs):
            self.metadata.append(f)
            if f is not helper:
                helper()

    ctx = Ctx(metadata=[])
    ch.overdub(ctx, lambda: len("ab"))
    assert ctx.metadata == [len]


def test_cmp_to_key_comparators_are_overdubbed():
    def by_length(a, b):
        return len(a) - len(b)

    ctx = SeenCalls(metadata=[])
    assert ch.overdub(ctx, lambda: sorted(["ccc", "a", "bb"], key=functools.cmp_to_key(by_length))) == [
        "a", "bb", "ccc"]
    assert [f for f, _, _ in ctx.metadata].count(by_length) >= 2


def test_the_callbacks_of_a_bound_pattern_sub_are_overdubbed():
    # pat.sub (a builtin_method) takes callbacks as re.Pattern.sub does (primitives).
    pat = re.compile(r"\d")

    def replace(match):
        return "x"

    ctx = SeenCalls(metadata=[])
    assert ch.overdub(ctx, lambda: pat.sub(replace, "a1b2")) == "axbx"
    assert [f for f, _, _ in ctx.metadata].count(replace) == 2


def test_default_fallback_runs_with_the_context_active():
    ctx = SeenCalls(metadata=[])

    def key(x):
        return -x

    assert ch.overdub(ctx, lambda: sorted([1, 3, 2], key=key)) == [3, 2, 1]
    assert [f for f, _, _ in ctx.metadata].count(key) == 3


def test_recurse_reenters_a_popped_context():
    class Ctx(ch.Context):
        operators = False

    def g(x):
        return abs(x)

    @ch.overdub.register
    def _(ctx: Ctx, f: ch.Is[g], x):
        ctx.metadata.append(ch.current_context())
        return ch.recurse(ctx, f, x)

    ctx = Ctx(metadata=[])
    assert ch.overdub(ctx, lambda: g(-1)) == 1
    assert ctx.metadata == [None]


def _down(n):
    return 0 if n == 0 else 1 + _down(n - 1)


# Deeper than the C path's budget of Sites (``SITE_BUDGET``, 100): the calls below it run
# through ``callsites.site``'s Python closure there (docs/internals.md, "The C hot path").
PAST_THE_SITE_BUDGET = 150


class HookedBothWays(ch.Context):
    """A prehook and a posthook: every call a ``Site`` (or its closure), none entering."""

    operators = False

    def prehook(self, f, *args, **kwargs):
        if f is _down:
            self.metadata.append((ch.current_context(), contextvars.copy_context()))

    def posthook(self, out, f, *args, **kwargs):
        pass


def test_hooks_run_with_their_own_context_popped_past_the_budget_of_sites():
    with Null() as outer:
        ctx = HookedBothWays(metadata=[])
        assert ch.overdub(ctx, _down, PAST_THE_SITE_BUDGET) == PAST_THE_SITE_BUDGET
    assert [current for current, _ in ctx.metadata] == [outer] * PAST_THE_SITE_BUDGET


def test_a_hook_runs_popped_alike_at_every_depth():
    """What a hook runs popped by -- the stack's variable set to the entry below on the
    pure-Python path, the thread's record on the C path, the variable left holding the
    hook's own entry -- is the same at every depth: past the C path's budget of Sites its
    closure runs the hooks as a Site does (``_speedups.popped_call``), so a copy of the
    hook's ``contextvars`` context, run after the hook, holds the same stack at every
    depth (docs/internals.md, "Callbacks, generators, threads")."""
    ctx = HookedBothWays(metadata=[])
    ch.overdub(ctx, _down, PAST_THE_SITE_BUDGET)
    seen_later = {copy.run(ch.current_context) for _, copy in ctx.metadata}
    assert len(seen_later) == 1


def test_the_callee_of_an_overloads_recurse_runs_under_the_entry_its_caller_ran_under():
    """``recurse`` from an overload of the context's own entry puts that entry back for the
    callee (``_speedups.unpop`` on the C path, ``callees.overloads`` on the pure-Python
    one) rather than pushing a new one: the callee sees the stack its caller saw, the very
    entries."""
    class Ctx(ch.Context):
        operators = False

    def g(x):
        return context_stack.top()

    def caller(x):
        return context_stack.top(), g(x)

    @ch.overdub.register
    def _(ctx: Ctx, f: ch.Is[g], x):
        return ch.recurse(ctx, f, x)

    with Null():
        seen_by_caller, seen_by_g = ch.overdub(Ctx(), caller, 1)
    assert seen_by_g is seen_by_caller


def test_recurse_in_a_with_block_of_the_overload_runs_the_callee_above_that_block():
    class Ctx(ch.Context):
        operators = False

    def g(x):
        return [ch.current_context(), context_stack.top().below.ctx]

    @ch.overdub.register
    def _(ctx: Ctx, f: ch.Is[g], x):
        with inner:
            return ch.recurse(ctx, f, x)

    ctx, inner = Ctx(), Null()
    assert ch.overdub(ctx, lambda: g(1)) == [ctx, inner]


def test_recurse_from_another_thread_of_the_overload_runs_the_callee_under_the_context():
    class Ctx(ch.Context):
        operators = False

    def g(x):
        return ch.current_context()

    @ch.overdub.register
    def _(ctx: Ctx, f: ch.Is[g], x):
        out = []
        thread = threading.Thread(target=lambda: out.append(ch.recurse(ctx, f, x)))
        thread.start()
        thread.join()
        return out[0]

    ctx = Ctx()
    assert ch.overdub(ctx, lambda: g(1)) is ctx


def test_posthook_is_not_called_when_the_call_raises():
    class Ctx(ch.Context):
        def posthook(self, out, f, *args, **kwargs):
            self.metadata.append(f)

    def boom():
        raise KeyError("x")

    ctx = Ctx(metadata=[])
    with pytest.raises(KeyError):
        ch.overdub(ctx, lambda: boom())
    assert boom not in ctx.metadata
    assert ctx.metadata == [KeyError]  # constructing the exception returned normally


def test_exceptions_propagate_unchanged():
    error = ValueError("original")

    def boom():
        raise error

    with pytest.raises(ValueError) as caught:
        ch.overdub(Seen(metadata=[]), lambda: boom())
    assert caught.value is error


def test_traceback_has_the_same_user_frames_and_lines():
    def inner():
        return 1 / 0

    def outer():
        return inner() + 1

    def user_frames(run):
        try:
            run()
        except ZeroDivisionError as exc:
            return [(f.name, f.lineno) for f in traceback.extract_tb(exc.__traceback__)
                    if "cassette_hook" not in f.filename and f.name != "user_frames"][-2:]

    plain = user_frames(outer)
    assert user_frames(lambda: ch.overdub(Null(), outer)) == plain
    assert user_frames(lambda: ch.overdub(Seen(metadata=[]), outer)) == plain


def test_overdub_of_a_non_callable_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"^overdub\(\): 'int' object is not callable \(f = 3, "):
        ch.overdub(Null(), 3)


def test_a_programs_call_of_a_non_callable_raises_the_same_type_error_under_a_context():
    def calls_three(three=3):
        return three()

    with pytest.raises(TypeError, match="'int' object is not callable"):
        ch.overdub(Seen(metadata=[]), calls_three)


def test_deep_recursion_that_works_plain_works_under_a_context():
    def depth(n):
        return 0 if n == 0 else 1 + depth(n - 1)

    n = sys.getrecursionlimit() - 60
    assert depth(n) == n
    assert ch.overdub(Null(), depth, n) == n
    assert ch.overdub(Seen(metadata=[]), depth, n) == n


def test_deep_recursion_works_under_an_overdub_overload_that_recurses():
    class Recursing(ch.Context):
        pass

    def depth(n):
        return 0 if n == 0 else 1 + depth(n - 1)

    @ch.overdub.register
    def _(ctx: Recursing, f, *args, **kwargs):
        return ch.recurse(ctx, f, *args, **kwargs)

    n = sys.getrecursionlimit() - 60
    assert ch.overdub(Recursing(), depth, n) == n


def test_recursion_limit_reads_as_the_program_set_it():
    def limits():
        before = sys.getrecursionlimit()
        sys.setrecursionlimit(before + 5)
        after = sys.getrecursionlimit()
        sys.setrecursionlimit(before)
        return before, after

    outside = sys.getrecursionlimit()
    assert ch.overdub(Null(), limits) == (outside, outside + 5)
    assert sys.getrecursionlimit() == outside


def test_recursion_limit_is_restored_after_the_context_ends():
    before = sys.getrecursionlimit()
    ch.overdub(Null(), abs, 1)
    assert sys.getrecursionlimit() == before


# -- scope -----------------------------------------------------------------------------

def test_exclude_makes_functions_of_a_module_primitives():
    import json

    class Ctx(SeenCalls):
        exclude = ("json",)

    ctx = Ctx(metadata=[])
    assert ch.overdub(ctx, lambda: json.dumps([1])) == "[1]"
    assert [f for f, _, _ in ctx.metadata] == [json.dumps]


def test_include_bounds_recursion_to_matching_modules():
    import json

    class Ctx(SeenCalls):
        include = ("tests.*", __name__)

    ctx = Ctx(metadata=[])
    ch.overdub(ctx, lambda: json.dumps([1]))
    assert [f for f, _, _ in ctx.metadata] == [json.dumps]


def test_classes_outside_the_scope_are_constructed_as_primitives():
    import threading

    class Scoped(SeenCalls):
        include = (__name__,)

    def g():
        threading.Event()
        Scoped()

    ctx = Scoped(metadata=[])
    ch.overdub(ctx, g)
    # Neither __init__ is in scope (threading's, and cassette_hook's own Context.__init__).
    assert [f for f, _, _ in ctx.metadata] == [threading.Event, Scoped]


def test_generics_have_names_hooks_can_print():
    names = []

    class Named(ch.Context):
        operators = False

        def prehook(self, f, *args, **kwargs):
            names.append(f.__name__)

    ch.overdub(Named(), lambda: ch.overdub(Null(), abs, -1))
    assert names == ["Null", "overdub"]


def test_cassette_hook_never_recurses_into_itself():
    assert not ch.canrecurse(Null(), ch.overdub, Null(), abs, 1)


# -- isolation -------------------------------------------------------------------------

def test_threads_do_not_see_each_others_contexts():
    seen_in_thread = []
    ready, done = threading.Event(), threading.Event()

    def other():
        ready.wait()
        seen_in_thread.append(ch.current_context())
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with Null():
        ready.set()
        done.wait()
    thread.join()
    assert seen_in_thread == [None]


def test_asyncio_tasks_inherit_the_context_active_where_created():
    async def report():
        return ch.current_context()

    async def main(ctx):
        with ctx:
            task = asyncio.ensure_future(report())
        return await task, await asyncio.ensure_future(report())

    ctx = Null()
    assert asyncio.run(main(ctx)) == (ctx, None)


def test_a_pass_that_is_not_a_pass_object_is_refused():
    with pytest.raises(TypeError, match="pass_ must be a cassette_hook.Pass"):
        Null(pass_=object())
    with pytest.raises(TypeError, match="pass_ must be a cassette_hook.Pass"):
        ch.similarcontext(Null(), pass_=object())


def test_with_block_activates_and_restores():
    ctx = Null()
    assert ch.current_context() is None
    with ctx as bound:
        assert bound is ctx and ch.current_context() is ctx
        with Null() as inner:
            assert ch.current_context() is inner
        assert ch.current_context() is ctx
    assert ch.current_context() is None


# -- twins -----------------------------------------------------------------------------

def test_a_collected_function_releases_its_twin():
    from cassette_hook.runtime.plan import plan_for

    twins = plan_for(Null()).twins
    namespace = {}
    exec("def temporary(x):\n    return abs(x)\n", namespace)
    fn = namespace.pop("temporary")
    assert ch.overdub(Null(), lambda: fn(-1)) == 1  # noqa: F821 -- fn is deleted below, after this call
    assert twins.get(fn) is not None
    before, ref = len(twins), weakref.ref(fn)
    del fn
    gc.collect()
    assert ref() is None
    assert len(twins) == before - 1


def test_functions_that_cannot_be_rewritten_run_as_primitives_with_one_warning(monkeypatch):
    from cassette_hook import rewrite

    def victim(x):
        return abs(x)

    original = rewrite.rewrite_code

    def broken_for_victim(code, hooks, **options):
        if code is victim.__code__:
            raise rewrite.UnsupportedCode("synthetic failure")
        return original(code, hooks, **options)

    monkeypatch.setattr(rewrite, "rewrite_code", broken_for_victim)

    ctx = SeenCalls(metadata=[])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ch.overdub(ctx, lambda: victim(-1) + victim(-2)) == 3
    messages = [str(w.message) for w in caught if "victim" in str(w.message)]
    assert len(messages) == 1 and "synthetic failure" in messages[0]
    assert [f for f, _, _ in ctx.metadata] == [victim, victim]  # seen, not recursed into


def make_adder(n):  # (a decorator factory's shape: it makes a closure, and calls nothing)
    def add(x):
        return abs(x) + n

    return add


class Stored:
    def __init__(self, value):  # (stores, calls nothing)
        self.value = value


def test_a_function_with_nothing_to_rewrite_is_not_rewritten_and_what_it_makes_is_still_seen(monkeypatch):
    """Its twin runs its own code (docs/internals.md, "Twins"), on either hot path: the
    rewrite would change nothing, and costs a ``bytecode`` round trip at each first call
    in each process."""
    rewritten = []
    original = plan_module._rewrite_or_warn

    def counting(func, code, *rest):
        rewritten.append(func.__qualname__)
        return original(func, code, *rest)

    monkeypatch.setattr(plan_module, "_rewrite_or_warn", counting)
    result, seen = seen_functions(lambda: (make_adder(2)(-3), Stored(4).value))
    assert result == (5, 4)
    assert [f for f in seen if f in (make_adder, abs, Stored)] == [make_adder, abs, Stored]
    assert [f.__qualname__ for f in seen if getattr(f, "__qualname__", "").startswith("make_adder.")] == [
        "make_adder.<locals>.add"]
    assert "make_adder" not in rewritten and "Stored.__init__" not in rewritten
    assert "make_adder.<locals>.add" in rewritten


class Unhashable:
    __hash__ = None

    def method(self):
        return "called"


def test_calling_callables_whose_hash_raises_under_a_context_with_a_prehook():
    # Found by python-dateutil's suite (its tz caches call weakref.ref objects): the
    # callee of a call site must not be hashed when Python would not hash it.
    def run():
        obj = Unhashable()
        ref = weakref.ref(obj)
        proxy = weakref.proxy(obj.method.__func__)  # hash(proxy) always raises
        return ref() is obj, proxy(obj)

    assert run() == (True, "called")
    ctx = Seen(metadata=[])
    assert ch.overdub(ctx, run) == (True, "called")
    assert any(isinstance(f, weakref.ref) for f, _, _ in ctx.metadata)
    assert ch.canrecurse(ctx, weakref.proxy(Unhashable.method)) is False  # C: no body, no error


def test_eval_under_a_context_works_after_the_program_deletes_sys_getframe(monkeypatch):
    def run():
        return eval("1 + 1", {}, {})

    ctx = ch.context("Plain")()
    monkeypatch.delattr(sys, "_getframe")
    assert ch.overdub(ctx, run) == 2


def test_a_function_whose_closure_leads_back_to_it_is_collected_while_its_context_is_active():
    def make():
        def countdown(n):
            return n if n <= 0 else countdown(n - 1)  # countdown's cell holds countdown

        return countdown

    from cassette_hook.runtime.plan import plan_for

    fn, ctx = make(), Null()
    assert ch.overdub(ctx, fn, 3) == 0
    assert plan_for(ctx).twins.get(fn) is not None
    ref = weakref.ref(fn)
    del fn
    gc.collect()
    assert ref() is None


# -- a context whose overloads name their callees ----------------------------------------
# With no hooks and every overload written for named callees (``Is[...]``), a call of any
# other function runs its twin and nothing else: call sites call the twin directly.


def _named_callee(x):
    return x + 1


def _other_callee(x):
    return _caller_name()


def _doubled(x):
    return 2 * x


def _caller_name():
    return sys._getframe().f_back.f_code.co_name  # the frame below, not what _getframe(1) finds


class NamesItsCallees(ch.Context):
    pass


class _NamedClass:
    pass


class _OtherClass:
    def __init__(self, x):
        self.x = x


@ch.overdub.register
def _replace_named_callee(ctx: NamesItsCallees, f: ch.Is[_named_callee, _NamedClass], *args):
    return ("overloaded", *args)


def test_an_overload_naming_its_callee_runs_for_that_callee_and_only_for_it():
    def run():
        return _named_callee(1), _doubled(2)

    assert ch.overdub(NamesItsCallees(), run) == (("overloaded", 1), 4)


# 3.10's call sites run ``call``: a frame of ours unless it is the C one (docs/internals.md).
_CALL_FRAME_OF_OURS = sys.version_info < (3, 11) and _native.runtime.name == "Python"


def test_an_overload_naming_a_class_replaces_its_construction_and_only_its():
    def run():
        return _NamedClass(), _OtherClass(3).x

    assert ch.overdub(NamesItsCallees(), run) == (("overloaded",), 3)


def test_a_callee_no_overload_names_has_its_callers_frame_below_it():
    def run():
        return [_caller_name() for _ in range(3)], _other_callee(0)

    in_run = "<listcomp>" if sys.version_info < (3, 12) else "run"
    expected = (["call"] * 3, "call") if _CALL_FRAME_OF_OURS else ([in_run] * 3, "_other_callee")
    assert ch.overdub(NamesItsCallees(), run) == expected


def _an_overload_registered_later_applies(ctx: ch.Context) -> None:
    """``run`` under ``ctx`` runs plainly, then the ``_doubled`` overload registered for
    ``ctx``'s class, then plainly again once it is removed."""
    def run():
        return _doubled(1)

    assert ch.overdub(ctx, run) == 2

    @ch.overdub.register
    def _(ctx: type(ctx), f: ch.Is[_doubled], x):  # type: ignore[valid-type]
        return "overloaded later"

    try:
        assert ch.overdub(ctx, run) == "overloaded later"
    finally:
        ch.overdub.unregister(_)
    assert ch.overdub(ctx, run) == 2


def test_an_overload_registered_after_a_direct_call_applies_to_the_next_call():
    class Later(ch.Context):
        pass

    _an_overload_registered_later_applies(Later())


def test_a_second_overload_registered_after_a_sole_one_is_dispatched_to():
    """A context's one overload of every call is called without dispatch; a second one,
    registered later, for some calls, is then found for those."""
    class Sole(ch.Context):
        def overdub(self, f, *args, **kwargs):
            return ch.recurse(self, f, *args, **kwargs)

    _an_overload_registered_later_applies(Sole())


def test_a_direct_callee_whose_code_is_replaced_runs_its_new_code():
    def callee():
        return "old"

    def run():
        return callee()

    ctx = NamesItsCallees()
    assert ch.overdub(ctx, run) == "old"
    callee.__code__ = (lambda: "new").__code__
    assert ch.overdub(ctx, run) == "new"


# -- operators on builtin values ---------------------------------------------------------
# operators.PLAIN_OPERATORS on operands of operators.C_OPERANDS have no Python dunder to
# recurse into: the hot path calls them as they are (in C, without asking operators.body).

_SAMPLE_OPERANDS = [0, 3, -2.5, 1j, True, "ab", b"x", None, (1,), [2], {"k": 1}, {3}, frozenset({4}), range(2),
                    slice(1), len]


def _plain_operators():
    import operator as op

    from cassette_hook.runtime import operators
    return [f for f in vars(op).values() if id(f) in operators.PLAIN_OPERATORS]


def test_plain_operators_on_builtin_values_have_no_python_body():
    from cassette_hook.runtime import operators

    assert {type(x) for x in _SAMPLE_OPERANDS} == operators.C_OPERANDS
    for f in _plain_operators():
        arity = 1 if f in (operator.neg, operator.pos, operator.invert) else 2
        for a in _SAMPLE_OPERANDS:
            for args in ([(a, b) for b in _SAMPLE_OPERANDS] if arity == 2 else [(a,)]):
                assert operators.body(f, args) is None, (f, args)


class CountsOperators(ch.Context):
    def prehook(self, f, *args, **kwargs):
        self.metadata.append(f)


def test_operators_on_builtin_values_give_the_plain_results_and_errors_under_hooks():
    def run(one=1, a="a", seven=7, pair=(1, 2)):  # (arguments: constants would be folded)
        out = [one + 2, a * 3, [one] + [2], seven % 3, 2 ** seven, one < 2, -one, ~seven, pair == (1, 2)]
        try:
            one + a
        except TypeError as e:
            out.append(str(e))
        return out

    ctx = CountsOperators(metadata=[])
    assert ch.overdub(ctx, run) == run()
    assert operator.add in ctx.metadata and operator.mod in ctx.metadata


class TakesAdditions(ch.Context):
    pass


@ch.fallback.register
def _additions_are_strings(ctx: TakesAdditions, f: ch.Is[operator.add], a, b):
    return f"{a}+{b}"


def test_a_fallback_overload_still_takes_an_operator_on_builtin_values():
    def run(one=1, three=3):
        return one + 2, three * 4

    assert ch.overdub(TakesAdditions(), run) == ("1+2", 12)


class FloorsCounted(ch.Context):
    """Overloads an operator (so calls are dispatched) and counts math.floor in fallback."""


@ch.overdub.register
def _floors_overdub(ctx: FloorsCounted, f: ch.Is[operator.neg], a):
    return f(a)


@ch.fallback.register
def _floors_counted(ctx: FloorsCounted, f: ch.Is[math.floor], x):
    ctx.metadata.append(x)
    return f(x)


def test_a_fallback_overload_still_takes_a_module_builtin_on_plain_scalars():
    def run(x=2.5, y=7):
        return math.floor(x), math.gcd(y, 21), len("abc")

    ctx = FloorsCounted(metadata=[])
    assert ch.overdub(ctx, run) == (2, 7, 3)
    assert ctx.metadata == [2.5]


# -- closures and lambdas made anew --------------------------------------------------------
# Every function object gets a twin of its own; those of a code that has one already share
# its rewritten code and the plan's answers for it (Plan.shared, docs/internals.md "Twins").
# Each test makes its first closure before the one it checks, so that the check meets a
# code the plan knows.


def _made_with(x, default=1, *, keyword=2):
    def closure(a=default, *, b=keyword):
        return (x, a, b)

    return closure


def test_closures_of_one_code_each_run_with_their_own_cells_and_defaults():
    def program():
        return [_made_with(x, default=x * 10, keyword=-x)() for x in range(3)]

    assert ch.overdub(Null(), program) == program() == [(0, 0, 0), (1, 10, -1), (2, 20, -2)]


def test_a_closures_defaults_changed_after_it_was_made_are_its_defaults():
    def program():
        _made_with(0)()
        closure = _made_with(1)
        first = closure()
        closure.__defaults__ = (5,)
        second = closure()
        closure.__kwdefaults__ = {"b": 6}
        return first, second, closure()

    assert ch.overdub(Null(), program) == program() == ((1, 1, 2), (1, 5, 2), (1, 5, 6))


def test_a_closures_defaults_changed_before_its_first_call_are_its_defaults():
    def program():
        _made_with(0)()
        closure = _made_with(1)
        closure.__defaults__, closure.__kwdefaults__ = (7,), {"b": 8}
        return closure()

    assert ch.overdub(Null(), program) == program() == (1, 7, 8)


def _counter():
    count = 0

    def read():
        return count

    def bump():
        nonlocal count
        count += 1

    return read, bump


def test_a_closure_reads_its_cell_as_rebound_after_its_first_call():
    def program():
        _counter()[0]()
        read, bump = _counter()
        before = read()
        bump()
        return before, read()

    assert ch.overdub(Null(), program) == program() == (0, 1)


def test_a_closure_given_new_code_runs_its_new_code():
    def program():
        _made_with(0)()
        closure = _made_with(1)
        first = closure()
        closure.__code__ = _new_code_for(x=None).__code__  # (one free variable, as closure's)
        return first, closure()

    assert ch.overdub(Null(), program) == program() == ((1, 1, 2), ("new", 1))


def _new_code_for(x):
    return lambda a=0, *, b=0: ("new", x)


def test_a_function_of_a_known_code_with_other_globals_reads_its_own_globals():
    def read_global():
        return SHARED_NAME  # noqa: F821 -- in the globals each function is given

    def program():
        functions = [types.FunctionType(read_global.__code__, {"SHARED_NAME": n, "__builtins__": __builtins__})
                     for n in range(3)]
        return [f() for f in functions]

    assert ch.overdub(Null(), program) == program() == [0, 1, 2]


def test_the_calls_of_each_closure_made_anew_are_seen():
    def program():
        return [_made_with(x)() for x in range(3)]

    ctx = SeenCalls(metadata=[])
    ch.overdub(ctx, program)
    assert [f.__name__ for f, _, _ in ctx.metadata if getattr(f, "__name__", "") == "closure"] == ["closure"] * 3


def test_a_closure_made_anew_has_the_program_frame_below_it():
    def make_and_call():
        def closure():
            return sys._getframe(1).f_code.co_name

        return closure()

    def program():
        return [make_and_call() for _ in range(3)]

    assert ch.overdub(Null(), program) == program() == ["make_and_call"] * 3


class FreshNull(ch.Context):
    """Overloads nothing; a class of its own, whose plan no other test has filled."""


def test_the_functions_of_one_code_are_put_in_scope_once(monkeypatch):
    # (with no lazy import hook's code around: light code is not shared, see Plan.shared)
    monkeypatch.setattr(plan_module, "switch_before_twin", None)
    asked = []
    recurses_into = Plan.recurses_into

    def counted(self, obj):
        asked.append(obj.__name__)
        return recurses_into(self, obj)

    monkeypatch.setattr(Plan, "recurses_into", counted)
    ch.overdub(FreshNull(), lambda: [(lambda x: x)(v) for v in range(5)])
    assert asked.count("<lambda>") == 2  # the outer lambda, and the first of the inner ones
