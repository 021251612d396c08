"""Context classes are ordinary objects: one that nobody references is collected with its
registrations (docs/api.md, "Lifetime of context classes and their overloads").

Every test runs on both paths (the C accelerator and ``CASSETTE_HOOK_PURE_PYTHON=1``):
what holds a class is the same on both, the generics' tables, their type caches, the
plans, the tagging classes.
"""

from __future__ import annotations

import abc
import os
import subprocess
import sys
import gc
import weakref
from typing import Any

import pytest

import cassette_hook as ch
from cassette_hook.importhook import switch


def g(x: int) -> int:
    return x + 1


def f(x: int) -> int:
    return g(x) * 2


def _throwaway(seen: list[Any]) -> type[ch.Context]:
    """A context class made in a function, as per request or per test, used in every way:
    overdubbed, entered, dispatched on, tagged."""

    class Throwaway(ch.Context):
        def prehook(self, fn: Any, *args: Any) -> None:
            seen.append(fn)
            super().__init__  # (a ``__class__`` cell: the method refers to its class)

    ch.overdub(Throwaway(), f, 1)
    with Throwaway():
        pass
    ch.prehook(Throwaway(), g, 1)
    ch.overdub(ch.enabletagging(Throwaway(), f), f, 1)
    return Throwaway


def test_a_context_class_nobody_references_is_collected() -> None:
    seen: list[Any] = []
    ref = weakref.ref(_throwaway(seen))
    assert g in seen
    gc.collect()
    assert ref() is None


def test_the_hook_methods_of_a_collected_class_leave_the_generics() -> None:
    before = len(ch.prehook.methods())
    cls = _throwaway([])
    assert len(ch.prehook.methods()) == before + 1
    del cls
    gc.collect()
    assert len(ch.prehook.methods()) == before


def test_an_overload_registered_for_a_throwaway_class_goes_with_it() -> None:
    # Its signature names the class: once the class is gone it can apply to no call.
    def make() -> weakref.ref[type]:
        class Throwaway(ch.Context):
            pass

        @ch.overdub.register
        def _(ctx: Throwaway, fn: ch.Is[g], x: int) -> int:
            return -x

        assert ch.overdub(Throwaway(), f, 1) == -2
        return weakref.ref(Throwaway)

    before = len(ch.overdub.methods())
    ref = make()
    assert len(ch.overdub.methods()) == before + 1
    gc.collect()
    assert ref() is None
    assert len(ch.overdub.methods()) == before


def test_an_overload_on_the_metadata_type_of_a_throwaway_class_goes_with_it() -> None:
    def make() -> weakref.ref[type]:
        class Throwaway(ch.Context):
            pass

        @ch.prehook.register
        def _(ctx: Throwaway[int], fn: Any, *args: Any) -> None:
            ctx.metadata += 1

        ctx = Throwaway(metadata=0)
        ch.overdub(ctx, f, 1)
        assert ctx.metadata > 0
        return weakref.ref(Throwaway)

    before = len(ch.prehook.methods())
    ref = make()
    gc.collect()
    assert ref() is None
    assert len(ch.prehook.methods()) == before


def test_a_metadatatype_overload_for_a_throwaway_class_goes_with_it() -> None:
    def make() -> weakref.ref[type]:
        class Throwaway(ch.Context):
            pass

        @ch.metadatatype.register
        def _(ctx: Throwaway, value: float) -> type:
            return str

        ctx = ch.enabletagging(Throwaway(), f)
        assert ch.metadata(ch.tag(1.0, ctx, "m"), ctx) == "m"
        return weakref.ref(Throwaway)

    before = len(ch.metadatatype.methods())
    ref = make()
    gc.collect()
    assert ref() is None
    assert len(ch.metadatatype.methods()) == before


def test_a_class_with_a_live_instance_is_kept_and_its_hooks_still_run() -> None:
    seen: list[Any] = []
    ctx = _throwaway(seen)()
    ref = weakref.ref(type(ctx))
    for _ in range(3):  # other classes come and go: the caches are dropped and remade
        _throwaway([])
        gc.collect()
    assert ref() is type(ctx)
    seen.clear()
    ch.overdub(ctx, f, 1)
    assert g in seen


def test_the_class_of_an_active_context_is_kept_while_it_is_active() -> None:
    seen: list[Any] = []
    with _throwaway(seen)() as ctx:
        ref = weakref.ref(type(ctx))
        del ctx
        gc.collect()
        assert ref() is not None
        seen.clear()
        ch.overdub(ch.current_context(), f, 1)  # type: ignore[arg-type]  # (active: not None)
        assert g in seen
    gc.collect()
    assert ref() is None


def test_an_overload_of_a_class_that_stays_is_kept_when_others_go() -> None:
    class Kept(ch.Context):
        pass

    @ch.overdub.register
    def kept(ctx: Kept, fn: ch.Is[g], x: int) -> int:
        return 0

    try:
        for _ in range(3):
            _throwaway([])
            gc.collect()
        assert kept in ch.overdub.methods()
        assert ch.overdub(Kept(), f, 1) == 0
    finally:
        ch.overdub.unregister(kept)


def test_making_and_dropping_classes_keeps_the_number_of_objects_flat() -> None:
    def counts_after(classes: int) -> int:
        for _ in range(classes):
            _throwaway([])
        gc.collect()
        return len(gc.get_objects())

    counts_after(200)  # (warm: the first classes fill caches that stay)
    first = counts_after(200)
    assert counts_after(1000) <= first + 50  # (not 1000 more classes' worth: ~30 objects each)


def test_an_overload_on_an_abstract_context_class_applies_to_its_virtual_subclasses() -> None:
    # Dispatch looks first at the overloads of the classes in the context's MRO; one whose
    # class has its own __subclasscheck__ (ABCMeta's) may apply beyond them.
    class Abstract(ch.Context, abc.ABC):
        pass

    class Virtual(ch.Context):
        pass

    Abstract.register(Virtual)

    @ch.overdub.register
    def replaced(ctx: Abstract, fn: ch.Is[g], x: int) -> int:
        return 0

    try:
        assert ch.overdub(Virtual(), f, 1) == 0
    finally:
        ch.overdub.unregister(replaced)


def _fails() -> None:
    raise ValueError("kept")


class _Watching(ch.Context):
    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        pass


@pytest.mark.parametrize("context_class", [ch.NullContext, _Watching], ids=["null", "prehook"])
def test_an_exception_kept_after_a_call_under_a_context_keeps_no_entry_live(context_class: type) -> None:
    # A traceback keeps its frames, and ch.overdub's frame with them: the program may keep
    # it (sys.last_exc, a list of errors), and the process must go idle all the same.
    gc.collect()
    live_before = len(switch._live)
    try:
        ch.overdub(context_class(), _fails)
    except ValueError as exc:
        kept = exc
    gc.collect()
    assert len(switch._live) == live_before and kept.__traceback__ is not None


ONE_WEAK_REFERENCE = """
import cassette_hook as ch

class Quiet(ch.Context):
    operators = False  # (its entries are watched by one weak reference, not two)

def f():
    return 1

for _ in range(3):
    ch.overdub(Quiet(), f)
print("ok")
"""


def test_the_end_of_an_entry_watched_by_one_weak_reference_reads_no_freed_memory() -> None:
    # CPython calls the callback of an object's only weak reference without holding the
    # reference; the debug allocator overwrites freed memory, so a read of it crashes.
    done = subprocess.run([sys.executable, "-c", ONE_WEAK_REFERENCE], capture_output=True, text=True,
                          env={**os.environ, "PYTHONMALLOC": "debug"}, timeout=120)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
