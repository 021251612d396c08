"""Which code is a library's -- the standard library's or an installed package's --
rather than the program's own.

A trace of a whole program is readable only if it stops at the program's edge: a call
the program makes into ``json``, ``argparse`` or an installed package is one line, not
the thousands of calls inside it.  A context says so with ``libraries = False`` (see
``Context``), and its plan runs such code as primitives.  Code is a library's if its file
lies under the standard library or a ``site-packages`` directory (the places the import
hook leaves alone unless named), or is a frozen standard module.  A function is judged by its code's
file, not by its ``__module__``, which may name a module of another file (code run as
``__main__`` while ``sys.modules["__main__"]`` is some tool's); a class, by the file of
one of its methods, or else its module's.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import os
import sys
from types import FunctionType, MethodType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def library_prefixes() -> tuple[str, ...]:
    """The standard library's and the site-packages directories, resolved, each ending
    with a separator: a file is a library's if its resolved path starts with one."""
    import site
    import sysconfig  # (13 ms on 3.12: only when first asked)

    paths = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    paths.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.realpath(p), "") for p in paths if p)


class Libraries:
    """``libraries.defined(f)``: is ``f`` a library's Python function or class?  Decided
    once per file; the directories are found at the first question."""

    def __init__(self) -> None:
        self._prefixes: tuple[str, ...] | None = None
        self._files: dict[str, bool] = {}

    def defined(self, f: Any) -> bool:
        func = f.__func__ if type(f) is MethodType else f
        if type(func) is FunctionType:
            return self.is_library_file(func.__code__.co_filename)
        if isinstance(f, type):
            return self._defines_class(f)
        return False

    def is_library_module(self, module: str) -> bool:
        """Is the module of this name (imported) a library's?"""
        file = getattr(sys.modules.get(module), "__file__", None)
        if isinstance(file, str):
            return self.is_library_file(file)
        return module.partition(".")[0] in sys.stdlib_module_names

    def _defines_class(self, cls: type) -> bool:
        for member in vars(cls).values():  # its own methods say where it was written
            if type(member) is FunctionType:
                return self.is_library_file(member.__code__.co_filename)
        return self.is_library_module(cls.__module__ if isinstance(cls.__module__, str) else "")

    def is_library_file(self, file: str) -> bool:
        known = self._files.get(file)
        if known is None:
            if self._prefixes is None:
                self._prefixes = library_prefixes()
            known = self._files[file] = file.startswith("<frozen ") or os.path.realpath(file).startswith(self._prefixes)
        return known


LIBRARIES = Libraries()
"""The one the plans ask (``Context.libraries``) and the trace."""
