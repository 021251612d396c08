"""Light code at import; switched code from the first activation of a context.

While no context is active anywhere, the import hook hands out *light* code
(``rewrite._dual.light``): the module as compiled, except that the functions its
functions define are switched.  Idle, that code is the program's own, so it runs at its
speed, and importing it costs a fraction of switching it (a few times compiling, not
15-25 times); most processes that import instrumented code never activate a context.

When a context is next activated (``_switch.entry_made``, before the context's body
runs), :func:`switch_waiting` gives every function made from a light module's code its
switched code: made then, or read from the cache (``_pyc.FUNCTIONS``).  The functions are
found among all live objects, since any of them may be called from anywhere under the
context (a decorator's closure, a registry, a bound method).  A running frame keeps the
code it started with, as a running frame of switched code keeps the body it chose; a
frame's code cannot be exchanged, which is why this happens at activation and not when a
function is first entered.  From then on the module is as if imported switched.
"""

from __future__ import annotations

import gc
import os
import threading
import warnings
from types import CodeType, FunctionType

from . import _debug, _pyc, _switch, rewrite
from ._context import recursion_budget
from .rewrite import _names

_switching = threading.Lock()  # a second activating thread waits until the functions are switched


class LightModule:
    """A module imported light, waiting for a context.  Where its source is known
    (``source_path``, and its ``os.stat`` at import), its switched functions are cached
    (``_pyc.FUNCTIONS``, keyed on those and the rewriting ``options``); the file's name and
    header are worked out at the activation, not at every import of a module that may
    never be switched."""

    __slots__ = ("name", "code", "source_path", "source", "options")

    def __init__(self, name: str, code: CodeType, source_path: str | None = None,
                 source: os.stat_result | None = None, options: str = "") -> None:
        self.name, self.code = name, code
        self.source_path, self.source, self.options = source_path, source, options

    def switched_functions(self, light: list[CodeType]) -> list[CodeType]:
        """The switched code of each of ``light`` (this module's :func:`functions`), or the
        light code itself where it cannot be switched."""
        found = "none"
        cache = None if self.source_path is None else _pyc.path_for(self.source_path, _pyc.FUNCTIONS)
        if cache is not None and self.source is not None:
            header = _pyc.key(self.source, self.name, self.options, _pyc.FUNCTIONS)
            cached, found = _pyc.read(cache, header)
            if isinstance(cached, tuple) and _same_functions(cached, light):
                if _debug.imports:
                    _debug.say("import", f"{self.name}: functions switched; cache hit: {cache}")
                return list(cached)
        from .rewrite import _dual  # (``bytecode`` with it)

        _debug.progress.begin(self.name)
        try:
            with recursion_budget.headroom(rewrite.HEADROOM):
                made = _dual.switched_functions(light, self.name)
        finally:
            _debug.progress.end()
        failed = [result for result in made if isinstance(result, Exception)]
        switched = [code if isinstance(result, Exception) else result for code, result in zip(light, made)]
        written = "not cached"
        if failed:
            warnings.warn(f"cassette_hook: cannot instrument {len(failed)} function(s) of module {self.name!r}: "
                          f"{failed[0]}; they run unrewritten", RuntimeWarning, stacklevel=2)
        elif cache is not None and self.source is not None:
            written = _pyc.write(cache, header, tuple(switched), self.source.st_mode)
        if _debug.imports:
            _debug.say("import", f"{self.name}: functions switched ({len(light)}); cache {found}, {written}")
        return switched


def functions(code: CodeType) -> list[CodeType]:
    """The code of the functions a light module makes while it is imported -- those its
    body and its class bodies define -- in a fixed order (depth first)."""
    found: list[CodeType] = []

    def walk(code: CodeType) -> None:
        for const in code.co_consts:
            if isinstance(const, CodeType):
                if _names.is_part(const):
                    walk(const)
                else:
                    found.append(const)

    walk(code)
    return found


def defines_functions_in_functions(code: CodeType) -> bool:
    """Does a function of this module's code define functions (then its light code is not
    the compiled code: ``rewrite._dual.light``)?  A walk over constants, no decoding."""
    def defines(code: CodeType) -> bool:
        return any(isinstance(const, CodeType) and (not _names.is_part(const) or defines(const))
                   for const in code.co_consts)

    return any(defines(function) for function in functions(code))


def _same_functions(cached: tuple[CodeType, ...], light: list[CodeType]) -> bool:
    """Does the cache file hold one switched code per light function, in order?"""
    return len(cached) == len(light) and all(
        a.co_name == b.co_name and a.co_firstlineno == b.co_firstlineno for a, b in zip(cached, light))


def switch_waiting() -> None:
    """Give every function made from the code of a module imported light its switched
    code (see the module's docstring).  One pass over the live objects for all the
    modules imported since the last activation."""
    with _switching:
        waiting: list[LightModule] = _switch.waiting()
        if waiting:
            _switch_functions(waiting)
            _switch.switched(waiting)


def _switch_functions(waiting: list[LightModule]) -> None:
    _switch.install_builtins()
    replacement: dict[int, CodeType] = {}  # id(light code) -> switched code; ``waiting`` keeps the ids live
    for module in waiting:
        light = functions(module.code)
        if not light:
            continue  # (constants and imports only: nothing to switch, nor to cache)
        for code, switched in zip(light, module.switched_functions(light)):
            if switched is not code:
                replacement[id(code)] = switched
    if not replacement:
        return
    for obj in gc.get_objects():
        if type(obj) is FunctionType:
            new = replacement.get(id(obj.__code__))
            if new is not None:
                obj.__code__ = new
