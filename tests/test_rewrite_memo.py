"""The rewriting's memos keyed by ids (``rewrite._memo.Memo``; docs/internals.md, "Where a
cold import's time goes"): a value remembered under a key made of objects' ids, those
objects held alive while the key is remembered, ``None`` a value like any other, and at
most a bounded number of keys, all forgotten at once when full."""

from __future__ import annotations

import gc
import weakref

from cassette_hook.rewrite._memo import Memo

_UNSEEN = object()


class _Hook:
    """An object to key by its ``id`` (one a weak reference can watch)."""


def test_a_value_remembered_is_got_by_its_key():
    memo: Memo[tuple[object, ...], list[str]] = Memo(8)
    hook = _Hook()
    value = memo.remember(("site", id(hook), 2), ["COPY", "CALL"], hook)
    assert memo.get(("site", id(hook), 2)) is value
    assert memo.get(("site", id(hook), 3)) is None


def test_none_is_remembered_as_a_value_not_as_a_key_unseen():
    memo: Memo[tuple[object, ...], list[str] | None] = Memo(8)
    hook = _Hook()
    assert memo.get(("site", id(hook)), _UNSEEN) is _UNSEEN
    memo.remember(("site", id(hook)), None, hook)
    assert memo.get(("site", id(hook)), _UNSEEN) is None


def test_the_objects_whose_ids_are_in_a_key_live_while_it_is_remembered():
    memo: Memo[tuple[object, ...], str] = Memo(8)
    first, second = _Hook(), _Hook()
    watched = weakref.ref(first), weakref.ref(second)
    key = (id(first), id(second))
    memo.remember(key, "both", first, second)
    del first, second
    gc.collect()
    assert watched[0]() is not None and watched[1]() is not None
    assert memo.get((id(watched[0]()), id(watched[1]()))) == "both"


def test_a_full_memo_forgets_every_key_and_what_they_held_before_remembering_more():
    kept = 4
    memo: Memo[tuple[object, ...], int] = Memo(kept)
    hooks = [_Hook() for _ in range(kept + 1)]
    watched = [weakref.ref(hook) for hook in hooks]
    keys = [(id(hook),) for hook in hooks]
    for number, (key, hook) in enumerate(zip(keys[:kept], hooks)):
        memo.remember(key, number, hook)
    assert [memo.get(key) for key in keys[:kept]] == list(range(kept))
    memo.remember(keys[kept], kept, hooks[kept])
    assert [memo.get(key) for key in keys] == [None] * kept + [kept]
    del hooks, hook
    gc.collect()
    assert [ref() is None for ref in watched] == [True] * kept + [False]
