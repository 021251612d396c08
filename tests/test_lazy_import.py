"""``install(lazy=True)``, the default: modules imported as compiled while no context is active, their
functions switched when a context is first activated (``cassette_hook.importhook.lazy_mode``)."""

from __future__ import annotations

import dis
import gc
import importlib
import marshal
import os
import subprocess
import sys
import threading
import warnings
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest
import test_importhook
from test_importhook import write

import cassette_hook as ch
from cassette_hook import _debug, _native, _process
from cassette_hook.importhook import lazy_mode, code_cache, switch, finder
from cassette_hook.rewrite import UnsupportedCode, _names
from cassette_hook.importhook import dual_code

MODULE = """
import functools

def helper(x):
    return x + 1

def logged(f):
    @functools.wraps(f)
    def wrapper(*args):
        return f(*args)
    return wrapper

@logged
def decorated(x):
    return helper(x) * 2

class Box:
    def method(self, x):
        return [helper(i) for i in range(x)]

    @staticmethod
    def static(x):
        return helper(x)

    @property
    def prop(self):
        return helper(10)

def make_adder(k):
    def add(x):
        return helper(x) + k
    return add

def run_in(ctx):
    with ctx:
        inner = lambda: helper(7)
        return inner()

def boom():
    return helper(0)
"""


class Seen(ch.Context):
    def prehook(self, f, *args, **kwargs):
        self.metadata.append(getattr(f, "__name__", repr(f)))


needs_watcher = pytest.mark.skipif(lazy_mode.watcher() is None,
                                   reason="function watchers: CPython 3.12+, C accelerators")


@pytest.fixture
def unwatched(monkeypatch):
    """The lazy hook where the functions made from light code cannot be watched (3.10, 3.11,
    the pure-Python path): what a frame running at the first activation makes stays light."""
    monkeypatch.setattr(lazy_mode, "_watch", None)


@pytest.fixture
def kept_switched(monkeypatch):
    """Functions keep the switched code an activation gave them after it ends (by default
    they get their light code back when the process goes idle: ``lazy_mode.RESTORE_AFTER``),
    for the tests that look at what the activation did."""
    monkeypatch.setattr(lazy_mode, "RESTORE_AFTER", None)


@pytest.fixture(params=["native", "unwatched"])
def either_way(request, monkeypatch):
    """The lazy hook as this Python runs it, and without a function watcher."""
    if request.param == "unwatched":
        monkeypatch.setattr(lazy_mode, "_watch", None)
    return request.param


@pytest.fixture
def tree(tmp_path, monkeypatch):
    gc.collect()  # (an entry of an earlier test's context still alive would make imports switched)
    assert not switch.active()
    yield from test_importhook.tree.__wrapped__(tmp_path, monkeypatch)


def code_of(function):
    """The code ``function`` holds now: on the C path 3.12+, read without switching it (reading
    ``__code__`` switches an armed function's module, as its first call would)."""
    watch = lazy_mode.watcher()
    return function.__code__ if watch is None else watch.code_of(function)


def lazy_import(tree: Path, name: str, source: str = MODULE):
    if not (tree / f"{name}.py").exists():
        write(tree, f"{name}.py", source)
    ch.install(include=[name])  # (lazy by default)
    try:
        return importlib.import_module(name)
    finally:
        ch.uninstall()


def compiled(tree: Path, name: str, function: str):
    """The code of ``function`` as CPython compiles the module's source."""
    module_code = compile((tree / f"{name}.py").read_text(), str(tree / f"{name}.py"), "exec")
    return next(c for c in lazy_mode.functions(module_code) if c.co_name == function)


def test_a_lazy_import_gives_the_modules_functions_their_compiled_code(tree):
    mod = lazy_import(tree, "lz_compiled")
    assert code_of(mod.helper).co_code == compiled(tree, "lz_compiled", "helper").co_code
    assert not _names.is_switched(code_of(mod.helper))


def test_a_lazy_import_is_the_compiled_code_itself_nested_functions_too(tree, either_way):
    mod = lazy_import(tree, f"lz_nested_{either_way}")
    assert code_of(mod.make_adder(1)).co_code == compiled(tree, f"lz_nested_{either_way}", "add").co_code
    assert not _names.is_switched(code_of(mod.make_adder(1)))


def test_a_closure_made_idle_is_switched_under_the_first_context(tree, either_way, kept_switched):
    add = lazy_import(tree, "lz_idle_closure").make_adder(1)
    with ch.NullContext():
        assert add(1) == 3
    assert _names.is_switched(add.__code__)


def test_without_a_function_watcher_a_modules_functions_methods_and_what_decorators_hold_are_switched_together(
        tree, unwatched, kept_switched):
    mod = lazy_import(tree, "lz_first_unwatched")
    with ch.NullContext():
        assert mod.boom() == 1
    getter = mod.Box.prop.fget  # (the context reached the class: a stand-in, kept while idle here)
    functions = [mod.helper, mod.decorated.__wrapped__, mod.Box.method, mod.Box.static,
                 getattr(getter, "__func__", getter), mod.run_in, mod.boom]
    assert all(_names.is_switched(f.__code__) for f in functions)


def test_a_module_whose_functions_define_none_is_imported_as_compiled_and_switched_at_activation(tree, kept_switched):
    mod = lazy_import(tree, "lz_flat", "def helper(x):\n    return abs(x)\n")
    assert code_of(mod.helper).co_code == compiled(tree, "lz_flat", "helper").co_code
    ctx = Seen(metadata=[])
    with ctx:
        mod.helper(-1)
    assert _names.is_switched(code_of(mod.helper)) and ctx.metadata == ["abs"]


def test_calls_under_a_context_are_seen_as_when_switched_at_import(tree):
    def calls(mod):
        ctx = Seen(metadata=[])
        with ctx:
            mod.decorated(1), mod.Box().method(2), mod.Box.static(3), mod.Box().prop, mod.make_adder(1)(2)
        return ctx.metadata

    write(tree, "lz_same.py", MODULE)
    ch.install(include=["lz_same"], lazy=False)
    eager = importlib.import_module("lz_same")
    del sys.modules["lz_same"]
    assert calls(lazy_import(tree, "lz_same")) == calls(eager)


@needs_watcher
def test_with_a_function_watcher_a_closure_made_under_a_context_by_a_frame_begun_idle_is_switched(tree):
    mod = lazy_import(tree, "lz_closure")
    ctx = Seen(metadata=[])
    assert mod.run_in(ctx) == 8
    assert ctx.metadata == ["helper", "add"]


def test_without_a_function_watcher_a_closure_made_under_a_context_by_a_frame_begun_idle_stays_light(
        tree, unwatched):
    mod = lazy_import(tree, "lz_closure_unwatched")
    ctx = Seen(metadata=[])
    assert mod.run_in(ctx) == 8
    assert ctx.metadata == ["add"]  # (``helper``'s own body is switched: its ``+`` is seen)


HANDED_ON = """
def helper(x):
    return abs(x)

def apply(f):
    return f()

def run_through(ctx):
    with ctx:
        return apply(lambda: helper(-7))
"""


def test_a_closure_made_under_a_context_by_a_frame_begun_idle_is_overdubbed_where_a_call_site_calls_it(
        tree, either_way):
    mod = lazy_import(tree, f"lz_handed_on_{either_way}", HANDED_ON)
    ctx = Seen(metadata=[])
    assert mod.run_through(ctx) == 7
    assert ctx.metadata == ["<lambda>", "helper", "abs"]


LATE = """
import cassette_hook as ch

def helper(x):
    return abs(x)

with ch.NullContext():
    pass

def late(x):
    return helper(x)
"""


@needs_watcher
def test_with_a_function_watcher_what_a_module_body_defines_after_activating_a_context_is_switched(tree, kept_switched):
    mod = lazy_import(tree, "lz_late", LATE)
    with ch.NullContext():
        assert mod.late(-1) == 1
    assert _names.is_switched(code_of(mod.late)) and _names.is_switched(code_of(mod.helper))


def test_without_a_function_watcher_what_a_module_body_defines_after_activating_a_context_stays_light(
        tree, unwatched):
    mod = lazy_import(tree, "lz_late_unwatched", LATE)
    assert not _names.is_switched(code_of(mod.late)) and _names.is_switched(code_of(mod.helper))


# -- with a function watcher: a module is switched at the first call of one of its functions

SMALL = """
import sys

def helper(x):
    return abs(x)

def caller_name():
    return sys._getframe(1).f_code.co_name
"""


@needs_watcher
def test_with_a_function_watcher_an_activation_arms_the_functions_and_switches_none(tree, kept_switched):
    mod = lazy_import(tree, "lz_armed")
    with ch.NullContext():
        assert lazy_mode.watcher().armed(mod.helper) and not _names.is_switched(code_of(mod.helper))
    assert not Path(code_cache.path_for(str(tree / "lz_armed.py"), code_cache.FUNCTIONS)).exists()  # (nothing made yet)


@needs_watcher
def test_the_first_call_of_an_armed_function_switches_it_alone(tree, kept_switched):
    mod, other = lazy_import(tree, "lz_called"), lazy_import(tree, "lz_not_called")
    ctx = Seen(metadata=[])
    with ctx:
        assert mod.boom() == 1
    assert ctx.metadata == ["helper", "add"]  # (boom's first call ran its switched body, and helper's)
    assert _names.is_switched(code_of(mod.boom)) and _names.is_switched(code_of(mod.helper))
    assert not lazy_mode.watcher().armed(mod.helper)
    assert lazy_mode.watcher().armed(mod.Box.method) and not _names.is_switched(code_of(mod.Box.method))
    assert lazy_mode.watcher().switched_of(code_of(mod.Box.method)) is None  # (its module's others wait)
    assert lazy_mode.watcher().armed(other.helper) and not _names.is_switched(code_of(other.helper))


@needs_watcher
def test_an_armed_function_called_by_c_switches_its_module(tree, kept_switched):
    mod = lazy_import(tree, "lz_called_by_c", SMALL)
    ctx = Seen(metadata=[])
    with ctx:
        assert sorted([-3, 1, -2], key=mod.helper) == [1, -2, -3]
    assert ctx.metadata == ["abs"] * 3 and _names.is_switched(code_of(mod.helper))


@needs_watcher
def test_an_armed_functions_first_call_has_its_caller_below_it(tree):
    mod = lazy_import(tree, "lz_caller_below", SMALL)
    with ch.NullContext():
        assert mod.caller_name() == "test_an_armed_functions_first_call_has_its_caller_below_it"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="CPython specializes calls from 3.11 on")
@needs_watcher
def test_a_call_site_specialized_before_the_activation_reaches_the_first_call(tree, kept_switched):
    helper = lazy_import(tree, "lz_warm_site", SMALL).helper

    def loop(n):
        for i in range(n):
            helper(-i)

    loop(5000)  # (idle: the site specializes for the compiled helper)
    ctx = Seen(metadata=[])
    with ctx:
        loop(10)
    assert ctx.metadata == ["abs"] * 10


@needs_watcher
def test_a_function_made_from_an_armed_modules_code_is_armed_as_it_is_made(tree, kept_switched):
    mod = lazy_import(tree, "lz_late_armed", LATE)  # (its body activates a context, then defines ``late``)
    assert lazy_mode.watcher().armed(mod.late) and not _names.is_switched(code_of(mod.late))


@needs_watcher
def test_the_twin_of_an_armed_function_is_made_from_its_switched_code(tree, kept_switched):
    mod = lazy_import(tree, "lz_armed_twin")
    with ch.NullContext():
        pass
    ctx = Seen(metadata=[])
    assert ch.overdub(ctx, mod.boom) == 1
    assert ctx.metadata == ["helper", "add"] and _names.is_switched(code_of(mod.boom))


@needs_watcher
def test_two_threads_first_calling_one_function_switch_it_once(tree, monkeypatch):
    mod = lazy_import(tree, "lz_two_first_calls")
    started, release = threading.Event(), threading.Event()
    real, made = dual_code.switched_functions, []

    def slow(codes, module):
        made.append([code.co_name for code in codes])
        started.set()
        release.wait(10)
        return real(codes, module)

    seen: dict[str, list[str]] = {}

    def call(name):
        ctx = Seen(metadata=[])
        with ctx:
            mod.boom()
        seen[name] = ctx.metadata

    monkeypatch.setattr(dual_code, "switched_functions", slow)
    first, second = threading.Thread(target=call, args=("first",)), threading.Thread(target=call, args=("second",))
    first.start()
    assert started.wait(10)
    second.start()
    second.join(0.3)  # (its first call waits for the first thread's switching)
    release.set()
    first.join(10), second.join(10)
    assert made == [["boom"], ["helper"]]  # (boom calls helper: each switched alone, once)
    assert seen == {"first": ["helper", "add"], "second": ["helper", "add"]}


@needs_watcher
def test_a_call_that_switching_its_own_module_makes_runs_the_compiled_code(tree, monkeypatch, kept_switched):
    mod = lazy_import(tree, "lz_called_while_switched")
    real = dual_code.switched_functions

    def calling(codes, module):  # (as a finalizer run by a collection during the switching might)
        assert mod.helper(1) == 2 and not _names.is_switched(code_of(mod.helper))
        return real(codes, module)

    monkeypatch.setattr(dual_code, "switched_functions", calling)
    with ch.NullContext():
        assert mod.boom() == 1
    assert _names.is_switched(code_of(mod.helper)) and _names.is_switched(code_of(mod.boom))


@needs_watcher
def test_an_armed_function_first_called_while_idle_keeps_its_compiled_code_until_the_next_context(tree, kept_switched):
    mod = lazy_import(tree, "lz_armed_idle_call")
    with ch.NullContext():
        pass
    gc.collect()  # (the activation's entry gone: the process is idle)
    assert mod.boom() == 1  # (its module is switched: the switched code is made now, or read)
    assert not lazy_mode.watcher().armed(mod.boom) and not _names.is_switched(code_of(mod.boom))
    ctx = Seen(metadata=[])
    with ctx:
        assert _names.is_switched(code_of(mod.boom))
        mod.boom()
    assert ctx.metadata == ["helper", "add"]


@needs_watcher
def test_a_keyboard_interrupt_while_switching_reaches_the_first_call_and_the_next_call_switches(tree, monkeypatch):
    mod = lazy_import(tree, "lz_interrupted", SMALL)
    real = dual_code.switched_functions

    def interrupted(codes, module):
        monkeypatch.setattr(dual_code, "switched_functions", real)  # (once)
        raise KeyboardInterrupt

    monkeypatch.setattr(dual_code, "switched_functions", interrupted)
    ctx = Seen(metadata=[])
    with ctx:
        with pytest.raises(KeyboardInterrupt):
            mod.helper(-1)
        assert lazy_mode.watcher().armed(mod.helper)
        assert mod.helper(-2) == 2
    assert ctx.metadata == ["abs"]


@needs_watcher
def test_an_armed_function_that_cannot_be_switched_runs_its_compiled_code_with_a_warning(tree, monkeypatch):
    mod = lazy_import(tree, "lz_cannot_switch", SMALL)

    def broken(codes, module):
        raise ValueError("no")

    monkeypatch.setattr(dual_code, "switched_functions", broken)
    ctx = Seen(metadata=[])
    with ctx, pytest.warns(RuntimeWarning, match=r"cannot instrument function 'helper' of module 'lz_cannot_switch': "
                                                     r"ValueError\('no'\)"):
        assert mod.helper(-2) == 2
    assert ctx.metadata == [] and not _names.is_switched(code_of(mod.helper))
    assert not lazy_mode.watcher().armed(mod.helper) and mod.helper(-3) == 3


@pytest.fixture
def restoring(monkeypatch):
    """Functions get their light code back whenever the process goes idle (by default, only
    when its last idle spell was long: ``lazy_mode.RESTORE_AFTER``)."""
    monkeypatch.setattr(lazy_mode, "RESTORE_AFTER", 0.0)


def test_when_the_last_context_ends_the_functions_an_activation_switched_get_their_compiled_code_back(
        tree, restoring, either_way):
    mod = lazy_import(tree, "lz_restored")
    with ch.NullContext():
        assert mod.helper(1) == 2 and _names.is_switched(code_of(mod.helper))
    gc.collect()
    assert code_of(mod.helper).co_code == compiled(tree, "lz_restored", "helper").co_code


def test_the_next_activation_switches_them_again_before_its_body_runs(tree, restoring, either_way):
    mod = lazy_import(tree, "lz_switched_again")
    with ch.NullContext():
        mod.helper(1)
    gc.collect()
    ctx = Seen(metadata=[])
    with ctx:
        assert _names.is_switched(code_of(mod.helper))
        mod.boom()
    assert ctx.metadata == ["helper", "add"]


def test_a_function_given_code_of_its_own_under_a_context_keeps_it(tree, restoring, either_way):
    mod = lazy_import(tree, "lz_own_code")

    def other(x):
        return -x

    with ch.NullContext():
        mod.helper.__code__ = other.__code__
    gc.collect()
    with ch.NullContext():
        assert code_of(mod.helper) is other.__code__
    assert code_of(mod.helper) is other.__code__ and mod.helper(1) == -1


def test_while_a_context_lives_in_another_thread_the_functions_stay_switched(tree, restoring, either_way):
    mod = lazy_import(tree, "lz_other_thread")
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with ch.NullContext():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    entered.wait(10)
    try:
        with ch.NullContext():
            mod.helper(1)
        gc.collect()
        assert _names.is_switched(code_of(mod.helper))
    finally:
        release.set()
        thread.join()
    gc.collect()
    assert not _names.is_switched(code_of(mod.helper))


def test_contexts_coming_and_going_in_a_loop_leave_the_functions_switched(tree, monkeypatch, either_way):
    monkeypatch.setattr(lazy_mode, "RESTORE_AFTER", 1e9)  # no idle spell between two activations is that long
    monkeypatch.setattr(lazy_mode, "_idle_since", None)  # (as in a process that has not been idle yet)
    monkeypatch.setattr(lazy_mode, "_last_idle", None)
    mod = lazy_import(tree, "lz_loop")
    with ch.NullContext():
        mod.helper(1)
    gc.collect()
    assert not _names.is_switched(code_of(mod.helper))  # the first idle spell: its length unknown
    with ch.NullContext():
        pass
    gc.collect()
    assert _names.is_switched(code_of(mod.helper))  # the last spell was short


def test_a_closure_that_restored_code_makes_while_idle_is_switched_by_the_next_activation(
        tree, restoring, either_way):
    mod = lazy_import(tree, "lz_made_while_idle")
    with ch.NullContext():
        pass
    gc.collect()
    add = mod.make_adder(1)  # made from the compiled code given back
    ctx = Seen(metadata=[])
    with ctx:
        assert _names.is_switched(add.__code__)
        assert add(2) == 4
    assert ctx.metadata == ["helper", "add", "add"]


def test_activations_are_watched_for_the_process_going_idle_only_once_there_is_something_to_restore(tree):
    write(tree, "lz_watched_activity.py", MODULE)
    program = """
import cassette_hook as ch
from cassette_hook.importhook import lazy_mode, switch
ch.install(include=["lz_watched_activity"])
watching = lambda: (lazy_mode._busy, lazy_mode._idle) in switch._activity_watchers
with ch.NullContext():
    pass
before = watching()
import lz_watched_activity
with ch.NullContext():
    pass
print(before, watching())
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *sys.path])}
    done = subprocess.run([sys.executable, "-c", program], cwd=tree, capture_output=True, text=True, env=env,
                          timeout=120)
    assert (done.returncode, done.stdout) == (0, "False True\n"), done.stderr


GENERATOR = """
def helper(x):
    return abs(x)

def produce():
    yield helper(-1)
"""


def test_a_generator_made_while_idle_runs_its_compiled_body_under_the_next_context(tree, restoring, either_way):
    mod = lazy_import(tree, "lz_idle_generator", GENERATOR)
    with ch.NullContext():
        pass
    gc.collect()
    made_idle = mod.produce()
    ctx = Seen(metadata=[])
    with ctx:
        assert next(made_idle) == 1
    assert ctx.metadata == ["abs"]  # produce's call of helper is not seen; helper's own body is switched


def test_the_function_watcher_is_in_use_where_the_run_requires_the_c_path_on_3_12_or_later():
    if os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS") and sys.version_info >= (3, 12):
        assert lazy_mode.watcher() is not None, "cassette_hook.importhook._watch was not built or not imported"


@needs_watcher
def test_the_function_watcher_refuses_a_switched_code_of_another_kind():
    def plain():
        return 1

    def generator():
        yield 1

    with pytest.raises(ValueError, match="not of its kind"):
        lazy_mode.watcher().switch_at_creation(plain.__code__, generator.__code__)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="CPython specializes calls from 3.11 on")
def test_calls_to_a_function_switched_at_the_first_activation_specialize_as_plain_ones(tree, kept_switched):
    fib = lazy_import(tree, "lz_versions", "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n").fib
    with ch.NullContext():
        fib(1)
    assert _names.is_switched(fib.__code__)
    fib(15)
    calls = {i.opname for i in dis.get_instructions(fib, adaptive=True) if i.opname.startswith("CALL")}
    # 3.13 versions a function only as it is made; without _speedups.set_code (the pure path)
    # an assigned function keeps no version, and its calls stay generic (docs/importhook.md).
    specializes = sys.version_info < (3, 13) or _native.runtime.name == "C"
    assert ("CALL_PY_EXACT_ARGS" in calls) == specializes, calls


def test_without_a_function_watcher_a_module_imported_under_a_context_is_switched_at_once(tree, unwatched):
    write(tree, "lz_active.py", MODULE)
    with ch.NullContext():
        mod = lazy_import(tree, "lz_active")
        assert _names.is_switched(code_of(mod.helper))
    assert not lazy_mode.waiting()


IMPORTED_UNDER_A_CONTEXT = """
def helper(x):
    return abs(x)

class Box:
    def method(self, x):
        return helper(x)

AT_IMPORT = [abs(-1)]
"""


@needs_watcher
def test_with_a_function_watcher_a_module_imported_under_a_context_has_its_body_switched_and_its_functions_armed(
        tree):
    ctx = Seen(metadata=[])
    with ctx:
        mod = lazy_import(tree, "lz_active_armed", IMPORTED_UNDER_A_CONTEXT)
        assert ctx.metadata == ["abs"]  # (its body's own call)
        assert lazy_mode.watcher().armed(mod.Box.method) and not _names.is_switched(code_of(mod.Box.method))
        assert mod.Box().method(-2) == 2
    assert ctx.metadata == ["abs", "helper", "abs"] and _names.is_switched(code_of(mod.helper))
    assert not lazy_mode.waiting()


@needs_watcher
def test_reading_the_code_of_an_armed_function_switches_it_alone(tree):
    with ch.NullContext():
        mod = lazy_import(tree, "lz_active_read", IMPORTED_UNDER_A_CONTEXT)
        assert _names.is_switched(mod.helper.__code__)
        assert not lazy_mode.watcher().armed(mod.helper) and _names.is_switched(code_of(mod.helper))
        assert lazy_mode.watcher().switched_of(code_of(mod.Box.method)) is None  # (its module's others wait)


def cached_entries(tree: Path, name: str) -> dict[str, bool]:
    """Which functions of module ``name`` its ``.functions`` cache file holds switched code for."""
    light = lazy_mode.functions(compile((tree / f"{name}.py").read_text(), str(tree / f"{name}.py"), "exec"))
    path = code_cache.path_for(str(tree / f"{name}.py"), code_cache.FUNCTIONS)
    with open(path, "rb") as file:
        data = file.read()
    entries = marshal.loads(data[data.index(b"\n", len(code_cache.FORMAT) + 4) + 1:])
    return {code.co_qualname: entry is not None for code, entry in zip(light, entries)}


@needs_watcher
def test_the_functions_switched_alone_in_a_run_are_kept_in_their_modules_cache_the_others_not(tree, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    with ch.NullContext():
        mod = lazy_import(tree, "lz_active_read_cached", IMPORTED_UNDER_A_CONTEXT)
        assert _names.is_switched(mod.helper.__code__)  # (a read)
        assert mod.Box().method(1) == 1  # (a call)
    lazy_mode.keep_made()  # (what the process does at exit)
    assert cached_entries(tree, "lz_active_read_cached") == {"helper": True, "Box.method": True}
    mod = lazy_import(tree, "lz_cached_alone")
    with ch.NullContext():
        assert mod.boom() == 1
    lazy_mode.keep_made()
    kept = cached_entries(tree, "lz_cached_alone")
    assert {name for name, made in kept.items() if made} == {"boom", "helper"} and len(kept) == 12


@needs_watcher
def test_functions_switched_in_another_run_are_kept_with_those_the_cache_held(tree, monkeypatch):
    first = lazy_import(tree, "lz_cached_merged")
    with ch.NullContext():
        first.helper(1)
    lazy_mode.keep_made()
    del sys.modules["lz_cached_merged"]
    second = lazy_import(tree, "lz_cached_merged")
    with ch.NullContext():
        second.Box.static(1)
    lazy_mode.keep_made()
    kept = cached_entries(tree, "lz_cached_merged")
    assert {name for name, made in kept.items() if made} == {"helper", "Box.static"}


@needs_watcher
def test_with_dont_write_bytecode_a_function_switched_alone_is_kept_nowhere_and_runs_switched(tree, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    mod = lazy_import(tree, "lz_not_kept")
    ctx = Seen(metadata=[])
    with ctx:
        assert mod.boom() == 1
    lazy_mode.keep_made()
    assert ctx.metadata == ["helper", "add"]
    assert not Path(code_cache.path_for(str(tree / "lz_not_kept.py"), code_cache.FUNCTIONS)).exists()


@needs_watcher
def test_a_function_whose_code_was_read_keeps_that_code_when_its_module_is_switched(tree):
    ctx = Seen(metadata=[])
    with ctx:
        mod = lazy_import(tree, "lz_active_read_first", IMPORTED_UNDER_A_CONTEXT)
        read = mod.helper.__code__
        assert mod.Box().method(-2) == 2  # (switches the module)
        assert code_of(mod.helper) is read and _names.is_switched(code_of(mod.Box.method))
    assert ctx.metadata == ["abs", "helper", "abs"]


KEEPS_CODE = """
import sys

KEPT = set()

def internal(f):  # (as jinja2's @internalcode: tracebacks leave out the frames of these codes)
    KEPT.add(f.__code__)
    return f

@internal
def inner():
    return sys._getframe().f_code

class Box:
    @internal
    def method(self):
        return sys._getframe().f_code
"""


def test_a_decorator_keeping_a_functions_code_at_import_under_a_context_holds_the_code_its_frames_run(tree):
    with ch.NullContext():
        mod = lazy_import(tree, "lz_keeps_code", KEEPS_CODE)
        assert mod.inner() in mod.KEPT and mod.Box().method() in mod.KEPT
    assert mod.inner() in mod.KEPT and mod.Box().method() in mod.KEPT


@needs_watcher
def test_a_function_of_a_module_imported_under_a_context_keeps_its_switched_code_while_idle(tree, restoring):
    with ch.NullContext():
        mod = lazy_import(tree, "lz_keeps_switched", KEEPS_CODE)
    gc.collect()  # (idle: what the activations switched gets its compiled code back)
    assert mod.inner() in mod.KEPT and _names.is_switched(code_of(mod.inner))
    with ch.NullContext():
        assert mod.inner() in mod.KEPT


@needs_watcher
def test_a_decorator_keeping_a_functions_code_while_its_module_is_imported_idle_holds_the_code_its_frames_run(tree):
    mod = lazy_import(tree, "lz_idle_keeps_code", KEEPS_CODE)  # (no context: light; jinja2 in peers' late run)
    assert mod.inner() in mod.KEPT and mod.Box().method() in mod.KEPT
    ctx = Seen(metadata=[])
    with ctx:
        assert mod.inner() in mod.KEPT and mod.Box().method() in mod.KEPT
    assert mod.inner() in mod.KEPT and ctx.metadata == ["_getframe", "_getframe"]  # (their own calls: switched)


@needs_watcher
def test_a_functions_code_read_while_idle_is_its_switched_code_which_runs_its_compiled_body_until_a_context(tree):
    mod = lazy_import(tree, "lz_idle_read")
    read = mod.helper.__code__
    assert _names.is_switched(read) and code_of(mod.helper) is read and mod.helper(1) == 2
    assert code_of(mod.boom).co_code == compiled(tree, "lz_idle_read", "boom").co_code  # (its module's others: light)
    ctx = Seen(metadata=[])
    with ctx:
        assert mod.boom() == 1
    assert ctx.metadata == ["helper", "add"] and code_of(mod.helper) is read


@needs_watcher
def test_a_functions_code_read_by_c_with_no_python_frame_below_is_settled(tree, monkeypatch):
    import _thread
    import operator
    import time

    mod = lazy_import(tree, "lz_frameless_read")
    raised = []
    monkeypatch.setattr(sys, "unraisablehook", raised.append)
    reads = map(operator.attrgetter("__code__"), [mod.helper])
    _thread.start_new_thread(list, (reads,))  # (list, then the getter: C only, in a thread of no Python frame)
    deadline = time.monotonic() + 10
    while not _names.is_switched(code_of(mod.helper)) and not raised and time.monotonic() < deadline:
        time.sleep(0.01)
    assert raised == [] and _names.is_switched(code_of(mod.helper))


@needs_watcher
def test_introspection_reading_a_functions_code_while_idle_leaves_it_compiled(tree):
    import inspect
    import typing

    mod = lazy_import(tree, "lz_idle_introspected")
    assert str(inspect.signature(mod.helper)) == "(x)" and not inspect.isgeneratorfunction(mod.helper)
    assert typing.get_type_hints(mod.helper) == {}
    assert code_of(mod.helper).co_code == compiled(tree, "lz_idle_introspected", "helper").co_code


@needs_watcher
def test_a_function_whose_code_was_read_while_idle_keeps_it_when_the_process_is_idle_again(tree, restoring):
    mod = lazy_import(tree, "lz_idle_read_kept", KEEPS_CODE)
    with ch.NullContext():
        mod.inner()
    gc.collect()  # (idle: what the activation switched gets its compiled code back)
    assert mod.inner() in mod.KEPT and _names.is_switched(code_of(mod.inner))


@needs_watcher
def test_a_function_whose_code_was_read_under_a_context_keeps_it_when_the_process_is_idle_again(tree, restoring):
    mod = lazy_import(tree, "lz_busy_read_kept")
    with ch.NullContext():
        mod.helper(1)
        read = mod.helper.__code__
    gc.collect()  # (idle: what the activation switched gets its compiled code back, but what was read)
    assert code_of(mod.helper) is read and _names.is_switched(read)
    assert code_of(mod.boom).co_code == compiled(tree, "lz_busy_read_kept", "boom").co_code


@needs_watcher
def test_a_function_made_from_an_armed_functions_code_runs_what_the_armed_function_runs(tree):
    with ch.NullContext():
        mod = lazy_import(tree, "lz_copied_armed", KEEPS_CODE)
        copy = type(mod.inner)(mod.inner.__code__, mod.__dict__)
        assert copy() is mod.inner() and copy() in mod.KEPT


@needs_watcher
def test_a_module_imported_under_a_context_again_reads_its_body_and_functions_from_the_cache(tree, monkeypatch):
    with ch.NullContext():
        lazy_import(tree, "lz_active_cached", IMPORTED_UNDER_A_CONTEXT).Box().method(1)
    lazy_mode.keep_made()  # (what the process does at exit)
    del sys.modules["lz_active_cached"]
    for kind in (code_cache.BODY, code_cache.FUNCTIONS):
        assert Path(code_cache.path_for(str(tree / "lz_active_cached.py"), kind)).exists()
    monkeypatch.setattr(dual_code, "switched_body", lambda code, module: pytest.fail("body made again"))
    monkeypatch.setattr(dual_code, "switched_functions", lambda codes, module: pytest.fail("functions made again"))
    ctx = Seen(metadata=[])
    with ctx:
        mod = lazy_import(tree, "lz_active_cached")
        assert mod.Box().method(-2) == 2
    assert ctx.metadata == ["abs", "helper", "abs"]


def test_a_lazy_import_reads_its_light_code_from_the_cache(tree, monkeypatch, either_way):
    lazy_import(tree, "lz_cached")
    assert Path(code_cache.path_for(str(tree / "lz_cached.py"), code_cache.LIGHT)).exists()
    del sys.modules["lz_cached"]
    lazy_mode.switched(lazy_mode.waiting())
    monkeypatch.setattr(SourceFileLoader, "get_code", lambda self, name: pytest.fail("read CPython's .pyc"))
    assert not _names.is_switched(code_of(lazy_import(tree, "lz_cached").helper))


def test_a_cached_lazy_import_as_compiled_reads_only_its_own_file(tree, monkeypatch, either_way):
    lazy_import(tree, "lz_flat_cached", "def helper(x):\n    return abs(x)\n")
    del sys.modules["lz_flat_cached"]
    lazy_mode.switched(lazy_mode.waiting())
    monkeypatch.setattr(SourceFileLoader, "get_code", lambda self, name: pytest.fail("read CPython's .pyc too"))
    assert lazy_import(tree, "lz_flat_cached").helper(-2) == 2


def test_a_module_without_functions_leaves_its_activation_nothing_to_do(tree, monkeypatch):
    lazy_import(tree, "lz_constants", "import os\nANSWER = 42\n")
    monkeypatch.setattr(dual_code, "switched_functions", lambda codes, module: pytest.fail("switched nothing"))
    with ch.NullContext():
        pass
    assert not Path(code_cache.path_for(str(tree / "lz_constants.py"), code_cache.FUNCTIONS)).exists()


def test_the_switched_functions_are_cached_for_the_next_import(tree, monkeypatch):
    first = lazy_import(tree, "lz_functions")
    with ch.NullContext():
        first.boom()
    lazy_mode.keep_made()  # (switched alone at their first call, with a function watcher: kept at exit)
    assert Path(code_cache.path_for(str(tree / "lz_functions.py"), code_cache.FUNCTIONS)).exists()
    del sys.modules["lz_functions"]
    monkeypatch.setattr(dual_code, "switched_functions", lambda codes, module: pytest.fail("made again"))
    mod = lazy_import(tree, "lz_functions")
    ctx = Seen(metadata=[])
    with ctx:
        mod.boom()
    assert ctx.metadata == ["helper", "add"]


def test_a_stale_functions_cache_is_made_again(tree):
    first = lazy_import(tree, "lz_stale")
    with ch.NullContext():
        first.boom()
    lazy_mode.keep_made()
    assert Path(code_cache.path_for(str(tree / "lz_stale.py"), code_cache.FUNCTIONS)).exists()
    del sys.modules["lz_stale"]
    source = tree / "lz_stale.py"
    source.write_text(MODULE.replace("return helper(0)", "return helper(1) + helper(2)"))
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    mod = lazy_import(tree, "lz_stale")
    ctx = Seen(metadata=[])
    with ctx:
        mod.boom()
    assert ctx.metadata == ["helper", "add", "helper", "add", "add"]


def test_without_a_function_watcher_a_function_that_cannot_be_switched_runs_as_compiled_with_one_warning(
        tree, monkeypatch, unwatched):
    mod = lazy_import(tree, "lz_broken")
    real = dual_code._Switcher.switched

    def refuse_boom(self, code):
        if code.co_name == "boom":
            raise UnsupportedCode("a shape the rewriter does not know")
        return real(self, code)

    monkeypatch.setattr(dual_code._Switcher, "switched", refuse_boom)
    ctx = Seen(metadata=[])
    with pytest.warns(RuntimeWarning, match=r"cannot instrument 1 function\(s\) of module 'lz_broken'.*does not know"):
        with ctx:
            assert mod.boom() == 1
            assert mod.Box.static(1) == 2
    assert ctx.metadata == ["add", "helper", "add"]  # boom's call of helper unseen, helper's own add seen
    assert not _names.is_switched(mod.boom.__code__)
    assert not Path(code_cache.path_for(str(tree / "lz_broken.py"), code_cache.FUNCTIONS)).exists()


def test_modules_imported_light_are_switched_once(tree, monkeypatch):
    mod = lazy_import(tree, "lz_once")
    made = []
    real = dual_code.switched_functions
    monkeypatch.setattr(dual_code, "switched_functions",
                        lambda codes, module: made.append(module) or real(codes, module))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    for _ in range(3):
        with ch.NullContext():
            mod.helper(1)
    assert made == ["lz_once"]


def test_a_second_thread_activating_meanwhile_waits_until_the_functions_are_switched(tree, monkeypatch):
    mod = lazy_import(tree, "lz_threads")
    started, release = threading.Event(), threading.Event()
    real = lazy_mode._switch_functions

    def slow(waiting):
        started.set()
        release.wait(10)
        real(waiting)

    def activate(seen=None):
        with ch.NullContext() if seen is None else Seen(metadata=seen):
            if seen is not None:
                mod.boom()

    monkeypatch.setattr(lazy_mode, "_switch_functions", slow)
    seen: list[str] = []
    first, second = threading.Thread(target=activate), threading.Thread(target=activate, args=(seen,))
    first.start()
    assert started.wait(10)
    second.start()
    second.join(0.3)  # (it cannot finish before the first thread's switching does)
    release.set()
    first.join(10), second.join(10)
    assert seen == ["helper", "add"]  # (boom's body and helper's were switched when it ran)


def test_install_lazy_takes_a_bool():
    with pytest.raises(TypeError, match=r"lazy=\.\.\.\) takes True or False, not 'yes'"):
        ch.install(["x"], lazy="yes")  # type: ignore[arg-type]


def test_install_from_env_installs_lazy_unless_the_environment_says_eager(monkeypatch):
    installed = []
    for eager in ("", "1"):
        try:
            _process.install_from_env({_process.INCLUDE: "lz_nothing", _process.EAGER: eager, _process.SEPARATE: "1"})
            installed.append(finder._lazy)
        finally:
            ch.uninstall()
    assert installed == [True, False]


def test_the_command_line_imports_light_until_a_context_is_active_unless_eager(tree):
    write(tree, "lz_cli.py", MODULE)
    program = ("import lz_cli; from cassette_hook.rewrite import _names; "
               "from cassette_hook.importhook import lazy_mode; watch = lazy_mode.watcher(); lz_cli.helper(1); "
               "print(_names.is_switched(lz_cli.helper.__code__ if watch is None else watch.code_of(lz_cli.helper)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *sys.path])}

    def run(*options: str) -> str:
        command = [sys.executable, "-m", "cassette_hook", "--include", "lz_cli", *options, "-c", program]
        done = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert run() == "False\n"
    assert run("--eager") == "True\n"
    assert run("--context", "null") == "True\n"


def test_the_program_run_with_dash_m_is_switched_at_import_even_lazy(tree):
    write(tree, "lz_main.py", MODULE + "\nimport sys\nsys.stdout.write(str(__import__('cassette_hook').rewrite."
                                       "_names.is_switched(helper.__code__)))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *sys.path])}
    command = [sys.executable, "-m", "cassette_hook", "-m", "lz_main"]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env, timeout=120)
    assert (done.returncode, done.stdout) == (0, "True"), done.stderr


def test_a_clean_lazy_module_is_switched_without_a_warning(tree):
    mod = lazy_import(tree, "lz_clean")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ch.NullContext():
            assert mod.helper(1) + mod.Box.static(2) == 5


def test_debug_import_says_what_a_lazy_import_without_a_cache_made(tree, capsys, monkeypatch, either_way):
    source = write(tree, "lz_sourceless.py", "def helper(x):\n    return abs(x)\n")
    (tree / "lz_sourceless.pyc").write_bytes(test_importhook._plain_pyc(source))
    source.unlink()
    monkeypatch.setattr(_debug, "imports", True)
    ch.install(include=["lz_sourceless"])
    importlib.import_module("lz_sourceless")
    said = [line.removeprefix("cassette_hook: import: ") for line in capsys.readouterr().err.splitlines()
            if line.startswith("cassette_hook: import: lz_sourceless")]
    assert said == ["lz_sourceless: included by 'lz_sourceless'; rewriting",
                    "lz_sourceless: light: as compiled (switched under a context); "
                    "not cached (a .pyc without its source)"]


@needs_watcher
def test_debug_import_says_what_an_import_under_a_context_made(tree, capsys, monkeypatch):
    monkeypatch.setattr(_debug, "imports", True)
    with ch.NullContext():
        lazy_import(tree, "lz_said_armed", IMPORTED_UNDER_A_CONTEXT)
    said = [line.removeprefix("cassette_hook: import: ") for line in capsys.readouterr().err.splitlines()
            if line.startswith("cassette_hook: import: lz_said_armed")]
    body = code_cache.path_for(str(tree / "lz_said_armed.py"), code_cache.BODY)
    assert said == ["lz_said_armed: included by 'lz_said_armed'; rewriting",
                    "lz_said_armed: its body rewritten; its functions switched at the first call of one; "
                    f"cache miss, written: {body}"]


def test_without_a_function_watcher_debug_import_says_what_a_lazy_import_and_the_first_activation_did(
        tree, capsys, monkeypatch, unwatched):
    monkeypatch.setattr(_debug, "imports", True)
    said_module, flat_module = "lz_said_unwatched", "lz_said_flat_unwatched"
    said = lazy_import(tree, said_module)
    flat = lazy_import(tree, flat_module, "def helper(x):\n    return abs(x)\n")
    with ch.NullContext():
        said.helper(1), flat.helper(1)
    said = [line.removeprefix("cassette_hook: import: ") for line in capsys.readouterr().err.splitlines()
            if line.startswith("cassette_hook: import: lz_said")]
    light, light_flat, functions = (code_cache.path_for(str(tree / f"{name}.py"), kind) for name, kind in (
        (said_module, code_cache.LIGHT), (flat_module, code_cache.LIGHT), (said_module, code_cache.FUNCTIONS)))
    assert said == [f"{said_module}: included by '{said_module}'; rewriting",
                    f"{said_module}: light: as compiled (switched under a context); "
                    f"cache miss, written: {light}",
                    f"{flat_module}: included by '{flat_module}'; rewriting",
                    f"{flat_module}: light: as compiled (switched under a context); "
                    f"cache miss, written: {light_flat}",
                    f"{said_module}: functions switched (12 of 12 made); cache miss, written",
                    f"{flat_module}: functions switched (1 of 1 made); cache miss, written"]
    assert Path(functions).exists()


@needs_watcher
def test_debug_import_says_which_function_a_first_call_switched_and_whence(tree, capsys, monkeypatch):
    monkeypatch.setattr(_debug, "imports", True)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    for _ in range(2):  # (the second run reads what the first kept)
        sys.modules.pop("lz_said_first_call", None)
        mod = lazy_import(tree, "lz_said_first_call", SMALL)
        with ch.NullContext():
            mod.helper(1)
        lazy_mode.keep_made()
    said = [line.removeprefix("cassette_hook: import: ") for line in capsys.readouterr().err.splitlines()
            if line.startswith("cassette_hook: import: lz_said_first_call:") and "light" not in line
            and "included" not in line]
    functions = code_cache.path_for(str(tree / "lz_said_first_call.py"), code_cache.FUNCTIONS)
    assert said == ["lz_said_first_call: helper switched at its first call; made",
                    f"lz_said_first_call: 1 function(s) switched alone kept; cache miss, written: {functions}",
                    "lz_said_first_call: helper switched at its first call; cache hit"]


@needs_watcher
def test_a_run_under_a_context_keeps_what_its_first_calls_switched_and_the_next_run_rewrites_none_of_it(tree):
    write(tree, "lz_runs.py", MODULE + "\nprint(boom(), Box().method(2))\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *sys.path])
    command = [sys.executable, "-m", "cassette_hook", "--include", "lz_runs", "--context", "null",
               "--debug", "import", "-c", "import lz_runs"]

    def run() -> list[str]:
        done = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env, timeout=120)
        assert (done.returncode, done.stdout) == (0, "1 [1, 2]\n"), done.stderr
        return sorted(line.removeprefix("cassette_hook: import: lz_runs: ") for line in done.stderr.splitlines()
                      if "at its first call" in line)

    called = ("Box.method", "boom", "helper", "logged")
    assert run() == [f"{name} switched at its first call; made" for name in called]
    assert run() == [f"{name} switched at its first call; cache hit" for name in called]
