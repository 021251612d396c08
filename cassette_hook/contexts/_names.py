"""What reports call a callee: ``module.qualname``, and which module it belongs to.

Hooks see every kind of callable -- Python functions, builtins, methods of builtin types
(presented unbound, as ``list.append``), classes, partial objects, callable instances --
and a report needs one stable, readable name for each.  The name is what profiles
aggregate by, so it must not depend on the receiver of a method or on object identity.

A Python function's name is read from the function itself each time: two attribute
reads, cheaper than any cache, and right for the wrappers one decorator makes
(``functools.wraps``), which share one code object but not their names.  Builtins and
classes, which need a search to name, are cached by themselves: they live as long as the
interpreter or their module.  Anything else is named afresh, so the cache never keeps a
function, a receiver or a short-lived object alive.
"""

from __future__ import annotations

import sys
from types import (BuiltinFunctionType, ClassMethodDescriptorType, FunctionType, MethodDescriptorType, MethodType,
                   MethodWrapperType, ModuleType, WrapperDescriptorType)
from typing import Any, Sequence

from .._patterns import ModulePatterns

_UNBOUND = (MethodDescriptorType, WrapperDescriptorType, ClassMethodDescriptorType)  # list.append, object.__init__
_DESCRIPTORS = (*_UNBOUND, MethodWrapperType)  # and a method-wrapper, bound to its receiver
_cache: dict[Any, tuple[str, str]] = {}


def module_and_qualname(f: Any) -> tuple[str, str]:
    """``(module, qualname)`` of a callee, for instance ``("builtins", "list.append")``."""
    if type(f) is FunctionType:
        return _function_names(f)
    key = _cache_key(f)
    try:
        found = None if key is None else _cache.get(key)
    except TypeError:  # a class whose metaclass makes it unhashable
        key = found = None
    if found is None:
        try:
            found = _describe(f)
        except Exception:  # a callable with odd attributes: name it by its type
            found = (_module_of(type(f)), f"{type(f).__qualname__}.__call__")
        if key is not None:
            _cache[key] = found
    return found


def _cache_key(f: Any) -> Any:
    """What a callee's name is cached under, or ``None``: not worth keeping alive."""
    kind = type(f)
    if kind in _UNBOUND or isinstance(f, type):
        return f
    if isinstance(f, BuiltinFunctionType) and (f.__self__ is None or isinstance(f.__self__, (ModuleType, type))):
        return f  # bound to a module or a class, not to an instance
    return None


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
    return _text(f.__module__) or f.__globals__.get("__name__") or "?", f.__qualname__


def _describe(f: Any) -> tuple[str, str]:
    kind = type(f)
    if kind is FunctionType:
        return _function_names(f)
    if kind is MethodType:
        return _describe(f.__func__)
    if isinstance(f, type):
        return _public(_module_of(f), f.__qualname__, f), f.__qualname__
    if isinstance(f, BuiltinFunctionType):  # with its subclass builtin_method (a C method taking its class)
        owner = f.__self__
        if owner is None or isinstance(owner, ModuleType):  # len, math.sqrt, operator.add
            module = _text(f.__module__) or getattr(owner, "__name__", None) or "builtins"
            return _public(module, f.__name__, f), f.__name__
        cls = owner if isinstance(owner, type) else type(owner)  # dict.fromkeys, or a bound method
        return _public(_module_of(cls), cls.__qualname__, cls), f"{cls.__qualname__}.{f.__name__}"
    if kind in _DESCRIPTORS:  # list.append, object.__init__, super().__init__ ...
        cls = getattr(f, "__objclass__", None) or type(f.__self__)
        return _public(_module_of(cls), cls.__qualname__, cls), f"{cls.__qualname__}.{f.__name__}"
    return _module_of(kind), f"{kind.__qualname__}.__call__"  # a partial object, a callable instance


def _text(value: object) -> str | None:
    return value if type(value) is str else None


def _module_of(cls: type) -> str:
    return _text(getattr(cls, "__module__", None)) or "builtins"


def _public(module: str, name: str, obj: object) -> str:
    """``operator`` rather than ``_operator`` when the public module re-exports the object."""
    if module.startswith("_"):
        public = sys.modules.get(module.lstrip("_"))
        if public is not None and getattr(public, name, None) is obj:
            return public.__name__
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

