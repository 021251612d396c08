"""What reports call a callee: ``module.qualname``, and which module it belongs to.

Hooks see every kind of callable -- Python functions, builtins, methods of builtin types
(presented unbound, as ``list.append``), classes, partial objects, callable instances --
and a report needs one stable, readable name for each.  The name is what profiles
aggregate by, so it must not depend on the receiver of a method or on object identity.

A Python function's name is read from the function itself each time: two attribute
reads, cheaper than any cache, and right for the wrappers one decorator makes
(``functools.wraps``), which share one code object but not their names.  Builtins and
classes, which need a search to name, are cached by identity, weakly: a report keeps no
class of the program's alive (its instances' ``__del__`` would not run at exit, where
they run plain).  Anything else is named afresh.

Naming runs none of the program's code: a class's names are read through ``type``'s own
descriptors (not through its metaclass), modules through their ``__dict__`` (not
through a lazy module's ``__getattr__``), and types are compared with ``issubclass`` on
``type(x)`` (``isinstance`` may ask an object's ``__class__``).
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import sys
from types import (BuiltinFunctionType, ClassMethodDescriptorType, FunctionType, MethodDescriptorType, MethodType,
                   MethodWrapperType, ModuleType, WrapperDescriptorType)
from typing import Any, Sequence

from .._patterns import ModulePatterns
from .._saferepr import module_dict, module_of, qualname_of
from .._weakid import WeakIdCache

_UNBOUND = (MethodDescriptorType, WrapperDescriptorType, ClassMethodDescriptorType)  # list.append, object.__init__
_DESCRIPTORS = (*_UNBOUND, MethodWrapperType)  # and a method-wrapper, bound to its receiver
# C descriptors, which live as long as their C type (hashed by identity)
_descriptors: dict[Any, tuple[str, str]] = {}
# classes and builtin functions of a module or a class, held weakly
_weakly: WeakIdCache[tuple[str, str]] = WeakIdCache()


def module_and_qualname(f: Any) -> tuple[str, str]:
    """``(module, qualname)`` of a callee, for instance ``("builtins", "list.append")``."""
    kind = type(f)
    if kind is FunctionType:
        return _function_names(f)
    if type(kind) is type and kind in _UNBOUND:  # (not asking a metaclass's __eq__)
        found = _descriptors.get(f)
        if found is None:
            found = _descriptors[f] = _named(f)
        return found
    weakly = issubclass(kind, type) or (issubclass(kind, BuiltinFunctionType) and _lasting(f.__self__))
    found = _weakly.get(f) if weakly else None
    if found is None:
        found = _named(f)
        if weakly:
            _weakly.set(f, found)
    return found


def _named(f: Any) -> tuple[str, str]:
    try:
        return _describe(f)
    except Exception:  # a callable with odd attributes: name it by its type
        return _module_of(type(f)), f"{qualname_of(type(f))}.__call__"


def _lasting(owner: Any) -> bool:
    """Is a builtin bound to ``owner`` worth caching?  Not if bound to an instance: a new
    one is made at each ``obj.method`` read."""
    return owner is None or issubclass(type(owner), (ModuleType, type))


def name_of(f: Any) -> str:
    """``module.qualname``; methods of builtin types as ``list.append`` (no ``builtins.``)."""
    if type(f) is FunctionType:  # the common case, once per call of a profile: inline
        module = f.__module__
        if type(module) is str and module and module != "builtins":
            return f"{module}.{f.__qualname__}"
    module, qualname = module_and_qualname(f)
    if module == "builtins" and "." in qualname:
        return qualname
    return f"{module}.{qualname}"


def location_of(f: Any) -> tuple[str, int] | None:
    """``(file, first line)`` of a callee's Python code, if it has any."""
    func = f.__func__ if type(f) is MethodType else f
    code = getattr(func, "__code__", None) if type(func) is FunctionType else None
    return None if code is None else (code.co_filename, code.co_firstlineno)


def _function_names(f: FunctionType) -> tuple[str, str]:
    return _text(f.__module__) or _text(dict.get(f.__globals__, "__name__")) or "?", f.__qualname__


def _describe(f: Any) -> tuple[str, str]:
    kind = type(f)
    if kind is FunctionType:
        return _function_names(f)
    if kind is MethodType:
        return _describe(f.__func__)
    if issubclass(kind, type):
        return _public(_module_of(f), qualname_of(f), f), qualname_of(f)
    if issubclass(kind, BuiltinFunctionType):  # with its subclass builtin_method (a C method taking its class)
        owner = f.__self__
        if owner is None or issubclass(type(owner), ModuleType):  # len, math.sqrt, operator.add
            module = _text(f.__module__) or (None if owner is None else _text(module_dict(owner).get("__name__")))
            return _public(module or "builtins", f.__name__, f), f.__name__
        cls = owner if issubclass(type(owner), type) else type(owner)  # dict.fromkeys, or a bound method
        return _public(_module_of(cls), qualname_of(cls), cls), f"{qualname_of(cls)}.{f.__name__}"
    if type(kind) is type and kind in _DESCRIPTORS:  # list.append, object.__init__, super().__init__ ...
        cls = getattr(f, "__objclass__", None) or type(f.__self__)
        return _public(_module_of(cls), qualname_of(cls), cls), f"{qualname_of(cls)}.{f.__name__}"
    return _module_of(kind), f"{qualname_of(kind)}.__call__"  # a partial object, a callable instance


def _text(value: object) -> str | None:
    return value if type(value) is str else None


def _module_of(cls: type) -> str:
    return module_of(cls) or "builtins"


def _public(module: str, name: str, obj: object) -> str:
    """``operator`` rather than ``_operator`` when the public module re-exports the object."""
    if module.startswith("_"):
        public: Any = sys.modules.get(module.lstrip("_"))  # (its namespace: a lazy module's __getattr__ would import)
        if issubclass(type(public), ModuleType) and module_dict(public).get(name) is obj:
            return module.lstrip("_")
    return module


class ModuleFilter:
    """Which callees a report shows, by their module: ``include`` patterns (``None``: all)
    and ``exclude`` patterns."""

    def __init__(self, include: Sequence[str] | None = None, exclude: Sequence[str] = ()) -> None:
        self.include = None if include is None else tuple(include)
        self.exclude = tuple(exclude)
        self.everything = self.include is None and not self.exclude
        self._include = None if self.include is None else ModulePatterns(self.include)
        self._exclude = ModulePatterns(self.exclude)

    def shows(self, module: str) -> bool:
        if self._include is not None and not self._include.matches(module):
            return False
        return not self._exclude.matches(module)

