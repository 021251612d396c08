"""The built-in contexts run no code of the program's that the program did not run, and
keep none of its objects alive (docs/contexts.md, "trace": "Tracing never changes what the
program does").

The trace shows values without calling their ``__repr__`` unless ``reprs=user`` asks for
it; the trace and the profile name callees without asking a class's metaclass; neither
holds an argument, a result or a class after the call it records.  Each test runs on the
C path and on the pure-Python one (tox's ``-pure`` environments).
"""

from __future__ import annotations

import collections
import gc
import io
import os
import subprocess
import sys
import textwrap
import threading
import types
import weakref

import pytest

from cassette_hook._saferepr import SafeRepr
from cassette_hook.contexts import ProfileContext, TraceContext
from cassette_hook.contexts._names import name_of


def traced(f, *args, **options):
    """``f(*args)``'s result under a trace, and the trace."""
    out = io.StringIO()
    ctx = TraceContext(out, **options)
    result = ctx.runcall(f, *args)
    ctx.write_report()
    return result, out.getvalue()


class Lazy:
    """A value whose ``__repr__`` consumes its state (the example of the issue)."""

    def __init__(self, n):
        self.items = (i * i for i in range(n))

    def __repr__(self):
        return f"Lazy({list(self.items)})"


def make_lazy(n):
    return Lazy(n)


def squares_of_a_lazy(n):
    return list(make_lazy(n).items)


# -- reprs the trace does not call -------------------------------------------------------

def test_trace_does_not_call_a_repr_that_consumes_state():
    plain = squares_of_a_lazy(3)
    result, text = traced(squares_of_a_lazy, 3)
    assert result == plain == [0, 1, 4]
    assert "Lazy([" not in text and "<Lazy object at 0x" in text


def test_trace_does_not_call_a_repr_that_raises():
    called = []

    class Raising:
        def __repr__(self):
            called.append(self)
            raise ValueError("no repr")

    value = Raising()
    assert traced(lambda x: [x], value)[1].endswith(f"-> [<Raising object at {id(value):#x}>]\n")
    assert called == []


def test_trace_does_not_call_a_repr_that_recurses():
    called = []

    class Recursing:
        def __repr__(self):
            called.append(self)
            return repr(self)

    value = Recursing()
    assert traced(lambda x: x, value)[1].endswith(f"-> <Recursing object at {id(value):#x}>\n")
    assert called == []


def test_trace_does_not_call_a_repr_that_blocks():
    never = threading.Event()

    class Blocking:
        def __repr__(self):
            never.wait()  # would hang the test
            return "Blocking()"

    value = Blocking()
    assert traced(lambda x: x, value)[1].endswith(f"-> <Blocking object at {id(value):#x}>\n")


def test_trace_does_not_call_the_repr_of_a_builtin_subclass_nor_its_iteration():
    called = []

    class Items(list):
        def __repr__(self):
            called.append("__repr__")
            return "Items()"

    class Quiet(dict):  # keeps dict's repr, but dict.__repr__ would not call these either
        def items(self):
            called.append("items")
            return super().items()

        def __len__(self):
            called.append("__len__")
            return 0

    items, quiet = Items([1]), Quiet(a=1)
    text = traced(lambda *xs: None, items, quiet)[1]
    assert f"(<Items object at {id(items):#x}>, {{'a': 1}}) -> None" in text
    assert called == []


def test_trace_shows_the_user_objects_in_a_container_by_type_and_id():
    value = Lazy(2)
    text = traced(lambda x: None, [value, "s", 1])[1]
    assert f"([<Lazy object at {id(value):#x}>, 's', 1]) -> None" in text
    assert list(value.items) == [0, 1]


def test_trace_calls_user_reprs_when_asked():
    plain = squares_of_a_lazy(3)
    result, text = traced(squares_of_a_lazy, 3, reprs="user")
    assert plain == [0, 1, 4] and result == []  # what the documentation warns of
    assert "-> Lazy([0, 1, 4])" in text


def test_trace_reprs_option_is_parsed_and_checked():
    assert TraceContext.from_options({"reprs": "user"}).reprs == "user"
    assert TraceContext.from_options({}).reprs == "safe"
    with pytest.raises(ValueError, match="bad value for option reprs='all': expected one of safe, user"):
        TraceContext.from_options({"reprs": "all"})
    with pytest.raises(ValueError, match="reprs must be one of safe, user, not 'all'"):
        TraceContext(reprs="all")


def test_trace_shows_keyword_names_that_are_str_subclasses_without_their_format():
    class Name(str):
        def __format__(self, spec):
            raise AssertionError("the trace called __format__")

    def kw(**kwargs):
        return len(kwargs)

    assert ".kw(a=1) -> 1\n" in traced(lambda: kw(**{Name("a"): 1}), exclude=["builtins"])[1]


# -- values shown without the program's code ---------------------------------------------

@pytest.mark.parametrize("value, text", [
    (ValueError("negative"), "ValueError('negative')"),
    (KeyError("k", 2), "KeyError('k', 2)"),
    (collections.namedtuple("Point", "x y")(1, [2]), "Point(x=1, y=[2])"),
    (int, "<class 'int'>"),
    (collections.OrderedDict, "<class 'collections.OrderedDict'>"),
    (types, "<module 'types'>"),
    (b"ab" * 100, ("b'" + "ab" * 20)[:37] + "..."),
    (frozenset({1}), "frozenset({1})"),
    (range(3), "range(0, 3)"),
], ids=["exception", "exception-args", "namedtuple", "class", "module-class", "module", "bytes", "frozenset",
        "range"])
def test_safe_repr_shows_builtin_values_as_their_repr_does(value, text):
    assert SafeRepr(40)(value) == text


def test_safe_repr_shows_an_exception_with_its_own_repr_by_type_and_id():
    class Loud(Exception):
        def __repr__(self):
            raise AssertionError("called")

    error = Loud()
    assert SafeRepr(60)(error) == f"<Loud object at {id(error):#x}>"


def test_safe_repr_shows_the_arguments_of_an_exception_safely():
    value = Lazy(1)
    assert SafeRepr(60)(ValueError(value)) == f"ValueError(<Lazy object at {id(value):#x}>)"


def test_safe_repr_shows_a_bound_method_with_its_receiver_safely():
    value = Lazy(1)
    assert SafeRepr(80)(value.__repr__) == f"<bound method Lazy.__repr__ of <Lazy object at {id(value):#x}>>"


def test_safe_repr_does_not_ask_a_metaclass():
    class Meta(type):
        def __repr__(cls):
            raise AssertionError("called")

        def __getattribute__(cls, name):
            raise AssertionError(f"asked for {name}")

    class Odd(metaclass=Meta):
        pass

    odd = Odd()
    assert SafeRepr(200)(Odd) == f"<class '{__name__}.{type.__dict__['__qualname__'].__get__(Odd)}'>"
    assert SafeRepr(200)(odd) == f"<Odd object at {id(odd):#x}>"


# -- naming callees without the program's code -------------------------------------------

class Watched(type):
    """A metaclass that records which attributes of its classes are read."""

    reads: list[str] = []

    def __getattribute__(cls, name):
        Watched.reads.append(name)
        return super().__getattribute__(name)


class Made(metaclass=Watched):
    pass


def test_naming_a_class_does_not_read_its_attributes_through_its_metaclass():
    Watched.reads.clear()
    assert name_of(Made) == f"{__name__}.Made"
    assert Watched.reads == []


class Compared(type):
    """A metaclass that records when its classes are hashed or compared."""

    calls: list[str] = []

    def __eq__(cls, other):
        Compared.calls.append("__eq__")
        return type.__eq__(cls, other)

    def __hash__(cls):
        Compared.calls.append("__hash__")
        return type.__hash__(cls)


def test_showing_a_value_and_naming_its_class_do_not_hash_or_compare_the_class():
    class Kept(metaclass=Compared):
        def __call__(self):
            return None

    kept = Kept()
    Compared.calls.clear()
    assert SafeRepr(40)(kept) == f"<Kept object at {id(kept):#x}>"
    assert name_of(kept) == f"{Kept.__module__}.{Kept.__qualname__}.__call__"
    assert Compared.calls == []


def test_naming_a_class_does_not_load_a_lazy_module(monkeypatch):
    loaded = []

    class Lazy(types.ModuleType):
        def __getattr__(self, name):
            loaded.append(name)
            raise AttributeError(name)

    class Hidden:  # as in _x, which x may re-export (then named x.Hidden)
        __module__ = "_lazily"

    monkeypatch.setitem(sys.modules, "lazily", Lazy("lazily"))
    assert name_of(Hidden) == f"_lazily.{Hidden.__qualname__}" and loaded == []


# -- no object kept alive ------------------------------------------------------------------

def test_a_named_class_is_not_kept_alive_by_its_name():
    def named():
        class Named:
            pass

        name_of(Named)
        return weakref.ref(Named)

    cls = named()
    gc.collect()
    assert cls() is None


def held_by(root):
    """The objects ``root`` holds, directly or not (not looking inside classes)."""
    found, todo = {}, [root]
    while todo:
        obj = todo.pop()
        if id(obj) not in found:
            found[id(obj)] = obj
            if not isinstance(obj, type):
                todo.extend(gc.get_referents(obj))
    return found.values()


def test_the_profile_holds_no_class_it_counted():
    class Counted:
        pass

    profile = ProfileContext(io.StringIO())
    profile.runcall(lambda: [Counted() for _ in range(3)])
    assert profile.stats()[name_of(Counted)].calls == 3
    assert not any(obj is Counted for obj in held_by(profile._trees))


FINALIZED_AT_EXIT = """
class Finalized:
    def __init__(self, n):
        self.n = n

    def __del__(self):
        print("finalized", self.n)

def use(x):
    return x.n

kept = Finalized(1)
use(kept)
use(Finalized(2))
print("end")
"""


@pytest.mark.parametrize("context", ["trace", "profile"])
def test_objects_a_context_saw_are_finalized_at_exit_as_plain(tmp_path, context):
    (tmp_path / "prog.py").write_text(textwrap.dedent(FINALIZED_AT_EXIT))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(*prefix):
        return subprocess.run([sys.executable, *prefix, "prog.py"], cwd=tmp_path, capture_output=True, text=True,
                              env=env, timeout=120).stdout

    plain = run()
    assert plain == "finalized 2\nend\nfinalized 1\n"
    assert run("-m", "cassette_hook", "--context", context, "--output", str(tmp_path / "report.txt")) == plain
