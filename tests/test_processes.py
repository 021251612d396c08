"""Whole process trees: ``install_from_env`` (sitecustomize) and ``--subprocesses``."""

from __future__ import annotations

import os
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


def test_sitecustomize_instruments_a_plain_python_child(tmp_path):
    write(tmp_path, "worker.py", WORK)
    write(tmp_path, "prog.py", """
        import worker
        print("__cassette_hook_enter__" in worker.work.__code__.co_names, worker.work(4))
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


