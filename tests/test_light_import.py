"""``import cassette_hook`` is light: what only rewriting, an entry-point lookup or a report
needs is imported when that happens, not before; and so is ``python -m cassette_hook``
starting a program: what only options, overdubbing or rewriting need waits for them."""

from __future__ import annotations

import dis
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import CodeType

import pytest

import cassette_hook as ch
from cassette_hook import _specs
from cassette_hook.importhook import dual_code
from cassette_hook.rewrite import _names

ROOT = Path(__file__).resolve().parent.parent
LATER = ("bytecode", "importlib_metadata", "xml.sax.saxutils", "inspect", "tempfile", "sysconfig",
         "cassette_hook.importhook.dual_code", "cassette_hook.contexts", "cassette_hook.contexts.profile",
         "cassette_hook.contexts.trace", "typing", "cassette_hook.dispatch", "cassette_hook.generics",
         "cassette_hook.runtime.callsites", "cassette_hook.tagging")


def python(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def printed_by(program: str, *args: str) -> str:
    """What ``python -c program args`` prints, in a fresh interpreter; it must succeed."""
    out = python("-c", program, *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def imported_by_importtime(stderr: str) -> set[str]:
    """The modules ``-X importtime`` reports (its lines end with the module's name)."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_importing_cassette_hook_imports_none_of_what_only_some_uses_need():
    probe = ("import sys; before = set(sys.modules); import cassette_hook\n"
             "print(' '.join(m for m in sys.argv[1:] if m in sys.modules and m not in before))")
    assert printed_by(probe, *LATER).split() == []


def test_the_built_in_contexts_are_there_when_named():
    from cassette_hook.contexts import null, profile, trace

    assert ch.NullContext is null.NullContext
    assert ch.ProfileContext is profile.ProfileContext
    assert ch.TraceContext is trace.TraceContext
    assert {"NullContext", "ProfileContext", "TraceContext"} <= set(ch.__all__)


@pytest.mark.parametrize("module", ["runtime.plan", "generics", "runtime.callees", "runtime.callsites",
                                    "runtime.operators", "runtime.primitives", "tagging", "dispatch"])
def test_each_module_of_the_hot_path_can_be_imported_first(module: str) -> None:
    program = f"import cassette_hook.{module}; import cassette_hook as ch; print(ch.overdub(ch.Context(), abs, -2))"
    out = python("-c", program)
    assert (out.returncode, out.stdout, out.stderr) == (0, "2\n", "")


def test_an_unknown_attribute_of_the_package_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'NoSuchContext'"):
        ch.NoSuchContext


def test_a_program_with_nothing_to_rewrite_starts_without_the_rewriter(tmp_path):
    out = python("-X", "importtime", "-m", "cassette_hook", "-c", "import sys; x = 1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert not imported_by_importtime(out.stderr) & {"bytecode", "cassette_hook.importhook.dual_code",
                                                     "importlib_metadata", "xml.sax.saxutils"}


def imported_by_the_command_line(tmp_path: Path, *args: str) -> set[str]:
    """What ``python -m cassette_hook ARGS`` imports that ``python -c pass`` does not."""
    out = python("-X", "importtime", "-m", "cassette_hook", *args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return imported_by_importtime(out.stderr) - imported_by_importtime(python("-X", "importtime", "-c", "pass").stderr)


def test_a_bare_program_starts_without_the_option_parser(tmp_path):
    assert not imported_by_the_command_line(tmp_path, "-c", "pass") & {"argparse", "gettext", "locale", "shutil"}


def test_a_program_with_nothing_to_rewrite_starts_without_the_generics_or_typing(tmp_path):
    imported = imported_by_the_command_line(tmp_path, "-c", "import sys; x = 1")
    assert not imported & {"typing", "cassette_hook.dispatch", "cassette_hook.generics",
                           "cassette_hook.runtime.callsites",
                           "cassette_hook.tagging"}


def test_the_public_names_are_listed_before_they_are_imported():
    assert printed_by("import cassette_hook as ch; print(sorted(set(ch.__all__) - set(dir(ch))))") == "[]\n"


def test_every_public_name_is_there_when_named():
    assert all(getattr(ch, name) is not None for name in ch.__all__)


@pytest.mark.parametrize(("lazy", "kind"), [(False, ""), (True, ".functions")])
def test_a_module_read_from_the_code_cache_finds_its_hooks_in_a_fresh_process(tmp_path, lazy, kind):
    (tmp_path / "cached_mod.py").write_text("def f():\n    return len('ab')\n")
    program = textwrap.dedent("""\
        import sys
        sys.dont_write_bytecode = False  # (whatever PYTHONDONTWRITEBYTECODE says)
        import cassette_hook as ch
        ch.install(include=["cached_mod"], lazy=LAZY)
        import cached_mod
        class Seen(ch.Context):
            def prehook(self, f, *args, **kwargs):
                print("saw", f.__name__)
        with Seen():
            print(cached_mod.f())
    """).replace("LAZY", str(lazy))
    first, cached = python("-c", program, cwd=tmp_path), python("-c", program, cwd=tmp_path)
    ours = (f".cassette_hook{kind}.pyc", f".cassette_hook.pure{kind}.pyc")  # (the hot path the child found)
    assert [path for path in tmp_path.glob("__pycache__/cached_mod.*.pyc") if path.name.endswith(ours)]
    assert first.stdout == cached.stdout == "saw len\n2\n", cached.stderr


def test_a_program_with_calls_is_rewritten_as_ever(tmp_path):
    out = python("-X", "importtime", "-m", "cassette_hook", "-c", "print(len('abc'))", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "3\n"
    assert {"bytecode", "cassette_hook.importhook.dual_code"} <= imported_by_importtime(out.stderr)


@pytest.mark.parametrize("name", sorted(_specs.BUILT_IN))
def test_naming_a_built_in_context_reads_no_package_metadata(tmp_path, name):
    out = python("-X", "importtime", "-m", "cassette_hook", "--context", name, "--output", os.devnull, "-c", "pass",
                 cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "importlib_metadata" not in imported_by_importtime(out.stderr)


def test_naming_another_package_s_context_looks_entry_points_up(tmp_path):
    """The entry point of a package installed in ``tmp_path`` (a ``.dist-info`` beside its module)."""
    (tmp_path / "theirs.py").write_text(
        "from cassette_hook import Context\nclass Theirs(Context):\n    def __init__(self):\n        print('made')\n")
    (tmp_path / "theirs-1.0.dist-info").mkdir()
    (tmp_path / "theirs-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: theirs\nVersion: 1.0\n")
    (tmp_path / "theirs-1.0.dist-info" / "entry_points.txt").write_text(
        "[cassette_hook.contexts]\ntheirs = theirs:Theirs\n")
    out = python("-X", "importtime", "-m", "cassette_hook", "--context", "theirs", "-c", "pass", cwd=tmp_path)
    assert (out.returncode, out.stdout) == (0, "made\n"), out.stderr
    assert "importlib_metadata" in imported_by_importtime(out.stderr)


SITE_FREE = ["pass", "x = 1", "import os\nfrom os import path as p", "x = y", '"""docstring"""\nA = 1\nB = A']
# Tables of constants and packages' __init__: displays and attribute reads, no call.
TABLES = ["__all__ = ['a', 'b', 'c', 'd']", "x = (y, 1)", "x = {1, y}", "x = {1, 2, 3, 4}", "x = {y: 1}",
          "x = {'a': 1, 'b': y}", "x = [*y]", "x = {*y}", "x = {**y, 'a': 1}", "import os\nx = os.path.sep",
          "M = {" + ", ".join(f"'k{i}': ('v', {i})" for i in range(40)) + "}",
          "M = {" + ", ".join(f"'k{i}': v" for i in range(40)) + "}"]
WITH_SITES = ["f()", "x + 1", "__all__ = a.__all__ + b.__all__", "x = [f()]", "x = {y: f()}",
              "a.b()", "def f(): pass", "class C: pass", "for x in y: pass", "[x for x in y]",
              "x = y[0]", "x = -y", "x = y < z", "x = y in z", "y[0] = 1", "del y[0]", "lambda: 0"]


@pytest.mark.parametrize("source", SITE_FREE + TABLES)
def test_code_said_to_need_no_rewriting_comes_out_of_the_switcher_as_it_went_in(source):
    code = compile(source, "<site-free>", "exec")
    assert _names.nothing_to_rewrite(code)
    out = dual_code.switched(code, "m")
    assert not _names.is_switched(out)
    assert out.co_code == code.co_code


def test_the_module_a_switched_body_asks_about_is_read_past_extended_arguments():
    # 300 constants before the switch's own: loading the module's name needs an EXTENDED_ARG,
    # which the reading (the raw bytecode, not dis) must apply.
    body = "".join(f"    a{i} = {i}.5 + g{i}\n" for i in range(300))
    module = dual_code.switched(compile(f"def f():\n{body}", "<many>", "exec"), "pkg.many")
    f = next(c for c in module.co_consts if isinstance(c, CodeType) and c.co_name == "f")
    before_question = []
    for instruction in dis.get_instructions(f):
        before_question.append(instruction.opname)
        if instruction.argval == "pkg.many":
            break
    assert "EXTENDED_ARG" in before_question
    assert _names.switch_module(f) == "pkg.many"


def test_a_body_that_is_not_switched_has_no_module_to_ask_about():
    with pytest.raises(ValueError, match="f is not a switched code object"):
        _names.switch_module(compile("def f(): return g", "<plain>", "exec").co_consts[0])


@pytest.mark.parametrize("source", WITH_SITES)
def test_code_with_a_site_or_a_function_is_rewritten(source):
    code = compile(source, "<sites>", "exec")
    assert not _names.nothing_to_rewrite(code)


def test_a_module_with_nothing_to_rewrite_is_imported_as_compiled(tmp_path, monkeypatch):
    (tmp_path / "light_consts.py").write_text(textwrap.dedent("""\
        import os
        NAME = "constants only"
        ALIAS = NAME
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    ch.install(include=["light_consts"])
    try:
        import light_consts

        assert light_consts.ALIAS == "constants only"
        assert light_consts.os is os
    finally:
        ch.uninstall()
        sys.modules.pop("light_consts", None)


def test_a_table_of_constants_is_imported_under_a_context_without_the_rewriter(tmp_path):
    # Such a module comes out of the rewriter unchanged, so no cache file is kept for it:
    # were it handed to the rewriter, every run would pay for that (docs/importhook.md,
    # "The code cache").
    (tmp_path / "table_mod.py").write_text("import os\n__all__ = ['NAMES']\nNAMES = {"
                                           + ", ".join(f"'k{i}': ('v', {i}, os.sep)" for i in range(40)) + "}\n")
    out = python("-X", "importtime", "-m", "cassette_hook", "--include", "table_mod", "--context", "null",
                 "-c", "import table_mod", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    imported = imported_by_importtime(out.stderr)
    assert "table_mod" in imported
    assert not imported & {"bytecode", "cassette_hook.importhook.dual_code"}


def test_installing_name_patterns_does_not_look_for_the_library_directories():
    probe = ("import sys; before = 'sysconfig' in sys.modules; import cassette_hook as ch\n"
             "ch.install(include=['mypkg']); print('sysconfig' in sys.modules and not before)")
    assert printed_by(probe) == "False\n"


def test_a_program_importing_nothing_from_its_directory_does_not_look_for_the_library(tmp_path):
    out = python("-X", "importtime", "-m", "cassette_hook", "-c", "pass", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "sysconfig" not in imported_by_importtime(out.stderr)


def test_a_directory_pattern_still_leaves_the_library_alone():
    # The library's directories are found during the first import the directory pattern
    # includes: finding them (sysconfig) imports modules through the finder itself.
    probe = ("import os, sys, cassette_hook as ch; from cassette_hook.rewrite import _names\n"
             "assert 'json' not in sys.modules\n"
             "ch.install(include=[os.path.dirname(os.__file__)])\n"
             "import json\n"
             "print(json.dumps([1]), _names.is_switched(json.dumps.__code__), 'sysconfig' in sys.modules)")
    assert printed_by(probe) == "[1] False True\n"


def test_a_module_under_an_included_directory_is_rewritten_once_the_library_is_known(tmp_path):
    (tmp_path / "lib_first.py").write_text("def f(x):\n    return abs(x)\n")
    probe = ("import sys, cassette_hook as ch; from cassette_hook.rewrite import _names\n"
             f"sys.path.insert(0, {str(tmp_path)!r}); ch.install(include=[{str(tmp_path)!r}], lazy=False)\n"
             "import lib_first\n"
             "print(_names.is_switched(lib_first.f.__code__), 'sysconfig' in sys.modules)")
    assert printed_by(probe) == "True True\n"


def test_naming_one_deferred_name_imports_them_all_and_leaves_no_module_getattr():
    probe = ("import cassette_hook as ch; had = '__getattr__' in vars(ch); ch.tag\n"
             "print(had, '__getattr__' in vars(ch), sorted(set(ch.__all__) - set(vars(ch))))")
    assert printed_by(probe) == "True False []\n"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10's interpreter specializes nothing")
def test_reads_of_the_package_attributes_in_a_hook_are_specialized():
    # CPython never specializes attribute reads of a module with a __getattr__: each
    # ``ch.tag`` in an overload would then be a generic lookup.
    probe = ("import dis, cassette_hook as ch\n"
             "def overload(x): return ch.tag, ch.untag\n"
             "for _ in range(100): overload(1)\n"
             "print(sorted({i.opname for i in dis.get_instructions(overload, adaptive=True) if 'ATTR' in i.opname}))")
    assert printed_by(probe) == "['LOAD_ATTR_MODULE']\n"
