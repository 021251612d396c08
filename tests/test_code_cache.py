"""The import hook's code cache is never staler than CPython (docs/importhook.md, "The code
cache"): differential tests, each step run in a fresh interpreter through the hook and,
on a copy of the same files, plainly; the hook must print what plain Python prints.

The children inherit the hot path of the test run (``CASSETTE_HOOK_PURE_PYTHON``), so these
hold on the C path and on the pure-Python path alike; the last test runs both in turn.
"""

from __future__ import annotations

import os
import py_compile
import shutil
import subprocess
import sys
import time
from importlib.util import cache_from_source
from pathlib import Path

import pytest

MODULE = "stale_m"
# The same size: an edit a check of the size misses.  (A call, so that there is something to switch.)
OLD, NEW = "def f():\n    return abs(-1)\n", "def f():\n    return abs(-2)\n"

HOOKED = f"""
import cassette_hook as ch
ch.install(include=[{MODULE!r}], lazy=LAZY)
import {MODULE}
with ch.NullContext():  # (lazy: its functions switched, from the cache of switched functions)
    print({MODULE}.f())
"""
PLAIN = f"import {MODULE}; print({MODULE}.f())"


def environment(**changes: str | None) -> dict[str, str]:
    """The test run's environment, with ``.pyc`` files written (as by default) and ``changes``."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": None, **changes}
    return {name: value for name, value in env.items() if value is not None}


def run(directory: Path, program: str, *options: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, *options, "-c", program], cwd=directory, capture_output=True, text=True,
                         env=environment() if env is None else env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def hooked_and_plain(tree: Path, lazy: bool, *options: str) -> tuple[str, str]:
    """What the module prints through the hook, and plainly in the same state of its files
    (a copy, whose .pyc CPython may rewrite without touching the hook's)."""
    plain_tree = tree.parent / f"{tree.name}-plain"
    shutil.rmtree(plain_tree, ignore_errors=True)
    shutil.copytree(tree, plain_tree)  # (with the modification times, to the nanosecond)
    plain = run(plain_tree, PLAIN, *options)
    return run(tree, HOOKED.replace("LAZY", str(lazy)), *options), plain


def write(source: Path, text: str, mtime_ns: int) -> None:
    source.write_text(text)
    os.utime(source, ns=(mtime_ns, mtime_ns))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    directory = tmp_path / "tree"
    directory.mkdir()
    return directory


A_SECOND = 1_000_000_000
START = (int(time.time()) - 100) * A_SECOND  # (a whole second in the past: edits below stay within it)


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "eager"])
@pytest.mark.parametrize("check", ["default", "always", "never"])
@pytest.mark.parametrize("invalidation", [py_compile.PycInvalidationMode.CHECKED_HASH,
                                          py_compile.PycInvalidationMode.UNCHECKED_HASH], ids=["checked", "unchecked"])
def test_a_hash_based_pyc_is_honoured_as_cpython_honours_it(tree, lazy, check, invalidation):
    # PEP 552: a checked .pyc is checked against the hash of the source, an unchecked one is
    # not (its code runs whatever the source says), and --check-hash-based-pycs overrides both.
    source = tree / f"{MODULE}.py"
    write(source, OLD, START)
    py_compile.compile(str(source), invalidation_mode=invalidation, doraise=True)
    options = ("--check-hash-based-pycs", check)
    assert hooked_and_plain(tree, lazy, *options) == ("1\n", "1\n")

    write(source, NEW, START)  # the same size, the modification time restored: only a hash tells
    hooked, plain = hooked_and_plain(tree, lazy, *options)
    assert hooked == plain
    cpython_checks = check == "always" or check == "default" and invalidation.name == "CHECKED_HASH"
    assert plain == ("2\n" if cpython_checks else "1\n")

    py_compile.compile(str(source), invalidation_mode=invalidation, doraise=True)  # CPython's .pyc made again
    assert hooked_and_plain(tree, lazy, *options) == ("2\n", "2\n")


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "eager"])
@pytest.mark.parametrize("edited_at", [START + A_SECOND // 2, START], ids=["later-that-second", "mtime-restored"])
@pytest.mark.parametrize("pyc_made_again", [False, True], ids=["pyc-removed", "pyc-recompiled"])
def test_an_edit_within_the_same_second_is_seen_when_cpythons_pyc_goes(tree, lazy, edited_at, pyc_made_again):
    # A timestamp .pyc records the source's modification time in whole seconds: CPython too
    # runs the old code after an edit within that second, until its .pyc is removed (by a
    # package manager) or compiled again (compileall -f); the hook must then run the new one.
    source = tree / f"{MODULE}.py"
    write(source, OLD, START + A_SECOND // 10)
    assert hooked_and_plain(tree, lazy) == ("1\n", "1\n")  # (CPython's .pyc written, and the hook's cache)

    write(source, NEW, edited_at)
    assert hooked_and_plain(tree, lazy) == ("1\n", "1\n")  # stale, but no staler than CPython

    if pyc_made_again:
        py_compile.compile(str(source), invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP, doraise=True)
    else:
        os.remove(cache_from_source(str(source)))
    assert hooked_and_plain(tree, lazy) == ("2\n", "2\n")


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "eager"])
def test_runs_on_the_c_and_pure_python_paths_in_turn_each_hit_their_own_cache(tree, lazy):
    # Switched code made for the C path calls method sites, which the pure-Python path
    # lacks: each keeps files of its own (.pure), so that neither rewrites the other's.
    (tree / f"{MODULE}.py").write_text(OLD)
    program = HOOKED.replace("LAZY", str(lazy))
    c_path = environment(CASSETTE_HOOK_PURE_PYTHON=None)
    pure_path = environment(CASSETTE_HOOK_PURE_PYTHON="1")
    assert run(tree, program, env=c_path) == run(tree, program, env=pure_path) == "1\n"  # each makes its files

    def ours() -> dict[str, tuple[int, int]]:
        return {path.name: (path.stat().st_ino, path.stat().st_mtime_ns)
                for path in (tree / "__pycache__").iterdir() if ".cassette_hook" in path.name}

    made = ours()
    kind = ".functions" if lazy else ""
    assert {name.partition(".cassette_hook")[2] for name in made} >= {f"{kind}.pyc", f".pure{kind}.pyc"}
    assert run(tree, program, env=c_path) == run(tree, program, env=pure_path) == "1\n"
    assert ours() == made  # read, not one of them written again
