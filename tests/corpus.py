"""A corpus of small, plain-Python functions for the differential tests.

Every function here is ordinary, cassette-unaware code.  ``tests/test_differential.py``
runs each one plainly and under several contexts (``ch.overdub(ctx, f, *args)``) and
compares what comes out: the return value, or the exception (type, message, cause and
context) together with the user frames of its traceback.

Each function is registered with :func:`case`:

- ``case(*args)``: called with these arguments (deep-copied for every run);
- ``case(given=strategy)``: ``strategy`` draws the argument tuple (hypothesis);
- ``post=``: applied to the return value *outside* any context (to drive a generator or a
  coroutine the function returned, or to turn an object into comparable data);
- ``min_version=``: skip on older Pythons.

Functions return plain data (numbers, strings, tuples, lists, dicts) so that results can be
compared with ``==``.  None of them depends on state left behind by an earlier call.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import contextvars
import copy
import dataclasses
import enum
import functools
import heapq
import inspect
import io
import itertools
import json
import logging
import math
import operator
import re
import string
import sys
import textwrap
import threading
import types
import typing
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from hypothesis import strategies as st

# --------------------------------------------------------------------------------------
# registry


@dataclass
class Case:
    name: str
    func: Callable[..., Any]
    args: tuple[Any, ...] = ()
    given: Any = None  # a hypothesis strategy of argument tuples
    post: Callable[[Any], Any] | None = None
    min_version: tuple[int, int] = (3, 10)
    max_examples: int = 15


CASES: list[Case] = []


def case(*args: Any, given: Any = None, post: Any = None, name: str | None = None,
         min_version: tuple[int, int] = (3, 10), max_examples: int = 15) -> Callable[[Any], Any]:
    def register(func: Any) -> Any:
        CASES.append(Case(name or func.__name__, func, args, given, post, min_version, max_examples))
        return func

    return register


small_ints = st.integers(min_value=-1000, max_value=1000)
ints = st.integers(min_value=-(10**12), max_value=10**12)
floats = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9)
texts = st.text(alphabet=string.ascii_letters + string.digits + " _-,.é", max_size=12)
int_lists = st.lists(small_ints, max_size=12)


# --------------------------------------------------------------------------------------
# calls: keywords, stars, defaults, keyword-only, positional-only


def _target(x, y=2, *rest, z, w=5, **kw):
    return (x, y, rest, z, w, sorted(kw.items()))


def _posonly(a, b=10, /, c=20, *, d=30):
    return (a, b, c, d)


_ONE = 1


def _bad_call(thunk):
    try:
        thunk()
    except TypeError as e:
        return ("TypeError", str(e))
    return "no error"


@case(given=st.tuples(small_ints, small_ints, int_lists))
def keyword_and_star_calls(a, b, xs):
    out = [
        _target(a, z=b),
        _target(a, b, *xs, z=1),
        _target(*[a, b, a], z=b, **{"q": a, "r": b}),
        _target(x=a, z=b, w=a),
        _target(a, *xs, **{"z": b}),
        _target(*(a,), **dict(z=b, extra=xs)),
        _posonly(a),
        _posonly(a, b, c=a, d=b),
        _posonly(*[a, b, a], d=b),
    ]
    args, kwargs = (a, b), {"z": a}
    out.append(_target(*args, **kwargs))
    out.append(_target(*args, *xs, z=b, **{}))
    return out


@case()
def bad_call_messages():
    return [
        _bad_call(lambda: _target(1)),
        _bad_call(lambda: _target(1, 2, 3, z=1, x=2)),
        _bad_call(lambda: _posonly(a=1)),
        _bad_call(lambda: _posonly(1, 2, 3, 4)),
        _bad_call(lambda: _posonly(1, e=2)),
        _bad_call(lambda: _target()),
        _bad_call(lambda: len(1, 2)),
        _bad_call(lambda: _ONE(2)),
        _bad_call(lambda: _target(1, z=1, **{"z": 2})),
        _bad_call(lambda: _target(1, **{"z": 1}, **{"z": 2})),
    ]


@case()
def star_call_of_non_iterable():
    def g(*a):
        return a

    n = 5
    try:
        g(*n)
    except TypeError as e:
        return str(e)


@case()
def double_star_call_of_non_mapping():
    def g(**k):
        return k

    n = 5
    try:
        g(**n)
    except TypeError as e:
        return str(e)


@case()
def star_call_with_generator_and_mapping():
    def g(*a, **k):
        return a, sorted(k.items())

    class M(collections.abc.Mapping):
        def __getitem__(self, key):
            return key.upper()

        def __iter__(self):
            return iter(["p", "q"])

        def __len__(self):
            return 2

    return g(*(i * i for i in range(4)), **M())


def _echo_kwargs(*args, **kwargs):
    return args, sorted(kwargs.items())


@case()
def keyword_arguments_named_like_engine_parameters():
    # Keyword names that an engine's own helper functions might also use.
    return [
        _echo_kwargs(1, f=2),
        _echo_kwargs(cls=3, self=4, ctx=5),
        _echo_kwargs(args=6, kwargs=7, func=8, entry=9, method=10, out=11),
        dict(self=1, f=2, cls=3),
    ]


class _KwInit:
    def __init__(self, f, cls=0, self_=0):
        self.values = (f, cls, self_)


@case()
def construct_with_keyword_f():
    return _KwInit(f=1).values


@case()
def construct_with_keyword_cls():
    return _KwInit(1, cls=2).values


@case()
def dataclass_with_fields_f_and_cls():
    @dataclass
    class Edge:
        f: int
        cls: str = "x"

    return dataclasses.astuple(Edge(f=1, cls="y"))


@case()
def method_called_with_keyword_self():
    class Box:
        def put(*args, **kwargs):
            return len(args), sorted(kwargs)

    return Box().put(self=1, f=2)


# --------------------------------------------------------------------------------------
# methods, builtin methods


class Account:
    rate = 2

    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance
        self.history = []

    def deposit(self, amount):
        self.balance += amount
        self.history.append(("deposit", amount))
        return self

    def withdraw(self, amount):
        if amount > self.balance:
            raise ValueError(f"insufficient funds: {self.balance} < {amount}")
        self.balance -= amount
        self.history.append(("withdraw", amount))
        return self.balance

    def interest(self):
        return self.balance * self.rate

    @staticmethod
    def fee(amount, percent=1):
        return amount * percent // 100

    @classmethod
    def opened_by(cls, owner):
        return cls(owner, balance=cls.rate)


@case(given=st.tuples(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**6)))
def method_calls(a, b):
    acct = Account("ann", a)
    acct.deposit(b).deposit(1)
    got = []
    try:
        got.append(acct.withdraw(b))
        got.append(acct.withdraw(10**7))
    except ValueError as e:
        got.append(str(e))
    m = acct.interest
    unbound = Account.deposit
    unbound(acct, 3)
    got.append(getattr(acct, "interest")())
    return got, m(), acct.history, Account.fee(a), acct.fee(b, percent=3)


@case(given=st.tuples(st.lists(texts, max_size=6), texts))
def builtin_methods(words, sep):
    out = []
    out.append(sep.join(words))
    acc = []
    for w in words:
        acc.append(w.upper())
        acc.extend([len(w)])
    acc.insert(0, "start")
    d = {}
    for w in words:
        d[w] = d.get(w, 0) + 1
        d.setdefault(w.lower(), []).__class__
    out.append(sorted(d.items(), key=repr))
    out.append(acc)
    out.append(sep.split(",") if sep else [])
    out.append("{}-{}".format(len(words), sep.strip()))
    out.append(str.upper(sep))
    out.append(list(map(str.lower, words)))
    out.append({}.fromkeys(words, 0))
    out.append(bytes(sep, "utf-8").hex())
    s = set(words)
    s.add("z")
    s.discard("y")
    out.append(sorted(s))
    out.append(d.pop("missing", "default"))
    return out


class _DoublingList(list):
    def append(self, x):
        super().append(x * 2)

    def extend(self, xs):
        for x in xs:
            self.append(x)


class _UpperDict(dict):
    def get(self, key, default=None):
        return super().get(key.upper(), default)

    def __setitem__(self, key, value):
        super().__setitem__(key.upper(), value)


class _LoudStr(str):
    def join(self, parts):
        return super().join(p.upper() for p in parts)


@case()
def builtin_method_overridden_in_subclass_calls_super():
    xs = _DoublingList()
    xs.append(1)
    xs.extend([2, 3])
    d = _UpperDict()
    d["a"] = 1
    return list(xs), d.get("a"), dict(d), _LoudStr("-").join(["x", "y"])


@case()
def builtin_bound_method_of_subclass_instance():
    xs = _DoublingList()
    plain_append = list.append.__get__(xs)  # the C method, bound to a subclass instance
    plain_append(5)
    add = super(_DoublingList, xs).append
    add(6)
    return list(xs)


# --------------------------------------------------------------------------------------
# class construction


class OnlyInit:
    def __init__(self, a, b=1):
        self.total = a + b


class OnlyNew:
    def __new__(cls, a):
        obj = super().__new__(cls)
        obj.a = a * 3
        return obj


class NewAndInit:
    log: list = []

    def __new__(cls, *args, **kwargs):
        cls.log.append(("new", args, sorted(kwargs.items())))
        return super().__new__(cls)

    def __init__(self, a, *, k=0):
        self.log.append(("init", a, k))
        self.a, self.k = a, k


class NewReturnsOther:
    def __new__(cls, value):
        return int(value) * 2

    def __init__(self, value):  # never called: __new__ returned an int
        raise AssertionError("unreachable")


class NewReturnsSubclass:
    def __new__(cls, flag):
        return super().__new__(_SubOfNewReturnsSubclass if flag else cls)

    def __init__(self, flag):
        self.inits = getattr(self, "inits", 0) + 1
        self.flag = flag


class _SubOfNewReturnsSubclass(NewReturnsSubclass):
    def __init__(self, flag):
        super().__init__(flag)
        self.sub = True


class Singleton:
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance


class _SingletonMeta(type):
    _instances: dict = {}

    def __call__(cls, *args, **kwargs):
        if cls not in cls._instances:
            cls._instances[cls] = super().__call__(*args, **kwargs)
        return cls._instances[cls]


class MetaSingleton(metaclass=_SingletonMeta):
    def __init__(self, value=0):
        self.value = value


class PositiveInt(int):
    def __new__(cls, value):
        return super().__new__(cls, abs(value))


class InitReturnsValue:
    def __init__(self):
        return 3


@case(given=st.tuples(small_ints, small_ints))
def class_construction(a, b):
    NewAndInit.log = []
    x = NewAndInit(a, k=b)
    y = NewReturnsOther(a)
    z1, z2 = NewReturnsSubclass(False), NewReturnsSubclass(True)
    s1, s2 = Singleton(), Singleton()
    m1, m2 = MetaSingleton(a), MetaSingleton(b)
    p = PositiveInt(a)
    return [
        OnlyInit(a).total, OnlyInit(a, b=b).total, OnlyNew(a).a, (x.a, x.k), NewAndInit.log,
        y, type(y).__name__, (type(z1).__name__, z1.inits), (type(z2).__name__, z2.inits, z2.sub),
        s1 is s2, m1 is m2, m1.value == m2.value, (p, type(p).__name__),
    ]


@case()
def construction_errors():
    out = []
    for thunk in (lambda: OnlyInit(), lambda: OnlyNew(), lambda: InitReturnsValue(),
                  lambda: object(1), lambda: OnlyInit(1, 2, 3), lambda: NewAndInit(1, j=2),
                  lambda: int("x"), lambda: abc_instance()):
        try:
            thunk()
            out.append("ok")
        except TypeError as e:
            out.append(("TypeError", str(e)))
        except ValueError as e:
            out.append(("ValueError", str(e)))
    return out


class _Shape(abc.ABC):
    @abc.abstractmethod
    def area(self): ...


def abc_instance():
    return _Shape()


@dataclass(order=True)
class Card:
    rank: int
    suit: str = "spades"
    tags: list = field(default_factory=list, compare=False)

    def __post_init__(self):
        self.tags.append(f"{self.rank}{self.suit[0]}")


@dataclass(frozen=True)
class FrozenPoint:
    x: float
    y: float = 0.0

    def norm(self):
        return math.hypot(self.x, self.y)


@case(given=st.tuples(small_ints, small_ints))
def dataclasses_(a, b):
    c1, c2 = Card(a), Card(b, "hearts")
    p = FrozenPoint(a, b)
    try:
        p.x = 3
        frozen = "mutable?"
    except dataclasses.FrozenInstanceError as e:
        frozen = type(e).__name__
    q = dataclasses.replace(p, y=1)
    return [repr(c1), c1 < c2, c1 == Card(a), sorted([c2, c1]) == sorted([c1, c2]),
            dataclasses.asdict(c2), p.norm(), frozen, q, hash(p) == hash(FrozenPoint(a, b)),
            [f.name for f in dataclasses.fields(Card)]]


Point = collections.namedtuple("Point", "x y")


class Pair(NamedTuple):
    left: int
    right: int = 0

    def swap(self):
        return Pair(self.right, self.left)


@case(given=st.tuples(small_ints, small_ints))
def namedtuples(a, b):
    p = Point(a, b)
    q = Point._make([b, a])
    r = p._replace(x=0)
    pr = Pair(a)
    try:
        Point(1)
        err = None
    except TypeError as e:
        err = str(e)
    return [p, q, r, p._asdict(), p.x + q.y, pr, pr.swap(), Pair(left=b, right=a), err, tuple(p) + q]


class Color(enum.Enum):
    RED = 1
    GREEN = 2
    BLUE = 3

    def describe(self):
        return f"{self.name.lower()}={self.value}"

    @classmethod
    def from_name(cls, name):
        return cls[name.upper()]


class Perm(enum.Flag):
    R = 4
    W = 2
    X = 1


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@case(given=st.tuples(st.integers(min_value=0, max_value=4)))
def enum_lookups(n):
    out = []
    try:
        out.append(Color(n))
    except ValueError as e:
        out.append(str(e))
    out += [Color["GREEN"], Color.from_name("blue"), Color.RED.describe(), list(Color),
            Color(2) is Color.GREEN, Perm.R | Perm.W, Perm(6), Perm.R in Perm(5),
            Level(1) < Level.HIGH, Level.HIGH + 1, len(Color), [c.name for c in Perm]]
    try:
        Color["PURPLE"]
    except KeyError as e:
        out.append(repr(e))
    return [repr(x) if isinstance(x, enum.Enum) else x for x in out]


class AppError(Exception):
    def __init__(self, code, detail="none"):
        super().__init__(f"error {code}: {detail}")
        self.code = code
        self.detail = detail


class NotFound(AppError):
    def __init__(self, what):
        super().__init__(404, detail=what)
        self.what = what

    def __str__(self):
        return f"not found: {self.what}"


class KeywordOnlyError(Exception):
    def __init__(self, *, reason):
        super().__init__()
        self.reason = reason


@case(given=st.tuples(small_ints))
def exceptions_with_custom_init(n):
    out = []
    for exc in (AppError(n), NotFound(f"item{n}"), KeywordOnlyError(reason=n), ValueError(n, "x")):
        try:
            raise exc
        except AppError as e:
            out.append((type(e).__name__, e.code, e.detail, str(e), e.args))
        except Exception as e:
            out.append((type(e).__name__, str(e), e.args, getattr(e, "reason", None)))
    return out


@case()
def class_features():
    registry = []

    class Plugin:
        def __init_subclass__(cls, /, name=None, **kwargs):
            super().__init_subclass__(**kwargs)
            registry.append(name or cls.__name__)

    class A(Plugin, name="alpha"):
        pass

    class B(Plugin):
        __slots__ = ("v",)

        def __init__(self, v):
            self.v = v

    class Named:
        def __set_name__(self, owner, name):
            self.name = f"{owner.__name__}.{name}"

        def __get__(self, obj, objtype=None):
            return self.name if obj is None else (self.name, obj.scale)

    class Holder:
        attr = Named()
        scale = 3

        def __class_getitem__(cls, item):
            return f"Holder[{item.__name__}]"

        def __getattr__(self, name):
            return f"missing:{name}"

    b = B(2)
    try:
        b.other = 1
        slots = "no slots?"
    except AttributeError as e:
        slots = type(e).__name__
    h = Holder()
    return [registry, b.v, slots, Holder.attr, h.attr, Holder[int], h.nothing, A.__mro__[1].__name__]


class _Meta(type):
    @classmethod
    def __prepare__(mcls, name, bases, **kwargs):
        ns = super().__prepare__(name, bases)
        ns["prepared_by"] = mcls.__name__
        return ns

    def __new__(mcls, name, bases, ns, **kwargs):
        ns["meta_kwargs"] = sorted(kwargs)
        return super().__new__(mcls, name, bases, ns)

    def __init__(cls, name, bases, ns, **kwargs):
        super().__init__(name, bases, ns)


@case(given=st.tuples(small_ints))
def class_bodies(a):
    outer = a * 2

    class Body(metaclass=_Meta, flag=True):
        x = abs(a)
        y = [i * outer for i in range(3)]
        z = {k: len(k) for k in ("ab", "c")}
        names_so_far = sorted(locals())
        also_vars = sorted(vars())
        try:
            int("bad")
        except ValueError as e:
            error = str(e)
        doubled = (lambda v: v * 2)(x)

        class Inner:
            where = __qualname__

            def who(self):
                return type(self).__qualname__

        def method(self):
            return super().__repr__()[:7], __class__.__name__

        @property
        def prop(self):
            return self.x + outer

        @staticmethod
        def static(v):
            return v + 1

        @classmethod
        def make(cls):
            return cls()

        temporary = 1
        del temporary

    b = Body.make()
    return [Body.x, Body.y, Body.z, Body.names_so_far, Body.also_vars, Body.error, Body.doubled,
            Body.Inner.where, Body.Inner().who(), b.method(), b.prop, Body.static(a), Body.prepared_by,
            Body.meta_kwargs, Body.__qualname__, Body.__module__, type(Body).__name__]


@case(1)
def class_body_comprehension_and_method_share_a_free_variable(a):
    # 3.13 inlines the comprehension into the class body, so ``outer`` is there both a
    # fast local and a free variable.
    outer = a * 2

    class Body:
        y = [i * outer for i in range(3)]

        def get(self):
            return outer

    return Body.y, Body().get()


@case(1)
def class_body_comprehension_shares_the_first_of_two_free_variables(a):
    # On 3.13 the class body has a local ``outer`` (the inlined comprehension's) and free
    # variables ``outer`` and ``zed``: the method's closure must get ``outer``'s cell, not
    # ``zed``'s (which a decoder that numbers only ``zed`` after the locals would give it).
    outer = a * 2
    zed = a + 10

    class Body:
        y = [i * outer for i in range(3)]
        w = zed

        def get(self):
            return outer

    return Body.y, Body.w, Body().get()


@case(1)
def class_body_comprehension_variable_shadows_a_free_variable(a):
    # 3.13+: the comprehension's ``outer`` is a local of the class body, the method's a free
    # variable in a slot of its own, which the method's closure must be given.
    outer = a * 2
    zed = a + 10

    class Body:
        y = [outer for outer in range(3)]
        w = zed

        def get(self):
            return outer

    return Body.y, Body.w, Body().get()


# --------------------------------------------------------------------------------------
# callables: instances, partial, static/class methods, properties


class Multiplier:
    def __init__(self, k):
        self.k = k
        self.calls = 0

    def __call__(self, x, *, offset=0):
        self.calls += 1
        return x * self.k + offset


def _power(base, exp, *, mod=None):
    return pow(base, exp, mod) if mod else base**exp


@case(given=st.tuples(small_ints, st.integers(min_value=0, max_value=20)))
def callables(a, e):
    triple = Multiplier(3)
    square = functools.partial(_power, exp=2)
    cube_mod = functools.partial(_power, exp=3, mod=97)
    nested = functools.partial(functools.partial(_power, a), e)
    bound = functools.partial(Account.fee, percent=50)
    make = functools.partial(OnlyInit, b=5)
    method = functools.partial(triple.__call__, offset=1)
    return [triple(a), triple(a, offset=e), triple.calls, square(a), cube_mod(a), nested(),
            bound(a), make(a).total, method(e), list(map(triple, [a, e])), square(a, exp=3),
            functools.partial(max, key=abs)(a, -e), square.func is _power]


class Temperature:
    unit_name = "C"

    def __init__(self, celsius):
        self._c = celsius

    @property
    def fahrenheit(self):
        return self._c * 9 / 5 + 32

    @fahrenheit.setter
    def fahrenheit(self, value):
        self._c = (value - 32) * 5 / 9

    @fahrenheit.deleter
    def fahrenheit(self):
        self._c = 0

    @functools.cached_property
    def kelvin(self):
        return self._c + 273.15

    @staticmethod
    def convert(c):
        return Temperature(c).fahrenheit

    @classmethod
    def freezing(cls):
        return cls(0)

    @classmethod
    def describe(cls):
        return cls.unit_name + cls.__name__


class Kelvin(Temperature):
    unit_name = "K"


@case(given=st.tuples(floats))
def static_class_methods_and_properties(c):
    t = Temperature(c)
    out = [t.fahrenheit, t.kelvin, t.kelvin]
    t.fahrenheit = 212
    out.append(t._c)
    del t.fahrenheit
    out.append(t._c)
    out += [Temperature.convert(c), t.convert(c), Temperature.freezing()._c, t.freezing()._c,
            Kelvin.describe(), Kelvin(1).describe(), type(Kelvin.freezing()).__name__,
            Temperature.__dict__["convert"].__func__(c)]
    return out


# --------------------------------------------------------------------------------------
# closures, nonlocal, cells, lambdas


def _make_counter(start=0):
    count = start

    def increment(by=1):
        nonlocal count
        count += by
        return count

    def peek():
        return count

    return increment, peek


@case(given=st.tuples(small_ints, st.lists(small_ints, max_size=5)))
def closures_and_nonlocal(start, steps):
    inc, peek = _make_counter(start)
    seen = [inc(s) for s in steps]
    seen.append(peek())
    late = [lambda: i for i in range(3)]
    early = [lambda i=i: i for i in range(3)]
    total = 0

    def outer():
        acc = []

        def middle():
            def inner():
                nonlocal total
                total += 1
                acc.append(total)

            inner()
            inner()

        middle()
        return acc

    cells = [c.cell_contents for c in inc.__closure__]
    return seen, [f() for f in late], [f() for f in early], outer(), total, cells


@case(given=st.tuples(int_lists))
def lambdas(xs):
    add = lambda a, b=1: a + b  # noqa: E731
    compose = lambda f, g: lambda x: f(g(x))  # noqa: E731
    inc_then_double = compose(lambda x: x * 2, add)
    return [add(1), add(1, 2), inc_then_double(3), (lambda *a, **k: (a, k))(1, k=2),
            sorted(xs, key=lambda v: (v % 3, -v)), list(map(lambda v: v * v, xs)),
            (lambda: (yield 1))().__next__(), (lambda x: lambda y: x - y)(10)(4)]


@case()
def cell_variable_deleted_and_rebound():
    x = 1

    def read():
        return x

    out = [read()]
    del x
    try:
        read()
    except NameError as e:
        out.append(str(e))
    x = 2
    out.append(read())
    return out


# --------------------------------------------------------------------------------------
# comprehensions and generator expressions


@case(given=st.tuples(int_lists, small_ints))
def comprehensions(xs, k):
    squares = [x * x for x in xs]
    evens = {x for x in xs if x % 2 == 0}
    index = {x: i for i, x in enumerate(xs) if x > k}
    nested = [[y * x for y in range(3) if y != x] for x in xs[:4]]
    flat = [y for row in nested for y in row if y % 2]
    gen_sum = sum(x * k for x in xs if x)
    captured = [(lambda: x * k)() for x in xs]
    with_call = [abs(x) + len(str(x)) for x in xs]
    walrus = [y for x in xs if (y := x * 2) > k]
    matrix = [[i * j for j in range(3)] for i in range(3)]
    transposed = [[row[i] for row in matrix] for i in range(3)]
    genexp_gen = (x + k for x in xs)
    first = next(genexp_gen, None)
    nested_gen = list(sum(1 for _ in range(x % 4)) for x in xs)
    dict_of_sets = {x % 3: {y for y in xs if y % 3 == x % 3} for x in xs}
    return [squares, sorted(evens), index, nested, flat, gen_sum, captured, with_call, walrus,
            transposed, first, list(genexp_gen), nested_gen, dict_of_sets]


@case()
def comprehension_scopes():
    x = "outer"
    names = [x for x in "ab"]
    class_level = []

    class C:
        y = 10
        vals = [i for i in range(3)]  # class scope: y is not visible inside, range is

    try:
        eval("[y for _ in range(1)]", {"y": 1})
    except NameError as e:
        class_level.append(str(e))
    try:
        [undefined_name_xyz for _ in range(1)]
    except NameError as e:
        class_level.append(str(e))
    return x, names, C.vals, class_level


# --------------------------------------------------------------------------------------
# generators


def _echo_gen(log):
    received = None
    try:
        while True:
            try:
                received = yield received
                log.append(("got", received))
            except KeyError as e:
                log.append(("caught", str(e)))
                received = "recovered"
    finally:
        log.append("closed")


def _inner_gen(n):
    for i in range(n):
        x = yield i
        if x:
            return f"early {x}"
    return f"done {n}"


def _delegating_gen(n):
    r1 = yield from _inner_gen(n)
    r2 = yield from _inner_gen(1)
    yield (r1, r2)
    return "outer done"


@case(given=st.tuples(st.integers(min_value=0, max_value=5)))
def generators(n):
    log = []
    g = _echo_gen(log)
    out = [next(g), g.send(1), g.send("two"), g.throw(KeyError("k")), g.send(3)]
    g.close()
    out.append(log)
    try:
        g.send(4)
    except StopIteration as e:
        out.append(("stopped", e.value))
    out.append(list(_delegating_gen(n)))
    d = _delegating_gen(n + 2)
    out.append(next(d))
    out.append(d.send(None))
    out.append(d.send("stop"))
    out.append(next(d))
    try:
        next(d)
    except StopIteration as e:
        out.append(("return", e.value))
    out += [d.__name__, d.__qualname__, _inner_gen.__name__, inspect.isgenerator(d),
            inspect.getgeneratorstate(d)]
    t = _inner_gen(3)
    next(t)
    try:
        t.throw(ValueError("boom"))
    except ValueError as e:
        out.append(str(e))
    return out


def _countdown(n):
    while n > 0:
        yield n
        n -= 1
    return "liftoff"


@case(5, post=lambda g: (list(g), g.gi_code.co_name, g.__qualname__))
def generator_returned_and_driven_outside(n):
    return _countdown(n)


def _gen_with_cleanup(log):
    try:
        yield 1
        yield 2
    except GeneratorExit:
        log.append("exit")
        raise
    finally:
        log.append("finally")


@case()
def generator_close_and_gc():
    log = []
    g = _gen_with_cleanup(log)
    next(g)
    g.close()
    g2 = _gen_with_cleanup(log)
    next(g2)
    del g2  # finalised by refcounting
    return log


@case()
def generator_raises_inside():
    def gen():
        yield 1
        raise LookupError("from generator")

    out = []
    try:
        for x in gen():
            out.append(x)
    except LookupError as e:
        out.append(str(e))
    return out


@case()
def generator_raising_stopiteration():
    def bad():
        yield 1
        raise StopIteration("oops")

    try:
        list(bad())
    except RuntimeError as e:
        return [str(e), type(e.__cause__).__name__, str(e.__cause__)]


# --------------------------------------------------------------------------------------
# coroutines, async generators, async with


async def _square_later(x, delay=0):
    await asyncio.sleep(delay)
    return x * x


async def _gather_squares(xs):
    results = await asyncio.gather(*(_square_later(x) for x in xs))
    task = asyncio.create_task(_square_later(7))
    done = await task
    return results, done, task.done()


_request_id: contextvars.ContextVar = contextvars.ContextVar("request_id", default="-")


async def _handler(i):
    _request_id.set(f"req{i}")
    await asyncio.sleep(0)
    return _request_id.get()


async def _async_main(xs):
    squares, seven, done = await _gather_squares(xs)
    ids = await asyncio.gather(*[_handler(i) for i in range(3)])
    q: asyncio.Queue = asyncio.Queue()

    async def producer():
        for i in range(3):
            await q.put(i)
        await q.put(None)

    async def consumer():
        got = []
        while (item := await q.get()) is not None:
            got.append(item)
        return got

    _, got = await asyncio.gather(producer(), consumer())
    try:
        await asyncio.wait_for(asyncio.sleep(10), timeout=0.001)
        timed_out = False
    except asyncio.TimeoutError:
        timed_out = True
    return squares, seven, done, ids, _request_id.get(), got, timed_out


@case(given=st.tuples(st.lists(small_ints, max_size=4)), max_examples=5)
def coroutines_with_asyncio_run(xs):
    return asyncio.run(_async_main(xs))


class _Ready:
    def __init__(self, value):
        self.value = value

    def __await__(self):
        got = yield "suspend"
        return (self.value, got)


async def _uses_custom_awaitable(v):
    first = await _Ready(v)
    second = await _Ready(v + 1)
    return [first, second]


@case(given=st.tuples(small_ints))
def coroutine_driven_by_hand(v):
    coro = _uses_custom_awaitable(v)
    out = [coro.send(None), coro.send("a")]
    try:
        coro.send("b")
    except StopIteration as e:
        out.append(e.value)
    c2 = _uses_custom_awaitable(v)
    c2.send(None)
    try:
        c2.throw(ValueError("into coroutine"))
    except ValueError as e:
        out.append(str(e))
    c3 = _uses_custom_awaitable(v)
    c3.close()
    out += [coro.__name__, coro.__qualname__, inspect.iscoroutine(c3)]
    return out


@case(3, post=lambda c: asyncio.run(c))
def coroutine_returned_and_run_outside(n):
    return _gather_squares(list(range(n)))


async def _agen(n, log):
    try:
        for i in range(n):
            sent = yield i
            if sent is not None:
                log.append(("sent", sent))
            await asyncio.sleep(0)
    finally:
        log.append("agen finally")


async def _consume_agen(n):
    log = []
    got = [x async for x in _agen(n, log) if x % 2 == 0]
    ag = _agen(n + 3, log)
    first = await ag.__anext__()
    second = await ag.asend("hello")
    try:
        await ag.athrow(KeyError("inside"))
    except KeyError as e:
        log.append(("athrow", str(e)))
    await ag.aclose()
    return got, first, second, log


@case(given=st.tuples(st.integers(min_value=0, max_value=6)), max_examples=5)
def async_generators_with_asyncio_run(n):
    return asyncio.run(_consume_agen(n))


async def _plain_agen():
    yield 1
    yield 2


@case()
def async_generator_driven_by_hand():
    ag = _plain_agen()
    out = []
    for _ in range(3):
        step = ag.__anext__()
        try:
            step.send(None)
        except StopIteration as e:
            out.append(("value", e.value))
        except StopAsyncIteration:
            out.append("exhausted")
    out.append(ag.__name__)
    return out


class AsyncResource:
    def __init__(self, log, suppress=False):
        self.log = log
        self.suppress = suppress

    async def __aenter__(self):
        self.log.append("aenter")
        return self

    async def __aexit__(self, et, ev, tb):
        self.log.append(("aexit", et.__name__ if et else None))
        return self.suppress


@contextlib.asynccontextmanager
async def _async_cm(log):
    log.append("acm enter")
    try:
        yield "acm value"
    except ZeroDivisionError:
        log.append("acm swallowed")
    finally:
        log.append("acm exit")


async def _async_with_main():
    log = []
    async with AsyncResource(log) as r:
        log.append(type(r).__name__)
    async with AsyncResource(log, suppress=True):
        raise KeyError("suppressed")
    try:
        async with AsyncResource(log):
            raise KeyError("propagated")
    except KeyError as e:
        log.append(str(e))
    async with _async_cm(log) as v:
        log.append(v)
        1 / 0
    async with AsyncResource(log) as a, _async_cm(log) as b:
        log.append((type(a).__name__, b))
    return log


@case()
def async_with():
    return asyncio.run(_async_with_main())


async def _async_comprehensions(n):
    async def arange(k):
        for i in range(k):
            yield i

    return ([i async for i in arange(n)], {i: await _square_later(i) for i in range(n)},
            [await _square_later(i) for i in range(n) if i])


@case(4)
def async_comprehensions(n):
    return asyncio.run(_async_comprehensions(n))


# --------------------------------------------------------------------------------------
# with, try/except/finally


class Resource:
    def __init__(self, name, log, suppress=False, fail_enter=False):
        self.name, self.log, self.suppress, self.fail_enter = name, log, suppress, fail_enter

    def __enter__(self):
        if self.fail_enter:
            raise OSError(f"cannot open {self.name}")
        self.log.append(("enter", self.name))
        return self.name.upper()

    def __exit__(self, et, ev, tb):
        self.log.append(("exit", self.name, et.__name__ if et else None, str(ev) if ev else None))
        return self.suppress


@contextlib.contextmanager
def _managed(log, value):
    log.append(("cm enter", value))
    try:
        yield value * 2
    except ArithmeticError as e:
        log.append(("cm caught", type(e).__name__))
    finally:
        log.append(("cm exit", value))


@case(given=st.tuples(small_ints))
def with_statements(n):
    log = []
    with Resource("a", log) as a:
        log.append(a)
    with Resource("b", log, suppress=True):
        raise KeyError(n)
    try:
        with Resource("c", log):
            raise ValueError(n)
    except ValueError as e:
        log.append(("after", str(e)))
    try:
        with Resource("d", log, fail_enter=True):
            log.append("unreachable")
    except OSError as e:
        log.append(str(e))
    with Resource("e", log) as e1, Resource("f", log, suppress=True) as f1:
        log.append((e1, f1))
        raise IndexError
    with _managed(log, n) as v:
        log.append(v)
        1 // (n - n)
    with contextlib.suppress(ZeroDivisionError):
        n / 0
    with contextlib.ExitStack() as stack:
        names = [stack.enter_context(Resource(str(i), log)) for i in range(3)]
        stack.callback(log.append, "callback")
        log.append(names)

    def returns_inside_with():
        with Resource("r", log):
            return "returned"

    log.append(returns_inside_with())
    for i in range(3):
        with Resource(f"loop{i}", log):
            if i == 1:
                continue
            if i == 2:
                break
    return log


@case(given=st.tuples(small_ints))
def try_except_finally_else(n):
    log = []

    def classify(v):
        try:
            if v < 0:
                raise ValueError("negative")
            r = 100 // v
        except ZeroDivisionError as e:
            log.append(("zero", str(e)))
            return "zero"
        except (ValueError, TypeError) as e:
            log.append(("value", str(e)))
            return "neg"
        else:
            log.append("else")
            return r
        finally:
            log.append(("finally", v))

    def finally_overrides():
        try:
            raise RuntimeError("lost")
        finally:
            return "finally wins"

    def finally_overrides_return():
        try:
            return "try"
        finally:
            return "finally"

    def reraise():
        try:
            {}["missing"]
        except KeyError:
            log.append("reraising")
            raise

    def nested():
        try:
            try:
                raise TypeError("inner")
            finally:
                log.append("inner finally")
        except TypeError as e:
            return f"outer caught {e}"

    out = [classify(n), classify(0), classify(-1), finally_overrides(), finally_overrides_return(), nested()]
    try:
        reraise()
    except KeyError as e:
        out.append(repr(e))
    try:
        try:
            raise ValueError("first")
        except ValueError:
            raise TypeError("second")
    except TypeError as e:
        out.append((str(e), repr(e.__context__), e.__suppress_context__))
    e = "rebound"
    try:
        raise OSError
    except OSError as e:
        pass
    try:
        e
        out.append("e still bound")
    except NameError:
        out.append("e unbound after except")
    for i in range(3):
        try:
            if i == 1:
                continue
            if i == 2:
                break
        finally:
            log.append(("loop finally", i))
    out.append(log)
    return out


@case(given=st.tuples(st.integers(min_value=0, max_value=30)))
def exception_raised_deep_caught_outside(depth):
    def dive(k):
        if k == 0:
            raise LookupError(f"bottom at depth {depth}")
        return dive(k - 1) + 1

    try:
        dive(depth)
    except LookupError as e:
        frames = [f.name for f in inspect.getinnerframes(e.__traceback__, context=0)]
        return str(e), frames.count("dive")


@case()
def raise_from():
    out = []
    try:
        try:
            int("x")
        except ValueError as e:
            raise KeyError("wrapped") from e
    except KeyError as e:
        out.append((repr(e), repr(e.__cause__), e.__suppress_context__, repr(e.__context__)))
    try:
        try:
            1 / 0
        except ZeroDivisionError:
            raise LookupError("hidden") from None
    except LookupError as e:
        out.append((repr(e), e.__cause__, e.__suppress_context__, type(e.__context__).__name__))
    try:
        raise RuntimeError("with note")
    except RuntimeError as e:
        if hasattr(e, "add_note"):
            e.add_note("a note")
        out.append(getattr(e, "__notes__", None))
    return out


_EXCEPT_STAR_SOURCE = '''
def except_star_groups(n):
    out = []
    try:
        raise ExceptionGroup("many", [ValueError(n), TypeError("t"), KeyError("k"), ValueError("v2")])
    except* ValueError as g:
        out.append(("values", sorted(str(e) for e in g.exceptions)))
    except* (TypeError, KeyError) as g:
        out.append(("others", sorted(type(e).__name__ for e in g.exceptions)))
    try:
        try:
            raise ExceptionGroup("outer", [ValueError("a"), ExceptionGroup("inner", [OSError("b")])])
        except* ValueError:
            out.append("handled values")
    except ExceptionGroup as rest:
        out.append(("rest", repr(rest)))
    try:
        raise ZeroDivisionError("naked")
    except* ZeroDivisionError as g:
        out.append(("wrapped", type(g).__name__, [str(e) for e in g.exceptions]))
    eg = ExceptionGroup("split", [ValueError(1), TypeError(2)])
    match_, rest = eg.split(ValueError)
    out.append((repr(match_), repr(rest)))
    return out


def except_star_uncaught():
    try:
        raise ExceptionGroup("uncaught", [ValueError("x"), KeyError("y")])
    except* ValueError:
        pass
'''

_PEP695_SOURCE = """
def pep695_generics(n):
    def first[T](items: list[T]) -> T:
        return items[0]

    class Box[T]:
        def __init__(self, item: T):
            self.item = item

        def get(self) -> T:
            return self.item

        def kind(self):
            return super().__repr__()[:6]

    class IntBox(Box[int]):
        def get(self):
            return super().get() + 1

    type Pair[K] = tuple[K, K]
    return [first([n, 2]), Box(n).get(), IntBox(n).get(), Box(1).kind(), [t.__name__ for t in Box.__type_params__],
            Pair.__name__, str(Pair.__value__), first.__type_params__[0].__name__, IntBox.__orig_bases__[0].__args__]
"""

if sys.version_info >= (3, 12):
    exec(compile(_PEP695_SOURCE, "<corpus pep695>", "exec"), globals())
    case(3, name="pep695_generics", min_version=(3, 12))(globals()["pep695_generics"])

if sys.version_info >= (3, 11):
    exec(compile(_EXCEPT_STAR_SOURCE, "<corpus except*>", "exec"), globals())
    case(3, name="except_star_groups", min_version=(3, 11))(globals()["except_star_groups"])
    case(name="except_star_uncaught", min_version=(3, 11))(globals()["except_star_uncaught"])


# --------------------------------------------------------------------------------------
# match statements


@dataclass
class Pt:
    x: int
    y: int


class Circle:
    __match_args__ = ("center", "radius")

    def __init__(self, center, radius):
        self.center, self.radius = center, radius


def _describe(shape):
    match shape:
        case Pt(x=0, y=0):
            return "origin"
        case Pt(0, y):
            return f"on y axis at {y}"
        case Pt(x, y) if x == y:
            return f"diagonal {x}"
        case Circle(Pt(x, y), r) if r > 10:
            return f"big circle at {x},{y}"
        case Circle(center=c, radius=0):
            return f"degenerate at {c}"
        case Circle():
            return "circle"
        case {"type": "rect", "w": w, "h": h, **rest}:
            return f"rect {w}x{h} extra={sorted(rest)}"
        case {"type": ("line" | "ray") as kind}:
            return f"{kind}"
        case [x]:
            return f"singleton {x}"
        case [1, 2, *rest]:
            return f"starts 1,2 then {rest}"
        case [first, *_, last] if first == last:
            return f"bookends {first}"
        case (int(a), str(b)):
            return f"int-str {a} {b}"
        case Color.RED | Color.GREEN:
            return "warm-ish"
        case str() as s if len(s) > 3:
            return f"long string {s}"
        case float(v) | int(v):
            return f"number {v}"
        case None:
            return "none"
        case _:
            return "other"


@case(given=st.tuples(small_ints, small_ints))
def match_statements(a, b):
    shapes = [Pt(0, 0), Pt(0, b), Pt(a, a), Pt(a, b), Circle(Pt(a, b), 11), Circle(Pt(1, 1), 0),
              Circle(Pt(1, 1), 5), {"type": "rect", "w": a, "h": b, "z": 1}, {"type": "ray"},
              [a], [1, 2, a, b], [a, b, a], (a, str(b)), Color.GREEN, Color.BLUE, "hello",
              "hi", 2.5, a, None, object]
    return [_describe(s) for s in shapes]


# --------------------------------------------------------------------------------------
# decorators


def _logged(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        wrapper.calls.append((args, sorted(kwargs.items())))
        return func(*args, **kwargs)

    wrapper.calls = []
    return wrapper


def _repeat(times):
    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            return [func(*args, **kwargs) for _ in range(times)]

        return wrapper

    return decorator


@_logged
@_repeat(2)
def _greet(name, punct="!"):
    return f"hello {name}{punct}"


@case(given=st.tuples(st.integers(min_value=0, max_value=60)))
def decorators(n):
    @functools.lru_cache(maxsize=None)
    def fib(k):
        return k if k < 2 else fib(k - 1) + fib(k - 2)

    @functools.cache
    def square(k):
        return k * k

    def add_attr(**attrs):
        def deco(f):
            for k, v in attrs.items():
                setattr(f, k, v)
            return f

        return deco

    @add_attr(tag="x")
    @_logged
    def tagged(a):
        return a + 1

    def class_deco(cls):
        cls.decorated = True
        return cls

    @class_deco
    class K:
        @_logged
        def method(self, v):
            return v * 2

        @property
        @functools.lru_cache(maxsize=None)
        def cached_prop(self):
            return "prop"

    k = K()
    _greet.calls.clear()
    out = [fib(n), fib.cache_info().misses, square(n), square(n), square.cache_info().hits,
           _greet("bob"), _greet("amy", punct="?"), _greet.__name__, _greet.__wrapped__.__name__,
           tagged(n), tagged.tag, tagged.__name__, k.method(n), K.decorated, k.cached_prop]
    out.append(_greet.calls)
    out.append([(type(args[0]).__name__, args[1:], kw) for args, kw in K.method.calls])
    return out


# --------------------------------------------------------------------------------------
# super()


class Base:
    def __init__(self, name):
        self.names = [("Base", name)]

    def greet(self):
        return "base"

    @classmethod
    def create(cls, name):
        return cls(name)

    @property
    def kind(self):
        return "base-kind"

    def __repr__(self):
        return f"<{type(self).__name__} {self.names}>"


class Left(Base):
    def __init__(self, name):
        super().__init__(name)
        self.names.append(("Left", name))

    def greet(self):
        return "left+" + super().greet()


class Right(Base):
    def __init__(self, name):
        super().__init__(name)
        self.names.append(("Right", name))

    def greet(self):
        return "right+" + super().greet()


class Diamond(Left, Right):
    def __init__(self, name):
        super().__init__(name)
        self.names.append(("Diamond", name))

    def greet(self):
        return "diamond+" + super().greet()

    @classmethod
    def create(cls, name):
        obj = super().create(name.upper())
        obj.names.append(("created", cls.__name__))
        return obj

    @property
    def kind(self):
        return "diamond/" + super().kind

    def two_arg(self):
        return super(Left, self).greet(), super(Diamond, self).greet()

    def nested_function(self):
        def helper():
            return super(Diamond, self).greet()

        def zero_arg_nested():
            return super().greet()  # no arguments in this scope: RuntimeError

        out = [helper()]
        try:
            out.append(zero_arg_nested())
        except RuntimeError as e:
            out.append(("RuntimeError", str(e)))
        out.append((lambda: super(Right, self).greet())())
        return out

    def in_comprehension(self):
        try:
            return [super().greet() for _ in range(2)]
        except TypeError as e:  # 3.10/3.11: the comprehension has its own frame
            return ("TypeError", str(e))

    def super_object(self):
        s = super()
        return type(s).__name__, s.__thisclass__.__name__, s.greet()

    def rebound_self(self):
        self = 5  # noqa: PLW0642
        try:
            return super().greet()
        except TypeError as e:
            return ("TypeError", str(e))

    def captured_self(self):
        def use():
            return self.greet()

        return super().greet(), use()

    @staticmethod
    def static_super():
        try:
            return super().greet()
        except RuntimeError as e:
            return ("RuntimeError", str(e))


@case(given=st.tuples(texts))
def super_calls(name):
    d = Diamond(name)
    created = Diamond.create(name)
    return [d.names, d.greet(), Diamond.__mro__[1].__name__, created.names, d.kind, d.two_arg(),
            d.nested_function(), d.in_comprehension(), d.super_object(), d.rebound_self(),
            d.captured_self(), Diamond.static_super(), repr(d), Left(name).greet(),
            super(Diamond, d).__init__.__name__]


@case()
def super_in_dunder_new_and_init_subclass():
    created = []

    class Tracked:
        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            created.append(cls.__name__)

        def __new__(cls, *args):
            obj = super().__new__(cls)
            obj.args = args
            return obj

    class Child(Tracked):
        def __new__(cls, a, b):
            obj = super().__new__(cls, a, b)
            obj.extra = a + b
            return obj

    c = Child(1, 2)
    return created, c.args, c.extra


# --------------------------------------------------------------------------------------
# frame-sensitive builtins


_MODULE_CONSTANT = "module-level"


@case(given=st.tuples(small_ints, texts))
def locals_vars_globals_dir(a, s):
    b = a * 2
    loc = locals()
    v = vars()
    names = dir()
    g = globals()
    inner_total = [locals() for _ in range(1)]
    c = 3
    loc2 = locals()
    return [sorted(loc), loc["a"], loc["b"], sorted(v), names, g["__name__"], g["_MODULE_CONSTANT"],
            "c" in loc, sorted(loc2), [sorted(d) for d in inner_total], vars(Account)["rate"],
            sorted(dir(Account))[-3:], locals() is locals(), g is globals(), s == loc["s"]]


@case()
def locals_with_cells_and_free_vars():
    x = 1
    y = 2

    def inner():
        z = x + 10
        return sorted(locals().items())

    def captures():
        return y

    return inner(), sorted(locals()), sorted(k for k in locals() if k != "inner")


@case(given=st.tuples(small_ints))
def eval_exec_without_namespaces(n):
    k = n + 1
    a = eval("k * 2 + n")
    b = eval("_MODULE_CONSTANT.upper()")
    exec("new_name = k * 3")
    after_exec = locals().get("new_name")
    exec("k = 'rebound by exec'")
    still = k
    code = compile("k - 1", "<expr>", "eval")
    c = eval(code)
    d = eval("[k for _ in range(2)]")
    e = eval("(lambda: n)()")
    g = {}
    exec("def made(x): return x + 1", g)
    return [a, b, after_exec, still, c, d, e, g["made"](n), eval("locals()")["n"], eval("dir()")[:3]]


def _caller_name():
    return sys._getframe(1).f_code.co_name


def _own_name():
    return sys._getframe(0).f_code.co_name


def _frame_lines():
    here = sys._getframe()
    up = sys._getframe(1)
    return here.f_lineno - here.f_code.co_firstlineno, up.f_lineno - up.f_code.co_firstlineno


@case()
def getframe_names_and_lines():
    def nested():
        return _caller_name(), _own_name(), sys._getframe().f_code.co_name, _frame_lines()

    return [_caller_name(), _own_name(), nested(), inspect.currentframe().f_code.co_name,
            sys._getframe(0).f_code.co_name, [_caller_name() for _ in range(1)],
            sys._getframe(0).f_globals is globals(), sys._getframe(0).f_locals.get("nested") is nested,
            _frame_lines()]


@case()
def getframe_f_back_walk():
    def leaf():
        f = sys._getframe()
        names = []
        while f is not None and len(names) < 3:
            names.append(f.f_code.co_name)
            f = f.f_back
        return names

    def middle():
        return leaf()

    return middle()


@case()
def inspect_stack_names():
    def leaf():
        return [fi.function for fi in inspect.stack(context=0)[:3]]

    def middle():
        return leaf()

    return middle()


@case()
def code_object_attributes_of_running_frame():
    def probe(a, /, b, *args, c=1, **kw):
        code = sys._getframe().f_code
        attrs = ["co_name", "co_filename", "co_firstlineno", "co_argcount", "co_posonlyargcount",
                 "co_kwonlyargcount", "co_varnames", "co_freevars", "co_cellvars", "co_nlocals"]
        if sys.version_info >= (3, 11):
            attrs.append("co_qualname")
        flags = code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS | inspect.CO_GENERATOR
                                 | inspect.CO_COROUTINE | inspect.CO_NESTED | inspect.CO_NEWLOCALS
                                 | inspect.CO_OPTIMIZED)
        return [(name, getattr(code, name)) for name in attrs] + [("flags", flags)]

    return probe(1, 2)


@case()
def running_code_is_the_functions_code():
    def probe():
        return sys._getframe().f_code is probe.__code__

    return probe()


@case()
def logging_records_caller():
    records = []

    class Capture(logging.Handler):
        def emit(self, record):
            records.append((record.funcName, record.lineno - _first_line(record), record.getMessage(),
                            record.module))

    def _first_line(record):
        return logging_records_caller.__code__.co_firstlineno

    logger = logging.getLogger("corpus.logging_records_caller")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = Capture()
    logger.addHandler(handler)
    try:
        logger.info("value %s", 42)
        logger.warning("second")
    finally:
        logger.removeHandler(handler)
    return records


@case()
def warnings_attributed_to_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("corpus warning", UserWarning)

        def deprecated():
            warnings.warn("old api", DeprecationWarning, stacklevel=2)

        deprecated()
    first = warnings_attributed_to_caller.__code__.co_firstlineno
    return [(w.category.__name__, str(w.message), w.filename.rsplit("/", 1)[-1], w.lineno - first)
            for w in caught]


@case()
def recursion_limit_seen_by_code():
    return sys.getrecursionlimit()


# --------------------------------------------------------------------------------------
# callee expressions


def _adder(x):
    return lambda y: x + y


def _default_source():
    return [1, 2]


@case(given=st.tuples(small_ints, small_ints, st.booleans()))
def callee_expressions(a, b, flag):
    out = []
    out.append((g := abs)(a))
    out.append(g(b))
    out.append((abs if flag else str)(a))
    out.append((_adder if flag else (lambda x: (lambda y: x * y)))(a)(b))
    out.append(_adder(a)(b))
    out.append(_make_counter(a)[0](b))
    out.append([abs, str][flag](a))
    out.append({"f": _adder}["f"](a)(1))
    out.append(getattr(Account, "fee")(a))
    out.append(Account("x", a).deposit(b).deposit(1).balance)
    out.append((lambda: _adder)()(a)(b))

    def with_defaults(x, extra=_default_source(), n=len(str(a))):
        return x, extra, n

    out.append(with_defaults(b))
    out.append(f"{_adder(a)(b)} {abs(b):>5} {str(a)!r} {'%d' % a} {'{:x}'.format(abs(b))}")
    out.append([c for c in (abs, _adder(a))][0](b))
    return out


# --------------------------------------------------------------------------------------
# operators


@case(given=st.tuples(ints, ints))
def int_operators(a, b):
    out = [a + b, a - b, a * b, -a, +a, ~a, a & b, a | b, a ^ b, abs(a), a == b, a != b, a < b,
           a <= b, a > b, a >= b, a << (b % 20), a >> (b % 20), a**2, pow(a, 3), a < b < a + 1,
           divmod(a, b) if b else None, a // b if b else None, a % b if b else None,
           a / b if b else None, pow(a, 2, abs(b)) if b else None]
    try:
        out.append(a // (b - b))
    except ZeroDivisionError as e:
        out.append(str(e))
    x = a
    x += b
    x -= 1
    x *= 2
    x //= 3
    x **= 2
    x %= 1000003
    x <<= 2
    x >>= 1
    x |= 5
    x &= 0xFFFF
    x ^= 3
    out.append(x)
    return out


@case(given=st.tuples(floats, floats))
def float_operators(a, b):
    out = [a + b, a - b, a * b, -a, a == b, a < b, abs(a), round(a, 3), math.floor(a), a**2]
    out.append(a / b if b else "div0")
    out.append(math.fmod(a, b) if b else "mod0")
    try:
        out.append(a / (b - b))
    except ZeroDivisionError as e:
        out.append(str(e))
    y = a
    y /= 2
    y -= b
    return out + [y, f"{a:.3f}", f"{b:e}", "%.2f" % a, "{:+.1f}".format(b)]


@case(given=st.tuples(texts, texts, st.integers(min_value=0, max_value=4)))
def string_operators(s, t, n):
    out = [s + t, s * n, t in s, s not in t, s == t, s < t, s[1:3], s[::-1], s[::2], s[-1:] if s else "",
           len(s + t), (s + t).count("a"), s.replace("a", "b"), f"{s!r}:{t:>8}:{n:03d}",
           "%s-%r-%d" % (s, t, n), "{0}/{1}/{0}".format(s, t), "{x}{y}".format(x=s, y=t),
           "{0.real}".format(n), "{0[0]}".format([s]), s.center(10, "*"), f"{s=}"]
    u = s
    u += t
    u *= 2
    return out + [u, "%(a)s %(b)s" % {"a": s, "b": t}, string.Template("$x!").substitute(x=s)]


@case(given=st.tuples(int_lists, int_lists))
def list_operators(xs, ys):
    zs = xs + ys
    out = [zs, xs * 2, xs == ys, xs < ys, 3 in xs, 3 not in ys, zs[1:3], zs[::2], zs[::-1],
           zs[-2:], len(zs)]
    w = list(zs)
    w[1:3] = [100, 200, 300]
    out.append(list(w))
    if len(w) >= 4:
        w[::2] = [0] * len(w[::2])
    out.append(list(w))
    if w:
        del w[0]
    del w[1:3]
    del w[::3]
    out.append(w)
    w += [7]
    w *= 2
    out.append(w)
    m = [[0] * 3 for _ in range(3)]
    m[1][2] += 5
    m[0][0] -= 1
    d = {"k": 1}
    d["k"] += 2
    d["new"] = d.get("new", 0) + 1
    del d["k"]
    out += [m, d, xs is ys, xs is not ys, [] is not [], (1, 2) + (3,), {1, 2} | {3}, {1: 2} | {3: 4}]
    return out


@functools.total_ordering
class Money:
    def __init__(self, cents):
        self.cents = cents

    def __add__(self, other):
        if isinstance(other, Money):
            return Money(self.cents + other.cents)
        if isinstance(other, int):
            return Money(self.cents + other)
        return NotImplemented

    def __radd__(self, other):
        if other == 0:
            return self
        return self.__add__(other)

    def __sub__(self, other):
        return NotImplemented

    def __rsub__(self, other):
        return Money(other - self.cents) if isinstance(other, int) else NotImplemented

    def __mul__(self, k):
        return Money(self.cents * k)

    __rmul__ = __mul__

    def __neg__(self):
        return Money(-self.cents)

    def __pos__(self):
        return Money(abs(self.cents))

    def __invert__(self):
        return Money(~self.cents)

    def __eq__(self, other):
        return isinstance(other, Money) and self.cents == other.cents

    def __lt__(self, other):
        if not isinstance(other, Money):
            return NotImplemented
        return self.cents < other.cents

    def __hash__(self):
        return hash(self.cents)

    def __bool__(self):
        return self.cents != 0

    def __repr__(self):
        return f"Money({self.cents})"

    def __format__(self, spec):
        return f"${self.cents / 100:{spec or '.2f'}}"

    def __matmul__(self, other):
        return self.cents * other.cents

    def __truediv__(self, k):
        return Money(self.cents // k)

    def __pow__(self, e, mod=None):
        return Money(pow(self.cents, e, mod))


class Bag:
    def __init__(self, items=()):
        self.items = list(items)
        self.log = []

    def __getitem__(self, key):
        self.log.append(("get", repr(key)))
        if isinstance(key, slice):
            return Bag(self.items[key])
        return self.items[key]

    def __setitem__(self, key, value):
        self.log.append(("set", repr(key)))
        self.items[key] = value

    def __delitem__(self, key):
        self.log.append(("del", repr(key)))
        del self.items[key]

    def __contains__(self, item):
        self.log.append(("contains", item))
        return item in self.items

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __iadd__(self, other):
        self.items.extend(other)
        self.log.append("iadd")
        return self

    def __eq__(self, other):
        return isinstance(other, Bag) and self.items == other.items


class Weird:
    """Comparisons that return non-bools, and a truthiness that counts."""

    def __init__(self):
        self.bools = 0

    def __eq__(self, other):
        return Verdict(self, "eq")

    def __lt__(self, other):
        return Verdict(self, "lt")

    def __contains__(self, item):
        return "truthy string"


class Verdict:
    def __init__(self, owner, what):
        self.owner, self.what = owner, what

    def __bool__(self):
        self.owner.bools += 1
        return self.what == "eq"

    def __repr__(self):
        return f"Verdict({self.what})"


@case(given=st.tuples(small_ints, small_ints))
def user_class_operators(a, b):
    m, n = Money(a), Money(b)
    out = [m + n, m + 1, 1 + m, sum([m, n]), 10 - m, -m, +m, ~m, m * 3, 3 * m, m == n, m != n,
           m < n, m <= n, m > n, m >= n, m @ n, m / 3, m**2, pow(m, 2, 7), bool(m), f"{m}",
           f"{n:.1f}", sorted([n, m, Money(0)]), max(m, n), min([m, n], key=lambda v: -v.cents),
           m in [n, m], m is m, m is not n]
    for bad in (lambda: m - n, lambda: m < 3, lambda: "x" + m, lambda: m + "x"):
        try:
            bad()
        except TypeError as e:
            out.append(str(e))
    total = Money(0)
    for v in (m, n):
        total += v
    out.append(total)
    bag = Bag(range(6))
    out += [bag[1], bag[1:4].items, bag[::2].items, 3 in bag, 9 not in bag, len(bag)]
    bag[0] = a
    bag[1:3] = [b, b, b]
    del bag[0]
    del bag[::2]
    same = bag
    bag += [a]
    out += [bag.items, bag.log, same is bag, bag == Bag(bag.items)]
    w = Weird()
    r1 = w == 1
    r2 = w < 2
    if w == 1:
        out.append("eq truthy")
    if w < 2:
        out.append("lt truthy")
    r3 = w < 1 < w
    if 1 < 2 < w:
        out.append("chain truthy")
    out += [repr(r1), repr(r2), repr(r3), 1 in w, 2 not in w, w.bools, not (w == 1)]
    logged = Bag([a, b, 0])
    logged[0] += 1
    logged[1:3] += [5]
    logged[-1] *= 2
    mm = Money(a)
    mm @= Money(2)
    out += [logged.items, logged.log, mm]
    return out


class _Reflecting:
    """Only reflected dunders: ``[1] + r`` reaches ``__radd__`` because list has no nb_add."""

    def __radd__(self, other):
        return ("radd", other)

    def __rmul__(self, other):
        return ("rmul", other)


@case()
def operators_reflected_after_sequence_concat_and_repeat():
    out = [[1] + _Reflecting(), "s" + _Reflecting(), (1,) + _Reflecting(), [1] * _Reflecting()]
    x = [1]
    x += _Reflecting()
    out.append(x)
    return out


class _StaticDunders:
    __add__ = staticmethod(lambda other: ("static add", other))
    __neg__ = staticmethod(lambda: "static neg")
    __eq__ = staticmethod(lambda other: ("static eq", other))
    __getitem__ = staticmethod(lambda key: ("static getitem", key))


class _ClassmethodRadd:
    @classmethod
    def __radd__(cls, other):
        return ("classmethod radd", cls.__name__, type(other).__name__)


class _DeclinesAdd:
    def __add__(self, other):
        return NotImplemented


@case()
def operators_with_staticmethod_and_classmethod_dunders():
    s = _StaticDunders()
    return [s + 1, -s, s == 2, s[3], _DeclinesAdd() + _ClassmethodRadd()]


class _AbcOperand(abc.ABC):
    def __add__(self, other):
        return "AbcOperand.__add__"

    def __lt__(self, other):
        return "AbcOperand.__lt__"


class _RegisteredOperand:
    def __radd__(self, other):
        return "RegisteredOperand.__radd__"

    def __gt__(self, other):
        return "RegisteredOperand.__gt__"


_AbcOperand.register(_RegisteredOperand)


@case()
def operator_priority_ignores_virtual_subclasses():
    # The reflected method of the right operand goes first only for a *real* subclass;
    # an ABC-registered class is not one.
    a, r = _AbcOperand(), _RegisteredOperand()
    return [issubclass(_RegisteredOperand, _AbcOperand), a + r, a < r]


class Node:
    def __init__(self, value):
        self.value = value
        self.children = []
        self.meta = {"hits": 0}


@case(given=st.tuples(small_ints))
def augmented_assignment_targets(a):
    n = Node(a)
    n.value += 1
    n.value *= 2
    n.children += [Node(1)]
    n.children[0].value -= a
    n.meta["hits"] += 1
    n.meta["hits"] **= 2
    grid = {"row": [1, 2, 3]}
    grid["row"][1] += a
    grid["row"][-1] //= 2
    calls = []

    def key():
        calls.append("key")
        return "hits"

    def target():
        calls.append("target")
        return n.meta

    target()[key()] += 10
    return n.value, n.children[0].value, n.meta, grid, calls


# --------------------------------------------------------------------------------------
# higher-order builtins and library callbacks


@case(given=st.tuples(int_lists))
def higher_order(xs):
    pairs = list(zip(xs, xs[1:]))
    out = [
        list(map(lambda v: v * 2, xs)),
        list(map(operator.add, xs, reversed(xs))),
        list(filter(lambda v: v % 3 == 0, xs)),
        list(filter(None, xs)),
        sorted(xs, key=lambda v: (abs(v), v)),
        sorted(xs, key=abs, reverse=True),
        min(xs, key=lambda v: abs(v - 7), default=None),
        max(xs, key=lambda v: -v, default=None),
        functools.reduce(lambda acc, v: acc * 2 + v, xs, 0),
        functools.reduce(operator.mul, xs, 1),
        list(itertools.starmap(lambda a, b: a - b, pairs)),
        [(k, list(g)) for k, g in itertools.groupby(sorted(xs), key=lambda v: v // 10)],
        list(itertools.accumulate(xs, lambda a, b: max(a, b))),
        list(itertools.accumulate(xs, func=operator.add, initial=100)),
        list(itertools.takewhile(lambda v: v < 50, xs)),
        list(itertools.dropwhile(lambda v: v < 50, xs)),
        list(itertools.filterfalse(lambda v: v % 2, xs)),
        list(enumerate(map(str, xs), start=1)),
        list(itertools.chain.from_iterable([xs, xs[:2]])),
        list(itertools.islice(itertools.count(), 3)),
        sorted(xs, key=functools.cmp_to_key(lambda a, b: (a % 7) - (b % 7))),
    ]
    ys = list(xs)
    ys.sort(key=lambda v: -v)
    out.append(ys)
    it = iter(list(xs) + [None])
    out.append(list(iter(lambda: next(it), None)))
    heap = []
    for v in xs:
        heapq.heappush(heap, (abs(v), v))
    out.append([heapq.heappop(heap) for _ in range(len(heap))])
    out.append(json.dumps({"m": Money(5)}, default=lambda o: o.cents))
    out.append(list(map(operator.attrgetter("cents"), [Money(v) for v in xs])))
    out.append(list(map(operator.methodcaller("upper"), ["a", "b"])))
    return out


@case(given=st.tuples(texts))
def regex_callbacks(s):
    words = re.compile(r"[a-z]+")
    out = [
        re.sub(r"\d", lambda m: str(int(m.group()) * 2), s),
        words.sub(lambda m: m.group().upper(), s),
        words.subn(lambda m: f"<{m.group()}>", s),
        re.sub(r"(?P<w>\w)", r"[\g<w>]", s, count=2),
        [m.span() for m in re.finditer(r"\s+", s)],
        re.split(r"[,.]", s),
        re.fullmatch(r"\w*", s) is not None,
    ]
    return out


@case()
def stdlib_callback_apis():
    @functools.singledispatch
    def describe(x):
        return "object"

    @describe.register
    def _(x: int):
        return f"int {x}"

    @describe.register(list)
    def _(x):
        return f"list of {len(x)}"

    dd = collections.defaultdict(lambda: "dflt")
    dd["a"] = 1
    counter = collections.Counter("mississippi")
    ordered = collections.OrderedDict.fromkeys("cab")
    ordered.move_to_end("c")
    chain = collections.ChainMap({"a": 1}, {"a": 2, "b": 3})

    class Deep:
        def __init__(self):
            self.items = [1, [2, 3]]
            self.copied = 0

        def __deepcopy__(self, memo):
            new = Deep()
            new.items = copy.deepcopy(self.items, memo)
            new.copied = self.copied + 1
            return new

    d2 = copy.deepcopy(Deep())
    return [describe(1), describe([1, 2]), describe("s"), dd["missing"], dd["a"],
            counter.most_common(2), list(ordered), chain["a"], chain["b"], d2.copied, d2.items,
            copy.copy([1, [2]]), textwrap.shorten("hello there world", 12),
            types.SimpleNamespace(a=1, b=2) == types.SimpleNamespace(b=2, a=1),
            typing.get_type_hints(_posonly) == {}]


# --------------------------------------------------------------------------------------
# recursion


def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


def _is_even(n):
    return True if n == 0 else _is_odd(n - 1)


def _is_odd(n):
    return False if n == 0 else _is_even(n - 1)


def _depth(n):
    if n == 0:
        return 0
    return 1 + _depth(n - 1)


class _Tree:
    def __init__(self, value, *children):
        self.value, self.children = value, children

    def total(self):
        return self.value + sum(c.total() for c in self.children)

    def walk(self):
        yield self.value
        for c in self.children:
            yield from c.walk()


@case(given=st.tuples(st.integers(min_value=0, max_value=16), st.integers(min_value=0, max_value=200)))
def recursion(n, m):
    tree = _Tree(1, _Tree(2, _Tree(3)), _Tree(4, _Tree(5), _Tree(6, _Tree(7))))
    return [_fib(n), _is_even(m), _is_odd(m), _depth(m), tree.total(), list(tree.walk())]


@case(900)
def recursion_to_depth_900(n):
    return _depth(n)


@case(450)
def mutual_recursion_to_depth_450(n):
    return _is_even(n)


@case()
def recursion_error_is_catchable():
    def forever(k):
        return forever(k + 1)

    try:
        forever(0)
    except RecursionError:
        return "RecursionError"


# --------------------------------------------------------------------------------------
# function objects mutated after use


def _with_default(x=1):
    return x


def _kw_default(*, x=1):
    return x


def _code_a():
    return "a"


def _code_b():
    return "b"


@case()
def function_defaults_mutated_between_calls():
    out = [_with_default()]
    saved = _with_default.__defaults__
    _with_default.__defaults__ = (2,)
    try:
        out.append(_with_default())
    finally:
        _with_default.__defaults__ = saved
    out.append(_kw_default())
    saved_kw = _kw_default.__kwdefaults__
    _kw_default.__kwdefaults__ = {"x": 3}
    try:
        out.append(_kw_default())
    finally:
        _kw_default.__kwdefaults__ = saved_kw
    return out


@case()
def function_code_swapped_between_calls():
    def target():
        return "a"

    out = [target()]
    target.__code__ = _code_b.__code__
    out.append(target())
    return out


# --------------------------------------------------------------------------------------
# miscellany: evaluation contexts of calls, odd callees, tracing


def _many(*args, **kwargs):
    return len(args), sum(args), sorted(kwargs)[:3], sum(kwargs.values())


@case(given=st.tuples(small_ints))
def calls_with_many_arguments(a):
    # Past ~30 arguments the compiler builds a tuple/dict and uses CALL_FUNCTION_EX.
    return [
        _many(a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
              24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40),
        _many(k0=a, k1=1, k2=2, k3=3, k4=4, k5=5, k6=6, k7=7, k8=8, k9=9, k10=10, k11=11, k12=12,
              k13=13, k14=14, k15=15, k16=16, k17=17, k18=18, k19=19, k20=20, k21=21, k22=22,
              k23=23, k24=24, k25=25, k26=26, k27=27, k28=28, k29=29, k30=30, k31=31, k32=32),
        _many(*range(a % 50), *[a] * 3, **{f"x{i}": i for i in range(a % 7)}),
    ]


def _ident(x):
    return x


@case(given=st.tuples(small_ints, st.booleans()))
def calls_at_every_stack_depth(a, flag):
    # Call sites inside other expressions, so that values of the enclosing expression sit
    # on the stack below the callee: list/tuple/dict displays, operators, subscripts,
    # conditionals, boolean operators, f-strings, unpacking, loops, handlers, with blocks.
    d = {"k": [a, _ident(a)]}
    out = [
        [1, 2, _ident(a), 3, _ident(_ident(a) + 1)],
        (_ident(a), *[_ident(1), _ident(2)], _ident(3)),
        {**d, "j": _ident(a), _ident("key"): _ident({"x": _ident(a)})},
        a + _ident(a) * _ident(2) - _ident(_ident(1)),
        d[_ident("k")][_ident(1)],
        _ident(a) if _ident(flag) else _ident(-a),
        flag and _ident("and") or _ident("or"),
        f"{_ident(a)}:{_ident(str(a)):>{_ident(6)}}",
        _many(_ident(1), *[_ident(2)], k=_ident(3), **{"j": _ident(4)}),
        _ident(_ident(_ident(_ident(_ident(a))))),
        max(_ident(a), key=_ident),
    ]
    for i in range(_ident(2)):
        for j in [_ident(i)]:
            out.append(_ident(j) + _ident(i))
    try:
        raise KeyError(_ident(a))
    except KeyError as e:
        out.append(_ident(e.args[0]))
        try:
            raise ValueError(_ident("inner"))
        except ValueError:
            out.append(_ident(len(str(e))))
    finally:
        out.append(_ident("finally"))
    with contextlib.nullcontext(_ident(a)) as v:
        with contextlib.nullcontext(_ident(v)) as w:
            out.append(_ident(v) + _ident(w))
    while _ident(len(out)) < 20:
        out.append(_ident(None))
    x, (y, *z) = _ident((1, _ident([2, 3, 4])))
    out.append((x, y, z))
    assert _ident(True), _ident("message")
    match _ident([a, flag]):
        case [n, True] if _ident(n) == a:
            out.append(_ident("matched true"))
        case [n, False] if _ident(n) == a:
            out.append(_ident("matched false"))
    return out


@case()
def locals_order():
    attrs = ["x"]
    out = [(name, 1) for name in attrs]
    flags = 3
    name = "later"
    return list(locals())


class _VirtualChild:
    def __init__(self, *args):
        self.init_args = args


class _AbstractFactory(abc.ABC):
    def __new__(cls, virtual):
        if virtual:
            return _VirtualChild("made by __new__")
        return super().__new__(cls)

    def __init__(self, virtual):
        self.init_args = ("factory __init__", virtual)


_AbstractFactory.register(_VirtualChild)


@case()
def new_returns_virtual_subclass():
    # type.__call__ runs __init__ only when __new__ returned a real instance of the class:
    # an ABC-registered (virtual) subclass does not count.
    v = _AbstractFactory(True)
    r = _AbstractFactory(False)
    return [type(v).__name__, isinstance(v, _AbstractFactory), v.init_args, r.init_args]


@types.coroutine
def _legacy_sleep():
    got = yield "legacy"
    return got


async def _awaits_legacy():
    return await _legacy_sleep()


@case()
def generator_based_coroutine():
    c = _awaits_legacy()
    first = c.send(None)
    try:
        c.send("resumed")
    except StopIteration as e:
        return first, e.value, bool(_legacy_sleep.__code__.co_flags & inspect.CO_ITERABLE_COROUTINE)


_GLOBAL_COUNTER = 0


def _bump(by):
    global _GLOBAL_COUNTER
    _GLOBAL_COUNTER += by
    return _GLOBAL_COUNTER


@case()
def globals_imports_and_builtins():
    global _GLOBAL_COUNTER
    _GLOBAL_COUNTER = 0
    _bump(2)
    _bump(3)
    import importlib

    mod = importlib.import_module("json.decoder")
    os_mod = __import__("os")
    from collections import OrderedDict as OD

    return [_GLOBAL_COUNTER, mod.__name__, os_mod.sep, OD.__name__, type("Dyn", (), {"a": 1})().a,
            type(3).__name__, object.__new__(Account).__class__.__name__, callable(_bump),
            isinstance(_bump, types.FunctionType), getattr(_bump, "__name__"), hasattr(_bump, "nope"),
            _bump.__qualname__, _bump.__module__, sys.getrecursionlimit() > 100]


@case()
def settrace_sees_the_same_lines():
    events = []
    here = __file__

    def tracer(frame, event, arg):
        code = frame.f_code
        if code.co_filename == here and code.co_name in ("_traced_helper", "_traced_loop"):
            events.append((code.co_name, event, frame.f_lineno - code.co_firstlineno))
        return tracer

    sys.settrace(tracer)
    try:
        result = _traced_loop(3)
    finally:
        sys.settrace(None)
    return result, events


def _traced_helper(x):
    y = x * 2
    if y > 2:
        return y - 1
    return _ident(
        y,
    )


def _traced_loop(n):
    total = 0
    for i in range(n):
        total += _traced_helper(i)
    try:
        _traced_helper(None)
    except TypeError:
        total += 100
    return total


def _yield_in_arguments(n):
    total = _many(n, (yield "first"), k=(yield "second"))
    yield _ident((yield total))


@case(given=st.tuples(small_ints))
def yield_inside_call_arguments(n):
    g = _yield_in_arguments(n)
    return [next(g), g.send(1), g.send(2), g.send("x"), list(g)]


async def _await_in_arguments(n):
    return _many(n, await _square_later(n), k=await _square_later(2), **{"j": await _square_later(1)})


@case(given=st.tuples(small_ints), max_examples=5)
def await_inside_call_arguments(n):
    return asyncio.run(_await_in_arguments(n))


# --------------------------------------------------------------------------------------
# probes: every call of _probe in these functions is an explicit call site (or a callback
# that the engine promises to overdub), so a prehook must see each one that runs.

PROBE_RUNS = [0]


def _probe(x=0):
    PROBE_RUNS[0] += 1
    return x


class _ProbeHolder:
    sm = staticmethod(_probe)

    def method(self, v):
        return _probe(v) + 1

    @classmethod
    def cm(cls, v):
        return _probe(v)


def probe_call_shapes(a):
    out = [_probe(a)]
    f = _probe
    out.append(f(a))
    out.append(_probe(*[a]))
    out.append(_probe(**{"x": a}))
    out.append(_probe(x=a))
    out.append(_ProbeHolder.sm(a))
    out.append(_ProbeHolder().sm(a))
    out.append(_ProbeHolder().method(a))
    out.append(_ProbeHolder.cm(a))
    out.append(functools.partial(_probe, a)())
    out.append(list(map(_probe, [a, a])))
    out.append(sorted([a, 1], key=_probe))
    out.append((lambda v: _probe(v))(a))
    out.append([_probe(v) for v in [a]])
    out.append(next(_probe(v) for v in [a]))
    out.append({_probe(v): _probe(v) for v in [a]})

    def inner(v=_probe(a)):
        return v

    out.append(inner())
    out.append(_probe(a) + _probe(a))
    out.append((g := _probe)(a) + g(a))
    return out


def probe_decorator_and_default():
    @_probe
    def decorated():
        return "d"

    def with_default(x=_probe(5)):
        return x

    return decorated(), with_default()


def probe_in_class_body(a):
    class Body:
        value = _probe(a)
        items = [_probe(i) for i in range(2)]

    return Body.value, Body.items


def probe_in_generator_and_coroutine(a):
    def gen():
        yield _probe(a)
        yield from (_probe(i) for i in range(2))

    async def coro():
        await asyncio.sleep(0)
        return _probe(a)

    return list(gen()), asyncio.run(coro())


PROBES = [probe_call_shapes, probe_decorator_and_default, probe_in_class_body,
          probe_in_generator_and_coroutine]


@case(given=st.tuples(small_ints))
def unittest_mock(a):
    from unittest import mock

    m = mock.Mock(return_value=a)
    out = [m(1, k=2), type(m.method(a)).__name__, m.call_args, m.method.call_args_list, m.call_count]
    m.assert_called_once_with(1, k=2)
    mm = mock.MagicMock()
    mm.__len__.return_value = 7
    mm.__getitem__.side_effect = lambda k: k * 2
    out += [len(mm), mm[a], 3 in mm, bool(mm)]
    spec = mock.create_autospec(_posonly)
    spec(1, 2)
    try:
        spec(1, 2, 3, 4, 5)
    except TypeError as e:
        out.append(str(e))
    with mock.patch.object(Account, "rate", 10):
        out.append(Account("p", 3).interest())
    with mock.patch(f"{__name__}._ident", side_effect=lambda x: -x) as patched:
        out.append(_ident(a))
        out.append(patched.call_count)
    out.append(Account("q", 3).interest())
    return out


# --------------------------------------------------------------------------------------
# threads, printing


@case(given=st.tuples(st.lists(small_ints, min_size=1, max_size=4)), max_examples=5)
def threads(xs):
    results = {}
    lock = threading.Lock()
    local = threading.local()

    def worker(i, v):
        local.value = v * 2
        with lock:
            results[i] = (local.value, threading.current_thread().name.startswith("w"))

    ts = [threading.Thread(target=worker, args=(i, v), name=f"w{i}") for i, v in enumerate(xs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with ThreadPoolExecutor(max_workers=2) as pool:
        squares = list(pool.map(lambda v: v * v, xs))
        fut = pool.submit(sum, xs)
    event = threading.Event()
    timer = threading.Thread(target=event.set)
    timer.start()
    timer.join()
    return sorted(results.items()), squares, fut.result(), event.is_set(), hasattr(local, "value")


@case(given=st.tuples(texts, small_ints))
def print_to_stringio(s, n):
    buf = io.StringIO()
    print(s, n, file=buf)
    print(s, n, sep="|", end="$\n", file=buf)
    print(*[1, 2, 3], file=buf, flush=True)
    print(file=buf)
    redirected = io.StringIO()
    with contextlib.redirect_stdout(redirected):
        print("to stdout", n)
        sys.stdout.write("direct\n")
    buf.write(f"{s:>4}")
    return buf.getvalue(), redirected.getvalue()


# --------------------------------------------------------------------------------------
# uncaught exceptions: the user frames of the traceback are compared


class _Broken:
    def __init__(self, fail):
        if fail:
            raise ValueError("in __init__")

    @property
    def prop(self):
        return self.missing_attribute

    def __add__(self, other):
        raise ArithmeticError("in __add__")

    def __getitem__(self, key):
        return {}[key]

    def method(self, x):
        return self.helper(x)

    def helper(self, x):
        return 1 / x


def _level3(x):
    return [1, 2][x]


def _level2(x):
    return _level3(x + 1)


def _level1(x):
    y = x * 2
    return _level2(
        y,
    )


@case(5)
def traceback_through_plain_calls(x):
    return _level1(x)


@case()
def traceback_in_method_and_property():
    b = _Broken(False)
    try:
        b.prop
    except AttributeError:
        pass
    return b.method(0)


@case()
def traceback_in_init():
    return _Broken(True)


@case()
def traceback_through_operator_dunder():
    return _Broken(False) + 1


@case()
def traceback_through_subscript_dunder():
    return _Broken(False)["key"]


@case()
def traceback_in_lambda_and_comprehension():
    f = lambda v: 10 // v  # noqa: E731
    return [f(v) for v in (2, 1, 0)]


@case()
def traceback_in_generator():
    def gen():
        yield 1
        yield {}["gen"]

    return list(gen())


@case()
def traceback_in_callback_from_c():
    return sorted([3, 1, 0], key=lambda v: 1 / v)


@case()
def traceback_through_map_and_reduce():
    return functools.reduce(lambda a, b: a / b, map(lambda v: v - 1, [3, 2, 1]))


@case()
def traceback_through_decorator_and_partial():
    @_logged
    def inner(a, b):
        return a[b]

    return functools.partial(inner, [1])(5)


@case()
def traceback_in_with_exit():
    class BadExit:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            raise RuntimeError("in __exit__")

    with BadExit():
        return "body"


@case()
def traceback_raise_from_chain():
    try:
        _level1(7)
    except IndexError as e:
        raise KeyError("chained") from e


@case()
def traceback_in_finally_after_return():
    try:
        return 1
    finally:
        raise OSError("finally raised")


@case()
def traceback_through_eval_and_exec():
    exec("def from_exec():\n    return 1 / 0\n", globals())
    return eval("from_exec()")


@case()
def traceback_through_class_construction_and_super():
    class Parent:
        def __init__(self, v):
            self.v = 1 // v

    class Kid(Parent):
        def __init__(self, v):
            super().__init__(v - 1)

    return Kid(1)


@case()
def traceback_through_coroutine():
    async def inner():
        await asyncio.sleep(0)
        raise ValueError("in coroutine")

    async def outer():
        return await inner()

    return asyncio.run(outer())


@case()
def traceback_through_enum_lookup():
    return Color(42)


@case()
def traceback_from_deep_recursion():
    def down(k):
        if k == 0:
            raise LookupError("bottom")
        return down(k - 1)

    return down(40)


@case()
def traceback_not_callable_and_bad_arguments():
    value = 3
    try:
        value()
    except TypeError:
        pass
    return _posonly(a=1)


@case()
def traceback_multiline_expression():
    data = {"a": [1, 2]}
    return (
        data["a"][0]
        + data["a"][1]
        + data[
            "b"
        ][0]
    )


@case()
def traceback_in_thread_is_reported_in_caller():
    errors = []

    def work():
        try:
            1 / 0
        except ZeroDivisionError as e:
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    raise errors[0]


@case(given=st.tuples(small_ints, small_ints))
def traceback_arithmetic_with_generated_inputs(a, b):
    table = {a: "x"}
    return table[a] * (a // b) + table[b]
