"""A bounded memo keyed by ids, holding what the ids name alive.

The rewriting makes some things once and looks them up at every site or body after: a
site's instructions by the ``id`` of its hooks (``NullSlotFamily._shapes``,
``_rewriter._operator_shapes``), the pairing's role of each instruction name by the ``id``
of a family's sets of names (``_stack._ROLES``).  An ``id`` is cheap to hash where the
object is not (or hashes by value when the look-up must be by identity), but it names the
object only while the object lives: so the memo holds each object whose ``id`` is in a key
for as long as the key is remembered.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(Generic[K, V]):
    """Values by keys made of ids (and numbers, names...), at most ``kept`` of them.

    ``get`` is the look-up of a ``dict`` (``memo.get(key)``, ``memo.get(key, default)``):
    the dict's own method, not one of this class calling it, since the memos are asked at
    every site the rewriting makes (a Python frame there would be a cost a rewrite pays
    thousands of times).  A value may be ``None``: ask with a default of your own to tell
    it from a key not remembered.

    ``remember(key, value, *held)`` remembers ``value`` under ``key`` and holds ``held``,
    every object whose ``id`` is in ``key``, alive until the key is forgotten: so that no
    other object can take that ``id`` and be answered for with another's value.

    When full, the memo forgets everything before remembering more, rather than one entry
    at a time: objects are held by ``id``, and two keys may hold the same one, so dropping
    one key could not drop what it holds without counting the keys of each object -- a
    cost on every miss for a case that never comes: the rewriting has a few dozen keys for
    the hooks a process has.  The bound is there so that a process making hooks without
    end (a new set for each of many contexts) does not keep them all alive; after it is
    reached, the values are made again, as they were the first time.
    """

    __slots__ = ("get", "_values", "_held", "_kept")

    def __init__(self, kept: int) -> None:
        self._values: dict[K, V] = {}
        self._held: dict[int, object] = {}
        self._kept = kept
        self.get = self._values.get  # (the dict is cleared, never replaced: the method stays its)

    def remember(self, key: K, value: V, *held: object) -> V:
        """``value``, remembered under ``key``, ``held`` (the objects whose ``id`` is in
        ``key``) kept alive while it is; everything forgotten first if the memo is full."""
        if len(self._values) >= self._kept:
            self._values.clear()
            self._held.clear()
        for item in held:
            self._held[id(item)] = item
        self._values[key] = value
        return value
