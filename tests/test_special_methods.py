"""Calls whose special method is not a plain function run as the plain call does.

``obj(x)`` runs ``type(obj).__call__`` and ``Cls(x)`` runs ``__new__`` and ``__init__``
the way the interpreter binds them: a ``staticmethod`` gets no receiver, a
``classmethod`` gets the class, a builtin or a ``functools.partial`` is called as it is,
and the metaclass is never asked for an instance's ``__call__``.  Each shape below is
run plainly and compared with the same call overdubbed by a context that overloads
nothing, by one with a counting prehook, and from a module loaded through the import
hook under both.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from typing import Any

import pytest

import cassette_hook as ch

SHAPES = textwrap.dedent('''
    import functools

    log = []

    def names(args):  # comparable across the plain and the hooked copy of this module
        return tuple(a.__name__ if isinstance(a, type) else a for a in args)

    def record(*args):
        return ("record", names(args))

    def remember(*args):
        log.append(names(args))

    class Base:
        pass

    class StaticCall(Base):
        __call__ = staticmethod(lambda x: record("static", x))

    class InheritedStaticCall(StaticCall):
        pass

    class ClassCall(Base):
        @classmethod
        def __call__(cls, x):
            return record(cls.__name__, x)

    class BuiltinCall(Base):
        __call__ = abs

    class PartialCall(Base):
        __call__ = functools.partial(record, "partial")

    class StaticMeta(type):
        __call__ = staticmethod(lambda *args: record("meta", len(args)))

    class ClassMeta(type):
        @classmethod
        def __call__(meta, *args):
            return record(meta.__name__, args)

    class MadeByStaticMeta(metaclass=StaticMeta):
        pass

    class MadeByClassMeta(metaclass=ClassMeta):
        pass

    class StaticInit:
        __init__ = staticmethod(lambda x: remember("static init", x))

    class ClassInit:
        @classmethod
        def __init__(cls, x):
            remember("class init", cls.__name__, x)

    class PartialInit:
        __init__ = functools.partial(remember, "partial init")

    class BuiltinInit:
        __init__ = log.append

    class BuiltinInitReturningValue:
        __init__ = abs

    class SubclassOfStaticInit(StaticInit):
        pass

    class StaticNewLambda:
        pass

    StaticNewLambda.__new__ = staticmethod(lambda cls, x: record("static new", cls.__name__, x))

    class PlainNewSetLater:
        pass

    PlainNewSetLater.__new__ = lambda cls, x: record("plain new", cls.__name__, x)

    class ClassNew:
        @classmethod
        def __new__(cls, *args):
            return record("class new", *args)

    class PartialNew:
        __new__ = functools.partial(record, "partial new")

    def call(obj, x):
        return obj(x)

    def construct(cls, x):
        log.clear()
        obj = cls(x)
        return type(obj).__name__, list(log)

    def instance_of_meta_made_class(cls, x):
        return call(object.__new__(cls), x)
''')

# Python 3.13 warns, plainly too, about a partial used as a class attribute.
pytestmark = pytest.mark.filterwarnings("ignore:functools.partial will be a method descriptor:FutureWarning")

# shape -> (the module function to run, the name of the object it is given)
CALLS = {
    "staticmethod __call__": ("call", "StaticCall()"),
    "inherited staticmethod __call__": ("call", "InheritedStaticCall()"),
    "classmethod __call__": ("call", "ClassCall()"),
    "builtin __call__": ("call", "BuiltinCall()"),
    "partial __call__": ("call", "PartialCall()"),
    "staticmethod __call__ of the metaclass, calling the class": ("call", "MadeByStaticMeta"),
    "classmethod __call__ of the metaclass, calling the class": ("call", "MadeByClassMeta"),
    "__call__ of the metaclass, calling an instance": ("instance_of_meta_made_class", "MadeByStaticMeta"),
    "staticmethod __init__": ("construct", "StaticInit"),
    "inherited staticmethod __init__": ("construct", "SubclassOfStaticInit"),
    "classmethod __init__": ("construct", "ClassInit"),
    "partial __init__": ("construct", "PartialInit"),
    "builtin __init__": ("construct", "BuiltinInit"),
    "builtin __init__ returning a value": ("construct", "BuiltinInitReturningValue"),
    "staticmethod __new__ wrapping a lambda": ("call", "StaticNewLambda"),
    "plain function __new__ set after the class": ("call", "PlainNewSetLater"),
    "classmethod __new__": ("call", "ClassNew"),
    "partial __new__": ("call", "PartialNew"),
}
# The shapes whose special method has a Python body that recursing runs: a counting
# prehook sees the call of ``record`` or ``remember`` inside it.
RECURSED = {"staticmethod __call__", "inherited staticmethod __call__", "classmethod __call__",
            "staticmethod __call__ of the metaclass, calling the class",
            "classmethod __call__ of the metaclass, calling the class", "staticmethod __init__",
            "inherited staticmethod __init__", "classmethod __init__", "staticmethod __new__ wrapping a lambda",
            "plain function __new__ set after the class", "classmethod __new__"}
if sys.version_info < (3, 13):  # from 3.13 a partial has a __get__ (a FutureWarning): left to the interpreter
    RECURSED |= {"partial __call__", "partial __init__"}


class Null(ch.Context):
    pass


class Counting(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        self.metadata.append(getattr(f, "__name__", None))


def load(name: str) -> Any:
    namespace: dict[str, Any] = {"__name__": name}
    exec(compile(SHAPES, f"<{name}>", "exec"), namespace)  # noqa: S102 -- the shapes above
    return type(sys)(name), namespace


def outcome(run: Any) -> tuple[Any, ...]:
    try:
        return ("returned", _comparable(run()))
    except Exception as e:  # noqa: BLE001 -- an exception is an outcome to compare
        return ("raised", type(e), str(e))


def _comparable(value: Any) -> Any:
    """``value`` with the shapes' instances as their class's name: from 3.14 a partial is a
    method descriptor, so ``record`` gets the instance, made anew by each run."""
    if isinstance(value, (tuple, list)):
        return type(value)(_comparable(item) for item in value)
    if type(value).__module__.startswith("special_shapes"):
        return ("an instance of", type(value).__qualname__)
    return value


def plain_and_args(shape: str) -> tuple[Any, dict[str, Any], tuple[Any, ...]]:
    _, namespace = load("special_shapes_plain")
    function, obj = CALLS[shape]
    return namespace[function], namespace, (eval(obj, namespace), 3)  # noqa: S307


@pytest.fixture
def hooked(tmp_path, monkeypatch):
    """The shapes as a module loaded through the import hook."""
    (tmp_path / "special_shapes_hooked.py").write_text(SHAPES)
    monkeypatch.syspath_prepend(str(tmp_path))
    ch.install(include=["special_shapes_hooked"])
    try:
        yield importlib.import_module("special_shapes_hooked")
    finally:
        ch.uninstall()
        sys.modules.pop("special_shapes_hooked", None)
        importlib.invalidate_caches()


@pytest.mark.parametrize("shape", CALLS)
@pytest.mark.parametrize("ctx_type", [Null, Counting])
def test_overdubbed_call_returns_what_the_plain_call_returns(shape, ctx_type):
    func, _, args = plain_and_args(shape)
    plain = outcome(lambda: func(*args))
    assert outcome(lambda: ch.overdub(ctx_type([]), func, *args)) == plain


@pytest.mark.parametrize("shape", CALLS)
@pytest.mark.parametrize("ctx_type", [None, Null, Counting])
def test_import_hooked_call_returns_what_the_plain_call_returns(hooked, shape, ctx_type):
    func, _, args = plain_and_args(shape)
    plain = outcome(lambda: func(*args))
    function, obj = CALLS[shape]
    hooked_args = (eval(obj, vars(hooked)), 3)  # noqa: S307
    if ctx_type is None:
        assert outcome(lambda: getattr(hooked, function)(*hooked_args)) == plain
        return
    with ctx_type([]):
        assert outcome(lambda: getattr(hooked, function)(*hooked_args)) == plain


@pytest.mark.parametrize("shape", sorted(RECURSED))
def test_python_body_of_the_special_method_is_recursed_into(shape):
    func, _, args = plain_and_args(shape)
    ctx = Counting([])
    ch.overdub(ctx, func, *args)
    assert {"record", "remember"} & set(ctx.metadata), ctx.metadata


@pytest.mark.parametrize("shape", sorted(set(CALLS) - RECURSED))
def test_special_method_without_a_python_body_runs_as_a_primitive(shape):
    func, _, args = plain_and_args(shape)
    ctx = Counting([])
    outcome(lambda: ch.overdub(ctx, func, *args))
    assert not {"record", "remember"} & set(ctx.metadata), ctx.metadata
