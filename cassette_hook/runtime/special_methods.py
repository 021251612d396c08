"""Special methods as the interpreter finds and binds them.

``obj(x)`` runs ``__call__`` and ``Cls(x)`` runs ``__init__`` the way CPython's type
slots do: the attribute is looked up along ``type(obj).__mro__`` only -- never on the
instance, never on the metaclass -- and then bound by the descriptor protocol.  So a
``staticmethod`` ``__call__`` gets no ``obj``, a ``classmethod`` gets the class, a
builtin or a ``functools.partial`` (no ``__get__``) is called as it is.  ``getattr(type(obj),
"__call__")`` looks like the same thing but is not: it unwraps a staticmethod into a
plain function (which then seems to take ``obj``) and falls back to the metaclass.

Recursing into such a call must present and run exactly what the interpreter would.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import functools
from types import FunctionType, MethodDescriptorType, MethodType, WrapperDescriptorType
from typing import Any

MISSING: Any = object()

# Descriptors whose binding is known C code with no side effects (``object.__init__`` is a
# wrapper descriptor, ``dict.__init__`` too); any other ``__get__`` is left to the
# interpreter: it may warn, count, or depend on the calling frame.
_BINDERS = (FunctionType, staticmethod, classmethod, WrapperDescriptorType, MethodDescriptorType)
# What recursing can run a body for: a function, a method, a partial's one call.
_RECURSIBLE = (FunctionType, MethodType, functools.partial)


def lookup(kind: type, name: str) -> Any:
    """``kind``'s attribute ``name`` as the interpreter finds a special method, or MISSING."""
    for klass in kind.__mro__:
        found = klass.__dict__.get(name, MISSING)
        if found is not MISSING:
            return found
    return MISSING


def bound(raw: Any, obj: object, kind: type) -> Any:
    """What the interpreter calls for the special method ``raw`` found on ``kind`` for
    ``obj``, when that can be worked out here without running user code; else None."""
    if raw is MISSING:
        return None
    if type(raw) in _BINDERS:
        return raw.__get__(obj, kind)
    return raw if not hasattr(type(raw), "__get__") else None


def recursible(run: Any) -> bool:
    """Is ``run`` something recursing can find a Python body in (not, say, a callable
    instance whose own ``__call__`` would lead back here)?"""
    return type(run) in _RECURSIBLE
