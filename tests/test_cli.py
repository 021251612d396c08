"""``python -m cassette_hook``: a program runs as under ``python``, instrumented."""

from __future__ import annotations

import os
import platform
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cassette_hook as ch

PROBE = """
import sys
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
print(__name__, repr(__file__) if "__file__" in dir() else None, sys.argv, sys.path[0], fib(12))
print("switched:", "__cassette_hook_enter__" in fib.__code__.co_names, file=sys.stderr)
"""


def run(*args: str, cwd: Path, instrumented: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    prefix = [sys.executable, "-m", "cassette_hook"] if instrumented else [sys.executable]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}  # find cassette_hook from anywhere
    return subprocess.run([*prefix, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def script(tmp_path: Path, source: str, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def test_script_sees_what_python_gives_it(tmp_path):
    script(tmp_path, PROBE)
    plain, hooked = run("prog.py", "a", "-v", cwd=tmp_path, instrumented=False), run("prog.py", "a", "-v", cwd=tmp_path)
    assert hooked.stdout == plain.stdout and hooked.returncode == plain.returncode == 0
    assert "switched: True" in hooked.stderr


def test_module_run_with_dash_m_sees_what_python_gives_it(tmp_path):
    script(tmp_path, PROBE, "pkg/__main__.py")
    script(tmp_path, "", "pkg/__init__.py")
    plain, hooked = run("-m", "pkg", "x", cwd=tmp_path, instrumented=False), run("-m", "pkg", "x", cwd=tmp_path)
    assert hooked.stdout == plain.stdout and hooked.returncode == 0
    assert "switched: True" in hooked.stderr


def test_code_run_with_dash_c_sees_what_python_gives_it(tmp_path):
    code = textwrap.dedent(PROBE)
    plain = run("-c", code, "--include", cwd=tmp_path, instrumented=False)
    hooked = run("-c", code, "--include", cwd=tmp_path)
    assert hooked.stdout == plain.stdout and "switched: True" in hooked.stderr


MAIN_MODULE_PROBE = PROBE + """
print(__spec__.name, __spec__.origin, __package__, globals().get("__cached__", "(no __cached__: 3.15+)"))
"""


def zip_app(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    import zipfile

    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as archive:
        for member, source in files.items():
            archive.writestr(member, textwrap.dedent(source))
    return path


@pytest.mark.parametrize("target", ["app", "./app/"])
def test_directory_with_main_module_sees_what_python_gives_it(tmp_path, target):
    script(tmp_path, MAIN_MODULE_PROBE, "app/__main__.py")
    plain, hooked = run(target, "a", cwd=tmp_path, instrumented=False), run(target, "a", cwd=tmp_path)
    assert (hooked.stdout, hooked.returncode) == (plain.stdout, plain.returncode) == (plain.stdout, 0)
    assert "switched: True" in hooked.stderr


@pytest.mark.parametrize("name", ["app.zip", "app.pyz", "app"])  # python goes by the content, not the name
def test_zip_file_with_main_module_sees_what_python_gives_it(tmp_path, name):
    zip_app(tmp_path, name, {"__main__.py": MAIN_MODULE_PROBE})
    plain, hooked = run(name, "-v", cwd=tmp_path, instrumented=False), run(name, "-v", cwd=tmp_path)
    assert (hooked.stdout, hooked.returncode) == (plain.stdout, plain.returncode) == (plain.stdout, 0)
    assert "switched: True" in hooked.stderr


def test_modules_of_a_zip_app_are_instrumented_by_default(tmp_path):
    helper = "def switched():\n    return '__cassette_hook_enter__' in switched.__code__.co_names\n"
    main = "import cassette_hook as ch, helper\nwith ch.NullContext():\n    print(helper.switched())\n"
    zip_app(tmp_path, "app.zip", {"__main__.py": main, "helper.py": helper})
    assert run("app.zip", cwd=tmp_path).stdout == "True\n"


@pytest.mark.parametrize("make", [lambda p: (p / "empty").mkdir(), lambda p: zip_app(p, "empty", {"x.py": ""})],
                         ids=["directory", "zip"])
def test_directory_or_zip_without_main_module_gives_pythons_message_and_status(tmp_path, make):
    make(tmp_path)
    plain, hooked = run("empty", cwd=tmp_path, instrumented=False), run("empty", cwd=tmp_path)
    assert (hooked.returncode, hooked.stderr) == (plain.returncode, plain.stderr)
    assert plain.returncode == 1 and "can't find '__main__' module" in plain.stderr


def test_uncaught_exception_in_a_directory_app_prints_pythons_traceback(tmp_path):
    script(tmp_path, "def fail():\n    raise ValueError('bad')\nfail()\n", "app/__main__.py")
    plain, hooked = run("app", cwd=tmp_path, instrumented=False), run("app", cwd=tmp_path)
    assert (hooked.returncode, hooked.stderr) == (plain.returncode, plain.stderr) == (1, plain.stderr)


def test_uncaught_exception_in_a_module_run_with_dash_m_prints_pythons_traceback(tmp_path):
    script(tmp_path, "def fail():\n    raise ValueError('bad')\nfail()\n", "pkg/__main__.py")
    plain, hooked = run("-m", "pkg", cwd=tmp_path, instrumented=False), run("-m", "pkg", cwd=tmp_path)
    assert (hooked.returncode, hooked.stderr) == (plain.returncode, plain.stderr) == (1, plain.stderr)


def test_script_named_by_a_relative_path_keeps_it_in_its_file_as_python_does(tmp_path):
    script(tmp_path, PROBE)
    plain, hooked = run("./prog.py", cwd=tmp_path, instrumented=False), run("./prog.py", cwd=tmp_path)
    assert hooked.stdout == plain.stdout and "/./prog.py" in plain.stdout


def test_exit_status_of_sys_exit_is_kept(tmp_path):
    script(tmp_path, "import sys\nprint('partial', end='')\nsys.exit(3)\n")
    result = run("prog.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (3, "partial")


def test_uncaught_exception_prints_pythons_traceback_and_exits_1(tmp_path):
    script(tmp_path, """
        def inner():
            raise ValueError("bad value")
        inner()
    """)
    plain, hooked = run("prog.py", cwd=tmp_path, instrumented=False), run("prog.py", cwd=tmp_path)
    assert hooked.returncode == plain.returncode == 1
    assert hooked.stderr == plain.stderr


def test_keyboard_interrupt_ends_the_process_as_python_does(tmp_path):
    script(tmp_path, "raise KeyboardInterrupt\n")
    plain, hooked = run("prog.py", cwd=tmp_path, instrumented=False), run("prog.py", cwd=tmp_path)
    assert hooked.returncode == plain.returncode == -signal.SIGINT
    assert hooked.stderr == plain.stderr


def test_missing_script_gives_pythons_message_and_status(tmp_path):
    plain, hooked = run("absent.py", cwd=tmp_path, instrumented=False), run("absent.py", cwd=tmp_path)
    assert (hooked.returncode, hooked.stderr) == (plain.returncode, plain.stderr) == (2, plain.stderr)


def test_missing_module_gives_pythons_message_and_status(tmp_path):
    plain, hooked = run("-m", "absent_mod", cwd=tmp_path, instrumented=False), run("-m", "absent_mod", cwd=tmp_path)
    assert (hooked.returncode, hooked.stderr) == (plain.returncode, plain.stderr)


def test_arguments_after_the_script_belong_to_the_program(tmp_path):
    script(tmp_path, "import sys; print(sys.argv[1:])")
    assert run("prog.py", "--context", "nope", "-m", cwd=tmp_path).stdout == "['--context', 'nope', '-m']\n"


def test_unknown_context_lists_the_available_ones_with_status_2(tmp_path):
    script(tmp_path, "print('ran')")
    result = run("--context", "nope", "prog.py", cwd=tmp_path)
    assert result.returncode == 2 and "ran" not in result.stdout
    assert "unknown context 'nope'" in result.stderr and "null" in result.stderr and "trace" in result.stderr


@pytest.mark.parametrize("args, option", [
    (["--context", "profile", "--output", "missing/table.txt"], "--output"),
    (["--context", "trace", "--output", "missing/trace.txt"], "--output"),
    (["--context", "profile,flamegraph=missing/f.svg"], "--context"),
    (["--context", "profile,speedscope=missing/p.json,dot=d.dot"], "--context"),
])
def test_unwritable_report_file_is_a_usage_error_before_the_program_starts(tmp_path, args, option):
    script(tmp_path, "open('started', 'w').close()")
    result = run(*args, "prog.py", cwd=tmp_path)
    assert result.returncode == 2 and not (tmp_path / "started").exists()
    assert f"error: {option}: " in result.stderr and "cannot write" in result.stderr
    assert f"no such directory {str(tmp_path / 'missing')!r}" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.py"]  # nothing created


@pytest.mark.parametrize("output", ["r.txt", "r.{pid}.txt"])
def test_two_contexts_writing_their_reports_to_one_output_file_is_a_usage_error(tmp_path, output):
    # (docs/cli.md, "Contexts": the last report written would replace the others)
    script(tmp_path, "open('started', 'w').close()")
    result = run("--context", "trace", "--context", "profile", "--output", output, "prog.py", cwd=tmp_path)
    assert result.returncode == 2 and not (tmp_path / "started").exists(), result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"python -m cassette_hook: error: --output: 2 contexts (TraceContext, ProfileContext) would write their "
        f"reports to the same file {output!r}, each over the one before: run the program once per context, each "
        f"with a report file of its own")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.py"]


def test_a_context_that_writes_no_report_shares_the_output_file_with_one_that_does(tmp_path):
    script(tmp_path, "print('ran')")
    result = run("--context", "null", "--context", "trace", "--output", "trace.txt", "prog.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "ran\n"), result.stderr
    assert "builtins.print('ran')" in (tmp_path / "trace.txt").read_text()


def test_profile_report_file_is_written_at_exit_not_before(tmp_path):
    script(tmp_path, "import os\nprint(os.path.exists('table.txt'))\n")
    result = run("--context", "profile", "--output", "table.txt", "prog.py", cwd=tmp_path)
    assert result.stdout == "False\n" and "calls of" in (tmp_path / "table.txt").read_text()


def test_context_that_fails_to_construct_reports_the_error_not_a_traceback(tmp_path):
    script(tmp_path, """
        import cassette_hook as ch
        class Fussy(ch.Context):
            def __init__(self):
                raise RuntimeError("needs a licence key")
    """, "fussy.py")
    script(tmp_path, "print('ran')")
    result = run("--context", "fussy:Fussy", "prog.py", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "RuntimeError: needs a licence key" in result.stderr


GREET = """
    import copy
    import json
    import textwrap


    class Card:
        def __init__(self, name):
            self.name = name

        def __deepcopy__(self, memo):
            return Card(self.name.title())


    def greet(name):
        return textwrap.dedent(f"  hello {name}").upper()


    def main():
        card = copy.deepcopy(Card("ada"))
        print(json.dumps([greet(card.name)]))


    main()
"""


def test_trace_of_a_script_shows_its_own_calls_with_library_calls_as_one_line(tmp_path):
    script(tmp_path, GREET)
    result = run("--context", "trace", "--output", "trace.txt", "prog.py", cwd=tmp_path)
    assert result.stdout == '["HELLO ADA"]\n'
    card = "<Card object at 0x...>"
    assert re.sub("0x[0-9a-f]+", "0x...", (tmp_path / "trace.txt").read_text()) == f"""\
__main__.main()
  __main__.Card('ada')
    __main__.Card.__init__({card}, 'ada') -> None
  __main__.Card -> {card}
  copy.deepcopy({card})
    str.title('ada') -> 'Ada'
    __main__.Card('Ada')
      __main__.Card.__init__({card}, 'Ada') -> None
    __main__.Card -> {card}
  copy.deepcopy -> {card}
  __main__.greet('Ada')
    textwrap.dedent('  hello Ada') -> 'hello Ada'
    str.upper('hello Ada') -> 'HELLO ADA'
  __main__.greet -> 'HELLO ADA'
  json.dumps(['HELLO ADA']) -> '["HELLO ADA"]'
  builtins.print('["HELLO ADA"]') -> None
__main__.main -> None
"""


def test_context_given_as_module_attr_is_active_for_the_whole_run(tmp_path):
    script(tmp_path, """
        import atexit, cassette_hook as ch
        class Counting(ch.Context):
            def prehook(self, f, *args, **kwargs):
                self.metadata.append(getattr(f, "__name__", "?"))
        counting = Counting([])
        atexit.register(lambda: print(sorted(set(counting.metadata))))
    """, "counting.py")
    script(tmp_path, "def double(x):\n    return abs(x) * 2\nprint(double(-2))\n")
    result = run("--context", "counting:counting", "prog.py", cwd=tmp_path)
    assert result.stdout.splitlines() == ["4", "['abs', 'double', 'mul', 'print']"]


def test_list_contexts_names_the_built_in_ones(tmp_path):
    result = run("--list-contexts", cwd=tmp_path)
    assert result.returncode == 0
    assert [line.split()[0] for line in result.stdout.splitlines()][:3] == ["null", "profile", "trace"]


def installed_package_with_contexts(site: Path, entry_points: str, source: str, first: bool = True) -> dict[str, str]:
    """A package ``theirs`` installed in ``site`` (its module and its ``.dist-info``) that
    registers ``entry_points`` (``name = theirs:Attr`` lines); the environment that finds it
    (``site`` before cassette_hook's own metadata on the path, or after it)."""
    script(site, source, "theirs.py")
    script(site, "Metadata-Version: 2.1\nName: theirs\nVersion: 1.0\n", "theirs-1.0.dist-info/METADATA")
    script(site, f"[cassette_hook.contexts]\n{entry_points}\n", "theirs-1.0.dist-info/entry_points.txt")
    return {"PYTHONPATH": os.pathsep.join([str(site), *sys.path] if first else [*sys.path, str(site)])}


LOUD = """\
    from cassette_hook import Context
    class Loud(Context):
        "A context that says when it is made."
        def __init__(self):
            print("Loud made")
"""


def test_another_package_s_context_is_named_by_its_entry_point(tmp_path):
    env = installed_package_with_contexts(tmp_path / "site", "loud = theirs:Loud", LOUD)
    assert run("--context", "loud", "-c", "print('ran')", cwd=tmp_path, **env).stdout == "Loud made\nran\n"
    listed = run("--list-contexts", cwd=tmp_path, **env).stdout
    assert "loud         A context that says when it is made." in listed.splitlines()


@pytest.mark.parametrize("first", [True, False], ids=["theirs-found-first", "theirs-found-last"])
def test_another_package_s_entry_point_cannot_replace_a_built_in_context(tmp_path, first):
    env = installed_package_with_contexts(tmp_path / "site", "null = theirs:Loud", LOUD, first)
    result = run("--context", "null", "-c", "print('ran')", cwd=tmp_path, **env)
    assert (result.returncode, result.stdout) == (0, "ran\n")


def test_listing_the_contexts_names_an_entry_point_that_clashes_with_a_built_in_one(tmp_path):
    env = installed_package_with_contexts(tmp_path / "site", "null = theirs:Loud", LOUD)
    result = run("--list-contexts", cwd=tmp_path, **env)
    assert result.returncode == 0 and "Loud made" not in result.stdout
    assert [line for line in result.stdout.splitlines() if line.startswith("null ")] == [
        f"{'null':12} {ch.NullContext.__doc__.strip().splitlines()[0]}"]
    assert ("entry point 'null' of theirs ignored: 'null' names the built-in context; name that one as "
            "'theirs:Loud'") in result.stderr


def test_help_names_the_options(tmp_path):
    help_text = run("--help", cwd=tmp_path).stdout
    assert "--include" in help_text and "--context" in help_text and "-m" in help_text and "--version" in help_text


def _version(tmp_path: Path, *args: str, code: str | None = None, **env: str) -> str:
    """What ``--version`` prints, with ``env`` (and without CASSETTE_HOOK_PURE_PYTHON unless
    given), by the command line or, with ``code`` run first, by ``main``."""
    environ = {key: value for key, value in os.environ.items() if key != "CASSETTE_HOOK_PURE_PYTHON"}
    environ.update(PYTHONPATH=os.pathsep.join(sys.path), **env)
    command = ["-m", "cassette_hook", "--version", *args] if code is None else [
        "-c", f"{code}\nfrom cassette_hook.cli.main import main\nraise SystemExit(main(['--version']))"]
    result = subprocess.run([sys.executable, *command], cwd=tmp_path, capture_output=True, text=True,
                            env=environ, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


PYTHON = f"CPython {platform.python_version()}"


@pytest.mark.skipif(not os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS"), reason="the C accelerators are built")
def test_version_names_the_c_accelerators_that_load(tmp_path):
    """(docs/cli.md) The function watcher needs 3.12: before, it says so."""
    if sys.version_info >= (3, 12):
        expected = "C accelerators: _speedups, _recording, _watch, _assembly, _decoding, _stacking"
    else:
        expected = ("C accelerators: _speedups, _recording, _assembly, _decoding, _stacking; not loaded: _watch is "
                    "not built or failed to import (cassette_hook.importhook._watch needs CPython 3.12's function "
                    "watchers)")
    assert _version(tmp_path) == f"cassette_hook {ch.__version__} ({PYTHON}; {expected})"


def test_version_says_the_runtime_is_pure_python_where_the_environment_asks_for_it(tmp_path):
    assert _version(tmp_path, "prog.py", CASSETTE_HOOK_PURE_PYTHON="1") == (
        f"cassette_hook {ch.__version__} ({PYTHON}; pure-Python runtime: CASSETTE_HOOK_PURE_PYTHON is set)")


def test_version_says_the_runtime_is_pure_python_where_the_accelerator_fails_to_import(tmp_path):
    said = _version(tmp_path, code="import sys\nsys.modules['cassette_hook._speedups'] = None  # (import halted)")
    assert said.startswith(f"cassette_hook {ch.__version__} ({PYTHON}; pure-Python runtime: the C accelerator "
                           "is not built or failed to import (import of cassette_hook._speedups halted")


BARE = [["-c", "pass"], ["-c", ""], ["-c", "x = 1\nprint(x)"], ["-m", "pkg.mod"], ["prog.py"], [""], ["dir with space"]]


@pytest.mark.parametrize("own", BARE)
def test_a_bare_program_is_read_as_the_parser_reads_it(own):
    from cassette_hook.cli import main as cli

    assert vars(cli._parse(own)) == vars(cli._parser().parse_args(own, namespace=cli._Options()))


@pytest.mark.parametrize("args", [["-c", "-x"], ["-m", "-x"], ["-c"], ["-x.py"]])
def test_a_value_that_looks_like_an_option_is_still_the_parsers_to_refuse(tmp_path, args):
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("usage: python -m cassette_hook")


def test_no_program_is_a_usage_error(tmp_path):
    result = run("--include", "x", cwd=tmp_path)
    assert result.returncode == 2 and "give exactly one of" in result.stderr


# Is helper.f switched once a context is active (by default, at the first activation)?
SWITCHED_ONCE_ACTIVE = ("import cassette_hook as ch, helper\nwith ch.NullContext():\n"  # (once called)
                        "    helper.f()\n    print('__cassette_hook_enter__' in helper.f.__code__.co_names)\n")


def test_include_option_replaces_the_default(tmp_path):
    script(tmp_path, SWITCHED_ONCE_ACTIVE)
    script(tmp_path, "def f():\n    return len([])\n", "helper.py")
    assert run("--include", "helper", "prog.py", cwd=tmp_path).stdout == "True\n"
    assert run("--include", "other", "prog.py", cwd=tmp_path).stdout == "False\n"


def test_directory_of_the_script_is_instrumented_by_default(tmp_path):
    script(tmp_path, SWITCHED_ONCE_ACTIVE)
    script(tmp_path, "def f():\n    return len([])\n", "helper.py")
    assert run("prog.py", cwd=tmp_path).stdout == "True\n"


@pytest.mark.parametrize("option", ["--include", "--exclude"])
def test_an_empty_pattern_is_a_usage_error(tmp_path, option):
    script(tmp_path, "print('ran')")
    result = run(option, "", "prog.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("usage: python -m cassette_hook") and "Traceback" not in result.stderr
    assert result.stderr.endswith(f"error: {option}: a pattern must be a non-empty string, not ''\n")


# -- the frames below the program's (docs/cli.md, "What the program sees") -------------------

TESTS = os.path.dirname(os.path.abspath(__file__))
STACK_PROBE = f"""
import sys
sys.path.insert(0, {TESTS!r})
import frames_program
def depth():
    return len(frames_program.stack_below(sys._getframe(1)))
print(frames_program.stack_below(sys._getframe()), depth(), sys.getrecursionlimit())
print("switched:", "__cassette_hook_enter__" in depth.__code__.co_names, file=sys.stderr)
"""
PROGRAM_KINDS = {
    "script": lambda p: [script(p, STACK_PROBE).name],
    "module": lambda p: ["-m", script(p, STACK_PROBE, "probe_mod.py").stem],
    "code": lambda p: ["-c", textwrap.dedent(STACK_PROBE)],
    "directory": lambda p: [script(p, STACK_PROBE, "app/__main__.py").parent.name],
    "zip app": lambda p: [zip_app(p, "app.pyz", {"__main__.py": STACK_PROBE}).name],
}


@pytest.mark.parametrize("kind", PROGRAM_KINDS)
def test_the_programs_first_frame_has_below_it_what_python_gives_it(tmp_path, kind):
    """The frames corpus's whole stack at the top of the program: ``python``'s (nothing
    below a script or ``-c`` code, ``runpy``'s two below the others), so that a depth
    counted along ``f_back`` is the plain one.  On both hot paths."""
    args = PROGRAM_KINDS[kind](tmp_path)
    plain, hooked = run(*args, cwd=tmp_path, instrumented=False), run("--context", "null", *args, cwd=tmp_path)
    assert (hooked.stdout, hooked.returncode) == (plain.stdout, plain.returncode) == (plain.stdout, 0)
    assert "switched: True" in hooked.stderr


# -- how the program is started: python exec'd on it (docs/cli.md, "How the program is run") --

def test_a_program_sees_the_environment_and_path_python_gives_it(tmp_path):
    script(tmp_path, """
        import os, subprocess, sys
        print(sys.path, os.environ.get("PYTHONPATH"), sorted(k for k in os.environ if "CASSETTE" in k), flush=True)
        child = "import sys; print('cassette_hook' in sys.modules, sys.argv)"
        subprocess.run([sys.executable, "-c", child, "x"], check=True)  # a plain python, not instrumented
    """)
    plain, hooked = run("prog.py", cwd=tmp_path, instrumented=False), run("prog.py", cwd=tmp_path)
    assert hooked.stdout == plain.stdout and plain.stdout.endswith("False ['-c', 'x']\n")


def test_the_programs_orig_argv_is_the_command_line_as_typed(tmp_path):
    script(tmp_path, "import sys\nprint(sys.orig_argv[1:])\n")
    result = run("--context", "null", "prog.py", "-v", cwd=tmp_path)
    assert result.stdout == str(["-m", "cassette_hook", "--context", "null", "prog.py", "-v"]) + "\n"


@pytest.mark.parametrize("args", [["prog.py"], ["-c", "print('ran')"], ["--context", "nope", "prog.py"]],
                         ids=["script", "code", "usage error"])
def test_the_compiled_program_is_removed_before_it_runs(tmp_path, args):
    script(tmp_path, "import os, tempfile\nprint(os.listdir(tempfile.gettempdir()))\n")
    (tmp_path / "tmp").mkdir()
    result = run(*args, cwd=tmp_path, TMPDIR=str(tmp_path / "tmp"))
    assert result.stdout in ("[]\n", "ran\n", "") and list((tmp_path / "tmp").iterdir()) == []


def test_interpreter_options_given_to_the_command_line_are_the_programs(tmp_path):
    script(tmp_path, "import sys\nprint(sys.flags, sys.warnoptions, sys._xoptions, sys.path[0], sys.argv)\n")
    options = ["-B", "-Wignore::UserWarning", "-X", "utf8", "-X", "int_max_str_digits=5000", "-Ou",
               *(["-P"] if sys.version_info >= (3, 11) else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    plain, hooked = (subprocess.run([sys.executable, *options, *middle, "prog.py", "a"], cwd=tmp_path, env=env,
                                    capture_output=True, text=True, timeout=120)
                     for middle in ([], ["-m", "cassette_hook"]))
    assert (hooked.stdout, hooked.returncode) == (plain.stdout, 0)


def test_a_sitecustomize_of_the_users_runs_before_the_program_as_under_python(tmp_path):
    script(tmp_path, "import sys\nprint('customized', 'cassette_hook' in sys.modules)\n", "site/sitecustomize.py")
    script(tmp_path, "print('ran')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *sys.path])}
    plain, hooked = (subprocess.run([*prefix, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                                    timeout=120)
                     for prefix in ([sys.executable], [sys.executable, "-m", "cassette_hook"]))
    assert plain.stdout == "customized False\nran\n"
    # once in the command line's interpreter, once in the program's, before cassette_hook
    assert hooked.stdout == "customized False\ncustomized False\nran\n"


def test_a_script_that_does_not_compile_gives_pythons_traceback_and_status(tmp_path):
    script(tmp_path, "print('no'\n")
    plain, hooked = run("prog.py", cwd=tmp_path, instrumented=False), run("prog.py", cwd=tmp_path)
    assert (hooked.returncode, hooked.stderr) == (plain.returncode, plain.stderr) == (1, plain.stderr)


@pytest.mark.parametrize("flag", ["-E", "-I"])
def test_under_dash_e_or_dash_i_the_program_runs_in_the_command_lines_own_process(tmp_path, flag):
    """``python`` would not read ``PYTHONPATH`` in an exec'd interpreter, so nothing could
    set up the hook there: the program runs as before the exec, its first frame on top of
    the command line's (docs/cli.md)."""
    script(tmp_path, PROBE)
    plain = subprocess.run([sys.executable, flag, "prog.py"], cwd=tmp_path, capture_output=True, text=True)
    hooked = subprocess.run([sys.executable, flag, "-m", "cassette_hook", "prog.py"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert (hooked.stdout, hooked.returncode) == (plain.stdout, 0) and "switched: True" in hooked.stderr


@pytest.mark.parametrize("orig_argv, options", [
    (["py", "-m", "cassette_hook", "x.py"], []),
    (["py", "-B", "-X", "dev", "-Wonce", "-m", "cassette_hook", "-m", "m"], ["-B", "-X", "dev", "-Wonce"]),
    (["py", "-Bu", "-mcassette_hook"], ["-Bu"]),
    (["py", "-OOm", "cassette_hook.__main__", "x.py"], ["-OO"]),
    (["py", "-W", "error", "--check-hash-based-pycs", "always", "-m", "cassette_hook"],
     ["-W", "error", "--check-hash-based-pycs", "always"]),
    (["py", "-Wm", "-m", "cassette_hook"], ["-Wm"]),
    (["py", "-m", "other", "-m", "cassette_hook"], None),
    (["py", "prog.py", "-m", "cassette_hook"], None),
    (["py", "-c", "-m cassette_hook"], None),
])
def test_the_interpreter_options_are_read_back_as_python_read_them(orig_argv, options):
    from cassette_hook.cli import reexec

    assert reexec._options_before_module(orig_argv, ("cassette_hook", "cassette_hook.__main__")) == options


def test_the_command_line_run_by_a_program_it_runs_runs_in_that_process(tmp_path):
    """``runpy.run_module("cassette_hook")`` in a program the command line started: the
    program's own process goes on (no ``exec`` replaces it), and runs the inner program."""
    script(tmp_path, "print('inner')\n", "inner.py")
    script(tmp_path, """
        import runpy, sys
        sys.argv = ["cassette_hook", "inner.py"]
        try:
            runpy.run_module("cassette_hook", run_name="__main__")
        except SystemExit as exc:
            print("still here", exc.code)
    """)
    assert run("prog.py", cwd=tmp_path).stdout == "inner\nstill here 0\n"


def test_a_program_too_long_to_hand_on_runs_in_the_command_lines_own_process(tmp_path):
    """Linux takes no string of more than 128 KiB in an ``exec``: ``-c`` code just under
    it that its description for the new interpreter (JSON: ``\\n`` escaped) takes over it
    cannot be handed on, and runs where it is, as before the ``exec`` (docs/cli.md)."""
    code = "pass\n" * 25_000 + "print('ran')\n"  # 125 KiB
    result = run("-c", code, cwd=tmp_path, TMPDIR=str(tmp_path))
    assert (result.stdout, result.returncode, result.stderr) == ("ran\n", 0, "")
    assert [p.name for p in tmp_path.iterdir()] == []  # (nothing left behind)


LIBRARY_CALL = "import json\ndef main():\n    return json.dumps([1])\nmain()\n"


def test_include_of_a_library_makes_the_trace_show_inside_it_unless_the_trace_says_otherwise(tmp_path):
    script(tmp_path, LIBRARY_CALL)
    run("--include", "json", "--include", str(tmp_path), "--context", "trace", "--output", "t.txt", "prog.py",
        cwd=tmp_path)
    trace = (tmp_path / "t.txt").read_text()
    assert "  json.dumps([1])\n" in trace and "json.encoder.JSONEncoder.encode(" in trace
    run("--include", "json", "--include", str(tmp_path), "--context", "trace,libraries=no", "--output", "t.txt",
        "prog.py", cwd=tmp_path)
    assert (tmp_path / "t.txt").read_text() == "__main__.main()\n  json.dumps([1]) -> '[1]'\n__main__.main -> '[1]'\n"


def test_help_says_that_include_widens_the_trace(tmp_path):
    assert "shows the calls inside the libraries P names" in " ".join(run("--help", cwd=tmp_path).stdout.split())
