"""Whole process trees: ``install_from_env`` (sitecustomize) and ``--subprocesses``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cassette_hook as ch
from cassette_hook import _subprocesses

WORK = """
def work(n):
    return sum(abs(-i) for i in range(n))
"""


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    return {**env, **extra}


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def test_install_from_env_installs_the_hook_and_activates_contexts(tmp_path):
    write(tmp_path, "worker.py", WORK)
    write(tmp_path, "prog.py", """
        import cassette_hook as ch, worker
        ch.install_from_env()
        import worker2
        print("__cassette_hook_enter__" in worker2.work.__code__.co_names, type(ch.current_context()).__name__)
    """)
    write(tmp_path, "worker2.py", WORK)
    env = env_for(tmp_path, CASSETTE_HOOK_INCLUDE="worker2", CASSETTE_HOOK_CONTEXT="null")
    result = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.stdout == "True NullContext\n", result.stderr


def test_install_from_env_with_nothing_set_does_nothing():
    assert ch.install_from_env({}) is False
    assert ch.current_context() is None


def test_install_from_env_rejects_an_unknown_context():
    with pytest.raises(ValueError, match="unknown context 'nope'"):
        ch.install_from_env({"CASSETTE_HOOK_CONTEXT": "nope"})


@pytest.mark.parametrize("variables, named", [
    ({"CASSETTE_HOOK_CONTEXT": "profile", "CASSETTE_HOOK_OUTPUT": "{missing}/table.txt"}, "CASSETTE_HOOK_OUTPUT"),
    ({"CASSETTE_HOOK_CONTEXT": "profile,flamegraph={missing}/f.svg"}, "CASSETTE_HOOK_CONTEXT"),
])
def test_install_from_env_refuses_an_unwritable_report_file_naming_the_variable(tmp_path, variables, named):
    environ = {key: value.format(missing=tmp_path / "missing") for key, value in variables.items()}
    message = f"^{named}: ProfileContext: cannot write .*no such directory"
    with pytest.raises(ch.contexts.ReportPathError, match=message):
        ch.install_from_env(environ)
    assert ch.current_context() is None


def test_sitecustomize_instruments_a_plain_python_child(tmp_path):
    write(tmp_path, "worker.py", WORK)
    write(tmp_path, "prog.py", """
        import cassette_hook as ch, worker
        with ch.NullContext():  # (switched at the first activation, or its first call)
            out = worker.work(4)
            print("__cassette_hook_enter__" in worker.work.__code__.co_names, out)
    """)
    env = env_for(tmp_path, CASSETTE_HOOK_INCLUDE="worker")
    env["PYTHONPATH"] = os.pathsep.join([_subprocesses._SITE, env["PYTHONPATH"]])
    result = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.stdout == "True 6\n", result.stderr


@pytest.mark.parametrize("how", ["subprocess", "spawn", "fork"])
def test_subprocesses_option_carries_contexts_into_children(tmp_path, how):
    write(tmp_path, "worker.py", WORK)
    write(tmp_path, "prog.py", f"""
        import multiprocessing, subprocess, sys
        import worker

        def child():
            worker.work(5)

        if __name__ == "__main__":
            worker.work(3)
            if {how!r} == "subprocess":
                subprocess.run([sys.executable, "-c", "import worker; worker.work(5)"], check=True)
            else:
                process = multiprocessing.get_context({how!r}).Process(target=child)
                process.start()
                process.join()
                assert process.exitcode == 0
    """)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--subprocesses", "--context",
                             "profile,collapsed=stacks.txt", "--output", "report.txt", "prog.py"],
                            cwd=tmp_path, env=env_for(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    parent = (tmp_path / "report.txt").read_text()
    children = [p for p in tmp_path.glob("report.*.txt")]
    assert "worker.work" in parent
    # (spawn also starts multiprocessing's resource tracker, a Python child with a report of its own)
    assert any("builtins.abs" in child.read_text() for child in children)  # the calls inside work()
    assert all(child.name.split(".")[1].isdigit() for child in children)
    assert "worker.work" in (tmp_path / "stacks.txt").read_text()  # a child's files do not replace the parent's
    assert len(list(tmp_path.glob("stacks.*.txt"))) == len(children)




def run_with_subprocesses(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cassette_hook", "--subprocesses", *args], cwd=tmp_path,
                          env=env_for(tmp_path), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("how", ["spawn", "forkserver"])
def test_only_the_processes_that_run_the_programs_code_write_reports(tmp_path, how):
    # multiprocessing's resource tracker and forkserver are Python children too, running
    # none of the program's code: they write nothing.  A forkserver's child reports.
    write(tmp_path, "worker.py", WORK)
    write(tmp_path, "prog.py", f"""
        import multiprocessing
        import worker

        def child():
            worker.work(5)

        if __name__ == "__main__":
            process = multiprocessing.get_context({how!r}).Process(target=child)
            process.start()
            process.join()
            assert process.exitcode == 0
    """)
    result = run_with_subprocesses(tmp_path, "--context", "profile", "--output", "report.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    children = [p.read_text() for p in tmp_path.glob("report.*.txt")]
    assert len(children) == 1 and re.search(r"^ +5 .* builtins\.abs$", children[0], re.M), children


def test_a_subprocess_childs_whole_program_context_covers_its_threads(tmp_path):
    write(tmp_path, "worker.py", WORK)
    write(tmp_path, "prog.py", """
        import subprocess, sys
        subprocess.run([sys.executable, "-c", "import threading, worker; "
                        "t = threading.Thread(target=worker.work, args=(5,)); t.start(); t.join()"], check=True)
    """)
    result = run_with_subprocesses(tmp_path, "--context", "profile", "--output", "report.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    [child] = [p.read_text() for p in tmp_path.glob("report.*.txt")]
    assert re.search(r"^ +5 .* builtins\.abs$", child, re.M) and " in 1 thread," in child


FORKING = """
import os, sys
import cassette_hook as ch
ch.install_from_env()
import worker

worker.before_fork()
{fork}
worker.in_parent()
print(os.getpid(), child)
"""

FORKING_WORK = """
def before_fork():
    return abs(-1)

def in_child():
    return abs(-2)

def in_parent():
    return abs(-3)
"""


@pytest.mark.parametrize("fork", [
    "child = os.fork()\nif child == 0:\n    worker.in_child()\n    sys.exit(0)\nos.waitpid(child, 0)",
    "import multiprocessing\nprocess = multiprocessing.get_context('fork').Process(target=worker.in_child)\n"
    "process.start()\nprocess.join()\nchild = process.pid",
], ids=["os.fork", "multiprocessing-fork"])
def test_install_from_env_gives_a_forked_child_a_report_of_its_own(tmp_path, fork):
    # A server and its forks, each its own prof.{pid}.txt: {pid} is the writer's id.
    write(tmp_path, "worker.py", FORKING_WORK)
    write(tmp_path, "prog.py", FORKING.format(fork=fork))
    env = env_for(tmp_path, CASSETTE_HOOK_INCLUDE="worker", CASSETTE_HOOK_CONTEXT="profile",
                  CASSETTE_HOOK_OUTPUT=str(tmp_path / "prof.{pid}.txt"))
    result = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    parent_pid, child_pid = result.stdout.split()
    reports = sorted(p.name for p in tmp_path.glob("prof.*.txt"))
    assert reports == sorted([f"prof.{parent_pid}.txt", f"prof.{child_pid}.txt"])
    parent, child = (tmp_path / f"prof.{parent_pid}.txt").read_text(), (tmp_path / f"prof.{child_pid}.txt").read_text()
    assert re.search(r"^ +2 .* builtins\.abs$", parent, re.M)  # before_fork and in_parent
    assert re.search(r"^ +2 .* builtins\.abs$", child, re.M)  # before_fork (inherited) and in_child


@pytest.mark.parametrize("spec", ["trace", "profile"])
def test_a_process_install_from_env_instrumented_writes_no_report_if_its_context_saw_nothing(tmp_path, spec):
    env = env_for(tmp_path, CASSETTE_HOOK_CONTEXT=spec,
                  CASSETTE_HOOK_OUTPUT=str(tmp_path / "report.{pid}.txt"))
    env["PYTHONPATH"] = os.pathsep.join([_subprocesses._SITE, env["PYTHONPATH"]])
    result = subprocess.run([sys.executable, "-c", "print(len('plain'))"], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "5\n", "")
    assert list(tmp_path.glob("report*")) == []


def test_the_command_lines_trace_of_a_program_that_makes_no_call_is_an_empty_file(tmp_path):
    write(tmp_path, "prog.py", "x = 1\n")
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--context", "trace", "--output", "trace.txt",
                             "prog.py"], cwd=tmp_path, env=env_for(tmp_path), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "trace.txt").read_text() == ""


@pytest.mark.parametrize("flag", ["-E", "-I"])
def test_install_from_env_reads_no_variable_under_dash_e_or_dash_i_as_python_reads_no_pythonpath(tmp_path, flag):
    code = "import cassette_hook as ch; print(ch.install_from_env(), ch.current_context())"
    env = env_for(tmp_path, CASSETTE_HOOK_INCLUDE="worker", CASSETTE_HOOK_CONTEXT="null",
                  CASSETTE_HOOK_DEBUG="no-such-category")  # (read, it would raise)
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "no-such-category" in plain.stderr  # (read without the flag)
    result = subprocess.run([sys.executable, flag, "-c", code], env=env, capture_output=True, text=True)
    assert (result.stdout, result.stderr) == ("False None\n", "")


# A module whose import would show: the program itself, named by mistake.
SIDE_EFFECT = "import sys\nsys.stderr.write('imported!')\nclass Ctx: pass\n"


@pytest.mark.parametrize("spec", ["prog.py:Ctx", "prog.sub.deeper:Ctx", "prog:", "prog:Ctx:", "prog:1st",
                                  "prog-x:Ctx", ":Ctx", "prog:Ctx."])
def test_a_context_spec_that_cannot_name_a_context_is_refused_without_importing_its_module(
        tmp_path, monkeypatch, capfd, spec):
    write(tmp_path, "prog.py", SIDE_EFFECT)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="not NAME or module:attr|'prog' is a module, not a package|not key=value"):
        ch.install_from_env({"CASSETTE_HOOK_CONTEXT": spec})
    assert "prog" not in sys.modules and "imported!" not in capfd.readouterr().err
