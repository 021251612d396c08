"""What C calls of the program's classes, reached by the contexts while any is active.

CPython calls some Python code itself, from C, with no call site for the rewriting to
turn into an overdubbed call: a property's getter (setter, deleter) when an attribute is
read (set, deleted), and a class's special methods -- ``__hash__`` and ``__eq__`` from a
``dict`` or a ``set``, ``__lt__`` from ``sort``, ``__len__`` from ``len``, ``__next__``
from a ``for`` loop, ``__bool__`` from ``if``, ``__repr__`` from an f-string.  Left alone,
such code runs plain under a context, unseen, with every call it makes.

So when a plan makes a twin of a function of a module (the context has reached that
module), the classes the module defines get stand-ins for those attributes while any
context is active:

- a property becomes a copy whose accessors are ``Special``s: called, a ``Special``
  makes the call of its function as a call site does (``functools.cached_property``
  likewise);
- a special method becomes a ``Special``, which is also a method descriptor: CPython's
  slots find it on the class and call it with the instance first.  Read as an attribute
  (``obj.__eq__``, ``super().__eq__``, ``getattr``) it binds the method itself, as the
  class would, so a call site that calls it explicitly overdubs that call as before;
  read on the class, it is the method.

The context sees the accessor or method run as a call, overdubbed, with the program's
frame below it (``Special`` is C; on the pure-Python path it is Python, a frame of ours,
as every call from C is there).  With no context active, a ``Special`` calls its
function directly.

They are the program's objects, changed, so they change only while contexts are active:
``lazy_mode`` gives the classes their own attributes back when the process goes idle (by the
same rule as the switched functions; on the pure-Python path, at every idle) and the
stand-ins again at the next activation.  While they are in, ``vars(cls)[name]`` is the
stand-in.

What is reached: properties of the exact ``property`` type and ``cached_property``s, and
the special methods CPython's slots call unbound (:data:`SLOT_METHODS`), that are Python
functions in the dict of a class that a module's namespace holds (or of a class nested in
one).  Not reached: a class made inside a function; a subclass of ``property``; the
special methods CPython binds before calling (``__enter__``/``__exit__``, ``__format__``,
``__length_hint__``: they run plain); ``__getattr__``, which cassette_hook's own attribute
probes would run (a hook would see them as the program's calls); ``__init__``, ``__new__`` and
``__call__``, which call sites reach already; ``__del__`` and ``__getattribute__``, which
would run the hooks from garbage collection and at every attribute read; the classes of
cassette_hook, of what it runs on and of the standard library, whose properties
cassette_hook's own code reads while a context is active; subclasses of cassette_hook's
classes (a context) and metaclasses, whose special methods it calls.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import functools
import sys
import weakref
from types import FunctionType, MethodType, ModuleType

from .._locks import rlock
from . import hotpath
from .. import _native
from .._own import RUNS_ON, is_own_module, strip_traceback

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Any, Callable

_BINARY = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift", "rshift", "and",
           "xor", "or")
SLOT_METHODS = frozenset({f"__{name}__" for name in (
    *_BINARY, *(f"r{name}" for name in _BINARY), *(f"i{name}" for name in _BINARY if name != "divmod"),
    "neg", "pos", "abs", "invert", "bool", "int", "float", "index",
    "lt", "le", "eq", "ne", "gt", "ge", "hash", "repr", "str",
    "len", "getitem", "setitem", "delitem", "contains", "iter", "next",
    "await", "aiter", "anext", "get", "set", "delete", "setattr", "delattr")})
"""Special methods that CPython's type slots call unbound, with the instance first (the
others it binds first, which a stand-in cannot tell from an attribute read)."""

_lock = rlock()
# Tables by id with weak references, as ``_weakid.WeakIdCache`` keeps, written out: that
# module imports ``typing``, and this one is loaded at every start (through ``lazy_mode``).
_scanned: dict[int, tuple[weakref.ref[ModuleType], int]] = {}  # id(module) -> (it, len(vars) when scanned)
_classes_reached: dict[int, weakref.ref[type]] = {}  # by id: a metaclass's __hash__ is the program's
# (class, attribute name, the class's own attribute, its stand-in)
_stand_ins: list[tuple[weakref.ref[type], str, object, object]] = []
_in = True  # are the stand-ins in the classes (else the originals are)?
_when_tracking: list[Callable[[], None]] = []


def when_tracking(callback: Callable[[], None]) -> None:
    """Call ``callback()`` when the first stand-in is put in (``lazy_mode`` then watches for
    the process going idle)."""
    _when_tracking.append(callback)


def reach(func: FunctionType, module: str) -> None:
    """A plan has made a twin of ``func``, a function of ``module``: give the classes that
    the module defines their stand-ins.  A module's namespace is looked at again only when
    it has grown (a class defined since); one that is not a module's (``exec``'s), every
    time."""
    namespace = func.__globals__
    owner = sys.modules.get(module)
    if owner is not None and vars(owner) is not namespace:
        owner = None
    if owner is not None and _scanned.get(id(owner), (None, -1))[1] == len(namespace) or not _reachable(module):
        return
    with _lock:  # (two threads may make twins of the module's functions at once; the loops in a function: _locks)
        any_found = _reach(namespace, module, owner)
    if any_found:
        for callback in _when_tracking:
            callback()


def _reach(namespace: dict[str, Any], module: str, owner: ModuleType | None) -> bool:
    """``reach``'s work, under its lock: did it find methods to stand in for?"""
    if owner is not None:
        _scanned[id(owner)] = (weakref.ref(owner, functools.partial(_forget, _scanned, id(owner))), len(namespace))
    classes = [cls for cls in _classes(namespace, module) if id(cls) not in _classes_reached]
    found = [(cls, name, plain, stand_in) for cls in classes
             for name, plain in list(vars(cls).items()) if _settable(cls, name)
             for stand_in in [_stand_in(name, plain)] if stand_in is not None]
    for cls in classes:
        _classes_reached[id(cls)] = weakref.ref(cls, functools.partial(_forget, _classes_reached, id(cls)))
    for cls, name, plain, stand_in in found:
        if not _in or _put(cls, name, stand_in):
            _stand_ins.append((weakref.ref(cls), name, plain, stand_in))
    return bool(found)


def _put(cls: type, name: str, value: object) -> bool:
    """Set ``cls``'s own attribute, past a metaclass's ``__setattr__``; False if the class
    refuses, which then keeps its own: a class made by C code with a Python function in
    its dict may be immutable, and the program's call that made the twin must not fail."""
    try:
        type.__setattr__(cls, name, value)
    except (TypeError, AttributeError):
        return False
    return True


def _forget(table: dict[int, Any], key: int, _ref: object) -> None:
    table.pop(key, None)


def plain(attribute: Any) -> Any:
    """A class's own attribute for what its dict holds: the special method a ``Special``
    stands in for (the operators' protocol looks special methods up itself)."""
    return attribute.__func__ if type(attribute) is Special else attribute


def tracked() -> bool:
    """Are there stand-ins to put in or take out?"""
    return bool(_stand_ins)


def busy() -> None:
    """A context is active again: put the stand-ins in, if they were taken out."""
    if not _in:
        _give(stand_ins=True)


def idle(give_back: bool) -> None:
    """No context is active any more: give the classes their own attributes back if
    ``give_back`` (``lazy_mode``'s rule for the switched functions), or if a stand-in's
    accessor would be a frame of ours under the getter (the pure-Python hot path's
    ``call`` is a Python function) while the program runs plain."""
    if _in and (give_back or type(hotpath.call) is FunctionType):
        _give(stand_ins=False)


def _give(stand_ins: bool) -> None:
    """Put the stand-ins in (``True``) or the classes' own attributes back.  A class whose
    attribute the program has set meanwhile keeps it, and is no longer tracked."""
    global _in
    with _lock:
        _in = stand_ins
        kept = []
        for tracked in _stand_ins:
            ref, name, plain, stand_in = tracked
            cls = ref()
            if cls is None:
                continue
            old, new = (plain, stand_in) if stand_ins else (stand_in, plain)
            now = vars(cls).get(name)
            if now is not new and (now is not old or not _put(cls, name, new)):
                continue
            kept.append(tracked)
        _stand_ins[:] = kept


def _reachable(module: str) -> bool:
    """May the classes of ``module`` get stand-ins?  Not cassette_hook's, nor those of what
    it runs on or of the standard library: cassette_hook's own code reads their properties
    while a context is active (making a twin, say), and would run into the context."""
    top = module.partition(".")[0]
    return not (is_own_module(module) or top in RUNS_ON or top in sys.stdlib_module_names)


def _classes(namespace: dict[str, Any], module: str) -> list[type]:
    """The classes ``module`` defines that its namespace holds, with those nested in them;
    not those that derive from cassette_hook's (a context, whose dunders it calls) nor
    metaclasses (cassette_hook hashes classes as it dispatches: a metaclass's ``__hash__``
    made a call site would run the hooks from inside the hooks' dispatch)."""
    found: list[type] = []
    seen: set[int] = set()

    def visit(cls: type) -> None:
        if id(cls) in seen:
            return
        seen.add(id(cls))
        if not issubclass(cls, type) and not any(is_own_module(base.__module__) for base in cls.__mro__[1:]):
            found.append(cls)
        for value in list(vars(cls).values()):
            if isinstance(value, type) and value.__qualname__.startswith(cls.__qualname__ + "."):
                visit(value)

    for value in list(namespace.values()):
        if isinstance(value, type) and value.__module__ == module:
            visit(value)
    return found


def _settable(cls: type, name: str) -> bool:
    """Does setting ``name`` on ``cls`` set its entry in the class's dict?  Not where the
    metaclass has a data descriptor of that name: a property named ``__class__`` (as
    ``unittest.mock`` defines) would change the class's own class."""
    metaclass: type = type(cls)
    for klass in metaclass.__mro__:
        if name in vars(klass):
            return not hasattr(type(vars(klass)[name]), "__set__")
    return True


def _stand_in(name: str, attribute: object) -> object | None:
    """The stand-in for a class attribute whose Python code C would call, or None."""
    if type(attribute) is FunctionType:
        return _call_site(attribute) if name in SLOT_METHODS else None
    if type(attribute) is property:
        accessors = (attribute.fget, attribute.fset, attribute.fdel)
        if not any(type(accessor) is FunctionType for accessor in accessors):
            return None
        stand_in = property(*map(_call_site, accessors))
        stand_in.__doc__ = attribute.__doc__  # (not the stand-in's, which ``property`` would take)
        if hasattr(attribute, "__name__"):  # (3.13+: from the getter, which a stand-in has no name for)
            stand_in.__name__ = attribute.__name__  # type: ignore[attr-defined,unused-ignore]  # (3.13+ only)
        return stand_in
    if type(attribute) is functools.cached_property and type(attribute.func) is FunctionType:
        cached: functools.cached_property[Any] = functools.cached_property.__new__(functools.cached_property)
        vars(cached).update(vars(attribute))
        cached.func = _call_site(attribute.func)
        return cached
    return None


def _call_site(function: Any) -> Any:
    """A ``Special`` for a Python function (a property's accessor is called, a special
    method found as a method descriptor: it serves both), else ``function`` itself."""
    global Special
    if type(function) is not FunctionType:
        return function
    if Special is None:
        Special = _native.runtime.accelerated("Special", _PureSpecial)
    return Special(function)


class _PureSpecial:
    """``Special`` on the pure-Python path (``_speedups/implicit.c`` has the other).  A Python class
    cannot be a method descriptor, so CPython's slots bind it before calling, as an
    attribute read does; the two are told apart by the instruction the reading frame is
    at: an attribute load binds the method itself, anything else (an operator, a
    builtin's call, a loop) gets the stand-in bound, which calls it as a call site."""

    __slots__ = ("__func__",)

    def __init__(self, function: FunctionType) -> None:
        self.__func__ = function

    def __get__(self, obj: object, cls: type | None = None) -> Any:
        if obj is None:
            return self.__func__
        reader = sys._getframe().f_back  # (None: called from C with no Python frame under it)
        if reader is not None and reader.f_code.co_code[reader.f_lasti] in _attribute_loads():
            return MethodType(self.__func__, obj)
        return MethodType(self, obj)

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        try:
            return hotpath.call(self.__func__, *args, **kwargs)
        except BaseException as exc:  # (the program's traceback: without this frame and ours below it)
            strip_traceback(exc)
            raise


@functools.cache
def _attribute_loads() -> frozenset[int]:
    import opcode  # (the pure-Python path's only)

    return frozenset(opcode.opmap[name] for name in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR")
                     if name in opcode.opmap)


Special: Any = None
"""The runtime's ``Special`` (``_PureSpecial`` in Python): chosen as the first stand-in is made (loading
the C accelerators at start-up would cost a process that never activates a context)."""
