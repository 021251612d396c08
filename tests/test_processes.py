"""Whole process trees: ``install_from_env`` (sitecustomize) and ``--subprocesses``."""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cassette_hook as ch
from cassette_hook.cli import subprocesses

WORK = """
def work(n):
    return sum(abs(-i) for i in range(n))
"""


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a child: none of our settings but the hot path the tox env runs.

    `CASSETTE_HOOK_PURE_PYTHON` is kept so that a pure-Python env tests its children on
    the pure-Python path too (docs/cli.md, "Which accelerators loaded").
    """
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CASSETTE_HOOK_") or k == "CASSETTE_HOOK_PURE_PYTHON"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    return {**env, **extra}


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


# How a program starts its multiprocessing children: "default" makes no set_start_method or
# get_context call, so it takes the platform's default (Linux: fork before 3.14, forkserver
# from 3.14; docs/processes.md, "--subprocesses").
START_METHODS = ["default", "fork", "spawn", "forkserver"]
DEFAULT_START_METHOD = "forkserver" if sys.version_info >= (3, 14) else "fork"


def start_with(method: str) -> str:
    """The expression a program's children are started from: the module or a context."""
    return "multiprocessing" if method == "default" else f"multiprocessing.get_context({method!r})"


def test_the_default_start_method_is_the_one_the_tests_expect(tmp_path):
    # The "default" parameter below exercises forkserver on 3.14+ and fork before; were
    # the default something else, those tests would not test what they say.
    write(tmp_path, "prog.py", """
        import multiprocessing
        if __name__ == "__main__":
            print(multiprocessing.get_start_method())
    """)
    result = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env_for(tmp_path), capture_output=True,
                            text=True, timeout=60)
    assert result.stdout == f"{DEFAULT_START_METHOD}\n", result.stderr


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


def test_install_from_env_refuses_two_contexts_writing_their_reports_to_one_file(tmp_path):
    # (docs/cli.md, "Contexts": each would write its report over the other's)
    environ = {"CASSETTE_HOOK_CONTEXT": "trace;profile", "CASSETTE_HOOK_OUTPUT": str(tmp_path / "r.{pid}.txt")}
    message = r"^CASSETTE_HOOK_OUTPUT: 2 contexts \(TraceContext, ProfileContext\) would write their reports to"
    from cassette_hook.contexts import ReportPathError

    with pytest.raises(ReportPathError, match=message):
        ch.install_from_env(environ)
    assert ch.current_context() is None and list(tmp_path.iterdir()) == []


def test_sitecustomize_instruments_a_plain_python_child(tmp_path):
    write(tmp_path, "worker.py", WORK)
    write(tmp_path, "prog.py", """
        import cassette_hook as ch, worker
        with ch.NullContext():  # (switched at the first activation, or its first call)
            out = worker.work(4)
            print("__cassette_hook_enter__" in worker.work.__code__.co_names, out)
    """)
    env = env_for(tmp_path, CASSETTE_HOOK_INCLUDE="worker")
    env["PYTHONPATH"] = os.pathsep.join([subprocesses._SITE, env["PYTHONPATH"]])
    result = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.stdout == "True 6\n", result.stderr


@pytest.mark.parametrize("how", ["subprocess", *START_METHODS])
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
                process = {start_with(how)}.Process(target=child)
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


@pytest.mark.parametrize("how", START_METHODS)
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
            process = {start_with(how)}.Process(target=child)
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


def parent_and_child_reports(tmp_path):
    """Run ``prog.py`` (which prints its id and its child's) with ``install_from_env``
    profiling ``worker``: exactly the two processes' reports exist; their texts."""
    env = env_for(tmp_path, CASSETTE_HOOK_INCLUDE="worker", CASSETTE_HOOK_CONTEXT="profile",
                  CASSETTE_HOOK_OUTPUT=str(tmp_path / "prof.{pid}.txt"))
    result = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    parent_pid, child_pid = result.stdout.split()
    reports = sorted(p.name for p in tmp_path.glob("prof.*.txt"))
    assert reports == sorted([f"prof.{parent_pid}.txt", f"prof.{child_pid}.txt"])
    return (tmp_path / f"prof.{parent_pid}.txt").read_text(), (tmp_path / f"prof.{child_pid}.txt").read_text()


@pytest.mark.parametrize("fork", [
    "child = os.fork()\nif child == 0:\n    worker.in_child()\n    sys.exit(0)\nos.waitpid(child, 0)",
    "import multiprocessing\nprocess = multiprocessing.get_context('fork').Process(target=worker.in_child)\n"
    "process.start()\nprocess.join()\nchild = process.pid",
], ids=["os.fork", "multiprocessing-fork"])
def test_install_from_env_gives_a_forked_child_a_report_of_its_own(tmp_path, fork):
    # A server and its forks, each its own prof.{pid}.txt: {pid} is the writer's id.
    write(tmp_path, "worker.py", FORKING_WORK)
    write(tmp_path, "prog.py", FORKING.format(fork=fork))
    parent, child = parent_and_child_reports(tmp_path)
    assert re.search(r"^ +2 .* builtins\.abs$", parent, re.M)  # before_fork and in_parent
    assert re.search(r"^ +1 .* builtins\.abs$", child, re.M)  # in_child's: before_fork's is the parent's


@pytest.mark.parametrize("method", START_METHODS)
def test_install_from_env_gives_each_multiprocessing_child_a_report_of_its_own(tmp_path, method):
    # A sitecustomize instruments every process: the child (forked, spawned, or forked by
    # the forkserver) writes its own prof.{pid}.txt of its own calls; the resource tracker
    # and the forkserver, which run none of the program's code, write none
    # (docs/processes.md, "sitecustomize.py and install_from_env").
    write(tmp_path, "worker.py", FORKING_WORK)
    write(tmp_path, "sitecustomize.py", "import cassette_hook\ncassette_hook.install_from_env()\n")
    write(tmp_path, "prog.py", f"""
        import multiprocessing, os
        import worker

        if __name__ == "__main__":
            worker.before_fork()
            process = {start_with(method)}.Process(target=worker.in_child)
            process.start()
            process.join()
            assert process.exitcode == 0
            worker.in_parent()
            print(os.getpid(), process.pid)
    """)
    parent, child = parent_and_child_reports(tmp_path)
    assert re.search(r"^ +2 .* builtins\.abs$", parent, re.M)  # before_fork and in_parent
    assert re.search(r"^ +1 .* builtins\.abs$", child, re.M)  # in_child's


@pytest.mark.parametrize("spec", ["trace", "profile"])
def test_a_process_install_from_env_instrumented_writes_no_report_if_its_context_saw_nothing(tmp_path, spec):
    env = env_for(tmp_path, CASSETTE_HOOK_CONTEXT=spec,
                  CASSETTE_HOOK_OUTPUT=str(tmp_path / "report.{pid}.txt"))
    env["PYTHONPATH"] = os.pathsep.join([subprocesses._SITE, env["PYTHONPATH"]])
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


# -- forked children: a report however they end, of what they did ------------------------

CHILD_ENDINGS = {
    "sys.exit": "sys.exit(3)",
    "os._exit": "os._exit(3)",
    "os.execl": "os.execl(sys.executable, sys.executable, '-S', '-c', 'raise SystemExit(3)')",
    "os.execvp": "os.execvp('sh', ['sh', '-c', 'exit 3'])",
    "SIGTERM": "os.write(ready_w, b'x')\n    while True:\n        time.sleep(1)",
}

FORK_AND_END = """
import os, signal, sys, time
import worker

print("buffered before the fork")  # (a pipe: still in the buffer, which the child copies)
worker.before_fork()
ready_r, ready_w = os.pipe()
child = os.fork()
if child == 0:
    worker.in_child()
    {end}
if {sigterm}:
    os.read(ready_r, 1)
    os.kill(child, signal.SIGTERM)
_, status = os.waitpid(child, 0)
worker.in_parent()
print(child, os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))
"""


def run_forking(tmp_path: Path, end: str, driver: str) -> tuple[subprocess.CompletedProcess[str], str, str]:
    """Run FORK_AND_END under ``driver``, plain or not; the result, the child's id and its report."""
    write(tmp_path, "worker.py", FORKING_WORK)
    write(tmp_path, "prog.py", FORK_AND_END.format(end=CHILD_ENDINGS[end], sigterm=end == "SIGTERM"))
    env = env_for(tmp_path)
    if driver == "install_from_env":
        write(tmp_path, "sitecustomize.py", "import cassette_hook\ncassette_hook.install_from_env()\n")
        env.update(CASSETTE_HOOK_INCLUDE="worker", CASSETTE_HOOK_CONTEXT="profile",
                   CASSETTE_HOOK_OUTPUT=str(tmp_path / "prof.{pid}.txt"))
        command = [sys.executable, "prog.py"]
    elif driver == "command line":
        command = [sys.executable, "-m", "cassette_hook", "--context", "profile", "--output", "prof.txt", "prog.py"]
    else:
        command = [sys.executable, "prog.py"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    child = result.stdout.split()[-2] if result.returncode == 0 else ""
    report = tmp_path / f"prof.{child}.txt"
    return result, child, report.read_text() if report.exists() else ""


@pytest.mark.parametrize("driver", ["command line", "install_from_env"])
@pytest.mark.parametrize("end", list(CHILD_ENDINGS))
def test_a_forked_child_writes_its_report_however_it_ends(tmp_path, end, driver):
    # A prefork server's or multiprocessing's child ends with os._exit, an exec or SIGTERM,
    # none of which runs atexit (docs/processes.md, "Forked children").
    result, child, report = run_forking(tmp_path, end, driver)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^ +1 .* builtins\.abs$", report, re.M), (report, result.stderr)


@pytest.mark.parametrize("end", list(CHILD_ENDINGS))
def test_a_forked_child_ends_as_it_does_plain(tmp_path, end):
    # Its exit status (or signal) and its output: in particular, os._exit and SIGTERM do
    # not print the copy of the parent's buffered output the child has, as plain.
    plain, _, _ = run_forking(tmp_path, end, "plain")
    result, _, _ = run_forking(tmp_path, end, "command line")
    assert plain.returncode == 0, plain.stderr
    assert (result.returncode, result.stdout.split()[:-2], result.stdout.split()[-1], result.stderr) == (
        0, plain.stdout.split()[:-2], plain.stdout.split()[-1], plain.stderr)


@pytest.mark.parametrize("start", [
    "process = ctx.Process(target=child)\nprocess.start()\nprocess.join()",
    "pool = ctx.Pool(2)\npool.map(worker.work, [30] * 8)\npool.close()\npool.join()",
    "with ctx.Pool(2) as pool:\n    pool.map(worker.work, [30] * 8)",
], ids=["Process", "Pool", "Pool terminated"])
def test_a_forked_childs_profile_is_of_its_own_calls_on_its_own_clock(tmp_path, start):
    # The parent's records and clock used to be carried across the fork: "81 calls ... 0.000 ms"
    # with every percentage '-', or a row at 1359829.1% (docs/processes.md, "Forked children").
    write(tmp_path, "worker.py", WORK)
    write(tmp_path, "prog.py", f"""
        import multiprocessing
        import worker

        def child():
            worker.work(30)

        if __name__ == "__main__":
            worker.work(3)
            ctx = multiprocessing.get_context("fork")
            {textwrap.indent(start, " " * 12).lstrip()}
    """)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--context", "profile", "--output", "prof.txt",
                             "prog.py"], cwd=tmp_path, env=env_for(tmp_path), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    children = [p.read_text() for p in tmp_path.glob("prof.*.txt")]
    assert children
    for report in children:
        header = report.splitlines()[0]
        assert float(re.search(r", ([\d.]+) ms;", header)[1]) > 0, report
        shares = re.findall(r"(-|[\d.]+%) +[\d.]+ +(-|[\d.]+%) ", report)
        assert shares and all(s != "-" and float(s[:-1]) <= 100 for row in shares for s in row), report
        assert "multiprocessing.context.BaseContext.get_context" not in report  # the parent's call


DEEP_FORK = """
import os, sys

def work(n):
    return n + 1

def down(n):
    if n:
        return down(n - 1)
    child = os.fork()
    if child == 0:
        work(1)
        return 0
    os.waitpid(child, 0)
    return child

if down(12) == 0:
    work(2)
    sys.exit(0)
print("parent")
"""


def test_a_forked_childs_trace_starts_at_the_top_at_the_fork_however_deep_it_forked(tmp_path):
    # Forked 13 calls deep, past the trace's 10 levels: the child's calls used to be hidden
    # (counted from the parent's calls running at the fork), and the ends of those calls
    # written as the child returned through them (docs/processes.md, "Forked children").
    write(tmp_path, "prog.py", DEEP_FORK)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--context", "trace", "--output", "trace.txt",
                             "prog.py"], cwd=tmp_path, env=env_for(tmp_path), capture_output=True, text=True,
                            timeout=120)
    assert (result.returncode, result.stdout) == (0, "parent\n"), result.stderr
    (child,) = [p for p in tmp_path.glob("trace.*.txt")]
    assert child.read_text() == "__main__.work(1) -> 2\n__main__.work(2) -> 3\nsys.exit(0) !! SystemExit(0)\n"
    assert "__main__.work" not in (tmp_path / "trace.txt").read_text()


def test_a_forked_childs_lines_on_the_stream_it_shares_with_its_parent_say_its_process_id(tmp_path):
    write(tmp_path, "prog.py", DEEP_FORK.replace("if child == 0:", "if child == 0:\n        print(os.getpid())"))
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--context", "trace", "prog.py"], cwd=tmp_path,
                            env=env_for(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    child = result.stdout.split()[0]
    assert [line for line in result.stderr.splitlines() if "__main__.work" in line] == [
        f"[pid {child}] __main__.work(1) -> 2", f"[pid {child}] __main__.work(2) -> 3"], result.stderr


def test_a_fork_pools_workers_traced_inside_the_standard_library_show_each_call_of_the_programs_function(tmp_path):
    # Under libraries=yes a fork worker starts deep inside multiprocessing's calls, past
    # the trace's 10 levels: its trace was empty (docs/processes.md, "Forked children").
    write(tmp_path, "prog.py", """
        import multiprocessing

        def work(x):
            return x * x

        if __name__ == "__main__":
            pool = multiprocessing.get_context("fork").Pool(2)
            print(sum(pool.map(work, range(6))))
            pool.close()
            pool.join()
    """)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--context", "trace,libraries=yes", "--output",
                             "trace.txt", "prog.py"], cwd=tmp_path, env=env_for(tmp_path), capture_output=True,
                            text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "55\n"), result.stderr
    workers = [p.read_text() for p in tmp_path.glob("trace.*.txt")]
    shown = sorted(int(m[1]) for trace in workers for m in re.finditer(r"^ *__main__\.work\((\d+)\) -> ", trace, re.M))
    assert shown == list(range(6)), (result.stderr, [trace[:3000] for trace in workers])
    assert not [trace for trace in workers if trace.startswith(" ")], workers  # (at the top)


@pytest.mark.parametrize("method", START_METHODS)
def test_every_pool_worker_that_ran_program_code_writes_its_report_when_the_pool_is_terminated(tmp_path, method):
    # `with Pool() as pool:` ends with terminate(): SIGTERM to each worker, which used to
    # lose their reports (docs/processes.md, "Forked children").
    write(tmp_path, "worker.py", WORK)
    write(tmp_path, "prog.py", f"""
        import multiprocessing
        import worker

        if __name__ == "__main__":
            with {start_with(method)}.Pool(2) as pool:
                print(sum(pool.map(worker.work, range(40))))
    """)
    result = run_with_subprocesses(tmp_path, "--context", "profile", "--output", "prof.txt", "prog.py")
    assert (result.returncode, result.stdout) == (0, "9880\n"), result.stderr
    workers = [p.read_text() for p in tmp_path.glob("prof.*.txt")]
    calls = [int(m[1]) for report in workers for m in re.finditer(r"^ +(\d+) .* builtins\.abs$", report, re.M)]
    assert sum(calls) == sum(range(40)), workers  # work(n) calls abs n times


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_a_pool_terminated_before_its_workers_ran_ends(tmp_path, method):
    # A worker that gets the pool's SIGTERM before it has run at all (forked, not yet
    # scheduled) got it before Python reset its state after the fork, which forgot it: it
    # then waited for a task for ever, where plain the default action ends it
    # (docs/processes.md, "Forked children").  A few programs at once, each ending many
    # pools at once, so that some worker is not scheduled in time.
    write(tmp_path, "prog.py", f"""
        import multiprocessing

        if __name__ == "__main__":
            for _ in range(60):
                with multiprocessing.get_context({method!r}).Pool(4):
                    pass
            print("done")
    """)
    command = [sys.executable, "-m", "cassette_hook", "--subprocesses", "--context", "trace", "--output",
               "trace.txt", "prog.py"]
    outputs = [tmp_path / f"output{i}.txt" for i in range(4)]
    runs = []
    for output in outputs:
        with output.open("w") as stream:
            runs.append(subprocess.Popen(command, cwd=tmp_path, env=env_for(tmp_path), stdout=stream,
                                         stderr=subprocess.STDOUT, start_new_session=True))
    ends: list[object] = []
    try:
        for run in runs:
            try:
                ends.append(run.wait(timeout=100))
            except subprocess.TimeoutExpired:
                ends.append("still waiting")
    finally:
        for run in runs:  # (a program left waiting, and its workers)
            try:
                os.killpg(run.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            run.wait()
    assert ends == [0] * 4, [output.read_text()[-2000:] for output in outputs]
    assert [output.read_text() for output in outputs] == ["done\n"] * 4


def test_a_trace_that_sigterm_ends_as_it_writes_is_written_whole(tmp_path):
    # The signal's handler runs in the main thread between two of its instructions, often
    # as the trace is writing a line there: the trace is written at a later delivery
    # (docs/processes.md, "Forked children"), never from half a line, and the process
    # still ends by SIGTERM
    write(tmp_path, "prog.py", """
        import os, signal, threading

        def outer(i):
            return inner(i)

        def inner(i):
            return i

        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
        n = 0
        while True:
            outer(n)
            n += 1
    """)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--context", "trace,lines=all,fold=no",
                             "--output", "trace.txt", "prog.py"], cwd=tmp_path, env=env_for(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stderr) == (-signal.SIGTERM, ""), result.stderr
    lines = [line for line in (tmp_path / "trace.txt").read_text().splitlines()[3:]  # (after the timer's start)
             if not line.startswith("[Thread-")]  # (the timer's own thread's calls, shown by its name)
    whole = re.compile(r"__main__\.outer\((\d+)\)|  __main__\.inner\((\d+)\) -> \2|__main__\.outer -> \d+")
    assert len(lines) > 100 and [line for line in lines if not whole.fullmatch(line)] == []


def test_sigterm_that_comes_as_the_main_thread_blocks_still_ends_the_process_with_its_report(tmp_path):
    # A Python handler runs when the main thread checks for signals; one noted by another
    # thread while the main thread waits on a lock is acted on only because cassette_hook
    # delivers it again (_sigterm.c).  Plain, SIGTERM ends the process at once.
    write(tmp_path, "worker.py", FORKING_WORK)
    write(tmp_path, "prog.py", """
        import signal, threading, time
        import worker

        def signal_this_thread():
            time.sleep(0.5)  # (the main thread is waiting by then)
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

        worker.in_child()
        lock = threading.Lock()
        lock.acquire()
        threading.Thread(target=signal_this_thread).start()
        lock.acquire()
    """)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--context", "profile", "--output", "prof.txt",
                             "prog.py"], cwd=tmp_path, env=env_for(tmp_path), capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == -15, result.stderr
    assert re.search(r"^ +1 .* builtins\.abs$", (tmp_path / "prof.txt").read_text(), re.M)


@pytest.mark.parametrize("method", ["default", "spawn", "forkserver"])
def test_a_pool_workers_main_script_is_instrumented_as_mp_main(tmp_path, method):
    # The children run the script again as __mp_main__ (with runpy, not an import):
    # `work` defined there is instrumented as in the parent's __main__.
    write(tmp_path, "prog.py", f"""
        import multiprocessing

        def work(n):
            return sum(abs(-i) for i in range(n))

        if __name__ == "__main__":
            with {start_with(method)}.Pool(2) as pool:
                print(sum(pool.map(work, range(40))))
    """)
    result = run_with_subprocesses(tmp_path, "--context", "profile", "--output", "prof.txt", "prog.py")
    assert (result.returncode, result.stdout) == (0, "9880\n"), result.stderr
    workers = [p.read_text() for p in tmp_path.glob("prof.*.txt")]
    calls = [int(m[1]) for report in workers for m in re.finditer(r"^ +(\d+) .* builtins\.abs$", report, re.M)]
    assert sum(calls) == sum(range(40)), workers


@pytest.mark.parametrize("where", ["script", "module"])
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_pools_workers_reports_add_up_to_every_call_of_its_function(tmp_path, method, where):
    # The worker loop (multiprocessing's) calls `work`: a call each worker's report counts
    # (docs/processes.md, "Pools"), on the path the tox env runs (CASSETTE_HOOK_PURE_PYTHON).
    write(tmp_path, "jobs.py", "def work(n):\n    return n + 1\n")
    defined = "from jobs import work" if where == "module" else "def work(n): return n + 1"
    write(tmp_path, "prog.py", f"""
        import multiprocessing
        {defined}

        if __name__ == "__main__":
            pool = {start_with(method)}.Pool(2)
            print(sum(pool.map(work, range(40))))
            pool.close()
            pool.join()
    """)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--subprocesses", "--context", "profile",
                             "--output", "prof.txt", "prog.py"], cwd=tmp_path, env=env_for(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "820\n"), result.stderr
    workers = [p.read_text() for p in tmp_path.glob("prof.*.txt")]
    calls = [int(m[1]) for report in workers
             for m in re.finditer(r"^ +(\d+) .* (?:__main__|__mp_main__|jobs)\.work$", report, re.M)]
    assert sum(calls) == 40, workers


# One call of a function of its own through each way of handing work to a process pool.
POOL_FUNCTIONS = """
def by_map(x): return x + 1
def by_imap(x): return x + 1
def by_imap_unordered(x): return x + 1
def by_starmap(a, b): return a + b
def by_apply(x): return x + 1
def by_apply_async(x): return x + 1
def by_map_async(x): return x + 1
def by_submit(x): return x + 1
def by_executor_map(x): return x + 1
"""

POOL_WAYS = """
import multiprocessing, sys
from concurrent.futures import ProcessPoolExecutor
{defined}

def main(method):
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(2) as pool:  # (ends by terminate(): SIGTERM to the workers, which write their reports whole)
        out = [pool.map(by_map, range(4)), list(pool.imap(by_imap, range(3))),
               sorted(pool.imap_unordered(by_imap_unordered, range(2))), pool.starmap(by_starmap, [(1, 2), (3, 4)]),
               pool.apply(by_apply, (5,)), pool.apply_async(by_apply_async, (6,)).get(),
               pool.map_async(by_map_async, range(3)).get()]
    with ProcessPoolExecutor(2, mp_context=ctx) as executor:
        out += [executor.submit(by_submit, 7).result(), list(executor.map(by_executor_map, range(5)))]
    print(out)

if __name__ == "__main__":
    main(sys.argv[1])
"""

POOL_CALLS = {"by_map": 4, "by_imap": 3, "by_imap_unordered": 2, "by_starmap": 2, "by_apply": 1,
              "by_apply_async": 1, "by_map_async": 3, "by_submit": 1, "by_executor_map": 5}


def write_pool_ways(tmp_path: Path, where: str, name: str = "prog.py") -> None:
    if where == "module":
        write(tmp_path, "jobs.py", POOL_FUNCTIONS)
    defined = "from jobs import *" if where == "module" else textwrap.indent(POOL_FUNCTIONS, " " * 8)
    write(tmp_path, name, POOL_WAYS.format(defined=textwrap.dedent(defined)))


def calls_in_reports(reports: list[str], spec: str) -> dict[str, int]:
    """How many calls of each ``by_*`` function the reports show, all processes together:
    a profile row's count, or a trace's lines (``(× N, the first shown)`` for N alike)."""
    found = dict.fromkeys(POOL_CALLS, 0)
    for report in reports:
        if spec == "profile":
            for m in re.finditer(r"^ +(\d+) .* (?:__main__|__mp_main__|jobs)\.(by_\w+)$", report, re.M):
                found[m[2]] += int(m[1])
        else:
            for m in re.finditer(r"^ *(?:__main__|__mp_main__|jobs)\.(by_\w+)\(.*?(?:\(× (\d+), the first shown\))?$",
                                 report, re.M):
                found[m[1]] += int(m[2] or 1)
    return found


@pytest.mark.parametrize("spec", ["trace", "profile"])
@pytest.mark.parametrize("where", ["script", "module"])
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_process_pools_workers_show_each_call_of_the_programs_function_once(tmp_path, method, where, spec):
    # The trace runs the standard library as one call each: Pool.map (and the other ways)
    # hands the function on as a call site that the worker unpickles as its own
    # (docs/processes.md, "Pools"); the profile sees the worker loop's call, and only it.
    write_pool_ways(tmp_path, where)
    plain = subprocess.run([sys.executable, "prog.py", method], cwd=tmp_path, env=env_for(tmp_path),
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--subprocesses", "--context", spec,
                             "--output", "report.txt", "prog.py", method], cwd=tmp_path,
                            env=env_for(tmp_path), capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, plain.stdout), result.stderr
    reports = [p.read_text() for p in tmp_path.glob("report*.txt")]
    assert calls_in_reports(reports, spec) == POOL_CALLS, reports


def test_install_from_envs_trace_shows_each_call_a_process_pool_makes_of_the_programs_functions(tmp_path):
    # (install_from_env instruments the modules the program imports, not its __main__)
    write_pool_ways(tmp_path, "module", "pooling.py")
    write(tmp_path, "prog.py", "import sys, pooling\nif __name__ == '__main__':\n    pooling.main(sys.argv[1])\n")
    write(tmp_path, "sitecustomize.py", "import cassette_hook\ncassette_hook.install_from_env()\n")
    env = env_for(tmp_path, CASSETTE_HOOK_INCLUDE="pooling,jobs", CASSETTE_HOOK_CONTEXT="trace",
                  CASSETTE_HOOK_OUTPUT=str(tmp_path / "trace.{pid}.txt"))
    result = subprocess.run([sys.executable, "prog.py", "spawn"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    reports = [p.read_text() for p in tmp_path.glob("trace.*.txt")]
    assert calls_in_reports(reports, "trace") == POOL_CALLS, reports


POOL_REFUSALS = """
import multiprocessing, re, sys, traceback
from concurrent.futures import ProcessPoolExecutor

def fails(x):
    raise ValueError(f"no {x}")

def shown(error):
    notes = getattr(error, "__notes__", [])
    return re.sub(r"0x[0-9a-f]+", "ADDR", f"{type(error).__name__}: {error} {notes}")

def remote(error):
    # the worker's traceback, as text, carried in the exception's cause
    return re.sub(r"0x[0-9a-f]+", "ADDR", str(error.__cause__))

def outer():
    def local(x):
        return x
    return local

if __name__ == "__main__":
    ctx = multiprocessing.get_context(sys.argv[1])
    with ctx.Pool(1) as pool:
        for call in (lambda: pool.map(lambda x: x, [1]), lambda: pool.apply(outer(), (1,))):
            try:
                call()
            except Exception as error:
                print(shown(error))
        try:
            pool.map(fails, [1])
        except ValueError as error:
            print(shown(error), remote(error), [frame.name for frame in traceback.extract_tb(error.__traceback__)])
        print(pool.map(abs, [-1, -2]))
    with ProcessPoolExecutor(1, mp_context=ctx) as executor:
        try:
            executor.submit(fails, 2).result()
        except ValueError as error:
            print(shown(error), remote(error))
        try:
            executor.submit(lambda: 1).result()
        except Exception as error:
            print(shown(error))
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_what_a_process_pools_function_raises_and_what_cannot_be_pickled_are_as_plain_under_the_trace(
        tmp_path, method):
    # A lambda and a local function fail to pickle with plain's exception and message;
    # the function's exception comes back with the worker's traceback as plain; a builtin
    # is handed on as it is.
    write(tmp_path, "prog.py", POOL_REFUSALS)
    plain = subprocess.run([sys.executable, "prog.py", method], cwd=tmp_path, env=env_for(tmp_path),
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and "ValueError: no 1" in plain.stdout and "ValueError: no 2" in plain.stdout, \
        plain.stderr
    assert plain.stdout.count("Can't") >= 3, plain.stdout  # (the lambdas and the local function refused)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--subprocesses", "--context", "trace",
                             "--output", "trace.txt", "prog.py", method], cwd=tmp_path,
                            env=env_for(tmp_path), capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, plain.stdout), result.stderr


POOL_PARTIALS = """
import functools, multiprocessing, re, sys
from concurrent.futures import ProcessPoolExecutor

def work(scale, x, *, offset=0):
    return scale * x + offset

def other(x):
    return x

class Refused:
    reduced = 0

    def __reduce__(self):
        Refused.reduced += 1
        raise TypeError("not this one")

class Own(functools.partial):
    pass

def shown(error):
    notes = getattr(error, "__notes__", [])
    return re.sub(r"0x[0-9a-f]+", "ADDR", f"{type(error).__name__}: {error} {notes}")

if __name__ == "__main__":
    ctx = multiprocessing.get_context(sys.argv[1])
    scaled = functools.partial(work, 10, offset=1)
    scaled.note = "kept"
    with ctx.Pool(2) as pool:
        print(pool.map(scaled, range(3)), pool.apply(functools.partial(work, 2), (5,)),
              pool.map(Own(other), [7]))
        try:
            pool.map(functools.partial(work, Refused()), [1])
        except Exception as error:
            print(shown(error), Refused.reduced)
    with ProcessPoolExecutor(1, mp_context=ctx) as executor:
        print(executor.submit(scaled, 4).result(), list(executor.map(scaled, [5, 6])))
    print(scaled.note, scaled.func is work, scaled.args, scaled.keywords)
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_process_pools_partial_of_the_programs_function_is_a_call_in_its_workers_under_the_trace(
        tmp_path, method):
    # (docs/processes.md, "Pools": a partial is handed on as a partial whose function is
    # the call site; its arguments pickle as plain, once: what fails, fails as plain)
    write(tmp_path, "prog.py", POOL_PARTIALS)
    plain = subprocess.run([sys.executable, "prog.py", method], cwd=tmp_path, env=env_for(tmp_path),
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and "TypeError: not this one" in plain.stdout, plain.stderr
    assert plain.stdout.splitlines()[1].endswith(" 1")  # (the argument's __reduce__ ran once)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--subprocesses", "--context", "trace",
                             "--output", "trace.txt", "prog.py", method], cwd=tmp_path,
                            env=env_for(tmp_path), capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, plain.stdout), result.stderr
    calls = collections.Counter()
    for report in (p.read_text() for p in tmp_path.glob("trace*.txt")):
        for m in re.finditer(r"^ *(?:__main__|__mp_main__)\.(work|other)\(.*?(?:\(× (\d+), the first shown\))?$",
                             report, re.M):
            calls[m[1]] += int(m[2] or 1)
    # map 3, apply 1, submit 1, executor map 2; a partial subclass's function is handed on as it is
    assert calls == {"work": 7}, calls


POOL_METHODS = """
import functools, multiprocessing, re, sys
from concurrent.futures import ProcessPoolExecutor

class Worker:
    def __init__(self, scale):
        self.scale = scale

    def work(self, x, *, offset=0):
        return self.scale * x + offset

class Refused(Worker):
    reduced = 0

    def __reduce__(self):
        Refused.reduced += 1
        raise TypeError("not this one")

def shown(error):
    notes = getattr(error, "__notes__", [])
    return re.sub(r"0x[0-9a-f]+", "ADDR", f"{type(error).__name__}: {error} {notes}")

def local_worker():
    class Local(Worker):
        pass

    return Local(1)

if __name__ == "__main__":
    ctx = multiprocessing.get_context(sys.argv[1])
    worker = Worker(10)
    with ctx.Pool(2) as pool:
        print(pool.map(worker.work, range(3)), pool.apply(worker.work, (5,)),
              pool.apply_async(worker.work, (6,)).get(), pool.map(functools.partial(worker.work, offset=1), [7]))
        for refused in (Refused(1).work, local_worker().work):
            try:
                pool.map(refused, [1])
            except Exception as error:
                print(shown(error), Refused.reduced)
    with ProcessPoolExecutor(1, mp_context=ctx) as executor:
        print(executor.submit(worker.work, 4).result(), list(executor.map(worker.work, [5, 6])))
        try:
            executor.submit(Refused(1).work, 1).result()
        except Exception as error:
            print(shown(error), Refused.reduced)
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_process_pools_bound_method_of_the_programs_function_is_a_call_in_its_workers_under_the_trace(
        tmp_path, method):
    # (docs/processes.md, "Pools": a bound method is handed on as a call site that pickles
    # its object and its function's name as plain pickles it: what fails, fails as plain)
    write(tmp_path, "prog.py", POOL_METHODS)
    plain = subprocess.run([sys.executable, "prog.py", method], cwd=tmp_path, env=env_for(tmp_path),
                           capture_output=True, text=True, timeout=120)
    lines = plain.stdout.splitlines()
    assert plain.returncode == 0 and len(lines) == 5, plain.stderr
    assert "TypeError: not this one" in lines[1] and "Can't" in lines[2]  # (the local class's object refused)
    assert lines[1].endswith(" 1") and lines[4].endswith(" 2")  # (the object's __reduce__ ran once a call)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--subprocesses", "--context", "trace",
                             "--output", "trace.txt", "prog.py", method], cwd=tmp_path,
                            env=env_for(tmp_path), capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, plain.stdout), result.stderr
    calls = 0
    for report in (p.read_text() for p in tmp_path.glob("trace*.txt")):
        for m in re.finditer(r"^ *(?:__main__|__mp_main__)\.Worker\.work\(.*?(?:\(× (\d+), the first shown\))?$",
                             report, re.M):
            calls += int(m[1] or 1)
    assert calls == 9, calls  # map 3, apply 1, apply_async 1, the partial's map 1, submit 1, executor map 2


def test_a_process_pools_bound_method_is_shipped_only_where_its_function_pickles_by_reference():
    import fractions

    import cassette_hook.runtime.callsites  # noqa: F401  (publishes the call sites' hotpath.call)
    from cassette_hook.runtime import primitives

    class Local:
        def work(self):
            return 1

    assert primitives._shipping(Local().work) is None
    assert primitives._shipping(fractions.Fraction.from_float) is None  # (a class method)
    assert type(primitives._shipping(collections.Counter().most_common)) is primitives._ShippedMethod


def test_a_process_pools_function_runs_as_itself_in_a_worker_with_no_context(tmp_path):
    # Without --subprocesses the workers are plain: they unpickle the call site as the
    # function itself (importing cassette_hook to do so) and run it as plain.
    write_pool_ways(tmp_path, "module")
    plain = subprocess.run([sys.executable, "prog.py", "spawn"], cwd=tmp_path, env=env_for(tmp_path),
                           capture_output=True, text=True, timeout=120)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--context", "trace", "--output", "trace.txt",
                             "prog.py", "spawn"], cwd=tmp_path, env=env_for(tmp_path), capture_output=True, text=True,
                            timeout=120)
    assert (result.returncode, result.stdout) == (0, plain.stdout), result.stderr
    assert list(tmp_path.glob("trace.*.txt")) == []  # (the parent's only)
    trace = (tmp_path / "trace.txt").read_text()
    assert "multiprocessing.pool.Pool.map(" in trace and "by_map(" not in trace, trace


def test_the_trace_shows_each_call_a_multiprocessing_thread_pool_makes_of_the_programs_function(tmp_path):
    # A ThreadPool is a Pool whose workers are threads: they call the call site itself.
    write(tmp_path, "jobs.py", "def work(n):\n    return n + 1\n")
    write(tmp_path, "prog.py", """
        from multiprocessing.pool import ThreadPool
        from jobs import work

        with ThreadPool(2) as pool:
            print(pool.map(work, range(5)), pool.apply(work, (3,)))
    """)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--context", "trace", "--output", "trace.txt",
                             "prog.py"], cwd=tmp_path, env=env_for(tmp_path), capture_output=True, text=True,
                            timeout=120)
    assert (result.returncode, result.stdout) == (0, "[1, 2, 3, 4, 5] 4\n"), result.stderr
    trace = (tmp_path / "trace.txt").read_text()
    assert len(re.findall(r"^\[[^]]*\] *jobs\.work\(", trace, re.M)) == 6, trace


def test_a_received_call_site_is_the_function_itself_where_no_whole_program_context_is_active():
    from cassette_hook.runtime import primitives

    def local(x):
        return x

    assert primitives._received(local) is local


CHILD_SCRIPT = """
import sys

def f(n):
    return n + 1

print(__name__, __file__, sys.argv, sys.path[0], f(1), "switched:", "__cassette_hook_enter__" in f.__code__.co_names)
"""


def test_a_child_running_a_script_of_the_program_runs_it_switched_as_the_command_line_runs_its_own(tmp_path):
    # (docs/processes.md, "--subprocesses"; on the path the tox env runs)
    write(tmp_path, "child.py", CHILD_SCRIPT)
    write(tmp_path, "prog.py", """
        import subprocess, sys
        print(subprocess.run([sys.executable, "child.py", "a1"], capture_output=True, text=True).stdout, end="")
    """)
    plain = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env_for(tmp_path),
                           capture_output=True, text=True, timeout=120)
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "--subprocesses", "--context", "profile",
                             "--output", "prof.txt", "prog.py"], cwd=tmp_path, env=env_for(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == plain.stdout.replace("switched: False", "switched: True"), (result.stdout, plain.stdout)
    children = [p.read_text() for p in tmp_path.glob("prof.*.txt")]
    assert len(children) == 1 and re.search(r"^ +1 .* __main__\.f$", children[0], re.M), children


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_pool_workers_trace_of_the_standard_library_never_shows_cassette_hooks_own_calls(tmp_path, method):
    # A spawn child (and a forkserver) instruments the main script it runs again as
    # __mp_main__ through a wrapper of ours that multiprocessing's traced code calls: the
    # wrapper, and what it calls, are ours, never in a report (docs/contexts.md)
    write(tmp_path, "worker.py", WORK)
    write(tmp_path, "prog.py", f"""
        import multiprocessing
        import worker

        if __name__ == "__main__":
            pool = {start_with(method)}.Pool(2)
            print(sum(pool.map(worker.work, range(4))))
            pool.close()
            pool.join()
    """)
    result = run_with_subprocesses(tmp_path, "--context", "trace,libraries=yes", "--output", "trace.txt", "prog.py")
    assert (result.returncode, result.stdout) == (0, "4\n"), result.stderr
    workers = [p.read_text() for p in tmp_path.glob("trace.*.txt")]
    assert any("multiprocessing.spawn.prepare(" in trace for trace in workers), workers  # (where the wrapper is called)
    assert not [line for trace in workers for line in trace.splitlines() if "cassette_hook" in line]
