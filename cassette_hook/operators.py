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

import operator
from types import FunctionType
from typing import Any, Callable

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
_ON_FIRST = {
    operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__",
    operator.getitem: "__getitem__", operator.setitem: "__setitem__", operator.delitem: "__delitem__",
    iter: "__iter__",
}


def _python(method: object) -> bool:
    return type(method) is FunctionType


def body(op: Any, args: tuple[Any, ...]) -> Body | None:
    """What runs ``op(*args)`` through Python dunders, or ``None`` if none are involved."""
    if op in _BINARY and len(args) == 2:
        forward, reflected, symbol = _BINARY[op]
        return _binary(forward, reflected, symbol, *args)
    if op in _INPLACE and len(args) == 2:
        inplace, binary = _INPLACE[op]
        method = getattr(type(args[0]), inplace, None)
        if _python(method):
            return lambda a, b: _inplace(method, binary, a, b)
        return body(binary, args)
    if op in _COMPARE and len(args) == 2:
        return _compare(*_COMPARE[op], *args)
    if op in _ON_FIRST and (len(args) == 1 if op is iter else args):
        method = getattr(type(args[0]), _ON_FIRST[op], None)
        if not _python(method):
            return None
        return (lambda obj: _iterator(_nested(method, obj))) if op is iter else (lambda *a: _nested(method, *a))
    if op is operator.contains and len(args) == 2:
        method = getattr(type(args[0]), "__contains__", None)
        return (lambda container, item: bool(_nested(method, container, item))) if _python(method) else None
    return None


def _iterator(result: Any) -> Any:
    if not hasattr(type(result), "__next__"):
        raise TypeError(f"iter() returned non-iterator of type '{type(result).__name__}'")
    return result


def _nested(method: Any, *args: Any) -> Any:
    """A Python dunder is a call site of its own; a C one (``int.__add__``) a plain call."""
    return call(method, *args) if _python(method) else method(*args)


def _binary(forward: str, reflected: str, symbol: str, a: Any, b: Any) -> Body | None:
    left, right = type(a), type(b)
    fwd = getattr(left, forward, None)
    ref = getattr(right, reflected, None) if right is not left else None
    if not (_python(fwd) or _python(ref)):
        return None
    # A subclass on the right that overrides the reflected method goes first.
    right_first = ref is not None and issubclass(right, left) and ref is not getattr(left, reflected, None)
    order = [(ref, True), (fwd, False)] if right_first else [(fwd, False), (ref, True)]

    def run(a: Any, b: Any) -> Any:
        for method, swapped in order:
            if method is not None:
                result = _nested(method, b, a) if swapped else _nested(method, a, b)
                if result is not NotImplemented:
                    return result
        raise TypeError(f"unsupported operand type(s) for {symbol}: '{left.__name__}' and '{right.__name__}'")

    return run


def _inplace(method: Any, binary: Any, a: Any, b: Any) -> Any:
    result = _nested(method, a, b)
    if result is not NotImplemented:
        return result
    run = body(binary, (a, b))
    return binary(a, b) if run is None else run(a, b)


def _compare(forward: str, reflected: str, symbol: str, a: Any, b: Any) -> Body | None:
    left, right = type(a), type(b)
    fwd, ref = getattr(left, forward, None), getattr(right, reflected, None)
    if not (_python(fwd) or _python(ref)):
        return None
    right_first = right is not left and issubclass(right, left)
    order = [(ref, True), (fwd, False)] if right_first else [(fwd, False), (ref, True)]

    def run(a: Any, b: Any) -> Any:
        for method, swapped in order:
            if method is not None:
                result = _nested(method, b, a) if swapped else _nested(method, a, b)
                if result is not NotImplemented:
                    return result
        if symbol == "==":
            return a is b
        if symbol == "!=":
            return a is not b
        raise TypeError(f"'{symbol}' not supported between instances of '{left.__name__}' and '{right.__name__}'")

    return run

# Last: callsite imports the modules that import this one.
from .callsite import call  # noqa: E402
