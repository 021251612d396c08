"""A cache keyed by the identity of weak-referenceable objects (functions, code objects, classes)."""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import functools
import weakref
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class WeakIdCache(Generic[V]):
    """``id(obj) -> value`` for weak-referenceable objects, forgotten when ``obj`` dies.

    A dict keyed by ``id`` is as fast as a lookup gets (``dict.get(id(f))``) and, unlike a
    dict keyed by the object, does not keep it alive; the weak reference's callback runs
    before the object's memory (and so its id) can be reused.
    """

    __slots__ = ("values", "_refs")  # (the C hot path reads ``values`` at its slot)

    def __init__(self) -> None:
        self.values: dict[int, V] = {}
        self._refs: dict[int, weakref.ref[Any]] = {}

    def get(self, obj: object) -> V | None:
        return self.values.get(id(obj))

    def set(self, obj: object, value: V) -> None:
        key = id(obj)
        if key not in self._refs:
            self._refs[key] = weakref.ref(obj, functools.partial(self._forget, key))
        self.values[key] = value

    def _forget(self, key: int, _ref: object) -> None:
        self.values.pop(key, None)
        self._refs.pop(key, None)

    def clear(self) -> None:
        self.values.clear()
        self._refs.clear()

    def __len__(self) -> int:
        return len(self.values)


ANCHOR = "__cassette_hook_anchored__"
"""The attribute of a class that holds what lives exactly as long as the class (see :func:`anchor`)."""


def anchor(owner: type, value: object) -> bool:
    """Make ``owner`` hold ``value``, so that ``value`` lives as long as ``owner`` does, and
    no longer: what refers to ``value`` only weakly (a generic's table of methods) then
    does not keep ``owner`` alive through it, though ``value`` may refer to ``owner``.

    (Python has no ephemerons, so a table cannot hold a value for as long as its key lives
    without keeping the key alive when the value refers to it: the key holds the value
    instead.)  False when ``owner`` takes no attribute (a static or immutable type): the
    caller must then hold ``value`` itself.
    """
    held = owner.__dict__.get(ANCHOR)
    if held is None:
        try:
            type.__setattr__(owner, ANCHOR, held := [])
        except (TypeError, AttributeError):
            return False
    held.append(value)
    return True


def unanchor(owner: type, value: object) -> None:
    """Let ``owner`` stop holding ``value`` (anchored with :func:`anchor`)."""
    held = owner.__dict__.get(ANCHOR, ())
    for i, v in enumerate(held):
        if v is value:
            del held[i]
            return
