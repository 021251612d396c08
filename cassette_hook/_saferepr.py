"""Values shown without running any code of the program's: for the trace and for errors.

A ``repr`` runs the program's code: a ``__repr__`` may read a generator dry, take a lock
that is never released, raise, or return forty megabytes of text.  What cassette_hook
writes about a program's values -- the trace's arguments and results, the context named
in an error message -- must not change what the program does (docs/contexts.md, "trace"),
so :class:`SafeRepr` shows

* builtin values whose ``repr`` is C code that calls nothing of the program's (numbers,
  strings, bytes, ``None``, ranges, functions, builtins, generators ...) by their
  ``repr``;
* builtin containers (``list``, ``tuple``, ``dict``, ``set``, ``frozenset``, ``deque``,
  ``array``) as ``reprlib`` does, each item shown the same way, so containers holding
  themselves and huge containers stay short -- also subclasses of them that keep their
  builtin ``repr``, read through the builtin type's own methods (a subclass's ``__iter__``
  or ``__len__`` is never called);
* a class as ``<class 'mod.Name'>``, a bound method as ``<bound method Name.f of ...>``, a
  module as ``<module 'name'>``, an exception that keeps ``BaseException``'s ``repr`` as
  ``Name(args...)``, a named tuple as ``Name(field=value, ...)``;
* anything else by its type's name and its id, ``<Name object at 0x7f...>``
  (``object.__repr__``'s form, short: the trace names the callees in full).

Everything is read through the builtin types' own descriptors (``type.__qualname__``,
``BaseException.args``, a module's ``__dict__``), never by an attribute lookup that a
class, a metaclass or a lazy module could intercept.  ``user=True`` calls the values'
own ``repr`` instead (what the trace's ``reprs=user`` asks for); its failures become the
``<Name object at 0x7f...>`` form.  Every result is at most ``width`` characters.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import array
import collections
import itertools
import reprlib
import types
from typing import Any, Callable

_type_qualname: Callable[[type], Any] = type.__dict__["__qualname__"].__get__
_type_name: Callable[[type], str] = type.__dict__["__name__"].__get__
_type_module: Callable[[type], Any] = type.__dict__["__module__"].__get__
_type_mro: Callable[[type], tuple[type, ...]] = type.__dict__["__mro__"].__get__
_type_dict: Callable[[type], Any] = type.__dict__["__dict__"].__get__
module_dict: Callable[[types.ModuleType], dict[str, Any]] = vars(types.ModuleType)["__dict__"].__get__
_exception_args: Callable[[BaseException], tuple[Any, ...]] = BaseException.__dict__["args"].__get__


def class_attribute(kind: type, name: str) -> Any:
    """What ``name`` is on ``kind`` as the type lookup finds it (in its MRO's dicts), or
    ``None``: neither ``kind``'s metaclass nor a descriptor is asked."""
    for klass in _type_mro(kind):
        namespace = _type_dict(klass)
        if name in namespace:
            return namespace[name]
    return None


def module_of(kind: type) -> str | None:
    """``kind.__module__`` as ``type`` has it (a string), or ``None``."""
    try:
        module = _type_module(kind)
    except Exception:  # (a class whose __module__ was deleted)
        return None
    return module if type(module) is str else None


def qualname_of(kind: type) -> str:
    """``kind.__qualname__`` as ``type`` has it."""
    name = _type_qualname(kind)
    return name if type(name) is str else "?"


def object_repr(value: Any) -> str:
    """``<Name object at 0x7f...>``: ``value``'s type's name and its id."""
    name = _type_name(type(value))
    return f"<{name if type(name) is str else '?'} object at {id(value):#x}>"


def class_repr(cls: type) -> str:
    """What ``type.__repr__`` gives: ``<class 'mod.Name'>``."""
    module = module_of(cls)
    name = qualname_of(cls) if module in (None, "builtins") else f"{module}.{qualname_of(cls)}"
    return f"<class '{name}'>"


class SafeRepr(reprlib.Repr):
    """``reprlib.Repr`` that runs no code of the program's (see the module's docstring).

    It dispatches on exact builtin types only (``reprlib`` goes by the type's *name*, so a
    user class called ``dict`` would be taken for one), keeps dictionaries and sets in
    their own order (``reprlib`` sorts them, calling the elements' ``__lt__``), and turns
    any failure into the ``<Name object at 0x7f...>`` form.  Every result is at most ``width``
    characters.
    """

    def __init__(self, width: int, *, user: bool = False) -> None:
        super().__init__()
        self.width = width
        self.user = user
        self._cut = max(width - 3, 1)  # what is kept of a longer text, before "..."
        self.maxstring = self.maxother = self.maxlong = width
        self.maxlevel = 3

    def __call__(self, value: Any) -> str:
        kind = type(value)
        text = None
        if kind is int or (kind is str and len(value) <= self.width):
            try:  # an int or a str that fits is its repr
                text = repr(value)
            except ValueError:  # (an int too long to print: repr1 names it)
                pass
        if text is None or len(text) > self.width:  # a longer one is shortened by reprlib
            text = self.repr1(value, self.maxlevel)
        return text if len(text) <= self.width else text[: self._cut] + "..."

    def repr1(self, x: Any, level: int) -> str:
        kind = type(x)
        # (builtin types are type's instances: a metaclass's __hash__ or __eq__ is not asked)
        builtin = type(kind) is type
        method = _BY_TYPE.get(kind) if builtin else None
        try:
            if method is not None:
                return method(self, x, level)
            if builtin and kind in _PLAIN:
                return self._cut_text(repr(x))
            if issubclass(kind, type):
                return self._cut_text(class_repr(x))
            if self.user:
                return self._cut_text(repr(x))
            return self._safe(x, kind, level)
        except Exception:
            return object_repr(x)

    def _cut_text(self, text: str) -> str:
        return text if len(text) <= self.maxother else text[: max(self.maxother - 3, 1)] + "..."

    def _safe(self, x: Any, kind: type, level: int) -> str:
        """A value of no builtin type: shown by what the builtin types know of it."""
        if kind is types.MethodType:
            func = x.__func__
            name = func.__qualname__ if type(func) is types.FunctionType else qualname_of(type(func))
            return f"<bound method {name} of {self.repr1(x.__self__, level - 1)}>"
        if issubclass(kind, types.ModuleType):
            module_name = module_dict(x).get("__name__")
            return f"<module {module_name!r}>" if type(module_name) is str else object_repr(x)
        found = class_attribute(kind, "__repr__")
        if found is _EXCEPTION_REPR:
            return self._exception(x, kind, level)
        if issubclass(kind, tuple):
            fields = class_attribute(kind, "_fields")
            if type(fields) is tuple and all(type(f) is str for f in fields) and len(fields) == tuple.__len__(x):
                return self._named_tuple(x, kind, fields, level)
        base = _KEPT_REPRS.get(found) if type(found) is types.WrapperDescriptorType else None
        if base is not None:
            return self._subclass(x, kind, base, level)
        return object_repr(x)

    def _exception(self, x: BaseException, kind: type, level: int) -> str:
        """``BaseException.__repr__``: ``Name(arg)`` for one argument, ``Name(a, b)`` else."""
        args = _exception_args(x)
        name = _type_name(kind)
        if len(args) == 1:
            return f"{name}({self.repr1(args[0], level - 1)})"
        return name + self.repr_tuple(args, level)

    def _named_tuple(self, x: tuple[Any, ...], kind: type, fields: tuple[str, ...], level: int) -> str:
        if level <= 0:
            return f"{_type_name(kind)}(...)"
        shown = [f"{field}={self.repr1(tuple.__getitem__(x, i), level - 1)}"
                 for i, field in enumerate(fields[: self.maxtuple])]
        return f"{_type_name(kind)}({', '.join(shown + ['...'] * (len(fields) > self.maxtuple))})"

    def _subclass(self, x: Any, kind: type, base: type, level: int) -> str:
        """A subclass of a builtin type that keeps its ``repr``, read as the builtin."""
        if base is list or base is tuple:  # (their repr does not name the subclass)
            prefix = base.__getitem__(x, slice(0, self.maxlist + 1))  # an exact list or tuple
            return _BY_TYPE[base](self, prefix, level)
        if base is dict:
            return self.repr_dict(x, level)
        if base is set or base is frozenset:  # Name({1, 2}), as set.__repr__ shows a subclass
            return f"{_type_name(kind)}({self._unsorted(x, base, level, '{', '}', '')})"
        if base is str or base is bytes:
            return self._cut_text(repr(base.__getitem__(x, slice(0, self.maxstring + 1))))
        if base is int:
            return reprlib.Repr.repr_int(self, int.__index__(x), level)
        return repr(float.__float__(x))  # (base is float)

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        length = dict.__len__(x)
        if not length:
            return "{}"
        if level <= 0:
            return "{...}"
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
                 for k, v in itertools.islice(dict.items(x), self.maxdict)]
        return "{" + ", ".join(items + ["..."] * (length > self.maxdict)) + "}"

    def repr_set(self, x: set[Any], level: int) -> str:
        return self._unsorted(x, set, level, "{", "}", "set()")

    def repr_frozenset(self, x: frozenset[Any], level: int) -> str:
        text = self._unsorted(x, frozenset, level, "{", "}", "")
        return f"frozenset({text})"

    def _unsorted(self, x: Any, base: Any, level: int, left: str, right: str, empty: str) -> str:
        length = base.__len__(x)
        if not length:
            return empty
        if level <= 0:
            return left + "..." + right
        items = [self.repr1(v, level - 1) for v in itertools.islice(base.__iter__(x), self.maxset)]
        return left + ", ".join(items + ["..."] * (length > self.maxset)) + right

    def repr_bytes(self, x: bytes | bytearray, level: int) -> str:
        return self._cut_text(repr(x[: self.maxstring + 1]))  # (not the repr of a gigabyte)


_BY_TYPE: dict[type, Callable[[Any, Any, int], str]] = {
    tuple: reprlib.Repr.repr_tuple, list: reprlib.Repr.repr_list, str: reprlib.Repr.repr_str,
    int: reprlib.Repr.repr_int, array.array: reprlib.Repr.repr_array,
    collections.deque: reprlib.Repr.repr_deque, dict: SafeRepr.repr_dict,
    set: SafeRepr.repr_set, frozenset: SafeRepr.repr_frozenset,
    bytes: SafeRepr.repr_bytes, bytearray: SafeRepr.repr_bytes,
}
# exact types whose repr is C code that reads nothing a program can intercept
_PLAIN = frozenset({
    float, complex, bool, type(None), type(Ellipsis), type(NotImplemented), range,
    types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
    types.ClassMethodDescriptorType, types.MethodWrapperType, types.GetSetDescriptorType,
    types.MemberDescriptorType, types.CodeType, types.GeneratorType, types.CoroutineType,
    types.AsyncGeneratorType, types.CellType,
})
_EXCEPTION_REPR = BaseException.__dict__["__repr__"]
# a subclass whose __repr__ is one of these is shown as that builtin type shows it
_KEPT_REPRS = {vars(base)["__repr__"]: base for base in (list, tuple, dict, set, frozenset, str, bytes, int, float)}


def short_repr(value: Any, width: int = 80) -> str:
    """``value`` in at most ``width`` characters, running none of the program's code: for
    error messages, which must neither fail nor grow with the value."""
    return SafeRepr(width)(value)


def context_repr(ctx: Any, width: int = 80) -> str:
    """A context as an error message names it: ``Count(metadata=[1, 2, 3, ...])``, its
    class and its metadata, short, running no code of the program's (neither the
    context's ``__repr__`` nor the metadata's: a nesting error must stay that error, and
    stay short, whatever the metadata is)."""
    try:
        metadata = object.__getattribute__(ctx, "__dict__").get("metadata")
    except Exception:  # (a context made without Context.__init__)
        metadata = None
    return f"{qualname_of(type(ctx))}(metadata={SafeRepr(width)(metadata)})"


def type_name(value: Any) -> str:
    """The name of ``value``'s type as CPython's own messages give it (its ``tp_name``):
    ``'int' object is not callable``, ``'collections.deque' object ...``; a class of the
    program's by its ``__name__``."""
    kind = type(value)
    flags = _type_flags(kind)
    name = _type_name(kind)
    module = None if flags & _HEAPTYPE and not flags & _IMMUTABLETYPE else module_of(kind)
    return name if module in (None, "builtins") else f"{module}.{name}"


_type_flags: Callable[[type], int] = type.__dict__["__flags__"].__get__
_HEAPTYPE, _IMMUTABLETYPE = 1 << 9, 1 << 8  # a class statement's class is a mutable heap type
