"""What C calls of the program's classes is seen: property accessors and the special
methods CPython's slots call (``__hash__`` from a set, ``__lt__`` from a sort, ``__next__``
from a loop) run as calls, overdubbed.

There is no call site for them to rewrite; while any context is active, the classes of a
module a context has reached hold stand-ins that are call sites
(``cassette_hook.runtime.standins``), given back when the process goes idle.
"""

from __future__ import annotations

import fractions
import functools
import gc
import operator
import threading
import traceback
from types import FunctionType

import pytest

import cassette_hook as ch
from cassette_hook.runtime import standins
from cassette_hook.importhook import lazy_mode


class Names(ch.Context):
    """Names the functions of this module it sees called."""

    def prehook(self, f, *args, **kwargs):
        if getattr(f, "__module__", None) == __name__ and "<" not in f.__qualname__:
            self.metadata.append(f.__qualname__)


def seen(run, *args):
    names: list[str] = []
    out = ch.overdub(Names(metadata=names), run, *args)
    return out, names


def helper(x):
    return x + 1


class Account:
    def __init__(self, balance):
        self._balance = balance

    @property
    def balance(self):
        """What is in it."""
        return helper(self._balance)

    @balance.setter
    def balance(self, value):
        self._balance = helper(value)

    @balance.deleter
    def balance(self):
        self._balance = 0

    @functools.cached_property
    def report(self):
        return f"balance {helper(self._balance)}"

    @property
    def missing(self):
        raise AttributeError("missing")

    def __getattr__(self, name):
        return f"fallback for {name}"

    class Ledger:
        @property
        def entries(self):
            return helper(1)


BALANCE = vars(Account)["balance"]  # the class's own property (stand-ins come later, under contexts)


def read(account):
    return account.balance


def test_a_property_read_under_a_context_is_seen_as_a_call_of_its_getter_and_its_calls():
    assert seen(read, Account(1)) == (2, ["Account.balance", "helper"])


def test_a_property_setter_and_deleter_are_seen_as_calls():
    def write(account):
        account.balance = 5
        del account.balance
        return account._balance

    assert seen(write, Account(1)) == (0, ["Account.balance", "helper", "Account.balance"])


def test_a_cached_property_is_seen_on_its_first_read_only():
    def twice(account):
        return account.report, account.report

    assert seen(twice, Account(1)) == (("balance 2", "balance 2"), ["Account.report", "helper"])


def test_a_property_read_by_c_code_is_seen():
    def by_attrgetter(accounts):
        return list(map(operator.attrgetter("balance"), accounts))

    assert seen(by_attrgetter, [Account(1), Account(2)]) == (
        [2, 3], ["Account.balance", "helper", "Account.balance", "helper"])


def test_a_property_of_a_nested_class_is_seen():
    assert seen(lambda: Account.Ledger().entries) == (2, ["Account.Ledger", "Account.Ledger.entries", "helper"])


def test_an_attribute_error_from_a_getter_still_falls_back_to_getattr():
    def missing(account):
        return account.missing

    assert seen(missing, Account(1)) == ("fallback for missing", ["Account.missing"])


def test_a_getter_that_raises_has_the_plain_traceback():
    """On both paths: on the pure-Python one the stand-in's ``__call__`` and ``call`` are
    frames of ours between the program's, which take their entries off the traceback
    (docs/internals.md, "Tracebacks are the program's")."""
    assert traceback_names(lambda: ch.overdub(ch.NullContext(), broken))[-2:] == ["broken", "value"]
    assert traceback_names(broken)[-2:] == ["broken", "value"]


def traceback_names(run):
    try:
        run()
    except ZeroDivisionError as error:
        return [frame.name for frame in traceback.extract_tb(error.__traceback__)]
    raise AssertionError("no ZeroDivisionError")


def broken():
    return Faulty().value


class Faulty:
    @property
    def value(self):
        return 1 / 0


def test_a_thread_with_no_context_reads_a_property_unseen_while_another_runs_one():
    reads: list[int] = []
    ready, done = threading.Event(), threading.Event()

    def elsewhere():
        ready.wait()
        reads.append(Account(10).balance)
        done.set()

    def waiting(account):
        ready.set()
        done.wait()
        return account.balance

    thread = threading.Thread(target=elsewhere)
    thread.start()
    assert seen(waiting, Account(1)) == (2, ["Account.balance", "helper"])
    thread.join()
    assert reads == [11]


@pytest.fixture
def restoring(monkeypatch):
    """Give back what activations changed whenever the process goes idle (collecting
    first what a caught exception's frames may keep of an earlier context's stack)."""
    gc.collect()
    monkeypatch.setattr(lazy_mode, "RESTORE_AFTER", 0.0)


@pytest.fixture
def kept(monkeypatch):
    """Keep what activations changed while the process is idle."""
    monkeypatch.setattr(lazy_mode, "RESTORE_AFTER", None)


def test_a_class_has_its_own_property_while_no_context_is_active(restoring):
    during = ch.overdub(Names(metadata=[]), lambda account: vars(Account)["balance"], Account(1))
    assert during is not BALANCE and type(during.fget) is standins.Special
    assert during.__doc__ == BALANCE.__doc__ == "What is in it."
    assert vars(Account)["balance"] is BALANCE


def test_a_class_gets_the_stand_in_again_at_the_next_activation(restoring):
    seen(read, Account(1))
    assert seen(read, Account(1)) == (2, ["Account.balance", "helper"])


def test_a_stand_in_kept_while_idle_reads_as_plainly(kept):
    seen(read, Account(1))
    if type(ch.runtime.callsites.call) is FunctionType:  # (the pure-Python path gives them back: below)
        assert vars(Account)["balance"] is BALANCE
    else:
        assert type(vars(Account)["balance"].fget) is standins.Special
    assert Account(4).balance == 5


def test_on_the_pure_python_path_stand_ins_are_given_back_at_every_idle(kept, monkeypatch):
    """There the stand-in's accessor is a Python function of ours (``call``): kept while
    idle, it would be a frame of ours under every getter of the plain program."""
    monkeypatch.setattr(standins.hotpath, "call", standins.hotpath.call if type(
        standins.hotpath.call) is FunctionType else lambda f, *args, **kwargs: f(*args, **kwargs))
    seen(read, Account(1))
    assert vars(Account)["balance"] is BALANCE


def test_a_property_the_program_replaced_under_a_context_keeps_the_programs(restoring):
    def replace():
        Replaced.value = property(lambda self: "the program's")
        return Replaced().value

    assert seen(replace) == ("the program's", ["Replaced"])
    assert Replaced().value == "the program's"
    assert seen(lambda: Replaced().value)[0] == "the program's"


class Replaced:
    @property
    def value(self):
        return "the class's"


def test_a_property_named_like_a_data_descriptor_of_the_metaclass_is_left_alone():
    """``unittest.mock`` defines a ``__class__`` property: setting it on the class would
    change the class's own class."""
    before = vars(Masquerading)["__class__"]
    assert ch.overdub(Names(metadata=[]), lambda: Masquerading().__class__) is int
    assert vars(Masquerading)["__class__"] is before and type(Masquerading) is type


class Masquerading:
    @property
    def __class__(self):
        return int


def test_a_class_defined_after_the_first_twin_of_its_module_is_reached():
    namespace = {"__name__": "test_implicit_late"}
    exec("def first():\n    return 1\n", namespace)
    assert ch.overdub(Names(metadata=[]), namespace["first"]) == 1
    exec("class Late:\n    @property\n    def value(self):\n        return 2\n"
         "def later():\n    return Late().value\n", namespace)
    names: list[str] = []
    assert ch.overdub(AllNames(metadata=names), namespace["later"]) == 2
    assert "Late.value" in names


class AllNames(ch.Context):
    def prehook(self, f, *args, **kwargs):
        self.metadata.append(getattr(f, "__qualname__", None))


def test_the_standard_librarys_classes_get_no_stand_ins():
    class Everything(ch.Context):
        libraries = True

    def approximate():
        assert vars(fractions.Fraction)["numerator"] is numerator
        return fractions.Fraction(3, 4).limit_denominator(2)

    numerator = vars(fractions.Fraction)["numerator"]
    assert ch.overdub(Everything(), approximate) == approximate()


# -- special methods ---------------------------------------------------------------------

class Version:
    def __init__(self, number):
        self.number = number

    def __eq__(self, other):
        return isinstance(other, Version) and helper(self.number) == helper(other.number)

    def __hash__(self):
        return hash(self.number)

    def __lt__(self, other):
        return self.number < other.number

    def __len__(self):
        return self.number

    def __bool__(self):
        return self.number > 0

    def __repr__(self):
        return f"Version({self.number})"

    def __rmul__(self, other):
        return Version(self.number * other)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return None


class Countdown:
    def __init__(self, start):
        self.left = start

    def __iter__(self):
        return self

    def __next__(self):
        if self.left == 0:
            raise StopIteration
        self.left -= 1
        return self.left


class Calls(ch.Context):
    """Names the functions of this module it sees called; operators are not calls here,
    so what is seen of a special method is C calling it."""

    operators = False

    def prehook(self, f, *args, **kwargs):
        if getattr(f, "__module__", None) == __name__ and "<" not in f.__qualname__:
            self.metadata.append(f.__qualname__)


def calls(run, *args):
    """What ``run(*args)`` returns, and the calls of special methods (but ``__init__``, which
    constructions run) and of ``helper`` a context sees it make."""
    names: list[str] = []
    out = ch.overdub(Calls(metadata=names), run, *args)
    return out, [name for name in names if name == "helper" or ".__" in name and not name.endswith(".__init__")]


def test_hash_and_eq_called_by_a_set_are_seen_with_the_calls_they_make():
    assert calls(lambda: len({Version(1), Version(1)})) == (
        1, ["Version.__hash__", "Version.__hash__", "Version.__eq__", "helper", "helper"])


def test_lt_called_by_sort_is_seen():
    assert calls(lambda: sorted([Version(2), Version(1)])) == ([Version(1), Version(2)], ["Version.__lt__"])


def test_len_bool_and_repr_called_by_builtins_and_statements_are_seen():
    def run():
        version = Version(3)
        return len(version), "yes" if version else "no", f"{version!r}"

    assert calls(run) == ((3, "yes", "Version(3)"), ["Version.__len__", "Version.__bool__", "Version.__repr__"])


def test_next_called_by_a_for_loop_is_seen_at_each_step():
    assert calls(lambda: [n for n in Countdown(2)]) == ([1, 0], ["Countdown.__iter__"] + ["Countdown.__next__"] * 3)


def test_a_reflected_operator_of_a_builtin_on_the_left_is_seen():
    assert calls(lambda: (3 * Version(2)).number) == (6, ["Version.__rmul__"])


def test_an_explicit_special_method_call_is_seen_once():
    assert calls(lambda: Version(1).__eq__(Version(1))) == (True, ["Version.__eq__", "helper", "helper"])


def test_a_special_method_called_through_super_is_seen_once():
    assert calls(lambda: Patch(1) == Patch(1)) == (True, ["Patch.__eq__", "Version.__eq__", "helper", "helper"])


class Patch(Version):
    def __eq__(self, other):
        return super().__eq__(other)

    __hash__ = Version.__hash__


def test_under_operators_a_special_method_is_seen_once_after_its_operator():
    names: list[str] = []
    assert ch.overdub(Names(metadata=names), lambda: Version(1) == Version(2)) is False
    assert names[-3:] == ["Version.__eq__", "helper", "helper"] and names.count("Version.__eq__") == 1


def test_enter_and_exit_which_cpython_binds_before_calling_run_unseen():
    def run():
        with Version(1) as version:
            return version.number

    assert calls(run) == (1, [])


def test_a_special_method_read_on_the_class_or_an_instance_is_the_classs_own():
    def read():
        version = Version(1)
        return Version.__eq__, version.__eq__.__func__, super(Patch, Patch(1)).__eq__.__func__

    assert ch.overdub(Calls(metadata=[]), read) == (EQ, EQ, EQ)


def test_getattr_of_a_special_method_binds_it_to_the_instance():
    """On the pure-Python path what it binds is the stand-in (its ``__func__`` is the
    method): a Python descriptor cannot tell ``getattr`` from CPython's slots, which it
    must answer with the stand-in."""
    def read():
        version = Version(1)
        bound = getattr(version, "__eq__")  # noqa: B009 -- a builtin reading it, not an attribute load
        return bound.__self__ is version, bound.__func__, bound(Version(1))

    pure = type(ch.runtime.callsites.call) is FunctionType
    bound_self, function, result = ch.overdub(Calls(metadata=[]), read)
    assert bound_self and result
    assert (function.__func__ if pure else function) is EQ


EQ = vars(Version)["__eq__"]


def test_a_special_method_that_raises_has_the_plain_traceback():
    assert traceback_names(lambda: ch.overdub(ch.NullContext(), hashed))[-2:] == ["hashed", "__hash__"]
    assert traceback_names(hashed)[-2:] == ["hashed", "__hash__"]


def hashed():
    return {Unhashable()}


class Unhashable:
    def __hash__(self):
        return 1 // 0


def test_a_contexts_own_special_methods_are_left_alone():
    before = vars(Equal)["__eq__"]
    assert ch.overdub(Equal(), lambda: Equal() == Equal()) is True
    assert vars(Equal)["__eq__"] is before


class Equal(ch.Context):
    def __eq__(self, other):
        return isinstance(other, Equal)

    __hash__ = ch.Context.__hash__


def test_a_special_method_read_on_the_class_again_and_again_is_the_method(kept):
    """CPython specializes a repeated class attribute read (of a name the metaclass does
    not have: ``__len__``, not ``__eq__``), caching what the class holds where it takes
    that to be what the read gives; a stand-in must not be cached so."""
    calls(lambda: len(Version(1)))
    with ch.NullContext():  # (this test's own code is not rewritten: it reads the class plainly)
        assert all(len_of_version() is LEN for _ in range(200))
    assert all(len_of_version() is LEN for _ in range(200))


LEN = vars(Version)["__len__"]


def len_of_version():
    return Version.__len__


def test_a_metaclass_is_left_alone_even_where_it_hashes_the_classes_dispatch_sees():
    class Typed(ch.Context):
        def prehook(self, f, x: Hashed):  # (dispatch on the argument's class: hashes it)
            self.metadata.append(type(x).__name__)

    before = vars(Hashing)["__hash__"]
    names: list[str] = []
    assert ch.overdub(Typed(metadata=names), lambda: identity(Hashed())).__class__ is Hashed
    assert vars(Hashing)["__hash__"] is before and names == ["Hashed"]


class Hashing(type):
    def __hash__(cls):
        return helper(id(cls))

    def __eq__(cls, other):
        return cls is other


class Hashed(metaclass=Hashing):
    pass


def identity(x):
    return x
