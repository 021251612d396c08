"""The import hook, the code cache and ``instrument``: modules instrumented without ``overdub``."""

from __future__ import annotations

import builtins
import contextlib
import dis
import gc
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import os
import subprocess
import sys
import types
import textwrap
import threading
import traceback
import warnings
import zipfile
from importlib.abc import MetaPathFinder
from pathlib import Path
from types import FunctionType

import pytest

import cassette_hook as ch
from cassette_hook.importhook import lazy_mode, code_cache, finder
from cassette_hook import _native
from cassette_hook.rewrite import UnsupportedCode, _names
from cassette_hook.importhook import dual_code

MODULE = """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def twice(f, x):
    return f(f(x))

class Box:
    def __init__(self, value):
        self.value = value

    def bigger(self, by):
        return Box(self.value + by)

def make_adder(k):
    def add(x):
        return x + k
    return add

def boom():
    return {}["missing"]
"""


class Seen(ch.Context):
    def prehook(self, f, *args, **kwargs):
        self.metadata.append(getattr(f, "__name__", repr(f)))


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A directory on sys.path for throwaway packages; the hook and the modules are
    removed afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # whatever PYTHONDONTWRITEBYTECODE says
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    before = set(sys.modules)
    yield tmp_path
    ch.uninstall()
    lazy_mode.switched(lazy_mode.waiting())  # (modules imported light that no test switched)
    for name in set(sys.modules) - before:
        if name.split(".")[0] != "cassette_hook":  # (its modules stay: the package keeps what they made)
            del sys.modules[name]
    importlib.invalidate_caches()


def write(root: Path, relative: str, source: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def cache_file(source: Path) -> Path:
    """The cache file of the switched code of ``source`` (``lazy=False``; the light import's
    files are tested in test_lazy_import)."""
    return Path(code_cache.path_for(str(source)))


def instrumented(function: FunctionType) -> bool:
    """Does ``function`` run switched code once a context is active (at once when its
    module was imported ``lazy=False``; when lazy, the default, from the first activation,
    or from its first call under a context where a function watcher is)?"""
    with ch.NullContext():
        lazy_mode.first_call(function)  # (what its first call does, where the activation only armed it)
        return _names.is_switched(function.__code__)


def test_included_module_gets_switched_code(tree):
    write(tree, "hooked_a.py", MODULE)
    ch.install(include=["hooked_a"])
    import hooked_a

    assert instrumented(hooked_a.fib)


@pytest.mark.skipif(sys.version_info < (3, 14), reason="annotations are deferred (__annotate__) from 3.14 on")
def test_an_annotate_function_of_an_included_module_stays_as_compiled(tree):
    """annotationlib runs an ``__annotate__`` with fake globals: it is never switched
    (docs/importhook.md)."""
    write(tree, "annotated_x.py", "def f(x: Later) -> int:\n    return abs(x)\n")
    ch.install(include=["annotated_x"], lazy=False)
    import annotated_x

    assert instrumented(annotated_x.f)
    assert not _names.is_switched(annotated_x.f.__annotate__.__code__)


@pytest.mark.skipif(sys.version_info < (3, 14), reason="3.14 compiles all(genexp) as an inline loop")
def test_an_inlined_all_stays_inline_in_the_plain_body_and_is_a_call_under_a_context(tree):
    write(tree, "inline_all.py", "def f(xs):\n    return all(x for x in xs)\n")
    ch.install(include=["inline_all"], lazy=False)
    import inline_all

    assert instrumented(inline_all.f)
    plain = {i.opname for i in dis.get_instructions(dual_code.plain_body(inline_all.f.__code__))}
    assert "LOAD_COMMON_CONSTANT" in plain  # (the compiler's test of the name, before its loop)
    seen = Seen([])
    with seen:
        assert inline_all.f([1, 0]) is False
    assert "all" in seen.metadata


TEMPLATES = """
def width():
    return 4

def f(x):
    return t'{abs(x)!r:>{width()}}-{x}'

AT_IMPORT = t'{width()!s:<{width()}}'
"""


def _template(template):
    return template.strings, [(i.value, i.expression, i.conversion, i.format_spec) for i in template.interpolations]


@pytest.mark.skipif(sys.version_info < (3, 14), reason="template strings (PEP 750) are 3.14's")
def test_a_module_with_template_strings_is_switched_and_gives_the_plain_templates(tree):
    """bytecode's misread BUILD_INTERPOLATION (docs/internals.md, "CPython 3.14") is fixed
    for the import hook's switched code too: the module body and its functions."""
    write(tree, "templates_x.py", TEMPLATES)
    ch.install(include=["templates_x"], lazy=False)
    seen = Seen([])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no "cannot rewrite")
        with seen:
            import templates_x
        assert seen.metadata == ["width", "width"]  # (the module body's calls)
        assert instrumented(templates_x.f)
        plain = _template(templates_x.f(-3))
        with seen:
            assert _template(templates_x.f(-3)) == plain
    assert seen.metadata[2:] == ["abs", "width"]
    assert _template(templates_x.AT_IMPORT) == (("", ""), [(4, "width()", "s", "<4")])
    plain_body = dual_code.plain_body(templates_x.f.__code__)
    assert "BUILD_INTERPOLATION" in {i.opname for i in dis.get_instructions(plain_body)}


def test_module_not_included_is_loaded_as_compiled(tree):
    write(tree, "hooked_b.py", MODULE)
    write(tree, "other_b.py", MODULE)
    ch.install(include=["hooked_b"])
    import other_b

    assert not _names.is_switched(other_b.fib.__code__)


def test_excluded_module_is_loaded_as_compiled(tree):
    write(tree, "pkg_c/__init__.py", "")
    write(tree, "pkg_c/inner.py", MODULE)
    write(tree, "pkg_c/skipped.py", MODULE)
    ch.install(include=["pkg_c"], exclude=["pkg_c.skipped"])
    from pkg_c import inner, skipped

    assert instrumented(inner.fib) and not instrumented(skipped.fib)


def test_glob_and_directory_patterns_include_modules(tree):
    write(tree, "glob_d/__init__.py", "")
    write(tree, "glob_d/io_x.py", MODULE)
    write(tree, "sub_d/by_path_d.py", MODULE)
    ch.install(include=["glob_d.io_*", str(tree / "sub_d")])
    sys.path.insert(0, str(tree / "sub_d"))
    try:
        import by_path_d
        from glob_d import io_x
    finally:
        sys.path.remove(str(tree / "sub_d"))
    assert instrumented(io_x.fib) and instrumented(by_path_d.fib)


def test_idle_instrumented_module_behaves_as_compiled(tree):
    write(tree, "hooked_e.py", MODULE)
    ch.install(include=["hooked_e"])
    import hooked_e

    assert hooked_e.fib(15) == 610
    assert hooked_e.twice(hooked_e.make_adder(3), 1) == 7
    assert hooked_e.Box(1).bigger(2).value == 3


def test_active_context_sees_the_calls_inside_an_instrumented_module(tree):
    write(tree, "hooked_f.py", MODULE)
    ch.install(include=["hooked_f"])
    import hooked_f

    seen = Seen([])
    with seen:
        hooked_f.fib(2)  # the call from this (plain) test is not a call site; fib's own are
    assert seen.metadata == ["lt", "sub", "fib", "lt", "sub", "fib", "lt", "add"]


def test_operator_sites_run_as_compiled_while_no_live_context_counts_operators(tree, monkeypatch):
    import builtins
    import operator

    write(tree, "hooked_ops.py", MODULE)
    ch.install(include=["hooked_ops"])
    import hooked_ops

    with ch.NullContext():  # (the first activation puts the hooks among the builtins)
        pass
    gc.collect()  # (entries that earlier tests left in cycles: a live one keeps the flag true)
    site, reached = _names.operator_name(operator.add), []
    observed = getattr(builtins, site)
    monkeypatch.setattr(builtins, site, lambda *operands: reached.append(operands) or observed(*operands))
    assert getattr(builtins, _names.OPERATORS_ON) is False
    with ch.NullContext():  # observes nothing, so counts no operators: its sites are not reached
        assert getattr(builtins, _names.OPERATORS_ON) is False
        assert hooked_ops.fib(10) == 55
    assert reached == []
    seen = Seen([])
    with seen:
        assert getattr(builtins, _names.OPERATORS_ON) is True
        with ch.NullContext():  # the observing context still lives: the sites run, and null calls the operator
            assert hooked_ops.fib(2) == 1
        hooked_ops.fib(2)
    assert getattr(builtins, _names.OPERATORS_ON) is False
    assert reached == [(1, 0), (1, 0)]
    assert seen.metadata == ["lt", "sub", "fib", "lt", "sub", "fib", "lt", "add"]


def test_yield_from_in_switched_code_reaches_its_hook_only_while_a_context_counts_operators(tree, monkeypatch):
    import builtins

    write(tree, "hooked_chain.py", """
        def chain(items):
            yield from items
    """)
    ch.install(include=["hooked_chain"])
    import hooked_chain

    with ch.NullContext():  # (the first activation puts the hooks among the builtins)
        pass
    gc.collect()  # (entries that earlier tests left in cycles: a live one keeps the flag true)
    hook, reached = str(_names.HOOKS.yield_from), []
    observed = getattr(builtins, hook)
    monkeypatch.setattr(builtins, hook, lambda operand: reached.append(operand) or observed(operand))
    with ch.NullContext():
        assert list(hooked_chain.chain((1, 2))) == [1, 2]
    assert reached == []
    seen = Seen([])
    with seen:
        assert list(hooked_chain.chain((3, 4))) == [3, 4]
    assert reached == [(3, 4)] and "iter" in seen.metadata


def _count_switch_questions(monkeypatch) -> list[str]:
    """Record the module of every question switched code asks (``__cassette_hook_enter__``)."""
    import builtins

    with ch.NullContext():  # (the first activation puts the hooks among the builtins)
        pass
    asked, enter = [], getattr(builtins, _names.ENTER)
    monkeypatch.setattr(builtins, _names.ENTER, lambda module: asked.append(module) or enter(module))
    return asked


def test_a_function_whose_module_is_out_of_scope_runs_plain_from_instrumented_code(tree, monkeypatch):
    # Its __module__ names a module in the context's scope, but its switch asks about the
    # module it was loaded from, which is not: its twin runs that switch, which says no.
    write(tree, "hooked_out.py", """
        def inner():
            return abs(-1)
        inner.__module__ = "hooked_in"
    """)
    write(tree, "hooked_in.py", """
        from hooked_out import inner

        def outer():
            return inner()
    """)
    ch.install(include=["hooked_in", "hooked_out"])
    import hooked_in

    class OnlyIn(Seen):
        include = ["hooked_in"]

    asked = _count_switch_questions(monkeypatch)
    seen = OnlyIn([])
    with seen:
        assert hooked_in.outer() == 1
    assert seen.metadata == ["inner"]  # (not inner's call of abs)
    assert asked == ["hooked_in", "hooked_out"]


def test_a_frame_of_instrumented_code_runs_its_functions_own_code_under_a_context(tree):
    # Libraries find their own frames by code object (jinja2's ``internalcode`` leaves
    # them out of template tracebacks): under a context, a twin of switched code runs it.
    write(tree, "hooked_own.py", """
        import sys

        def inner():
            return sys._getframe().f_code

        def outer():
            return inner()
    """)
    ch.install(include=["hooked_own"])
    import hooked_own

    for context in (ch.NullContext(), Seen([])):
        with context:
            assert hooked_own.outer() is hooked_own.inner.__code__


# Where CPython has dict watchers (3.12+) and the C accelerators run, a twin's frames read
# a mirror of the builtins that tells them they are twins (``plan._skip_the_question``).
TWINS_SKIP_THE_QUESTION = _native.runtime.name == "C" and sys.version_info >= (3, 12)


def test_only_calls_from_plain_sites_ask_whether_instrumented_code_runs_rewritten_where_twins_can_skip_it(
        tree, monkeypatch):
    write(tree, "hooked_asks.py", """
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
    """)
    ch.install(include=["hooked_asks"])
    import hooked_asks

    asked = []
    answer = getattr(builtins, _names.ENTER)
    monkeypatch.setattr(builtins, _names.ENTER, lambda module: asked.append(module) or answer(module))
    with ch.NullContext():
        assert hooked_asks.fib(10) == 55
    # fib(10) makes 177 calls: one from this test, the others from fib's own sites.
    assert len(asked) == (1 if TWINS_SKIP_THE_QUESTION else 177)


def test_a_builtin_added_changed_or_removed_under_a_context_is_what_instrumented_code_reads(tree, monkeypatch):
    write(tree, "hooked_reads.py", """
        def read():
            return cassette_hook_test_builtin

        def outer():
            return read()
    """)
    ch.install(include=["hooked_reads"])
    import hooked_reads

    with ch.NullContext():
        monkeypatch.setattr(builtins, "cassette_hook_test_builtin", "added", raising=False)
        assert hooked_reads.outer() == "added"
        builtins.cassette_hook_test_builtin = "changed"
        assert hooked_reads.outer() == "changed"
        monkeypatch.delattr(builtins, "cassette_hook_test_builtin")
        with pytest.raises(NameError, match="cassette_hook_test_builtin"):
            hooked_reads.outer()


def test_code_instrumented_code_evaluates_in_a_namespace_of_its_own_reads_the_builtins(tree, monkeypatch):
    # (eval gives the namespace the running frame's builtins: a twin's, the mirror)
    write(tree, "hooked_evaluates.py", """
        def evaluate():
            return eval("len('abc'), cassette_hook_test_builtin", {})

        def outer():
            return evaluate()
    """)
    ch.install(include=["hooked_evaluates"])
    import hooked_evaluates

    monkeypatch.setattr(builtins, "cassette_hook_test_builtin", "read", raising=False)
    with ch.NullContext():
        assert hooked_evaluates.outer() == (3, "read")


def test_callbacks_from_c_into_instrumented_code_are_overdubbed(tree):
    write(tree, "hooked_g.py", """
        def key(x):
            return abs(x)
    """)
    ch.install(include=["hooked_g"])
    import hooked_g

    seen = Seen([])
    with seen:
        sorted([3, -1, 2], key=hooked_g.key)
    assert seen.metadata == ["abs", "abs", "abs"]


def test_context_scope_bounds_instrumented_modules_too(tree):
    write(tree, "hooked_h.py", MODULE)
    ch.install(include=["hooked_h"])
    import hooked_h

    class Elsewhere(Seen):
        include = ["somewhere_else"]

    seen = Elsewhere([])
    with seen:
        hooked_h.fib(3)
    assert seen.metadata == []


def test_thread_without_a_context_runs_plain_while_another_has_one(tree):
    write(tree, "hooked_i.py", MODULE)
    ch.install(include=["hooked_i"])
    import hooked_i

    seen, started, results = Seen([]), threading.Event(), []

    def other_thread():
        started.wait()
        results.append(hooked_i.fib(12))

    worker = threading.Thread(target=other_thread)
    worker.start()
    with seen:
        started.set()
        worker.join()
    assert results == [144]
    assert seen.metadata == []


def test_asyncio_task_keeps_the_context_it_was_created_in(tree):
    write(tree, "hooked_j.py", """
        import asyncio

        async def later(gate):
            await gate.wait()
            return abs(-4)
    """)
    ch.install(include=["hooked_j"])
    import asyncio

    import hooked_j

    seen = Seen([])

    async def main():
        gate = asyncio.Event()
        with seen:
            task = asyncio.ensure_future(hooked_j.later(gate))
        gate.set()
        return await task

    assert asyncio.run(main()) == 4
    assert "abs" in seen.metadata


def test_traceback_of_instrumented_code_has_the_same_lines(tree):
    path = write(tree, "hooked_k.py", MODULE)
    ch.install(include=["hooked_k"])
    import hooked_k

    with pytest.raises(KeyError) as info:
        hooked_k.boom()
    line = path.read_text().splitlines().index('    return {}["missing"]') + 1
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (frame.filename, frame.lineno, frame.line) == (str(path), line, 'return {}["missing"]')
    with Seen([]), pytest.raises(KeyError) as info:  # (under a context, cassette_hook's frames join in)
        hooked_k.twice(lambda _: hooked_k.boom(), 0)
    assert (str(path), line) in [(f.filename, f.lineno) for f in traceback.extract_tb(info.value.__traceback__)]


GENERATORS = """
def pair(x):
    yield x
    yield abs(x)

def leaks_stop_iteration():
    yield 1
    raise StopIteration
"""


def test_a_tracer_sees_a_switched_generator_start_before_the_switch_runs(tree):
    write(tree, "hooked_gen_a.py", GENERATORS)
    ch.install(include=["hooked_gen_a"])
    import hooked_gen_a

    events = []

    def tracer(frame, event, arg):
        events.append((frame.f_code.co_name, event))
        return tracer

    with Seen([]):
        generator = hooked_gen_a.pair(-2)
        sys.settrace(tracer)
        try:
            assert list(generator) == [-2, 2]
        finally:
            sys.settrace(None)
    assert events[0] == ("pair", "call")  # not the switch's hook, called from a frame not yet started


LINES = """
    def inner(n):
        x = n + 1
        return x * 2

    def outer(n):
        total = inner(n)
        return total + inner(n + 1)
"""


def _traced_lines(module, context) -> list[tuple[str, str, int]]:
    """The events a line tracer sees of ``module.outer(1)`` run under ``context``."""
    events = []

    def tracer(frame, event, arg):
        if frame.f_code.co_filename == module.__file__:
            events.append((frame.f_code.co_name, event, frame.f_lineno))
        return tracer

    with context:
        sys.settrace(tracer)
        try:
            assert module.outer(1) == 10
        finally:
            sys.settrace(None)
    return events


def test_a_line_tracer_sees_the_lines_of_the_program_in_twins_of_switched_code(tree):
    write(tree, "hooked_lines.py", LINES)
    ch.install(include=["hooked_lines"])
    import hooked_lines

    plain = _traced_lines(hooked_lines, contextlib.nullcontext())
    assert _traced_lines(hooked_lines, ch.NullContext()) == plain  # (inner's frames: twins)
    assert _traced_lines(hooked_lines, Seen([])) == plain


def test_a_line_tracer_sees_each_line_once_in_a_thread_without_a_context_while_another_has_one(tree):
    import builtins

    # There the switch asks, and is told no: its way to the plain body must not look to
    # the tracer like a new line (it was a jump back, which line tracing reports).
    write(tree, "hooked_lines_b.py", LINES)
    ch.install(include=["hooked_lines_b"])
    import hooked_lines_b

    with ch.NullContext():  # (the module is switched at the first activation)
        pass
    plain = _traced_lines(hooked_lines_b, contextlib.nullcontext())
    started, done = threading.Event(), threading.Event()

    def other_thread():
        with ch.NullContext():
            started.set()
            done.wait()

    worker = threading.Thread(target=other_thread)
    worker.start()
    started.wait()
    try:
        assert getattr(builtins, _names.ACTIVE) is True
        assert _traced_lines(hooked_lines_b, contextlib.nullcontext()) == plain
    finally:
        done.set()
        worker.join()


@pytest.mark.parametrize("active", [False, True], ids=["idle", "under a context"])
def test_stop_iteration_raised_in_a_switched_generator_becomes_runtime_error(tree, active):
    write(tree, "hooked_gen_b.py", GENERATORS)
    ch.install(include=["hooked_gen_b"])
    import hooked_gen_b

    seen = Seen([])
    with seen if active else contextlib.nullcontext(), pytest.raises(RuntimeError, match="StopIteration"):
        list(hooked_gen_b.leaks_stop_iteration())


class AskEveryOtherFinder(MetaPathFinder):
    """A finder like ours: it asks all the others (but itself) for the spec."""

    def __init__(self):
        self.asked = []

    def find_spec(self, fullname, path, target=None):
        self.asked.append(fullname)
        for other in sys.meta_path:
            if other is not self and hasattr(other, "find_spec"):
                spec = other.find_spec(fullname, path, target)
                if spec is not None:
                    return spec
        return None


def test_another_finder_that_asks_every_other_finder_does_not_recurse_for_ever(tree, monkeypatch):
    write(tree, "hooked_asked.py", MODULE)
    ch.install(include=["hooked_asked"])
    other = AskEveryOtherFinder()
    monkeypatch.setattr(sys, "meta_path", [sys.meta_path[0], other, *sys.meta_path[1:]])
    import hooked_asked

    assert other.asked == ["hooked_asked"] and instrumented(hooked_asked.fib)


def test_install_twice_keeps_one_finder_with_the_new_patterns():
    try:
        ch.install(include=["first"])
        ch.install(include=["second"])
        finders = [f for f in sys.meta_path if isinstance(f, finder.SwitchingFinder)]
        assert len(finders) == 1 and finders[0].patterns.include == ("second",)
    finally:
        ch.uninstall()
    assert not any(isinstance(f, finder.SwitchingFinder) for f in sys.meta_path)


def test_install_rejects_a_string_of_patterns():
    with pytest.raises(TypeError, match="list of patterns"):
        ch.install(include="pkg")


def test_cassette_hook_itself_is_never_instrumented():
    patterns = finder.Patterns(include=["*", "cassette_hook"])
    assert not patterns.matches("cassette_hook.runtime.callsites", finder.__file__)
    assert not patterns.matches("bytecode", None)


@pytest.mark.parametrize("module", ["bytecode", "importlib_metadata", "zipp", "lazy_importer._imports"])
def test_what_cassette_hook_runs_on_is_never_instrumented_even_when_named(module):
    # importlib_metadata 10 imports through lazy_importer, whose proxies run when
    # cassette_hook reads entry points: rewritten, they would call back into it.
    assert not finder.Patterns(include=[module]).matches(module, None)


@pytest.mark.parametrize(("module", "expected"), [
    ("pkg", True), ("pkg.sub.mod", True), ("pkgx", False), ("other.pkg", False),
    ("lib.fast_io", True), ("lib.io", False), ("lib.x.fast_io", True), ("tool7", True), ("tool77", False),
])
def test_module_patterns_are_names_with_their_submodules_or_globs(module, expected):
    from cassette_hook._patterns import ModulePatterns

    assert ModulePatterns(["pkg", "lib.*fast_io", "tool?"]).matches(module) is expected


def test_standard_library_is_instrumented_only_when_named():
    json_file = importlib.import_module("json").__file__
    assert not finder.Patterns(include=["*"]).matches("json", json_file)
    assert not finder.Patterns(include=[os.path.dirname(os.path.dirname(json_file))]).matches("json", json_file)
    assert finder.Patterns(include=["json"]).matches("json", json_file)


def test_standard_library_is_instrumented_by_a_glob_that_names_its_package():
    json_file = importlib.import_module("json.decoder").__file__
    assert finder.Patterns(include=["json.*"]).matches("json.decoder", json_file)


def test_an_excluded_directory_wins_over_an_included_name(tmp_path):
    origin = str(write(tmp_path, "vendored/pkg_e/mod.py", ""))
    assert finder.Patterns(include=["pkg_e"]).matches("pkg_e.mod", origin)
    assert not finder.Patterns(include=["pkg_e"], exclude=[str(tmp_path / "vendored")]).matches("pkg_e.mod", origin)


def test_directory_patterns_see_through_symbolic_links(tmp_path):
    origin = write(tmp_path, "real/mod_l.py", "")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "file_link.py").symlink_to(origin)
    patterns = finder.Patterns(include=[str(tmp_path / "real")])
    assert patterns.matches("mod_l", str(tmp_path / "link" / "mod_l.py"))
    assert patterns.matches("file_link", str(tmp_path / "file_link.py"))
    assert not finder.Patterns(include=[str(tmp_path / "elsewhere")]).matches("mod_l", str(origin))


def test_namespace_package_modules_are_instrumented(tree):
    write(tree, "ns_l/part.py", MODULE)  # no __init__.py
    ch.install(include=["ns_l"])
    from ns_l import part

    assert instrumented(part.fib) and part.fib(10) == 55


def test_module_from_a_sourceless_pyc_is_instrumented(tree):
    source = write(tree, "compiled_m.py", MODULE)
    (tree / "compiled_m.pyc").write_bytes(_plain_pyc(source))
    source.unlink()
    ch.install(include=["compiled_m"])
    import compiled_m

    assert instrumented(compiled_m.fib) and compiled_m.fib(10) == 55


def test_module_from_a_zip_archive_is_instrumented(tree):
    archive = tree / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped_n.py", MODULE)
    sys.path.insert(0, str(archive))
    try:
        ch.install(include=["zipped_n"])
        import zipped_n
    finally:
        sys.path.remove(str(archive))
    assert instrumented(zipped_n.fib) and zipped_n.fib(10) == 55


class MadeInExecModule(importlib.abc.InspectLoader):
    """A loader of modules made in ``exec_module``, as packages that make modules lazily
    do: it has ``get_code`` (``InspectLoader``'s), which gives ``None`` without source."""

    def get_source(self, fullname):
        return None

    def exec_module(self, module):
        module.answer = 42
        module.made_by = type(self).__name__


class NoneFromGetCode(importlib.abc.Loader):
    def get_code(self, fullname):
        return None

    def exec_module(self, module):
        module.answer = 42


class ExecModuleOnly(importlib.abc.Loader):
    def exec_module(self, module):
        module.answer = 42


class MakesModules(MetaPathFinder):
    """A meta-path importer behind ours, for the names under ``made_``."""

    def __init__(self, loader):
        self.loader = loader

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith("made_"):
            return None
        return importlib.util.spec_from_loader(fullname, self.loader)


@pytest.mark.parametrize("loader", [MadeInExecModule(), NoneFromGetCode(), ExecModuleOnly()],
                         ids=lambda loader: type(loader).__name__)
def test_module_whose_loader_gives_no_code_is_loaded_by_its_own_loader(tree, monkeypatch, loader):
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, MakesModules(loader)])
    ch.install(include=["made_q"])
    import made_q

    assert made_q.answer == 42
    assert made_q.__loader__ is loader and made_q.__spec__.loader is loader


def test_module_a_finder_makes_lazy_is_lazy_and_instrumented(tree, monkeypatch):
    write(tree, "lazy_r.py", "import sys\nsys.lazy_r_ran = True\n" + MODULE)

    class LazyFinder(MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != "lazy_r":
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            spec.loader = importlib.util.LazyLoader(spec.loader)
            return spec

    monkeypatch.delattr(sys, "lazy_r_ran", raising=False)
    ours = ch.install(include=["lazy_r"])
    monkeypatch.setattr(sys, "meta_path", [ours, LazyFinder(), *sys.meta_path[1:]])
    import lazy_r

    assert not hasattr(sys, "lazy_r_ran")  # not run until first used
    assert lazy_r.fib(10) == 55 and sys.lazy_r_ran
    assert instrumented(lazy_r.fib)


def _fresh_import(monkeypatch, name):
    """Import ``name`` anew (the old module is put back afterwards)."""
    for loaded in [n for n in sys.modules if n == name or n.startswith(name.split(".")[0] + ".")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.delitem(sys.modules, name.split(".")[0], raising=False)
    return importlib.import_module(name)


def test_extension_module_under_an_included_name_is_loaded_by_its_own_loader(tree, monkeypatch):
    # (_bz2: a shared object on every build here; Debian's 3.14 builds _csv into the interpreter)
    ch.install(include=["_bz2"])
    module = _fresh_import(monkeypatch, "_bz2")

    assert type(module.__loader__) is importlib.machinery.ExtensionFileLoader
    compressor = module.BZ2Compressor()
    assert module.BZ2Decompressor().decompress(compressor.compress(b"ab") + compressor.flush()) == b"ab"


def test_builtin_module_under_an_included_name_is_loaded_by_its_own_loader(tree, monkeypatch):
    assert "_symtable" in sys.builtin_module_names
    ch.install(include=["_symtable"])
    module = _fresh_import(monkeypatch, "_symtable")

    assert module.__loader__ is importlib.machinery.BuiltinImporter and hasattr(module, "symtable")


def test_frozen_module_under_an_included_name_imports_as_plain(tree, monkeypatch, capsys):
    plain = vars(_fresh_import(monkeypatch, "__phello__.spam")).keys() - {"__loader__", "__spec__"}
    printed = capsys.readouterr().out
    ch.install(include=["__phello__"])
    module = _fresh_import(monkeypatch, "__phello__.spam")

    assert module.__spec__.origin == "frozen" and capsys.readouterr().out == printed
    assert vars(module).keys() - {"__loader__", "__spec__"} == plain


def test_directory_pattern_does_not_take_in_frozen_modules(tree, monkeypatch):
    monkeypatch.chdir(tree)  # (a frozen module's origin, "frozen", is no file in it)
    ch.install(include=["."])
    module = _fresh_import(monkeypatch, "__phello__.spam")

    assert module.__loader__ is importlib.machinery.FrozenImporter


def test_module_that_cannot_be_rewritten_is_imported_plain_with_one_warning(tree, monkeypatch):
    write(tree, "broken_o.py", MODULE)

    def fail(code, module):
        raise UnsupportedCode("a shape the rewriter does not handle")

    monkeypatch.setattr(dual_code, "switched", fail)
    ch.install(include=["broken_o"], lazy=False)
    with pytest.warns(RuntimeWarning, match="'broken_o'.*a shape the rewriter does not handle") as record:
        import broken_o
    assert len(record) == 1
    assert broken_o.fib(10) == 55 and not _names.is_switched(broken_o.fib.__code__)


# -- the cache -------------------------------------------------------------------------

def test_rewritten_code_is_cached_beside_cpythons_own_pyc(tree):
    source = write(tree, "cached_p.py", MODULE)
    ch.install(include=["cached_p"], lazy=False)
    import cached_p  # noqa: F401

    ours = cache_file(source)
    path = ".cassette_hook.pyc" if _native.runtime.name == "C" else ".cassette_hook.pure.pyc"  # (the hot path's)
    assert ours.exists() and ours.name.startswith("cached_p.") and ours.name.endswith(path)
    cpython = Path(importlib.util.cache_from_source(str(source)))
    assert not _names.is_switched(_first_function(_code_in(cpython)))


def test_cached_code_is_reused_without_rewriting(tree, monkeypatch):
    write(tree, "cached_q.py", MODULE)
    ch.install(include=["cached_q"], lazy=False)
    import cached_q  # noqa: F401

    del sys.modules["cached_q"]
    monkeypatch.setattr(dual_code, "switched", lambda code, module: pytest.fail("rewrote despite the cache"))
    import cached_q as again

    assert _names.is_switched(again.fib.__code__)


def test_the_cache_files_of_switched_code_name_the_hot_path_they_were_made_for(monkeypatch):
    # On the C path switched code calls method sites, which the pure-Python path lacks: each
    # path keeps files of its own, so that running them in turn rewrites neither's.
    kinds = (code_cache.SWITCHED, code_cache.LIGHT, code_cache.FUNCTIONS)
    paths = {kind: code_cache.path_for(__file__, kind) for kind in kinds}
    other = types.SimpleNamespace(method_site=None if _native.runtime.method_site is not None else lambda name: ())
    monkeypatch.setattr(_native, "runtime", other)  # (the other implementation, as far as the cache asks)
    assert code_cache.path_for(__file__, code_cache.SWITCHED) != paths[code_cache.SWITCHED]
    assert code_cache.path_for(__file__, code_cache.FUNCTIONS) != paths[code_cache.FUNCTIONS]
    assert code_cache.path_for(__file__, code_cache.LIGHT) == paths[code_cache.LIGHT]  # (light code has no sites)


def _replace_by_a_copy(path: Path) -> None:
    """Another file with the same bytes at ``path`` (as another process importing at the
    same time writes, or as a copied tree has)."""
    copy = path.with_name(path.name + ".copy")
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)


def test_cache_serves_when_cpythons_pyc_is_replaced_by_the_same_bytes(tree, monkeypatch):
    source = write(tree, "cached_same.py", MODULE)
    ch.install(include=["cached_same"], lazy=False)
    import cached_same  # noqa: F401

    _replace_by_a_copy(Path(importlib.util.cache_from_source(str(source))))
    del sys.modules["cached_same"]
    monkeypatch.setattr(dual_code, "switched", lambda code, module: pytest.fail("rewrote despite the cache"))
    import cached_same as again

    assert _names.is_switched(again.fib.__code__)


def test_cache_file_names_the_new_pyc_once_it_served_for_it(tree, monkeypatch):
    # (so that the next import finds it valid with a stat of CPython's .pyc, not a read)
    source = write(tree, "cached_stamp.py", MODULE)
    ch.install(include=["cached_stamp"], lazy=False)
    import cached_stamp  # noqa: F401

    cpython = importlib.util.cache_from_source(str(source))
    _replace_by_a_copy(Path(cpython))
    found = [_read_switched(source, cpython, "cached_stamp")]
    monkeypatch.setattr(code_cache, "_with_stat", lambda path: pytest.fail(f"read {path}"))
    found.append(_read_switched(source, cpython, "cached_stamp"))
    assert found == ["hit", "hit"]


def _read_switched(source: Path, cpython: str, module: str) -> str:
    """What reading the switched code of ``source`` from the cache finds (``hit``, ``stale`` ...)."""
    return code_cache.read_mirroring(str(cache_file(source)), cpython, str(source), module, finder.OPTIONS,
                               code_cache.SWITCHED)[1]


def test_cache_is_rewritten_when_the_source_changes(tree):
    source = write(tree, "cached_r.py", "def f():\n    return abs(-1)\n")
    ch.install(include=["cached_r"], lazy=False)
    import cached_r

    assert cached_r.f() == 1
    del sys.modules["cached_r"]
    source.write_text("def f():\n    return abs(-2) + 0\n")
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 2_000_000_000))
    import cached_r as edited

    assert edited.f() == 2


def test_corrupt_cache_file_is_ignored_and_rewritten(tree):
    source = write(tree, "cached_s.py", MODULE)
    ch.install(include=["cached_s"], lazy=False)
    import cached_s  # noqa: F401

    ours = cache_file(source)
    data = ours.read_bytes()
    ours.write_bytes(data[: len(data) // 2])  # right header, truncated code
    del sys.modules["cached_s"]
    import cached_s as again

    assert again.fib(10) == 55 and _names.is_switched(again.fib.__code__)
    assert ours.read_bytes() == data


def test_unwritable_cache_directory_still_imports(tree):
    write(tree, "ro_t/__init__.py", "")
    write(tree, "ro_t/mod.py", MODULE)
    (tree / "ro_t" / "__pycache__").write_text("a file where the cache directory would be")
    ch.install(include=["ro_t"], lazy=False)
    from ro_t import mod

    assert mod.fib(10) == 55 and _names.is_switched(mod.fib.__code__)


def test_cache_file_is_written_where_its_directory_is_missing(tmp_path):
    # (most are written beside CPython's .pyc, whose directory is there: it is made only
    # where the file cannot be created for want of it)
    from cassette_hook.importhook import code_cache

    path = tmp_path / "made" / "here" / "mod.switched.pyc"
    assert code_cache._write(str(path), b"the cache", 0o644) == "written"
    assert path.read_bytes() == b"the cache" and [p.name for p in path.parent.iterdir()] == [path.name]


def test_dont_write_bytecode_writes_no_cache(tree, monkeypatch):
    source = write(tree, "nowrite_u.py", MODULE)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    ch.install(include=["nowrite_u"], lazy=False)
    import nowrite_u

    assert _names.is_switched(nowrite_u.fib.__code__)
    assert not cache_file(source).exists()


def test_pycache_prefix_holds_the_cache(tree, monkeypatch):
    source = write(tree, "prefixed_v.py", MODULE)
    monkeypatch.setattr(sys, "pycache_prefix", str(tree / "prefix"))
    ch.install(include=["prefixed_v"], lazy=False)
    import prefixed_v  # noqa: F401

    assert cache_file(source).is_relative_to(tree / "prefix") and cache_file(source).exists()
    assert not (tree / "__pycache__" / cache_file(source).name).exists()


def test_concurrent_imports_from_processes_leave_a_good_cache_file(tree):
    source = write(tree, "raced_w.py", MODULE * 20)
    program = (f"import sys; sys.path.insert(0, {str(tree)!r}); import cassette_hook as ch; "
               "ch.install(include=['raced_w'], lazy=False); import raced_w; assert raced_w.fib(10) == 55")
    # (run in the test's directory: from the repository's, ``-c`` would import the package
    # from its sources, whose hot path may not be the one installed, nor its cache key)
    processes = [subprocess.Popen([sys.executable, "-c", program], cwd=tree) for _ in range(4)]
    assert [p.wait(timeout=120) for p in processes] == [0, 0, 0, 0]
    code, _, _ = code_cache.read_mirroring(str(cache_file(source)), importlib.util.cache_from_source(str(source)),
                                     str(source), "raced_w", finder.OPTIONS, code_cache.SWITCHED)
    assert code is not None and _names.is_switched(_first_function(code))
    assert not [p for p in cache_file(source).parent.iterdir() if p.name.endswith(".tmp")]


# -- instrument ------------------------------------------------------------------------

def test_instrument_a_function_in_place(tree):
    write(tree, "late_x.py", MODULE)
    import late_x

    fib = late_x.fib
    assert ch.instrument(fib) is fib and _names.is_switched(fib.__code__)
    seen = Seen([])
    with seen:
        fib(1)
    assert seen.metadata == ["lt"]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="CPython specializes calls from 3.11 on")
def test_calls_to_a_function_instrumented_in_place_specialize_as_before(tree):
    write(tree, "late_fib.py", "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n")
    from late_fib import fib

    ch.instrument(fib)
    fib(15)
    specialized = any(i.opname == "CALL_PY_EXACT_ARGS" for i in dis.get_instructions(fib, adaptive=True))
    # 3.13 versions a function only as it is made; lazy_mode.set_code gives an assigned one its
    # version back, which the pure path cannot (docs/importhook.md)
    assert specialized == (sys.version_info < (3, 13) or _native.runtime.name == "C")


def test_instrument_a_class_covers_its_methods_and_properties():
    class Thing:
        def method(self):
            return abs(-1)

        @staticmethod
        def static():
            return abs(-2)

        @classmethod
        def klass(cls):
            return abs(-3)

        @property
        def prop(self):
            return abs(-4)

    ch.instrument(Thing)
    for function in (Thing.method, Thing.static, Thing.klass.__func__, Thing.prop.fget):
        assert _names.is_switched(function.__code__)
    seen = Seen([])
    with seen:
        assert Thing().prop == 4  # a property getter, called by C code
    assert seen.metadata == ["abs"]


def test_instrument_a_module_covers_functions_defined_later(tree):
    write(tree, "late_y.py", MODULE)
    import late_y

    ch.instrument(late_y)
    adder = late_y.make_adder(1)  # made after instrumenting, from the instrumented code
    assert _names.is_switched(adder.__code__) and adder(1) == 2
    assert _names.is_switched(late_y.Box.bigger.__code__)


def test_instrument_refuses_cassette_hooks_own_code():
    with pytest.raises(ValueError, match="its own code"):
        ch.instrument(ch.importhook.finder)


def test_instrument_rejects_other_objects():
    with pytest.raises(TypeError, match="module, class or function, not int"):
        ch.instrument(3)


def _plain_pyc(source: Path) -> bytes:
    import importlib._bootstrap_external as external

    code = compile(source.read_text(), str(source), "exec")
    return bytes(external._code_to_timestamp_pyc(code, int(source.stat().st_mtime), source.stat().st_size))


def _code_in(pyc: Path):
    return marshal.loads(pyc.read_bytes()[16:])


def _first_function(module_code):
    return next(c for c in module_code.co_consts if hasattr(c, "co_code"))


def test_hooks_among_the_builtins_keep_its_keys_exact_strings():
    # One key of a str subclass turns the builtins dict into a general dict, and CPython
    # then stops specializing every builtin lookup of the process.
    import builtins

    from cassette_hook.importhook import switch

    switch.install_builtins()
    assert all(type(key) is str for key in vars(builtins))


def test_a_hook_gone_from_the_builtins_is_put_back_as_it_was_made():
    # The hooks are made once (a partial an operator); each later install only checks that
    # each is there (docs/internals.md, "The import hook: switched code, made at import").
    import builtins

    from cassette_hook.importhook import switch
    from cassette_hook.rewrite import _names

    switch.install_builtins()
    name = _names.operator_name(next(iter(_names.OPERATORS)))
    made = getattr(builtins, name)
    delattr(builtins, name)
    try:
        switch.install_builtins()
        assert getattr(builtins, name) is made
    finally:
        setattr(builtins, name, made)


STACK_WALKER = """
    import sys
    frame, STACK = sys._getframe(), []
    while frame is not None:
        STACK.append(frame.f_code.co_filename)
        frame = frame.f_back
"""


def _stack_below_module_body(name: str) -> list[str]:
    """The files of the frames under ``name``'s module body while it is imported here."""
    return importlib.import_module(name).STACK[1:]


def test_module_body_sees_the_same_frames_below_it_as_plain(tree):
    write(tree, "walker_plain.py", STACK_WALKER)
    write(tree, "walker_hooked.py", STACK_WALKER)
    ch.install(include=["walker_hooked"], lazy=False)
    hooked = _stack_below_module_body("walker_hooked")
    assert _names.is_switched(sys.modules["walker_hooked"].__loader__.get_code("walker_hooked"))
    assert hooked == _stack_below_module_body("walker_plain")


def test_module_body_imported_from_our_cache_sees_the_same_frames_below_it_as_plain(tree):
    write(tree, "walker_plain2.py", STACK_WALKER)
    write(tree, "walker_cached.py", STACK_WALKER)
    ch.install(include=["walker_cached"], lazy=False)
    _stack_below_module_body("walker_cached")
    assert cache_file(tree / "walker_cached.py").exists()
    del sys.modules["walker_cached"]
    assert _stack_below_module_body("walker_cached") == _stack_below_module_body("walker_plain2")
