"""The builtins cassette_hook's own code calls: those of the moment it was imported.

A function looks its builtins up in a dict fixed when the function is made: its globals'
``__builtins__`` then (``func.__builtins__``).  A module's is the interpreter's own dict,
where a program's ``builtins.tuple = my_tuple`` lands; the engine, calling ``tuple`` there,
would call the program's replacement too (more calls than the plain program makes, and,
hooked under a context whose hooks see every call, the hook's own work calling it again,
until ``RecursionError``).  Instrumentation must not change what a program does, so every
module of the package binds ``__builtins__`` to :data:`BUILTINS`, a copy taken once when
the package is imported, before it defines a function::

    from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

One line in each module, not a loader of our own: under pytest, whose plugin entry point
marks the package for assertion rewriting, pytest's import hook loads the package's
modules, whatever loader the package would give them (``tests/test_replaced_builtins.py``
checks that every module has the line).  ``bytecode``, which the engine runs on to
rewrite, gets them through its loaders instead (:func:`give_to_dependencies`): it is
imported when something is first rewritten, perhaps long after the program replaced a
builtin, and its modules are loaded through its own directory, which no other finder
claims.

What the engine runs *for* the program keeps the program's builtins: twins and switched
code are made with the program's globals (or from a frame with the function's builtins:
:func:`function_with_builtins`), and code the engine ``exec``s for the program gets the
interpreter's dict (:func:`program_namespace`), as from the program's own frame.
A builtin replaced before cassette_hook is imported (monkey-patching at start-up, as
gevent's) is in the copy: the engine calls it as any library imported after it would.
"""

from __future__ import annotations

import builtins
import os
import sys
from importlib.machinery import (BYTECODE_SUFFIXES, EXTENSION_SUFFIXES, SOURCE_SUFFIXES, ExtensionFileLoader,
                                 FileFinder, PathFinder, SourceFileLoader, SourcelessFileLoader)
from types import FunctionType, ModuleType

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Any

BUILTINS: dict[str, Any] = dict(vars(builtins))
"""The builtins when cassette_hook was imported: what the package's own code calls."""

__builtins__ = BUILTINS  # type: ignore[assignment]  # (this module's functions, below, too)


def program_namespace(namespace: dict[str, Any]) -> dict[str, Any]:
    """``namespace``, given the interpreter's builtins if it has none: what ``exec`` or
    ``eval`` called from one of the program's frames would give it (called from ours, they
    would give it :data:`BUILTINS`, and the code run there would miss what the program
    puts among the builtins, ``gettext.install``'s ``_`` as a replaced ``tuple``)."""
    if "__builtins__" not in namespace:
        namespace["__builtins__"] = vars(builtins)
    return namespace


def _make(make: Any, args: tuple[Any, ...]) -> Any:
    return make(*args)


def function_with_builtins(builtins_of: dict[str, Any], *args: Any) -> FunctionType:
    """``FunctionType(*args)`` (code, globals, ...) whose frames read ``builtins_of`` where
    its globals have no ``__builtins__``: ``FunctionType`` gives it the builtins of the
    frame that calls it then, which, from ours, are :data:`BUILTINS`.  For what the engine
    makes in the image of a program's function (a twin) made with bare globals
    (``FunctionType(code, {})``): made from a frame whose builtins are that function's."""
    maker = FunctionType(_make.__code__, {"__builtins__": builtins_of})
    made: FunctionType = maker(FunctionType, args)
    return made


class _SourceLoader(SourceFileLoader):
    """``SourceFileLoader``, its module's functions made with :data:`BUILTINS`."""

    def exec_module(self, module: ModuleType) -> None:
        vars(module)["__builtins__"] = BUILTINS  # (exec keeps the builtins a namespace has)
        super().exec_module(module)


class _SourcelessLoader(SourcelessFileLoader):
    """``SourcelessFileLoader``, its module's functions made with :data:`BUILTINS`."""

    def exec_module(self, module: ModuleType) -> None:
        vars(module)["__builtins__"] = BUILTINS
        super().exec_module(module)


DEPENDENCIES = ("bytecode",)
"""The packages the engine calls while a context is active, on the program's behalf
(``_own.RUNS_ON`` less those it calls only to start: entry points, at start-up)."""


def give_to_dependencies() -> None:
    """Make the modules of :data:`DEPENDENCIES` not imported yet call :data:`BUILTINS`,
    by loading the modules in the package's directory with loaders that give them: the
    finder of that directory is looked up in ``sys.path_importer_cache`` by its path, the
    package's ``__path__``, which is the package's alone (its ``__init__``, found in the
    directory all of ``sys.path``'s packages share, keeps the program's builtins: it only
    imports the others).  A dependency imported before cassette_hook, or not from a
    directory (a zip), is the program's: its functions look up the program's builtins.
    Done once, at the package's import (below): finding a package is a few ``stat`` calls."""
    for name in DEPENDENCIES:
        if name in sys.modules:
            continue
        spec = PathFinder.find_spec(name)
        for directory in (spec.submodule_search_locations or ()) if spec is not None else ():
            if os.path.isdir(directory):
                sys.path_importer_cache[directory] = FileFinder(
                    directory, (ExtensionFileLoader, EXTENSION_SUFFIXES), (_SourceLoader, SOURCE_SUFFIXES),
                    (_SourcelessLoader, BYTECODE_SUFFIXES))


give_to_dependencies()
