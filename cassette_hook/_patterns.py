"""Module-name patterns: the one syntax of ``Context.include``/``exclude``, of the import
hook's patterns, and of the reports' module filters.

``"pkg"`` means ``pkg`` and everything under it (``pkg.sub``, not ``pkgx``); a pattern
with ``*``, ``?`` or ``[`` is a glob (``fnmatch``) over full module names.  A set of
patterns is compiled once, because the import hook asks about every import.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import fnmatch
import re

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Iterable


def is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


class ModulePatterns:
    """Does a module name match any of some patterns?  (``patterns.matches(name)``)"""

    __slots__ = ("patterns", "_names", "_prefixes", "_globs")

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = patterns = tuple(patterns)
        names = tuple(p for p in patterns if not is_glob(p))
        globs = [fnmatch.translate(p) for p in patterns if is_glob(p)]
        self._names = frozenset(names)
        self._prefixes = tuple(name + "." for name in names)
        self._globs = re.compile("|".join(globs)).match if globs else None

    def matches(self, module: str) -> bool:
        return (module in self._names or module.startswith(self._prefixes)
                or self._globs is not None and self._globs(module) is not None)

    def first_match(self, module: str) -> str | None:
        """The first pattern that matches ``module``: for messages, which name the
        pattern (slower than :meth:`matches`, which only says whether one does)."""
        return next((p for p in self.patterns if ModulePatterns((p,)).matches(module)), None)
