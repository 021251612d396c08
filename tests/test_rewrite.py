"""Bytecode shapes the rewriter must handle: which call sites are seen, which are not,
and that the result is the plain program's.  Each shape runs on every CPython version."""

import asyncio
import operator
import sys
import warnings

import pytest

import cassette_hook as ch


def one(*args, **kwargs):
    return 1


def two(*args, **kwargs):
    return 2


class Box:
    def __init__(self, items):
        self.items = list(items)

    def get(self, i):
        return self.items[i]


class Calls(ch.Context):
    """Records every callee it sees; operators off unless a test says otherwise."""

    operators = False

    def prehook(self, f, *args, **kwargs):
        self.metadata.append(f)


class CallsAndOperators(Calls):
    operators = True


def seen(fn, *args, ctx_type=Calls):
    ctx = ctx_type(metadata=[])
    result = ch.overdub(ctx, fn, *args)
    assert result == fn(*args), "overdubbed result differs from the plain one"
    return ctx.metadata


def test_conditional_callee_is_resolved_on_both_paths():
    def g(c):
        return (one if c else two)(0)

    assert seen(g, True) == [one] and seen(g, False) == [two]


def test_walrus_callee_binds_the_plain_function():
    def g():
        (h := one)(0)
        return h is one

    assert seen(g) == [one]


def test_chained_calls_see_each_call():
    def make():
        return one

    def g():
        return make()(0)

    assert seen(g) == [make, one]


def test_calls_inside_arguments_are_seen_in_evaluation_order():
    def g():
        return one(two(), k=two(one()))

    assert seen(g) == [two, one, two, one]


def test_many_arguments_and_extended_arg_calls():
    def g():
        return one(0, 1, 2, 3, 4, 5, 6) + one(*range(300)) + one(**{f"k{i}": i for i in range(300)})

    assert seen(g) == [one, range, one, range, one]


def test_keyword_only_and_star_combinations():
    def g(xs, kw):
        return one(*xs, 1, *xs, k=1, **kw) + two(*xs)

    assert seen(g, [1], {"z": 2}) == [one, two]


def test_with_statement_exit_is_not_a_call_site():
    class Manager:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def g():
        with Manager():
            return one()

    assert seen(g) == [Manager, one]


def test_class_statement_is_not_a_call_site_but_its_body_and_decorators_are():
    def deco(cls):
        return cls

    def g():
        @deco
        class Local:
            x = one()

        return Local.x

    assert seen(g) == [one, deco]


def test_comprehension_functions_are_inlined_into_the_body():
    def g(xs):
        return [one(x) for x in xs], {two(x) for x in xs}, {x: one() for x in xs}, list(two() for x in xs)

    assert seen(g, [1, 2]) == [one, one, two, two, one, one, list, two, two]


def test_locals_keep_their_compiled_order():
    def g(a):
        total = [v for v in range(a)]
        name = "x"
        return list(locals())

    assert seen(g, 2) == [range, locals, list]


@pytest.mark.parametrize("route", ["the family's", "bytecode's"])
@pytest.mark.parametrize("comprehension", ["[i * outer for i in range(3)]", "[outer for outer in range(3)]"],
                         ids=["naming_it", "shadowing_it"])
def test_a_methods_closure_is_decoded_as_the_free_variable_a_class_bodys_local_is_named_like(comprehension, route):
    # 3.13+ compiles the comprehension inline: ``outer`` is a local of the class body and a
    # free variable in a slot of its own (docs/internals.md, "Free variables named like a local").
    from bytecode import FreeVar, Instr

    from cassette_hook.rewrite._family import family

    source = (f"def f(outer, zed):\n    class Body:\n        y = {comprehension}\n        w = zed\n"
              "        def get(self):\n            return outer\n    return Body\n")
    f = next(c for c in compile(source, "<f>", "exec").co_consts if hasattr(c, "co_code"))
    body = next(c for c in f.co_consts if hasattr(c, "co_code"))
    decode = family.decode if route == "the family's" else getattr(family, "decode_by_bytecode", family.decode)
    closure = [item.arg for item in decode(body) if isinstance(item, Instr) and isinstance(item.arg, FreeVar)
               and item.name in ("LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_CLOSURE")]
    assert closure and all(arg == FreeVar("outer") for arg in closure)  # (3.10, 3.11: the comprehension's too)


def test_nested_functions_are_not_modified_and_run_overdubbed_when_called():
    def g():
        def inner():
            return one()

        return inner, inner()

    ctx = Calls(metadata=[])
    inner, _ = ch.overdub(ctx, g)
    assert [f.__name__ for f in ctx.metadata] == ["inner", "one"]
    assert inner() == 1 and "cassette" not in repr(inner.__code__.co_consts)


def test_generator_iterated_outside_the_context_runs_plain():
    def gen():
        yield one()
        yield two()

    ctx = Calls(metadata=[])
    g = ch.overdub(ctx, gen)
    assert list(g) == [1, 2]
    assert ctx.metadata == []


def test_generator_methods_send_throw_and_close():
    def echo():
        received = yield one()
        try:
            yield received
        except KeyError:
            yield two()

    def g():
        it = echo()
        return next(it), it.send(5), it.throw(KeyError), it.close()

    assert seen(g) == [echo, next, one, generator_send(), generator_throw(), two, generator_close()]


def generator_send():
    return type((lambda: (yield))()).send


def generator_throw():
    return type((lambda: (yield))()).throw


def generator_close():
    return type((lambda: (yield))()).close


def test_exception_handlers_and_finally_blocks_are_rewritten():
    def g():
        try:
            raise KeyError(one())
        except KeyError:
            two()
        finally:
            one()
        return 0

    assert seen(g) == [one, KeyError, two, one]


def test_return_inside_finally_and_with_keeps_the_plain_result():
    def g():
        for _ in range(2):
            try:
                return one()
            finally:
                two()

    assert seen(g) == [range, one, two]


def test_match_statement_patterns_are_not_call_sites():
    def g(value):
        match value:
            case Box(items=[x, *_]):
                return one(x)
            case {"k": v}:
                return two(v)
            case [a, b]:
                return one(a, b)
        return None

    assert seen(g, Box([7])) == [one]
    assert seen(g, {"k": 1}) == [two]
    assert seen(g, [1, 2]) == [one]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="except* is new in 3.11")
def test_except_star_groups():
    namespace = {"one": one}
    exec(
        "def g():\n"
        "    try:\n"
        "        raise ExceptionGroup('eg', [KeyError(1), ValueError(2)])\n"
        "    except* KeyError:\n"
        "        one()\n"
        "    except* ValueError:\n"
        "        one()\n"
        "    return 0\n",
        namespace,
    )
    assert seen(namespace["g"]) == [KeyError, ValueError, ExceptionGroup, one, one]  # noqa: F821 -- 3.11+


def test_await_inside_call_arguments():
    async def value():
        return 3

    async def g():
        return one(await value(), await value())

    ctx = Calls(metadata=[])
    assert ch.overdub(ctx, lambda: asyncio.run(g())) == 1
    assert [f for f in ctx.metadata if f in (g, value, one)] == [g, value, value, one]


def test_async_with_and_async_for():
    class Manager:
        async def __aenter__(self):
            return self

        async def __aexit__(self, *exc):
            return False

    async def numbers():
        yield one()

    async def g():
        async with Manager():
            return [x async for x in numbers()]

    ctx = Calls(metadata=[])
    assert ch.overdub(ctx, lambda: asyncio.run(g())) == [1]
    mine = (g, Manager, Manager.__aenter__, Manager.__aexit__, numbers, one)
    assert [f for f in ctx.metadata if f in mine] == [g, Manager, numbers, one]


def test_all_any_and_tuple_of_a_generator_expression_are_calls_hooks_see():
    """3.14 compiles them as loops behind a test that the name is the builtin; under a
    context they stay calls, as on every other version (docs/internals.md, "CPython 3.14")."""
    def g(xs):
        return all(x for x in xs), any(x for x in xs), tuple(x for x in xs)

    assert [f for f in seen(g, [1, 0]) if f in (all, any, tuple)] == [all, any, tuple]


@pytest.mark.skipif(sys.version_info < (3, 14), reason="annotations are deferred (__annotate__) from 3.14 on")
def test_an_annotate_function_is_never_rewritten_and_the_calls_of_annotations_are_not_seen():
    """annotationlib runs a function's ``__annotate__`` (with fake globals, for names not
    yet defined): no part of what the program calls (docs/internals.md, "CPython 3.14")."""
    import annotationlib

    namespace = {"one": one}
    exec("def g(x: one()):\n    return x\n", namespace)  # (annotations deferred: no __future__ import)

    def read():  # (with the fake globals, on a function it makes of the __annotate__'s code)
        return annotationlib.call_annotate_function(namespace["g"].__annotate__, annotationlib.Format.FORWARDREF)

    ctx = Calls(metadata=[])
    assert ch.overdub(ctx, read) == read() == {"x": 1}
    assert one not in ctx.metadata


# Every shape of BUILD_INTERPOLATION's argument (docs/internals.md, "CPython 3.14"): no
# conversion, each conversion, with and without a format spec, a spec with nested fields
# (themselves calls), ``=``, and calls in the interpolated expressions.
TEMPLATE = ("def g(x, width):\n"
            "    return t'a{one(x)}b{x!r:>{width}}c{x!s}{x!a:^{two()}}{x:}{x=}{Box([x]).get(0)!r:{one()}}'\n")


def _template_string_function(source=TEMPLATE):
    namespace = {"one": one, "two": two, "Box": Box}
    exec(source, namespace)  # (a SyntaxError to parse before 3.14)
    return namespace["g"]


def _interpolations(template):
    return [(i.value, i.expression, i.conversion, i.format_spec) for i in template.interpolations]


@pytest.mark.skipif(sys.version_info < (3, 14), reason="template strings (PEP 750) are 3.14's")
@pytest.mark.parametrize("ctx_type", [Calls, CallsAndOperators])
def test_a_template_string_with_interpolations_gives_the_plain_template_and_its_calls_are_seen(ctx_type):
    g = _template_string_function()
    ctx = ctx_type(metadata=[])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no "cannot rewrite g": it is rewritten)
        template = ch.overdub(ctx, g, "é", 3)
    plain = g("é", 3)
    assert template.strings == plain.strings and _interpolations(template) == _interpolations(plain)
    assert [f for f in ctx.metadata if f in (one, two, Box)] == [one, two, Box, one]


@pytest.mark.skipif(sys.version_info < (3, 14), reason="template strings (PEP 750) are 3.14's")
def test_a_template_string_without_interpolations_is_rewritten():
    namespace = {"one": one}
    exec("def g():\n    one()\n    return t'plain'\n", namespace)
    ctx = Calls(metadata=[])
    assert ch.overdub(ctx, namespace["g"]).strings == ("plain",)
    assert one in ctx.metadata


@pytest.mark.skipif(sys.version_info < (3, 14), reason="except without parentheses (PEP 758) is 3.14's")
def test_except_naming_several_exceptions_without_parentheses_catches_as_compiled():
    namespace = {"one": one}
    exec("def g(x):\n"
         "    try:\n"
         "        one()\n"
         "        return [1][x]\n"
         "    except KeyError, IndexError:\n"
         "        return 'caught'\n", namespace)  # (a SyntaxError to parse before 3.14)
    g = namespace["g"]
    ctx = Calls(metadata=[])
    assert (ch.overdub(ctx, g, 0), ch.overdub(ctx, g, 5)) == (g(0), g(5)) == (1, "caught")
    assert ctx.metadata.count(one) == 2


def test_f_strings_and_formatting_calls():
    def g(x):
        return f"{one()}-{x!r:>4}" + "%s" % two() + "{}".format(one())

    assert seen(g, 5) == [one, two, one, str.format]  # a call is seen once its arguments are


def test_operator_shapes_all_versions():
    def g(a, xs):
        xs[0] += a
        xs[1:2] = [a]
        ok = 0 < a <= 10 and a not in xs
        if a < 5:
            ok = not ok
        return xs[-1:], ok, -a, +a, ~a, a @ Matrix() if False else None

    ops = [f for f in seen(g, 3, [1, 2, 3], ctx_type=CallsAndOperators) if f is not iter]
    assert ops == [operator.getitem, operator.iadd, operator.setitem, operator.setitem, operator.lt,
                   operator.le, operator.contains, operator.lt, operator.getitem, operator.neg,
                   operator.pos, operator.invert]


class Matrix:
    def __rmatmul__(self, other):
        return other


def test_super_in_methods_with_and_without_arguments():
    class Base:
        def m(self, x):
            return one(x)

    class Child(Base):
        def m(self, x):
            return super().m(x) + super(Child, self).m(x)

    def g():
        return Child().m(0)

    # 3.12+ compiles ``super(Child, self).m`` without calling super; earlier versions call it.
    assert [f for f in seen(g) if f is not super] == [Child, Child.m, Base.m, one, Base.m, one]


def test_lambdas_and_default_argument_calls():
    def g():
        f = lambda y=two(): one(y)  # noqa: E731
        return f()

    ctx = Calls(metadata=[])
    ch.overdub(ctx, g)
    assert ctx.metadata[0] is two and ctx.metadata[2] is one


def test_a_nested_part_that_cannot_be_rewritten_runs_as_compiled(monkeypatch):
    from cassette_hook import rewrite

    original = rewrite.rewrite_code

    def refuse_class_bodies(code, hooks, **options):
        if code.co_name == "Local":
            raise rewrite.UnsupportedCode("synthetic")
        return original(code, hooks, **options)

    monkeypatch.setattr(rewrite, "rewrite_code", refuse_class_bodies)

    def g():
        class Local:
            x = one()

        return two(Local.x)

    with pytest.warns(RuntimeWarning, match="cannot rewrite .*Local.*synthetic.*runs unrewritten"):
        assert seen(g) == [two]


def _code_objects(module):
    """Every code object defined in ``module`` (functions, methods, nested code)."""
    import types

    found, todo = [], [value.__code__ for value in vars(module).values() if isinstance(value, types.FunctionType)]
    for value in vars(module).values():
        if isinstance(value, type):
            todo += [v.__code__ for v in vars(value).values() if isinstance(v, types.FunctionType)]
    while todo:
        code = todo.pop()
        if code.co_filename == getattr(module, "__file__", None):
            found.append(code)
            todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return found


@pytest.mark.parametrize("module_name", ["corpus", "json.encoder", "json.decoder", "collections", "asyncio.tasks",
                                         "argparse", "dataclasses", "inspect", "typing"])
@pytest.mark.parametrize("operators", [False, True])
def test_declared_stack_size_covers_what_the_rewritten_code_needs(module_name, operators):
    import importlib
    import os

    from bytecode import ControlFlowGraph

    from cassette_hook.runtime.callsites import HOOKS
    from cassette_hook.rewrite import rewrite_code
    from cassette_hook.rewrite._rewriter import decode  # (bytecode's own misreads some class bodies)

    sys.path.insert(0, os.path.dirname(__file__))
    module = importlib.import_module(module_name)
    codes = _code_objects(module)
    assert codes
    for code in codes:
        try:
            rewritten = rewrite_code(code, HOOKS, operators=operators)
        except Exception:  # noqa: BLE001 -- shapes the rewriter refuses are tested elsewhere
            continue
        def estimate(c):  # bytecode's estimate errs high, and alike for both versions
            return ControlFlowGraph.from_bytecode(decode(c)).compute_stacksize()

        added = estimate(rewritten) - estimate(code)
        assert added <= rewritten.co_stacksize - code.co_stacksize, code.co_name


@pytest.mark.parametrize("module_name", ["corpus", "json.decoder", "collections", "asyncio.tasks", "argparse",
                                         "dataclasses", "inspect", "typing", "enum", "functools"])
@pytest.mark.parametrize("operators", [False, True])
@pytest.mark.parametrize("enters", [False, True])
def test_a_body_found_to_be_its_own_twin_is_one_the_rewriter_leaves_as_it_is(module_name, operators, enters):
    """``_names.twin_is_itself`` says, without the rewriter, what the rewriter would do: a
    twin of such a body runs the body's own code (docs/internals.md, "Twins")."""
    import dis
    import importlib
    import os
    import types

    from cassette_hook.rewrite import _names, rewrite_code
    from cassette_hook.runtime.callsites import HOOKS

    sys.path.insert(0, os.path.dirname(__file__))
    itself = [code for code in _code_objects(importlib.import_module(module_name)) if _names.twin_is_itself(code)]
    assert itself  # (each module has some: decorator factories, __init__ that store, properties)

    # The rewriter writes 3.14's small ints, and a callee's borrowed load, in their plain
    # forms, which the compiler's own code need not (docs/internals.md, "CPython 3.14").
    plain = {"LOAD_FAST_BORROW": "LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW": "LOAD_FAST_LOAD_FAST",
             "LOAD_SMALL_INT": "LOAD_CONST"}

    def instructions(code: types.CodeType) -> list[tuple[str, object]]:
        return [(plain.get(i.opname, i.opname), i.argval if not isinstance(i.argval, types.CodeType) else id(i.argval))
                for i in dis.get_instructions(code)]

    for code in itself:
        assert instructions(rewrite_code(code, HOOKS, operators=operators, enters=enters)) == instructions(code), (
            code.co_qualname if hasattr(code, "co_qualname") else code.co_name)


def test_yield_from_calls_iter_and_recurses_into_a_python_iter():
    class Tree:
        def __init__(self, *children):
            self.children = children

        def __iter__(self):
            yield one()
            for child in self.children:
                yield from child

    def g():
        return [x for x in Tree(Tree(), Tree())]  # a for loop: iter() is a call site

    calls = seen(g, ctx_type=CallsAndOperators)
    assert calls.count(Tree.__iter__) == 3 and calls.count(one) == 3


def test_yield_from_a_generator_or_coroutine_is_left_to_the_instruction():
    import types

    def inner():
        yield 1
        return 2

    def outer():
        result = yield from inner()
        return result

    @types.coroutine
    def awaiting():
        yield from asyncio.sleep(0).__await__()
        return 3

    assert seen(lambda: list(outer()), ctx_type=CallsAndOperators)[:2] == [outer, list]
    assert asyncio.run(ch.overdub(CallsAndOperators(metadata=[]), lambda: _await(awaiting()))) == 3


async def _await(awaitable):
    return await awaitable


@pytest.mark.parametrize("module_name", ["corpus", "json.encoder", "collections", "asyncio.tasks", "argparse",
                                         "dataclasses", "inspect", "typing", "email.message"])
def test_operator_sites_are_only_made_of_the_instructions_the_family_names(module_name):
    """The rewriter asks ``operator_site`` only about the instructions the running family
    lists in ``operator_names`` (the per-opcode filter of a cold rewrite, docs/internals.md
    "Where a cold import's time goes"): asked about any other instruction, it must make no
    site, or that site would be lost.  Checked on both paths' families alike: the family
    is the running Python's, whichever hot path runs."""
    import importlib
    import os

    from bytecode import Instr

    from cassette_hook.rewrite import UnsupportedCode
    from cassette_hook.rewrite._family import family
    from cassette_hook.rewrite._names import switched_hooks
    from cassette_hook.rewrite._rewriter import decode

    sys.path.insert(0, os.path.dirname(__file__))
    module = importlib.import_module(module_name)
    hooks = switched_hooks()
    listed = 0
    for code in _code_objects(module):
        try:
            items = family.plain_forms(list(decode(code)))
        except UnsupportedCode:  # (shapes the rewriter refuses are tested elsewhere)
            continue
        for item in items:
            if isinstance(item, Instr) and item.name in family.operator_names:
                listed += 1
            elif isinstance(item, Instr):
                assert family.operator_site(item, hooks) is None, (code.co_name, item)
    assert listed  # (the module has operators, so the filter had both kinds to tell apart)


# -- 3.14+'s borrowed loads in twins (docs/internals.md, "CPython 3.14") ------------------

class Nothing(ch.Context):
    """Overloads nothing: its twins' call sites resolve (``resolve``), where ``Calls``'s enter."""


class _Receiver:
    def method(self, x):
        return x + 1


def _loads(code):
    import dis

    return [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname.startswith("LOAD_FAST")]


def _locals_and_callees(receiver, x, function):
    held = receiver.method
    y = held(x) + function(x, x)
    return receiver.method(y), [v for v in (x, y)]


@pytest.mark.parametrize("enters", [False, True], ids=["resolving", "entering"])
def test_a_twin_loads_its_variables_as_compiled_but_for_its_callees(enters):
    """A twin's variables are read borrowed where the compiler borrowed them (3.14+), the
    program's own cost; a load that pushes a callee is a plain load (the site's hook reads
    a callee's reference count)."""
    from cassette_hook.rewrite import rewrite_code
    from cassette_hook.runtime.callsites import HOOKS

    code = _locals_and_callees.__code__
    callees = {"held", "function"}
    expected = [("LOAD_FAST" if name == "LOAD_FAST_BORROW" and arg in callees else name, arg)
                for name, arg in _loads(code)]
    assert _loads(rewrite_code(code, HOOKS, operators=False, enters=enters)) == expected


def _a_held_bound_method_called(receiver):
    held = receiver.method
    results = held(0), held(1), held(2)  # (its twin made at the first call, found at the others)
    return held.__func__ is _Receiver.method, results


@pytest.mark.parametrize("ctx_type", [Nothing, Calls], ids=["resolving", "entering"])
def test_a_bound_method_a_variable_holds_keeps_its_function_when_called_under_a_context(ctx_type):
    """(A bound method made for its call alone is rebound to its twin in place: from 3.14
    a borrowed load would give a variable's the same count of references.)"""
    assert ch.overdub(ctx_type(metadata=[]), _a_held_bound_method_called, _Receiver()) == (True, (1, 2, 3))


class _Noted:
    def __init__(self, events):
        self.events = events

    def __del__(self):
        self.events.append("freed")


def _take(value, _):
    value.events.append("taken")


def _rebind_callers_variable():
    sys._getframe(1).f_locals["noted"] = None  # (PEP 667: a write through to the caller's variable)
    return 0


def _borrowed_then_rebound(events):
    noted = _Noted(events)
    _take(noted, _rebind_callers_variable())  # ``noted`` loaded borrowed (3.14+), then rebound before the call
    return events


@pytest.mark.parametrize("ctx_type", [Nothing, Calls], ids=["resolving", "entering"])
def test_a_value_loaded_borrowed_outlives_its_variable_rebound_before_its_use_as_plain(ctx_type):
    assert ch.overdub(ctx_type(metadata=[]), _borrowed_then_rebound, []) == _borrowed_then_rebound([]) == [
        "taken", "freed"]


class _RebindingPrehook(ch.Context):
    def prehook(self, f, *args, **kwargs):
        if f is _take:
            sys._getframe(1).f_locals["noted"] = None  # (the program's frame: the hook runs from C or a site)


def _borrowed_for_a_hook(events):
    noted = _Noted(events)
    _take(noted, 0)
    return events


def test_a_value_loaded_borrowed_outlives_its_variable_rebound_by_a_hook_before_its_use():
    assert ch.overdub(_RebindingPrehook(), _borrowed_for_a_hook, []) == ["taken", "freed"]


def test_a_twin_a_pass_made_has_no_borrowed_load():
    """A pass may put anything between a load and its use (a store to its variable): its
    body keeps the plain loads it was given."""
    from cassette_hook import passes
    from cassette_hook.runtime.callsites import HOOKS

    code = passes.rewrite_with_pass(ch.Pass(lambda ctx_type, func, body: body), Nothing, _locals_and_callees,
                                    _locals_and_callees.__code__, HOOKS, operators=False)
    assert not [name for name, _ in _loads(code) if "BORROW" in name]
