"""Recursing into operators: ``a + b`` whose operands define ``__add__`` in Python.

(``iter(obj)`` counts as one: a ``for`` loop starts with it.)

An operator site is seen as a call of the ``operator`` function (``operator.add(a, b)``),
which is C code; run as a primitive it would call ``Vector.__add__`` from C, out of the
context's reach.  Its "body" is Python's operator protocol, so recursing into it follows
that protocol here -- forward method, reflected method, subclass priority,
``NotImplemented``, the identity fallback of ``==`` -- and calls each Python dunder as a
nested call site.  Only when a Python dunder is involved: everything else stays the C
operator, with its exact behaviour and messages.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import functools
import operator
import weakref
from types import BuiltinFunctionType, CoroutineType, FunctionType, GeneratorType
from typing import Any, Callable

from . import hotpath, standins
from .._own import strip_traceback

Body = Callable[..., Any]

_BINARY = {
    operator.add: ("__add__", "__radd__", "+"), operator.sub: ("__sub__", "__rsub__", "-"),
    operator.mul: ("__mul__", "__rmul__", "*"), operator.matmul: ("__matmul__", "__rmatmul__", "@"),
    operator.truediv: ("__truediv__", "__rtruediv__", "/"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__", "//"),
    operator.mod: ("__mod__", "__rmod__", "%"), operator.pow: ("__pow__", "__rpow__", "** or pow()"),
    operator.lshift: ("__lshift__", "__rlshift__", "<<"), operator.rshift: ("__rshift__", "__rrshift__", ">>"),
    operator.and_: ("__and__", "__rand__", "&"), operator.or_: ("__or__", "__ror__", "|"),
    operator.xor: ("__xor__", "__rxor__", "^"),
}
_INPLACE = {
    operator.iadd: ("__iadd__", operator.add), operator.isub: ("__isub__", operator.sub),
    operator.imul: ("__imul__", operator.mul), operator.imatmul: ("__imatmul__", operator.matmul),
    operator.itruediv: ("__itruediv__", operator.truediv),
    operator.ifloordiv: ("__ifloordiv__", operator.floordiv), operator.imod: ("__imod__", operator.mod),
    operator.ipow: ("__ipow__", operator.pow), operator.ilshift: ("__ilshift__", operator.lshift),
    operator.irshift: ("__irshift__", operator.rshift), operator.iand: ("__iand__", operator.and_),
    operator.ior: ("__ior__", operator.or_), operator.ixor: ("__ixor__", operator.xor),
}
_COMPARE = {
    operator.lt: ("__lt__", "__gt__", "<"), operator.le: ("__le__", "__ge__", "<="),
    operator.gt: ("__gt__", "__lt__", ">"), operator.ge: ("__ge__", "__le__", ">="),
    operator.eq: ("__eq__", "__eq__", "=="), operator.ne: ("__ne__", "__ne__", "!="),
}
# One dunder on the first operand: unary operators, the container protocol, and the
# ``iter(obj)`` a ``for`` loop starts with.
_ON_FIRST: dict[Any, str] = {  # Any: typeshed types the operators as functions, iter otherwise
    operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__",
    operator.getitem: "__getitem__", operator.setitem: "__setitem__", operator.delitem: "__delitem__",
    iter: "__iter__",
}


# The operators whose ``body`` is None whenever every operand's class is one of
# ``C_OPERANDS`` (builtin value classes: every dunder C, nothing to recurse into).  The
# C hot path calls these directly, without asking ``body``.  A builtin function is one too:
# its dunders are C, and a builtin handed it as a callback (``map(issubclass, a, b)``)
# calls it as the plain program does (``primitives._overdubbed`` leaves it alone), so the
# C path calls such a builtin directly too, without asking its preparer
# (docs/performance.md, "A builtin's arguments prepared without copies").
PLAIN_OPERATORS: frozenset[int] = frozenset(map(id, (*_BINARY, *_INPLACE, *_COMPARE,
                                                   operator.neg, operator.pos, operator.invert)))
C_OPERANDS: frozenset[type] = frozenset({int, float, complex, bool, str, bytes, type(None), tuple, list, dict, set,
                                         frozenset, range, slice, BuiltinFunctionType})
# For each callee ``body`` may find Python dunders for (by id): how it runs the dunder it
# finds when one Python function is all it runs, the operator's symbol, and the special
# methods it looks up, as (operand index, name).  The ways: ``"first"``, the first
# operand's dunder called with all the operands (``obj[k]``, ``-obj``); ``"truth"``, its
# truth (``k in obj``); ``"iterator"``, checked to be one (``iter(obj)``); on operands of
# one class, which try no reflected method first, ``"forward"``, a binary operator's
# forward dunder, ``NotImplemented`` from it an error, and ``"compare"``, a comparison's
# forward then reflected dunder; ``""`` for the in-place operators.  ``body`` finds
# nothing when none of the special methods is Python code on its operand's class.  The C
# hot path checks that with CPython's own cached lookup, asks ``body`` only when one may
# be, and runs a single dunder itself.
DUNDERS: dict[int, tuple[str, str, tuple[tuple[int, str], ...]]] = {
    **{id(op): ("forward", symbol, ((0, forward), (1, reflected)))
       for op, (forward, reflected, symbol) in _BINARY.items()},
    **{id(op): ("compare", symbol, ((0, forward), (1, reflected)))
       for op, (forward, reflected, symbol) in _COMPARE.items()},
    **{id(op): ("", "", ((0, inplace), (0, _BINARY[binary][0]), (1, _BINARY[binary][1])))
       for op, (inplace, binary) in _INPLACE.items()},
    **{id(op): ("iterator" if op is iter else "first", "", ((0, name),)) for op, name in _ON_FIRST.items()},
    id(operator.contains): ("truth", "", ((0, "__contains__"),)),
}


def _python(method: object) -> bool:
    return method is not None and method is not _C


_C: Any = object()  # a special method implemented in C: leave the whole protocol to C


def _special(obj: Any, name: str) -> Any:
    """``obj``'s special method ``name`` as CPython finds it: looked up on the type and
    bound to ``obj`` by its descriptor.  ``None`` when the type does not define it (or
    only ``object`` does), ``_C`` when C code implements it."""
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            found = standins.plain(klass.__dict__[name])
            if type(found) is FunctionType:  # a call site of its own (``call`` is C: no frame of ours)
                return functools.partial(hotpath.call, found, obj)
            if type(found) in (staticmethod, classmethod) and type(found.__func__) is FunctionType:
                return functools.partial(hotpath.call, found.__get__(obj, type(obj)))
            return None if klass is object or found is None else _C
    return None


def body(op: Any, args: tuple[Any, ...]) -> Body | None:
    """What runs ``op(*args)`` through Python dunders, or ``None`` to leave it to C."""
    # The operators are C functions, whose hash is their identity. Any other callee is
    # not one, and looking it up in the tables below would hash it: that runs its
    # __hash__, which may raise (a weakref.ref to an unhashable object, a weakref.proxy)
    # where the plain call hashes nothing.
    if type(op) is not BuiltinFunctionType:
        return None
    if op in _BINARY and len(args) == 2:
        forward, reflected, symbol = _BINARY[op]
        return _binary(forward, reflected, symbol, *args)
    if op in _INPLACE and len(args) == 2:
        inplace, binary = _INPLACE[op]
        method = _special(args[0], inplace)
        if method is None:
            return _binary_inplace(binary, *args)
        return (lambda a, b: _inplace(method, binary, a, b)) if _python(method) else None
    if op in _COMPARE and len(args) == 2:
        return _compare(*_COMPARE[op], *args)
    if op in _ON_FIRST and (len(args) == 1 if op is iter else args):
        method = _special(args[0], _ON_FIRST[op])
        if not _python(method):
            return None
        return (lambda obj: _iterator(type(obj), method())) if op is iter else _on_first(method)
    if op is operator.contains and len(args) == 2:
        method = _special(args[0], "__contains__")
        return (lambda container, item: bool(method(item))) if _python(method) else None
    return None


def iterated(obj: Any) -> Any:
    """What a builtin that iterates ``obj`` is handed so that the iteration is overdubbed:
    ``obj`` itself, unless its class defines ``__iter__`` in Python; then a stand-in whose
    ``__iter__`` is ``iter(obj)`` as a call site.

    Not ``iter(obj)`` itself: a builtin may ask its argument for more than an iterator.
    ``list(x)`` calls ``len(x)`` before iterating and ``x.__length_hint__`` (``len`` first)
    after, ``tuple(x)`` and ``str.join`` ask for the hint.  The stand-in has ``__len__``
    and ``__length_hint__`` exactly when ``obj``'s class has them, passing them on, so the
    builtin makes the same calls, in the same order, with the same errors.
    """
    if type(obj) in ITERATED_IN_C or not _python(_special(obj, "__iter__")):
        return obj
    sized, hinted = _special(obj, "__len__") is not None, _special(obj, "__length_hint__") is not None
    return _stand_in_class(type(obj), sized, hinted)(obj)


class _Iterated:
    """Stands in for an object whose class defines ``__iter__`` in Python (see ``iterated``)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __iter__(self) -> Any:
        try:
            return hotpath.call(iter, self.obj)
        except BaseException as exc:  # (C calls this for the program: its traceback is the program's)
            strip_traceback(exc)
            raise


class _Sized(_Iterated):
    __slots__ = ()

    def __len__(self) -> int:
        try:
            return len(self.obj)
        except BaseException as exc:
            strip_traceback(exc)
            raise


class _Hinted(_Iterated):
    __slots__ = ()

    def __length_hint__(self) -> Any:  # whatever it returns: the builtin checks it
        try:
            return type(self.obj).__length_hint__(self.obj)
        except BaseException as exc:
            strip_traceback(exc)
            raise


class _SizedHinted(_Sized, _Hinted):
    __slots__ = ()


# Builtin types whose ``__iter__`` is C's for good (their classes cannot be changed): what
# builtins are handed most (``map(issubclass, a, b)``, ``sorted(xs)``), answered without
# walking the MRO (sympy's first run hands 40,000 of them: docs/performance.md, "A builtin's
# arguments prepared without copies").
ITERATED_IN_C = frozenset({tuple, list, dict, set, frozenset, str, bytes, bytearray, range, GeneratorType,
                            map, filter, zip, enumerate, reversed, type({}.keys()), type({}.values()),
                            type({}.items()), type(iter(())), type(iter([])), type(iter(range(0)))})
_STAND_INS = {(False, False): _Iterated, (True, False): _Sized, (False, True): _Hinted, (True, True): _SizedHinted}
_NAMESAKES: weakref.WeakKeyDictionary[type, dict[type, type]] = weakref.WeakKeyDictionary()


def _stand_in_class(cls: type, sized: bool, hinted: bool) -> type:
    """The stand-in class for an instance of ``cls``.  One with a hint is a subclass named
    as ``cls`` is: the builtin checks the hint and, from 3.15 on, names the class of what it
    was handed in the error for a bad one (``mod.Cls.__length_hint__() must return an int``),
    which must be the program's class, as it is plainly."""
    base = _STAND_INS[sized, hinted]
    if not hinted:
        return base
    made = _NAMESAKES.setdefault(cls, {})
    namesake = made.get(base)
    if namesake is None:
        namesake = made[base] = type(cls.__name__, (base,), {"__slots__": (), "__module__": cls.__module__,
                                                              "__qualname__": cls.__qualname__})
    return namesake


def yield_from_operand(obj: Any) -> Any:
    """What ``yield from obj`` iterates: ``iter(obj)`` as a call site, except for generators
    and coroutines, which the instruction takes as they are (with its own checks)."""
    return obj if type(obj) in (GeneratorType, CoroutineType) else hotpath.call(iter, obj)


def _iterator(cls: type, result: Any) -> Any:
    """``result`` of ``cls.__iter__``, if it is an iterator; else CPython's error for it."""
    if not hasattr(type(result), "__next__"):
        _check_as_cpython(cls, "__iter__", result, iter)
    return result


def _check_as_cpython(cls: type, dunder: str, result: Any, builtin: Callable[[Any], Any]) -> None:
    """Raise what ``builtin`` raises when ``cls``'s ``dunder`` returns ``result``, in the
    running CPython's own words (3.15 names the class, earlier versions do not): the
    builtin is run on a throwaway class with ``cls``'s names whose ``dunder`` returns
    ``result``, so no code of the program's runs again."""
    namesake = type(cls.__name__, (), {dunder: lambda self: result, "__module__": cls.__module__,
                                       "__qualname__": cls.__qualname__})
    builtin(namesake())


def _on_first(method: functools.partial[Any]) -> Body:
    """The body of ``op(obj, *rest)`` whose dunder ``method`` is bound to ``obj``: a plain
    function is given ``obj`` as its own first argument, so that no frame of ours is
    between the program's and the dunder's."""
    if len(method.args) == 2:  # partial(call, function, obj)
        return functools.partial(method.func, method.args[0])
    return lambda obj, *rest: method(*rest)


def _subclass(right: type, left: type) -> bool:
    """A real subclass, as the operator protocol checks (ABC registration does not count)."""
    return right is not left and left in right.__mro__


def _binary(forward: str, reflected: str, symbol: str, a: Any, b: Any) -> Body | None:
    left, right = type(a), type(b)
    fwd = _special(a, forward)
    ref = _special(b, reflected) if right is not left else None
    if fwd is _C or ref is _C or not (fwd or ref):
        return None
    # A subclass on the right that overrides the reflected method goes first.
    right_first = ref is not None and _subclass(right, left) and _defines(right, reflected, left)
    order = [(ref, a), (fwd, b)] if right_first else [(fwd, b), (ref, a)]

    def run(a: Any, b: Any) -> Any:
        result = _first_implemented(order)
        if result is NotImplemented:
            raise TypeError(f"unsupported operand type(s) for {symbol}: '{left.__name__}' and '{right.__name__}'")
        return result

    return run


def _first_implemented(order: list[tuple[Any, Any]]) -> Any:
    """The first result that is not ``NotImplemented`` of ``method(other)`` in ``order``."""
    for method, other in order:
        if method is not None:
            result = method(other)
            if result is not NotImplemented:
                return result
    return NotImplemented


def _defines(right: type, name: str, left: type) -> bool:
    """Does ``right`` implement ``name`` differently from ``left``?"""
    return class_attribute(right, name) is not class_attribute(left, name)


def class_attribute(klass: type, name: str) -> Any:
    """``klass``'s attribute ``name`` as its classes' namespaces hold it, along its MRO (no
    descriptor or metaclass of the program's is run; a stand-in gives what it stands in
    for), or None."""
    return next((standins.plain(k.__dict__[name]) for k in klass.__mro__ if name in k.__dict__), None)


def _inplace(method: Any, binary: Any, a: Any, b: Any) -> Any:
    result = method(b)
    if result is not NotImplemented:
        return result
    run = _binary_inplace(binary, a, b)
    return binary(a, b) if run is None else run(a, b)


def _binary_inplace(binary: Any, a: Any, b: Any) -> Body | None:
    """The body of ``binary(a, b)`` run for ``a op= b``: its error names ``op=``, as
    CPython's does (``+=``, ``**=``)."""
    forward, reflected, symbol = _BINARY[binary]
    return _binary(forward, reflected, symbol.split()[0] + "=", a, b)


def _compare(forward: str, reflected: str, symbol: str, a: Any, b: Any) -> Body | None:
    left, right = type(a), type(b)
    fwd, ref = _special(a, forward), _special(b, reflected)
    if fwd is _C or ref is _C or not (fwd or ref):
        return None
    order = [(ref, a), (fwd, b)] if _subclass(right, left) else [(fwd, b), (ref, a)]

    def run(a: Any, b: Any) -> Any:
        result = _first_implemented(order)
        if result is not NotImplemented:
            return result
        if symbol == "==":
            return a is b
        if symbol == "!=":
            return a is not b
        raise TypeError(f"'{symbol}' not supported between instances of '{left.__name__}' and '{right.__name__}'")

    return run
