"""``python -m cassette_hook attach PID``: contexts in a running process for a while, which
then goes on as before (docs/cli.md, "Attaching to a running process").

End to end: a server started here, attached to, its report read, then asked again.
Both runtimes: the suite runs on the C and the pure-Python path (tox's ``-pure``
environments; the server inherits ``CASSETTE_HOOK_PURE_PYTHON``).  ``sys.remote_exec``
is CPython 3.14's; on older ones the command says so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REMOTE = sys.version_info >= (3, 14)
needs_remote_exec = pytest.mark.skipif(not REMOTE, reason="sys.remote_exec is CPython 3.14's: see "
                                                          "test_attach_on_a_python_older_than_3_14_says_it_needs_3_14")

SERVER_MODULE = """\
import select
import sys

def answer(n):
    return n * n + 1

_COMPILED = answer.__code__

def handle(line):
    if line.strip() == "state":
        hooked = any(type(f).__name__ == "SwitchingFinder" for f in sys.meta_path)
        return f"compiled={answer.__code__ is _COMPILED} hook={hooked}"
    return str(answer(int(line)))

def serve(requests, replies):
    # (running when attached, this frame stays plain: the calls it makes are not seen, but
    # handle runs its instrumented body, whose calls are)
    while True:
        ready, _, _ = select.select([requests], [], [], 0.02)  # (back in Python often: a safe point)
        if not ready:
            continue
        line = requests.readline()
        if not line:
            return
        replies.write(handle(line) + "\\n")
        replies.flush()
"""

SERVER = """\
import sys
import srvmod
print("ready", flush=True)
srvmod.serve(sys.stdin, sys.stdout)
"""


class Server:
    """A program that answers ``n`` with ``n * n + 1``, one line each, until its input ends."""

    def __init__(self, tmp_path: Path, *python: str) -> None:
        (tmp_path / "server").mkdir()
        (tmp_path / "server" / "srvmod.py").write_text(SERVER_MODULE)
        (tmp_path / "server" / "server.py").write_text(SERVER)
        self.process = subprocess.Popen([*(python or [sys.executable]), "server.py"], cwd=tmp_path / "server",
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None and self.process.stdout.readline() == "ready\n"
        self.pid = self.process.pid

    def ask(self, line: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{line}\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=30)


@pytest.fixture
def server(tmp_path):
    running = Server(tmp_path)
    yield running
    running.process.kill()
    running.process.wait()


def attach(*args: object, cwd: Path, sigint_ignored: bool = False) -> subprocess.Popen[str]:
    """The attacher, started; with ``sigint_ignored``, as a shell without job control starts
    a command in the background (``cmd &`` in a script): SIGINT ignored, inherited."""
    ignore_sigint = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    return subprocess.Popen([sys.executable, "-m", "cassette_hook", "attach", *map(str, args)], cwd=cwd,
                            stderr=subprocess.PIPE, text=True, preexec_fn=ignore_sigint)


def attached(attacher: subprocess.Popen[str]) -> str:
    """The attacher's first line on stderr: it has attached (or failed)."""
    assert attacher.stderr is not None
    return attacher.stderr.readline()


def ended(attacher: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = attacher.communicate(timeout=60)
    return attacher.returncode, " ".join(err.split())


def calls_of(report: str, function: str) -> int:
    """The call count of ``function`` in a profile's table."""
    for line in report.splitlines():
        if line.rstrip().endswith(function):
            return int(line.split()[0].split("/")[0])
    raise AssertionError(f"{function} is not in the report:\n{report}")


@needs_remote_exec
def test_attach_for_a_duration_profiles_the_running_server_and_leaves_it_serving(tmp_path, server):
    assert server.ask("3") == "10"
    attacher = attach(server.pid, "--context", "profile", "--duration", "1", "--output", "prof.txt", cwd=tmp_path)
    assert "attached to process" in attached(attacher)
    answers = [server.ask(str(n)) for n in range(5)]
    status, err = ended(attacher)
    assert status == 0, err
    assert "the report is in prof.txt" in err
    assert 1 <= calls_of((tmp_path / "prof.txt").read_text(), "srvmod.answer") <= 5
    assert answers == [str(n * n + 1) for n in range(5)]
    assert [server.ask(str(n)) for n in range(5, 8)] == ["26", "37", "50"]
    assert server.close() == 0


@needs_remote_exec
def test_attach_until_signal_sees_every_call_of_the_window(tmp_path, server):
    attacher = attach(server.pid, "--context", "profile", "--until-signal", "--output", "prof.txt", cwd=tmp_path)
    assert "until SIGINT" in attached(attacher)
    assert [server.ask(str(n)) for n in range(7)] == [str(n * n + 1) for n in range(7)]
    attacher.send_signal(signal.SIGINT)
    status, err = ended(attacher)
    assert status == 0, err
    assert calls_of((tmp_path / "prof.txt").read_text(), "srvmod.answer") == 7
    assert server.ask("4") == "17"


@needs_remote_exec
def test_sigint_ends_the_window_of_an_attacher_started_with_sigint_ignored(tmp_path, server):
    attacher = attach(server.pid, "--context", "profile", "--until-signal", "--output", "prof.txt", cwd=tmp_path,
                      sigint_ignored=True)
    attached(attacher)
    server.ask("3")
    attacher.send_signal(signal.SIGINT)
    status, err = ended(attacher)
    assert status == 0, err
    assert calls_of((tmp_path / "prof.txt").read_text(), "srvmod.answer") == 1


@needs_remote_exec
def test_attach_until_sigterm_ends_the_window_as_sigint_does(tmp_path, server):
    attacher = attach(server.pid, "--context", "profile", "--until-signal", "--output", "prof.txt", cwd=tmp_path)
    attached(attacher)
    server.ask("2")
    attacher.send_signal(signal.SIGTERM)
    assert ended(attacher)[0] == 0
    assert calls_of((tmp_path / "prof.txt").read_text(), "srvmod.answer") == 1


@needs_remote_exec
def test_after_the_window_the_target_has_its_compiled_code_and_no_hook(tmp_path, server):
    assert server.ask("state") == "compiled=True hook=False"
    attacher = attach(server.pid, "--context", "profile", "--until-signal", "--output", "prof.txt", cwd=tmp_path)
    attached(attacher)
    assert server.ask("state") == "compiled=False hook=True"
    attacher.send_signal(signal.SIGINT)
    assert ended(attacher)[0] == 0
    assert server.ask("state") == "compiled=True hook=False"


@needs_remote_exec
def test_attach_twice_in_a_row_works_again(tmp_path, server):
    for _ in range(2):
        attacher = attach(server.pid, "--context", "profile", "--until-signal", "--output", "prof.txt",
                          cwd=tmp_path)
        attached(attacher)
        server.ask("1")
        attacher.send_signal(signal.SIGINT)
        assert ended(attacher)[0] == 0
        assert calls_of((tmp_path / "prof.txt").read_text(), "srvmod.answer") == 1


@needs_remote_exec
def test_without_output_the_report_goes_to_the_attachers_stderr(tmp_path, server):
    attacher = attach(server.pid, "--context", "trace", "--until-signal", cwd=tmp_path)
    attached(attacher)
    server.ask("5")
    attacher.send_signal(signal.SIGINT)
    status, err = ended(attacher)
    assert status == 0, err
    assert "srvmod.answer(5) -> 26" in err


@needs_remote_exec
def test_relative_file_options_of_a_context_are_the_attaching_users(tmp_path, server):
    attacher = attach(server.pid, "--context", "profile,raw=dump.json", "--until-signal", "--output", "prof.txt",
                      cwd=tmp_path)
    attached(attacher)
    server.ask("5")
    attacher.send_signal(signal.SIGINT)
    assert ended(attacher)[0] == 0
    assert (tmp_path / "dump.json").exists() and not (tmp_path / "server" / "dump.json").exists()


def refused(*args: object, cwd: Path) -> tuple[int, str]:
    return ended(attach(*args, cwd=cwd))


@needs_remote_exec
def test_attach_to_no_such_process_says_so(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    status, err = refused(gone.pid, "--context", "profile", "--duration", "1", cwd=tmp_path)
    assert status == 1 and f"no process with id {gone.pid}" in err


@needs_remote_exec
def test_attach_to_a_process_that_is_not_python_says_so(tmp_path):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        status, err = refused(sleeper.pid, "--context", "profile", "--duration", "1", cwd=tmp_path)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert status == 1 and f"process {sleeper.pid}" in err and "is not a CPython 3.14 or later process" in err


@needs_remote_exec
@pytest.mark.parametrize("how", [("-X", "disable-remote-debug"), ("PYTHON_DISABLE_REMOTE_DEBUG",)])
def test_attach_to_a_process_with_remote_debugging_disabled_says_so(tmp_path, how):
    env = dict(os.environ)
    python = [sys.executable]
    if how[0] == "-X":
        python += how
    else:
        env[how[0]] = "1"
    target = subprocess.Popen([*python, "-c", "import time\nprint('ready', flush=True)\nwhile 1: time.sleep(0.02)"],
                              env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout is not None and target.stdout.readline() == "ready\n"
        status, err = refused(target.pid, "--context", "profile", "--duration", "1", cwd=tmp_path)
    finally:
        target.kill()
        target.wait()
    assert status == 1 and "remote debugging is disabled" in err and "-X disable-remote-debug" in err


@needs_remote_exec
def test_attach_to_a_process_without_cassette_hook_importable_says_how_to_install_it(tmp_path):
    base = getattr(sys, "_base_executable", sys.executable)  # (outside the venv: cassette_hook is not there)
    target = Server(tmp_path, base, "-S")
    try:
        status, err = refused(target.pid, "--context", "profile", "--duration", "1", cwd=tmp_path)
        assert target.ask("2") == "5"
    finally:
        target.process.kill()
        target.process.wait()
    assert status == 1, err
    assert f"cassette_hook cannot be imported in process {target.pid}" in err
    assert f"install it into the target's environment ({base} -m pip install cassette_hook)" in err


@needs_remote_exec
def test_attach_without_permission_says_what_ptrace_needs(tmp_path, server):
    if os.getuid() != 0:
        pytest.skip("needs root, to attach as another user to a process of root's")  # (CI runs as root)
    os.chmod(tmp_path, 0o755)
    attacher = subprocess.Popen([sys.executable, "-m", "cassette_hook", "attach", str(server.pid), "--context",
                                 "profile", "--duration", "1"], cwd="/", stderr=subprocess.PIPE, text=True,
                                user=65534)
    status, err = ended(attacher)
    assert status == 1 and f"no permission to attach to process {server.pid}" in err
    assert "root" in err and ("ptrace_scope" in err or "CAP_SYS_PTRACE" in err)
    assert server.ask("2") == "5"


@needs_remote_exec
def test_a_target_that_never_reaches_a_safe_point_in_time_is_not_attached_even_later(tmp_path):
    code = ("import sys, time\nprint('ready', flush=True)\ntime.sleep(3)\nfor _ in range(20): time.sleep(0.05)\n"
            "print('cassette_hook' in sys.modules, flush=True)")
    target = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout is not None and target.stdout.readline() == "ready\n"
        status, err = refused(target.pid, "--context", "profile", "--duration", "1", "--timeout", "0.5", cwd=tmp_path)
        out, _ = target.communicate(timeout=30)
    finally:
        target.kill()
        target.wait()
    assert status == 1 and "did not reach a point where it runs Python code within 0.5 s" in err
    assert out == "False\n" and target.returncode == 0


@needs_remote_exec
def test_an_unknown_context_is_a_usage_error_from_the_target(tmp_path, server):
    status, err = refused(server.pid, "--context", "nosuch", "--duration", "1", cwd=tmp_path)
    assert status == 2 and "--context: unknown context 'nosuch'" in err
    assert server.ask("state") == "compiled=True hook=False"


def test_attach_needs_a_window(tmp_path):
    status, err = refused(os.getpid(), "--context", "profile", cwd=tmp_path)
    assert status == 2 and "one of the arguments --duration --until-signal is required" in err


def test_attach_needs_a_process_id(tmp_path):
    status, err = refused("me", "--context", "profile", "--duration", "1", cwd=tmp_path)
    assert status == 2 and "PID: expected a process id" in err


@pytest.mark.skipif(REMOTE, reason="the behaviour of CPython 3.10-3.13: on 3.14+ the tests above attach")
def test_attach_on_a_python_older_than_3_14_says_it_needs_3_14(tmp_path, server):
    status, err = refused(server.pid, "--context", "profile", "--duration", "1", cwd=tmp_path)
    version = ".".join(map(str, sys.version_info[:3]))
    assert status == 1 and "attach needs CPython 3.14 or later" in err and "both for this command and in the " \
        "target process" in err and f"this is CPython {version}" in err
    assert server.ask("2") == "5"
