"""Named constants that Cassette spells as calls (``OverdubInstead()``, ``NoMetaData()``)."""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from typing import Any, TypeVar

C = TypeVar("C", bound="Constant")


class Constant:
    """One instance per subclass, which is also what calling it gives, so that Cassette's
    ``OverdubInstead()`` and the Python ``OverdubInstead`` are the same object; copying
    and unpickling build it again through ``__new__``, and so keep it the same too."""

    _instance: Any  # each subclass's own, set on first construction

    def __new__(cls: type[C]) -> C:
        instance: C | None = cls.__dict__.get("_instance")
        if instance is None:
            instance = super().__new__(cls)
            cls._instance = instance
        return instance

    def __call__(self: C) -> C:
        return self

    def __repr__(self) -> str:
        return type(self).__name__.lstrip("_")
