"""``--debug import`` / ``CASSETTE_HOOK_DEBUG=import``: why each import was or was not
rewritten, and what the code cache did, one line each on stderr.  (With ``lazy=False``,
where each import rewrites; what a lazy import and the first activation say is in
test_lazy_import.)"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cassette_hook as ch
from cassette_hook import _debug
from cassette_hook.importhook import code_cache, finder
from cassette_hook._patterns import ModulePatterns
from cassette_hook.rewrite import UnsupportedCode
from cassette_hook.importhook import dual_code

MODULE = "def f(x):\n    return abs(x)\n"
PREFIX = "cassette_hook: import: "
# What cassette_hook imports for itself when it first rewrites (its generics, ``bytecode``):
# imported during whichever test rewrites first, so neither said nor removed by the tests.
OWN = ModulePatterns(finder.NEVER)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A directory on sys.path for throwaway modules, with ``--debug import`` on."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(_debug, "imports", True)
    before = set(sys.modules)
    yield tmp_path
    ch.uninstall()
    for name in set(sys.modules) - before:
        if not OWN.matches(name):
            del sys.modules[name]
    importlib.invalidate_caches()


def lines(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert all(line.startswith(PREFIX) for line in err.splitlines()), err
    said = [line[len(PREFIX):] for line in err.splitlines()]
    return [line for line in said if not OWN.matches(line.partition(":")[0])]


def test_included_module_names_the_pattern_and_a_cache_miss_written(tree, capsys):
    (tree / "dbg_a.py").write_text(MODULE)
    ch.install(include=["dbg_*"], lazy=False)
    import dbg_a  # noqa: F401

    cache = code_cache.path_for(str(tree / "dbg_a.py"))
    assert lines(capsys) == ["dbg_a: included by 'dbg_*'; rewriting",
                             f"dbg_a: rewritten; cache miss, written: {cache}"]


def test_module_with_nothing_to_rewrite_says_so(tree, capsys):
    (tree / "dbg_consts.py").write_text("import os\nNAME = 'x'\n")
    ch.install(include=["dbg_consts"], lazy=False)
    import dbg_consts  # noqa: F401

    assert lines(capsys) == ["dbg_consts: included by 'dbg_consts'; rewriting",
                             "dbg_consts: nothing to rewrite (no function, class or call): imported as compiled"]


def test_second_import_is_a_cache_hit(tree, capsys):
    (tree / "dbg_b.py").write_text(MODULE)
    ch.install(include=["dbg_b"], lazy=False)
    import dbg_b

    del sys.modules["dbg_b"]
    capsys.readouterr()
    import dbg_b  # noqa: F401, F811

    assert lines(capsys)[-1] == f"dbg_b: cache hit: {code_cache.path_for(str(tree / 'dbg_b.py'))}"


def test_changed_source_makes_the_cache_stale(tree, capsys):
    source = tree / "dbg_c.py"
    source.write_text(MODULE)
    ch.install(include=["dbg_c"], lazy=False)
    import dbg_c

    del sys.modules["dbg_c"]
    source.write_text(MODULE + "\n# edited\n")
    capsys.readouterr()
    import dbg_c  # noqa: F401, F811

    assert lines(capsys)[-1].startswith("dbg_c: rewritten; cache stale, written: ")


def test_corrupt_cache_is_said_so(tree, capsys):
    source = tree / "dbg_d.py"
    source.write_text(MODULE)
    ch.install(include=["dbg_d"], lazy=False)
    import dbg_d

    cache = Path(code_cache.path_for(str(source)))
    cache.write_bytes(cache.read_bytes()[:-8])
    del sys.modules["dbg_d"]
    capsys.readouterr()
    import dbg_d  # noqa: F401, F811

    assert lines(capsys)[-1].startswith("dbg_d: rewritten; cache corrupt, written: ")


def test_unwritable_cache_is_said_so(tree, capsys):
    (tree / "dbg_e").mkdir()
    (tree / "dbg_e" / "__init__.py").write_text(MODULE)
    (tree / "dbg_e" / "__pycache__").write_text("a file where the cache directory would be")
    ch.install(include=["dbg_e"], lazy=False)
    import dbg_e  # noqa: F401

    # (CPython could write no .pyc there either, and a cache file of ours mirrors one: code_cache)
    assert "rewritten; cache miss, not written (CPython wrote no .pyc of its own for it to mirror)" in lines(capsys)[-1]


def test_excluded_module_names_the_exclude_pattern(tree, capsys):
    (tree / "dbg_f.py").write_text(MODULE)
    ch.install(include=["dbg_f"], exclude=["dbg_f"], lazy=False)
    import dbg_f  # noqa: F401

    assert lines(capsys) == ["dbg_f: not rewritten: excluded by 'dbg_f'"]


def test_module_no_pattern_matches_says_so(tree, capsys):
    (tree / "dbg_g.py").write_text(MODULE)
    ch.install(include=["something_else"], lazy=False)
    import dbg_g  # noqa: F401

    assert lines(capsys) == ["dbg_g: not rewritten: no include pattern matches it"]


def test_library_module_under_an_included_directory_is_not_named(tree, capsys, monkeypatch):
    ch.install(include=[os.path.dirname(os.__file__)], lazy=False)
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    import colorsys  # noqa: F401

    said = lines(capsys)
    library = "not rewritten: in the standard library or site-packages, which only a name pattern includes"
    assert said[-1] == f"colorsys: {library}"
    # Before it, if this process had not yet imported them: the modules sysconfig imports
    # to say where the library is, which this first question needed.
    assert all(line.endswith(f": {library}") for line in said)


def test_extension_module_is_loaded_by_its_own_loader(tree, capsys, monkeypatch):
    # (_bz2: a shared object on every build here; Debian's 3.14 builds _csv into the interpreter)
    ch.install(include=["_bz2"], lazy=False)
    monkeypatch.delitem(sys.modules, "_bz2", raising=False)
    import _bz2  # noqa: F401

    assert lines(capsys) == ["_bz2: included by '_bz2'; an extension module: no code: loaded by its own loader"]


def test_rewrite_failure_is_said_so(tree, capsys, monkeypatch):
    (tree / "dbg_h.py").write_text(MODULE)

    def fail(code, module):
        raise UnsupportedCode("a shape the rewriter does not handle")

    monkeypatch.setattr(dual_code, "switched", fail)
    ch.install(include=["dbg_h"], lazy=False)
    with pytest.warns(RuntimeWarning):
        import dbg_h  # noqa: F401

    assert lines(capsys)[-1] == "dbg_h: rewrite failed: a shape the rewriter does not handle; imported unrewritten"


def test_nothing_is_said_when_debug_is_off(tree, capsys, monkeypatch):
    monkeypatch.setattr(_debug, "imports", False)
    (tree / "dbg_i.py").write_text(MODULE)
    ch.install(include=["dbg_i"], lazy=False)
    import dbg_i  # noqa: F401

    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("name", "origin"), [
    ("pkg", None), ("pkg.sub", "/src/pkg/sub.py"), ("pkg.vendored.x", None), ("other", "/src/other.py"),
    ("other", "/elsewhere/other.py"), ("bytecode", None), ("json", os.path.realpath(os.__file__)),
    ("pkg.skip_me", "/src/pkg/skip_me.py"), ("tool_io", None),
])
def test_explanation_agrees_with_the_decision(name, origin):
    patterns = finder.Patterns(include=["pkg", "/src", "tool_*"], exclude=["pkg.vendored", "/src/pkg/skip_me.py"])
    assert patterns.why(name, origin).startswith("included") == patterns.matches(name, origin)


def test_unknown_category_is_an_error_that_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown debug category 'imports' \(available: import, runtime\)"):
        _debug.parse("import,imports")


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}
    environ["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    return subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True,
                          env={**environ, **env}, timeout=120)


def test_command_line_debug_import_explains_each_import(tmp_path):
    (tmp_path / "dbg_j.py").write_text(MODULE)
    result = run(tmp_path, "-m", "cassette_hook", "--debug", "import", "--include", "dbg_j", "-c", "import dbg_j")
    assert f"{PREFIX}dbg_j: included by 'dbg_j'; rewriting\n" in result.stderr
    assert result.returncode == 0


def test_command_line_rejects_an_unknown_debug_category(tmp_path):
    result = run(tmp_path, "-m", "cassette_hook", "--debug", "imprt", "-c", "pass")
    assert result.returncode == 2 and "--debug: unknown debug category 'imprt'" in result.stderr


def test_environment_variable_turns_debug_on_for_install_from_env(tmp_path):
    (tmp_path / "dbg_k.py").write_text(MODULE)
    result = run(tmp_path, "-c", "import cassette_hook; cassette_hook.install_from_env(); import dbg_k",
                 CASSETTE_HOOK_INCLUDE="dbg_k", CASSETTE_HOOK_DEBUG="import")
    assert f"{PREFIX}dbg_k: included by 'dbg_k'; rewriting\n" in result.stderr


def test_subprocesses_carry_debug_into_children(tmp_path):
    (tmp_path / "dbg_l.py").write_text(MODULE)
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import subprocess, sys
        subprocess.run([sys.executable, "-c", "import dbg_l"], check=True)
    """))
    result = run(tmp_path, "-m", "cassette_hook", "--subprocesses", "--debug", "import", "--include", "dbg_l",
                 "prog.py")
    assert f"{PREFIX}dbg_l: included by 'dbg_l'; rewriting\n" in result.stderr, result.stderr



class _Terminal:
    """A stderr that says it is a terminal, and keeps what is written to it."""

    def __init__(self, tty: bool = True) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


@pytest.fixture
def slow_start(tree, monkeypatch):
    """No debug lines; a progress line from the first module rewritten on."""
    monkeypatch.setattr(_debug, "imports", False)
    monkeypatch.setattr(_debug, "progress", _debug.Progress())
    monkeypatch.setattr(_debug.Progress, "DELAY", 0.0)
    return tree


def test_a_long_cold_start_names_each_module_it_rewrites_on_a_terminal(slow_start, monkeypatch):
    for name in ("prog_a", "prog_b"):
        (slow_start / f"{name}.py").write_text(MODULE)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    ch.install(include=["prog_*"], lazy=False)
    import prog_a  # noqa: F401
    import prog_b  # noqa: F401

    shown = [part for part in terminal.text.split("\r") if part]
    line = r"cassette_hook: instrumenting, module {} in 0 s \(cached for the next run\): {}\x1b\[K"
    assert re.fullmatch(line.format(1, "prog_a"), shown[0])
    assert re.fullmatch(line.format(2, "prog_b"), shown[2])
    assert shown[1] == shown[3] == "\x1b[K"  # erased as each module is done, before its body runs


def _stderr_of_first_import(root, monkeypatch, name, *, tty=True):
    """What importing the new module ``name`` through the hook writes to stderr."""
    (root / f"{name}.py").write_text(MODULE)
    stderr = _Terminal(tty=tty)
    monkeypatch.setattr(sys, "stderr", stderr)
    ch.install(include=[name], lazy=False)
    importlib.import_module(name)
    return stderr.text


def test_progress_is_not_shown_when_stderr_is_not_a_terminal(slow_start, monkeypatch):
    assert _stderr_of_first_import(slow_start, monkeypatch, "prog_c", tty=False) == ""


def test_progress_waits_for_a_start_that_is_long(slow_start, monkeypatch):
    monkeypatch.setattr(_debug.Progress, "DELAY", 3600.0)
    assert _stderr_of_first_import(slow_start, monkeypatch, "prog_d") == ""


def test_the_progress_line_fits_on_one_row_of_the_terminal(slow_start, monkeypatch):
    monkeypatch.setattr(_debug, "_width", lambda: 40)
    text = _stderr_of_first_import(slow_start, monkeypatch, "prog_with_a_rather_long_module_name_e")

    shown = [part for part in text.split("\r") if part]
    assert shown[0] == "cassette_hook: instrumenting, module 1 \x1b[K"  # 39 characters, then erase to the end


def test_a_cold_start_that_cannot_be_cached_says_so_once_with_the_way_out(slow_start, monkeypatch):
    # (docs/importhook.md, "The code cache": every run would pay it again)
    monkeypatch.setattr(_debug.Progress, "NOTICE", 0.0)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    first = _stderr_of_first_import(slow_start, monkeypatch, "uncached_a", tty=False)
    second = _stderr_of_first_import(slow_start, monkeypatch, "uncached_b", tty=False)

    assert re.fullmatch(r"cassette_hook: cache: instrumenting code that cannot be cached \(sys\.dont_write_bytecode "
                        r"is set: PYTHONDONTWRITEBYTECODE or -B\) has taken \d+\.\d s of this run so far, and every "
                        r"run will take it again; unset it to have it cached beside CPython's \.pyc files\n", first)
    assert second == ""


def test_an_unwritable_cache_says_where_to_cache_instead(slow_start, monkeypatch):
    monkeypatch.setattr(_debug.Progress, "NOTICE", 0.0)
    monkeypatch.setattr(code_cache, "_write", lambda path, data, mode: "not writable (Permission denied)")
    said = _stderr_of_first_import(slow_start, monkeypatch, "unwritable_a", tty=False)

    assert "is not writable (Permission denied)" in said and "PYTHONPYCACHEPREFIX" in said


def test_a_cold_start_too_short_to_matter_says_nothing_of_the_cache(slow_start, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert _stderr_of_first_import(slow_start, monkeypatch, "uncached_c", tty=False) == ""  # (NOTICE: 2 s)


# -- ``--debug runtime``: which implementation of the runtime runs, and why ---------------

RUNS_A_CONTEXT = "import cassette_hook as ch\nwith ch.NullContext():\n    len([])\n"


def test_command_line_debug_runtime_says_which_implementation_runs_and_why(tmp_path):
    result = run(tmp_path, "-m", "cassette_hook", "--debug", "runtime", "-c", RUNS_A_CONTEXT)
    said = [line for line in result.stderr.splitlines() if line.startswith("cassette_hook: runtime: ")]
    built = importlib.util.find_spec("cassette_hook._speedups") is not None  # (no CASSETTE_HOOK_ variable in the child)
    # Once per process (the command line may run the program in a child: docs/processes.md).
    assert said and len(set(said)) == 1, result.stderr
    assert said[0] == ("cassette_hook: runtime: C implementation: the C accelerator is built "
                       f"({importlib.util.find_spec('cassette_hook._speedups').origin})" if built else
                       "cassette_hook: runtime: Python implementation: the C accelerator is not built or failed to "
                       "import (No module named 'cassette_hook._speedups')")
    assert result.returncode == 0


def test_debug_runtime_names_the_environment_variable_that_chose_python(tmp_path):
    result = run(tmp_path, "-m", "cassette_hook", "--debug", "runtime", "-c", RUNS_A_CONTEXT,
                 CASSETTE_HOOK_PURE_PYTHON="1")
    assert "cassette_hook: runtime: Python implementation: CASSETTE_HOOK_PURE_PYTHON is set\n" in result.stderr


def test_debug_runtime_gives_the_import_error_when_c_cannot_be_loaded(monkeypatch, capsys):
    from cassette_hook import _native

    def refuse(name: str, package: str | None = None) -> None:
        raise ImportError(f"no module named {name!r} (refused by the test)")

    monkeypatch.setattr(_native, "PURE_PYTHON", False)
    monkeypatch.setattr(_native.importlib, "import_module", refuse)
    monkeypatch.setattr(_debug, "runtime", True)
    chosen = _native.choose()
    assert chosen.name == "Python"
    assert capsys.readouterr().err == (
        "cassette_hook: runtime: Python implementation: the C accelerator is not "
        "built or failed to import (no module named '._speedups' (refused by the test))\n")
