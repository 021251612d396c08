"""The profile charges a generator's and a coroutine's time to its own function, as
cProfile does: each resume of its frame is a call of its row, by the call that resumes
it, and the calls its body makes are that row's children; ``generators="caller"`` keeps
the caller's view, where only the call that makes it is seen (docs/contexts.md,
"Generators and coroutines").  3.10 and 3.11 have no ``sys.monitoring``, and give the
caller's view either way (documented there): the tests say which they expect where.

Every test runs on whichever hot path the suite runs on (tox: ``py3XX`` and
``py3XX-pure``); the trees must be the same on both.  Calls are counted, never timed."""

from __future__ import annotations

import asyncio
import gc
import io
import sys
import threading

import pytest

import cassette_hook as ch
from cassette_hook.contexts import ProfileContext

M = __name__
RESUMES_COUNTED = sys.version_info >= (3, 12)  # (sys.monitoring)


@pytest.fixture(autouse=True)
def no_collection():
    """No full collection starts while a test profiles: one would be a row of its own,
    ``<garbage collection>`` (docs/contexts.md), among the calls these trees count."""
    was_enabled = gc.isenabled()
    gc.disable()
    yield
    if was_enabled:
        gc.enable()


def inner(i):
    return i * 2


def gen(n):
    for i in range(n):
        yield inner(i)


def consume():
    total = 0
    for x in gen(5):
        total += x
    return total


def profiled(f, **options):
    ctx = ProfileContext(io.StringIO(), **options)
    ctx.runcall(f)
    return ctx


def tree(ctx):
    """The profile's only thread as nested ``{name: (calls, {children})}``."""
    (only,) = ctx._trees_now()
    return _nested(only.root)


def _nested(node):
    return {name: (child.calls, _nested(child)) for name, child in node.children.items()}


def stack_depth(ctx):
    return len(ctx._threads.stack)


# -- a generator consumed by a for loop ------------------------------------------------


def test_a_generators_body_calls_are_its_rows_children_and_each_resume_is_a_call():
    ctx = profiled(consume)
    # the call that makes it, then six resumes: five that yield, one that returns (cProfile: 6)
    expected = {f"{M}.gen": (7, {"builtins.range": (1, {}), f"{M}.inner": (5, {})})}
    if not RESUMES_COUNTED:
        expected = {f"{M}.gen": (1, {}), "builtins.range": (1, {}), f"{M}.inner": (5, {})}
    assert tree(ctx) == {f"{M}.consume": (1, expected)}


def test_the_caller_view_leaves_the_generators_calls_to_its_consumer():
    ctx = profiled(consume, generators="caller")
    assert tree(ctx) == {f"{M}.consume": (1, {f"{M}.gen": (1, {}), "builtins.range": (1, {}),
                                              f"{M}.inner": (5, {})})}


def test_the_caller_view_is_an_option_of_the_command_line():
    assert ProfileContext.from_options({"generators": "caller"}).generators == "caller"
    assert ProfileContext.from_options({}).generators == "generator"


def test_a_generators_view_that_is_neither_is_refused_by_name():
    with pytest.raises(ValueError, match="generators must be one of generator, caller, not 'callee'"):
        ProfileContext(generators="callee")
    with pytest.raises(ValueError, match="generators='callee'"):
        ProfileContext.from_options({"generators": "callee"})


def test_the_generator_view_gives_the_programs_result():
    ctx = ProfileContext(io.StringIO())
    assert ch.overdub(ctx, consume) == consume()


# -- generators that end otherwise -----------------------------------------------------


def raising(n):
    for i in range(n):
        yield inner(i)
    raise KeyError(inner(n))


def test_a_generator_that_raises_ends_its_call_and_leaves_the_stack_balanced():
    def program():
        try:
            for _ in raising(2):
                pass
        except KeyError:
            pass
        return inner(0)

    ctx = profiled(program)
    assert stack_depth(ctx) == 1
    if RESUMES_COUNTED:  # made, then three resumes: two yield, the last raises
        assert tree(ctx) == {f"{M}.test_a_generator_that_raises_ends_its_call_and_leaves_the_stack_balanced."
                             "<locals>.program": (1, {f"{M}.raising": (4, {"builtins.range": (1, {}),
                                                                           f"{M}.inner": (3, {}),
                                                                           "builtins.KeyError": (1, {})}),
                                                      f"{M}.inner": (1, {})})}


def cleaning(n):
    try:
        yield from range(n)
    finally:
        inner(-1)


def test_a_generator_closed_early_ends_its_call_and_leaves_the_stack_balanced():
    def program():
        for _ in cleaning(5):
            break  # (the generator, dropped, is closed: GeneratorExit is thrown into it)
        return inner(0)

    ctx = profiled(program)
    assert stack_depth(ctx) == 1
    name = f"{M}.test_a_generator_closed_early_ends_its_call_and_leaves_the_stack_balanced.<locals>.program"
    if RESUMES_COUNTED:  # made, started (yields once), then closed (thrown into: runs its finally, unwinds)
        assert tree(ctx) == {name: (1, {f"{M}.cleaning": (3, {"builtins.range": (1, {}), f"{M}.inner": (1, {})}),
                                        f"{M}.inner": (1, {})})}


def catching():
    while True:
        try:
            yield inner(0)
        except ValueError:
            inner(1)


def test_a_generator_thrown_into_counts_the_throw_as_a_resume():
    def program():
        g = catching()
        next(g)
        g.throw(ValueError)  # (caught inside: it yields again)
        g.close()
        return inner(2)

    ctx = profiled(program)
    assert stack_depth(ctx) == 1
    name = f"{M}.test_a_generator_thrown_into_counts_the_throw_as_a_resume.<locals>.program"
    if RESUMES_COUNTED:  # made; then resumed by next, throw (inner twice) and close (unwinds)
        assert tree(ctx)[name][1] == {
            f"{M}.catching": (1, {}), f"{M}.inner": (1, {}),
            "builtins.next": (1, {f"{M}.catching": (1, {f"{M}.inner": (1, {})})}),
            "generator.throw": (1, {f"{M}.catching": (1, {f"{M}.inner": (2, {})})}),
            "generator.close": (1, {f"{M}.catching": (1, {})})}


def refusing():
    yield inner(0)
    yield inner(1)


def test_a_generator_thrown_into_that_does_not_catch_ends_its_call_by_the_exception():
    def program():
        g = refusing()
        next(g)
        try:
            g.throw(KeyError)
        except KeyError:
            pass
        return inner(2)

    ctx = profiled(program)
    assert stack_depth(ctx) == 1
    name = f"{M}.test_a_generator_thrown_into_that_does_not_catch_ends_its_call_by_the_exception.<locals>.program"
    if RESUMES_COUNTED:  # made; resumed by next; thrown into, which unwinds it at once
        assert tree(ctx)[name][1] == {
            f"{M}.refusing": (1, {}), f"{M}.inner": (1, {}),
            "builtins.next": (1, {f"{M}.refusing": (1, {f"{M}.inner": (1, {})})}),
            "generator.throw": (1, {f"{M}.refusing": (1, {})})}


def walk(depth):
    yield inner(depth)
    if depth:
        yield from walk(depth - 1)


def test_a_recursive_generator_is_a_call_under_each_level_that_delegates_to_it():
    def program():
        return list(walk(2))

    ctx = profiled(program)
    assert stack_depth(ctx) == 1
    name = f"{M}.test_a_recursive_generator_is_a_call_under_each_level_that_delegates_to_it.<locals>.program"
    if RESUMES_COUNTED:  # each level: made by the one above, resumed once per item it passes on, and to end
        innermost = (1 + 1 + 1, {f"{M}.inner": (1, {})})
        middle = (1 + 2 + 1, {f"{M}.inner": (1, {}), f"{M}.walk": innermost})
        assert tree(ctx)[name][1] == {f"{M}.walk": (1, {}), "builtins.list": (1, {f"{M}.walk": (
            3 + 1, {f"{M}.inner": (1, {}), f"{M}.walk": middle})})}


def outer():
    yield inner(-1)
    yield from gen(2)


def test_a_generator_run_by_yield_from_is_a_call_of_the_generator_that_delegates():
    def program():
        return list(outer())

    ctx = profiled(program)
    assert stack_depth(ctx) == 1
    (calls, children) = tree(ctx)[f"{M}.test_a_generator_run_by_yield_from_is_a_call_of_the_generator_that_"
                                  "delegates.<locals>.program"]
    if RESUMES_COUNTED:  # outer: made, then resumed four times by list (three yields, a return)
        assert children == {f"{M}.outer": (1, {}), "builtins.list": (1, {f"{M}.outer": (4, {
            f"{M}.inner": (1, {}), f"{M}.gen": (4, {"builtins.range": (1, {}), f"{M}.inner": (2, {})})})})}
    else:  # (the caller's view: the body's calls are list's, which runs it)
        assert children == {f"{M}.outer": (1, {}), "builtins.list": (1, {
            f"{M}.inner": (3, {}), f"{M}.gen": (1, {}), "builtins.range": (1, {})})}


# -- coroutines ------------------------------------------------------------------------


async def work(n):
    total = 0
    for i in range(n):
        total += inner(i)
        await asyncio.sleep(0)
    return total


async def main():
    return await work(2) + await work(1)


def test_a_coroutines_calls_are_its_rows_children_wherever_the_event_loop_resumes_it():
    ctx = profiled(lambda: asyncio.run(main()))
    assert stack_depth(ctx) == 1
    inners = named(ctx, f"{M}.inner")
    assert sum(node.calls for _, node in inners) == 3
    if RESUMES_COUNTED:  # (each resume by the event loop, under the call of asyncio's that resumes it)
        assert {parent for parent, _ in inners} == {f"{M}.work"}
        (work_calls,) = {sum(node.calls for _, node in named(ctx, f"{M}.work"))}
        assert work_calls == 2 + 3 + 2  # made twice; work(2) resumed thrice, work(1) twice
        assert {parent for parent, _ in named(ctx, f"{M}.work")} == {f"{M}.main"}


def named(ctx, name):
    """``(parent's name, node)`` for each node called ``name`` in the profile's only thread."""
    (only,) = ctx._trees_now()
    found, pending = [], [only.root]
    while pending:
        node = pending.pop()
        for child in node.children.values():
            if child.name == name:
                found.append((node.name, child))
            pending.append(child)
    return found


# -- threads ---------------------------------------------------------------------------


def test_each_threads_generators_are_counted_in_its_own_tree_and_its_stack_balanced():
    ctx = ProfileContext(io.StringIO())
    barrier = threading.Barrier(2)

    def thread_body():
        barrier.wait()
        return consume()

    def program():
        threads = [threading.Thread(target=ch.overdub, args=(ctx, thread_body), name=f"t{i}") for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    program()
    trees = {t.name: t for t in ctx._trees_now()}
    assert sorted(trees) == ["t0", "t1"]
    for name, thread_tree in trees.items():
        assert len(thread_tree.stack) == 1, name
        body = thread_tree.root.children[f"{M}.consume"]
        assert body.calls == 1
        if RESUMES_COUNTED:
            assert body.children[f"{M}.gen"].calls == 7
            assert body.children[f"{M}.gen"].children[f"{M}.inner"].calls == 5
