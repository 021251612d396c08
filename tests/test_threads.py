"""Whole-program contexts (the command line's, ``install_from_env``'s, the pytest plugin's)
are active in every thread of the program, from its first call; ``with`` blocks stay
per thread and nest above them."""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import ctypes.util
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import cassette_hook as ch
from cassette_hook import _context

pytest_plugins = ["pytester"]


class Seen(ch.Context):
    """Records (thread name, callee name) for every call it sees."""

    operators = False

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.metadata.append((threading.current_thread().name, getattr(f, "__name__", None)))


def instrumented_work() -> Callable[[int], int]:
    """A function whose call sites consult the active contexts (as the import hook's do)."""

    def work(n: int) -> int:
        return sum(abs(-i) for i in range(n))

    return ch.instrument(work)


def calls_of(ctx: ch.Context, name: str) -> list[str]:
    """The threads in which ``ctx`` saw a call of ``name``."""
    return [thread for thread, callee in ctx.metadata if callee == name]


@pytest.fixture
def whole_program() -> Iterator[Callable[..., ch.Context]]:
    """Activate contexts for the whole program; deactivated when the test ends."""
    pushed: list[ch.Context] = []

    def activate(*contexts: ch.Context) -> ch.Context:
        _context.push_whole_program(contexts)
        pushed.extend(contexts)
        return contexts[-1]

    yield activate
    _context.pop_whole_program(pushed)


def run_in_thread(target: Callable[[], Any], name: str = "worker") -> Any:
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(target()), name=name)
    thread.start()
    thread.join()
    return box[0]


# -- which threads see them ------------------------------------------------------------

def test_a_whole_program_context_is_active_in_a_thread_started_after_it(whole_program):
    ctx = whole_program(Seen(metadata=[]))
    assert run_in_thread(ch.current_context) is ctx


def test_a_whole_program_context_is_active_in_a_thread_started_before_it(whole_program):
    started, go, box = threading.Event(), threading.Event(), []

    def late() -> None:
        started.set()
        go.wait()
        box.append(ch.current_context())

    thread = threading.Thread(target=late)
    thread.start()
    started.wait()
    ctx = whole_program(Seen(metadata=[]))
    go.set()
    thread.join()
    assert box == [ctx]


def test_a_whole_program_context_sees_the_calls_of_a_thread(whole_program):
    ctx = whole_program(Seen(metadata=[]))
    work = instrumented_work()
    assert run_in_thread(lambda: work(3), name="worker") == 3
    assert calls_of(ctx, "abs") == ["worker"] * 3


def test_a_whole_program_context_sees_the_calls_of_thread_pool_workers(whole_program):
    ctx = whole_program(Seen(metadata=[]))
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="pool") as pool:
        results = list(pool.map(instrumented_work(), [1, 2, 3, 4]))
    assert results == [0, 1, 3, 6]
    threads = calls_of(ctx, "abs")
    assert len(threads) == 1 + 2 + 3 + 4 and all(t.startswith("pool") for t in threads)


def test_a_whole_program_context_is_active_in_asyncio_to_thread_and_run_in_executor(whole_program):
    ctx = whole_program(Seen(metadata=[]))

    async def main() -> tuple[Any, Any]:
        loop = asyncio.get_running_loop()
        return await asyncio.to_thread(ch.current_context), await loop.run_in_executor(None, ch.current_context)

    assert asyncio.run(main()) == (ctx, ctx)


def test_a_whole_program_context_is_active_in_a_thread_that_c_code_started(whole_program):
    # pthread_create calling back into Python through ctypes: the thread has no
    # ``threading`` bootstrap, and CPython gives it a fresh thread state on the callback.
    libc = ctypes.CDLL(ctypes.util.find_library("pthread") or ctypes.util.find_library("c"))
    ctx = whole_program(Seen(metadata=[]))
    box = []

    @ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    def start(_: Any) -> None:
        box.append(ch.current_context())
        return None

    handle = ctypes.c_ulong()
    assert libc.pthread_create(ctypes.byref(handle), None, start, None) == 0
    assert libc.pthread_join(handle, None) == 0
    assert box == [ctx]


def test_a_context_copied_before_activation_sees_the_whole_program_contexts(whole_program):
    copied = contextvars.copy_context()
    ctx = whole_program(Seen(metadata=[]))
    assert copied.run(ch.current_context) is ctx


def test_threads_see_no_whole_program_context_once_it_is_deactivated(whole_program):
    ctx = Seen(metadata=[])
    _context.push_whole_program([ctx])
    _context.pop_whole_program([ctx])
    assert run_in_thread(ch.current_context) is None
    assert ch.current_context() is None


def test_deactivating_a_context_that_is_not_whole_program_is_an_error():
    with pytest.raises(RuntimeError, match="is not a whole-program context"):
        _context.pop_whole_program([Seen(metadata=[])])


# -- with blocks keep their per-thread semantics -----------------------------------------

def test_a_threads_own_with_block_nests_above_the_whole_program_contexts(whole_program):
    outer = whole_program(Seen(metadata=[]))

    work, in_hook = instrumented_work(), instrumented_work()

    class Inner(ch.Context):
        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            if f is abs:
                in_hook(1)  # the hook's own calls: the contexts below see them

    def in_thread() -> tuple[Any, Any]:
        with Inner() as inner:
            work(3)
            return ch.current_context() is inner, _context.active.get().below.ctx

    assert run_in_thread(in_thread, name="worker") == (True, outer)
    assert calls_of(outer, "abs") == ["worker"] * 3  # in in_hook(1), once per abs of work(3)
    assert run_in_thread(ch.current_context) is outer  # and it ends with the block


def test_a_thread_does_not_see_another_threads_with_block_above_the_whole_program_contexts(whole_program):
    outer = whole_program(Seen(metadata=[]))
    with Seen(metadata=[]):
        assert run_in_thread(ch.current_context) is outer


def test_a_with_block_open_when_whole_program_contexts_are_activated_stays_innermost(whole_program):
    with Seen(metadata=[]) as mine:
        outer = whole_program(Seen(metadata=[]))
        assert ch.current_context() is mine
        assert run_in_thread(ch.current_context) is outer
    assert ch.current_context() is outer


def test_the_hooks_of_a_whole_program_context_do_not_see_their_own_calls(whole_program):
    class Counting(ch.Context):
        operators = False

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            self.metadata.append(getattr(f, "__name__", None))
            len(args)  # must not be seen by this context (it is popped while its hook runs)

    ctx = whole_program(Counting(metadata=[]))
    work = instrumented_work()
    run_in_thread(lambda: work(2))
    assert "len" not in ctx.metadata and ctx.metadata.count("abs") == 2


def test_the_recursion_limit_comes_back_when_whole_program_contexts_and_with_blocks_interleave():
    limit = sys.getrecursionlimit()
    outer = Seen(metadata=[])
    with Seen(metadata=[]):
        _context.push_whole_program([outer])
    _context.pop_whole_program([outer])
    assert sys.getrecursionlimit() == limit


# -- whole programs: the command line and the pytest plugin ----------------------------

THREADED = """
import asyncio, threading
from concurrent.futures import ThreadPoolExecutor
import jobs

thread = threading.Thread(target=jobs.in_thread, name="plain-thread")
thread.start()
thread.join()
with ThreadPoolExecutor(2, thread_name_prefix="pool") as pool:
    print(sorted(pool.map(jobs.in_pool, [1, 2, 3])))

async def main():
    loop = asyncio.get_running_loop()
    return await asyncio.to_thread(jobs.in_to_thread), await loop.run_in_executor(None, jobs.in_executor)

print(asyncio.run(main()))
"""

JOBS = """
def work(n):
    return sum(abs(-i) for i in range(n))

def in_thread():
    return work(2)

def in_pool(n):
    return work(n)

def in_to_thread():
    return work(4)

def in_executor():
    return work(5)
"""


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}
    return subprocess.run([sys.executable, "-m", "cassette_hook", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_command_lines_profile_counts_the_calls_of_every_thread(tmp_path):
    write(tmp_path, "jobs.py", JOBS)
    write(tmp_path, "prog.py", THREADED)
    result = run_cli(tmp_path, "--context", "profile,operators=no,speedscope=prof.json", "--output", "table.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    table = (tmp_path / "table.txt").read_text()
    # (a thread's target is called by threading, which is not instrumented: its calls are seen)
    assert re.search(r"^ +6 .* jobs\.work$", table, re.M)  # in_thread, 3 in_pool, in_to_thread, in_executor
    assert re.search(r"^ +17 .* builtins\.abs$", table, re.M)  # 2 + 1+2+3 + 4 + 5
    names = [p["name"] for p in json.loads((tmp_path / "prof.json").read_text())["profiles"]]
    assert "plain-thread" in names and any(n.startswith("pool") for n in names)


def test_the_command_lines_trace_shows_the_calls_of_a_thread_under_its_name(tmp_path):
    write(tmp_path, "jobs.py", JOBS)
    write(tmp_path, "prog.py", """
        import threading, jobs
        jobs.in_thread()
        thread = threading.Thread(target=jobs.in_to_thread, name="worker")
        thread.start()
        thread.join()
    """)
    result = run_cli(tmp_path, "--context", "trace,operators=no,include=jobs", "--output", "trace.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "trace.txt").read_text().splitlines()
    assert lines == ["jobs.in_thread()", "  jobs.work(2) -> 1", "jobs.in_thread -> 1", "[worker] jobs.work(4) -> 6"]


def test_a_threaded_programs_output_is_the_same_under_the_command_lines_contexts(tmp_path):
    write(tmp_path, "jobs.py", JOBS)
    write(tmp_path, "prog.py", THREADED)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}
    plain = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert plain.returncode == 0 and plain.stdout == "[0, 1, 3]\n(6, 10)\n", plain.stderr
    for spec in ("null", "profile", "trace"):
        result = run_cli(tmp_path, "--context", spec, "--output", "report.txt", "prog.py")
        assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, ""), spec


def test_the_pytest_plugins_session_context_sees_the_threads_a_test_starts(pytester):
    pytester.makepyfile(jobs=JOBS, counting=COUNTING)
    pytester.syspathinsert()
    pytester.makepyfile(test_it="""
        import threading, jobs
        def test_in_a_thread():
            thread = threading.Thread(target=jobs.in_thread)
            thread.start()
            thread.join()
    """)
    result = pytester.runpytest_subprocess("--cassette-include", "jobs", "--cassette-context", "counting:Counting", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["abs calls seen: 2"])


COUNTING = """
import cassette_hook as ch

class Counting(ch.Context):
    def prehook(self, f, *args, **kwargs):
        self.metadata.append(getattr(f, "__name__", "?"))

    def write_report(self):
        print("abs calls seen:", self.metadata.count("abs"))

    @classmethod
    def from_options(cls, options, output):
        return cls([])
"""
