"""An include pattern that matched no imported module is named on stderr at exit, where
a person typed it: the command line and ``CASSETTE_HOOK_INCLUDE``.  (The pytest
plugin's ``--cassette-include`` is in ``test_pytest_plugin``.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from cassette_hook.importhook import unmatched

PROG = """
import helper_u
print(helper_u.f(-2))
"""


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "helper_u.py").write_text("def f(x):\n    return abs(x)\n")
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROG))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}
    environ["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    return subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True,
                          env={**environ, **env}, timeout=120)


def test_misspelt_module_name_is_named_once_at_exit(tmp_path):
    result = run(tmp_path, "-m", "cassette_hook", "--include", "helper_u", "--include", "helpr_u", "prog.py")
    assert (result.stdout, result.returncode) == ("2\n", 0)
    assert result.stderr == "cassette_hook: --include 'helpr_u' matched no imported module\n"


def test_glob_that_matched_nothing_is_named(tmp_path):
    result = run(tmp_path, "-m", "cassette_hook", "--include", "helper_*", "--include", "nope_*", "prog.py")
    assert result.stderr == "cassette_hook: --include 'nope_*' matched no imported module\n"


def test_directory_is_named_only_when_it_does_not_exist(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run(tmp_path, "-m", "cassette_hook", "--include", "./empty", "--include", "./mising", "prog.py")
    assert result.stderr == "cassette_hook: --include './mising': no such directory\n"


def test_default_include_is_never_named(tmp_path):
    (tmp_path / "alone.py").write_text("print(1)\n")
    result = run(tmp_path, "-m", "cassette_hook", "alone.py")
    assert (result.stdout, result.stderr) == ("1\n", "")


def test_subprocesses_leave_the_check_off_since_a_child_may_import_what_the_parent_does_not(tmp_path):
    result = run(tmp_path, "-m", "cassette_hook", "--subprocesses", "--include", "helper_u", "-c", "pass")
    assert result.stderr == ""


def test_install_from_env_names_a_pattern_that_matched_nothing(tmp_path):
    result = run(tmp_path, "-c", "import cassette_hook; cassette_hook.install_from_env(); import helper_u",
                 CASSETTE_HOOK_INCLUDE="helper_u,networx")
    assert result.stderr == "cassette_hook: CASSETTE_HOOK_INCLUDE 'networx' matched no imported module\n"


def test_child_of_subprocesses_does_not_name_unmatched_patterns(tmp_path):
    result = run(tmp_path, "-c", "import cassette_hook; cassette_hook.install_from_env()",
                 CASSETTE_HOOK_INCLUDE="networx", CASSETTE_HOOK_SEPARATE="1")
    assert result.stderr == ""


def test_install_from_code_does_not_warn(tmp_path):
    result = run(tmp_path, "-c", "import cassette_hook; cassette_hook.install(include=['networx'])")
    assert result.stderr == ""


def test_a_pattern_matches_its_submodules_as_the_hook_does():
    assert unmatched.unmatched(["pkg", "pk", "pkg.sub"], ["pkg.sub.deep"]) == ["'pk' matched no imported module"]


def test_a_module_run_with_dash_m_is_matched_by_its_name(tmp_path):
    result = run(tmp_path, "-m", "cassette_hook", "--include", "helper_u", "--context", "null", "-m", "helper_u")
    assert (result.returncode, result.stderr) == (0, "")


def test_a_module_run_with_dash_m_is_matched_by_its_package(tmp_path):
    (tmp_path / "pkg_u").mkdir()
    (tmp_path / "pkg_u" / "tool.py").write_text("print('ran')\n")
    result = run(tmp_path, "-m", "cassette_hook", "--include", "pkg_u.tool", "--context", "null", "-m", "pkg_u.tool")
    assert (result.stdout, result.stderr) == ("ran\n", "")
