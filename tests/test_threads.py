"""Whole-program contexts (the command line's, ``install_from_env``'s, the pytest plugin's)
are active in every thread of the program, from its first call; ``with`` blocks stay
per thread and nest above them."""

from __future__ import annotations

import ast
import asyncio
import collections
import gc
import contextvars
import ctypes
import ctypes.util
import json
import os
import re
import subprocess
import sys
import textwrap
import io
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import cassette_hook as ch
from cassette_hook import context_stack
from cassette_hook.importhook import switch

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
        context_stack.push_whole_program(contexts)
        pushed.extend(contexts)
        return contexts[-1]

    yield activate
    context_stack.pop_whole_program(pushed)


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
    context_stack.push_whole_program([ctx])
    context_stack.pop_whole_program([ctx])
    assert run_in_thread(ch.current_context) is None
    assert ch.current_context() is None


def test_whole_program_contexts_that_ran_hooks_are_live_nowhere_once_deactivated():
    # (On the pure-Python path, a hook running popped sets the stack's variable in this
    # thread, which keeps the old whole-program entry alive: it must not count as active,
    # or the lazy hook never gives idle code its compiled code back -- what attach relies
    # on: docs/cli.md, "Attaching to a running process".)  Both paths.
    from cassette_hook.importhook import switch

    ctx, work = Seen(metadata=[]), instrumented_work()
    context_stack.push_whole_program([ctx])
    work(3)
    context_stack.pop_whole_program([ctx])
    live = [ref() for ref in list(switch._live)]
    assert ctx.metadata and not [entry for entry in live if entry is not None and entry.ctx is ctx]


def test_deactivating_a_context_that_is_not_whole_program_is_an_error():
    with pytest.raises(RuntimeError, match="is not a whole-program context"):
        context_stack.pop_whole_program([Seen(metadata=[])])


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
            return ch.current_context() is inner, context_stack.active.get().below.ctx

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
        context_stack.push_whole_program([outer])
    context_stack.pop_whole_program([outer])
    assert sys.getrecursionlimit() == limit


def test_a_with_block_open_when_whole_program_contexts_come_and_go_leaves_the_process_idle():
    # The block's entry is moved onto the new whole-program stack as a copy; the original,
    # which the old stack variable still holds in this thread, must not count as live.
    gc.collect()
    live_before = len(switch._live)  # (what earlier tests of the process may have left alive)
    outer = Seen(metadata=[])
    with Seen(metadata=[]):
        context_stack.push_whole_program([outer])
    context_stack.pop_whole_program([outer])
    gc.collect()
    assert len(switch._live) == live_before


def test_a_tagged_with_block_open_when_whole_program_contexts_are_activated_leaves_its_tag_extent():
    outer = Seen(metadata=[])
    tagged = ch.enabletagging(Seen(metadata=[]), len)
    try:
        with tagged:
            context_stack.push_whole_program([outer])
    finally:
        context_stack.pop_whole_program([outer])
    assert tagged.tag.depth == 0


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
    result = run_cli(tmp_path, "--context", "profile,operators=no,speedscope=prof.json", "--output", "table.txt",
                     "prog.py")
    assert result.returncode == 0, result.stderr
    table = (tmp_path / "table.txt").read_text()
    # (a thread's bootstrap is a call site: its target, threading's, and the calls inside are seen)
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
    assert lines == ["jobs.in_thread()", "  jobs.work(2) -> 1", "jobs.in_thread -> 1",
                     "[worker] jobs.in_to_thread()", "[worker]   jobs.work(4) -> 6", "[worker] jobs.in_to_thread -> 6"]


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
    result = pytester.runpytest_subprocess("--cassette-include", "jobs", "--cassette-context", "counting:Counting",
                                           "-s")
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


# -- the built-in contexts under concurrency -----------------------------------------------

def run_threads(count: int, target: Callable[[], Any], *, together: bool = False) -> None:
    """Run ``target`` in ``count`` threads named ``t0``, ``t1``...; ``together``: all at
    once (a barrier), so that their hooks run at the same time."""
    barrier = threading.Barrier(count)

    def run() -> None:
        if together:
            barrier.wait()
        target()

    threads = [threading.Thread(target=run, name=f"t{i}") for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_the_profile_loses_no_call_of_many_short_threads(whole_program):
    profile = whole_program(ch.ProfileContext(operators=False))
    work = instrumented_work()
    run_threads(60, lambda: work(3))
    stats = profile.stats()
    assert (stats["builtins.abs"].calls, stats["builtins.sum"].calls, len(profile.threads())) == (180, 60, 60)
    if sys.version_info >= (3, 12):  # and the generator expression: 4 resumes a thread (docs/contexts.md)
        assert profile.table().startswith(f"{180 + 60 + 60 + 240} calls of 4 functions in 60 threads")
    else:
        assert profile.table().startswith(f"{180 + 60 + 60} calls of 3 functions in 60 threads")


def test_the_profile_loses_no_call_when_threads_run_its_hooks_at_the_same_time(whole_program):
    profile = whole_program(ch.ProfileContext(operators=False))
    work = instrumented_work()
    run_threads(4, lambda: [work(50) for _ in range(20)], together=True)
    assert profile.stats()["builtins.abs"].calls == 4 * 20 * 50
    assert sorted(p["name"] for p in profile.speedscope()["profiles"]) == ["t0", "t1", "t2", "t3"]


def test_the_trace_keeps_every_line_of_threads_tracing_at_the_same_time_whole(whole_program):
    out = io.StringIO()
    whole_program(ch.TraceContext(out, operators=False, fold=None))  # (every line: none folded)
    work = instrumented_work()
    run_threads(4, lambda: [work(30) for _ in range(5)], together=True)
    # Per work(30): range, sum opened, 30 abs inside it, sum closed: 33 lines, each whole.
    shape = re.compile(r"(\[t\d\] )?(builtins\.range\(30\) -> range\(0, 30\)|builtins\.sum\(<generator .*\)|"
                       r"  builtins\.abs\(-?\d+\) -> \d+|builtins\.sum -> 435)")
    matches = [shape.fullmatch(line) for line in out.getvalue().splitlines()]
    assert all(matches)
    per_thread = collections.Counter(m.group(1) for m in matches if m is not None)
    assert per_thread == {f"[t{i}] ": 5 * 33 for i in range(4)}


def test_the_trace_names_every_thread_but_the_one_that_made_it_even_when_it_traces_last(whole_program):
    # (sequential threads often get the same ident: each is still named)
    out = io.StringIO()
    whole_program(ch.TraceContext(out, operators=False, include=["builtins"]))
    work = instrumented_work()
    run_in_thread(lambda: work(1), name="first")
    run_in_thread(lambda: work(1), name="second")
    work(1)
    calls = ["builtins.range(", "builtins.sum(", "  builtins.abs(", "builtins.sum -> 0"]
    assert [re.sub(r"\(.*", "(", line) for line in out.getvalue().splitlines()] == [
        *(f"[first] {call}" for call in calls), *(f"[second] {call}" for call in calls), *calls]


def test_a_hook_that_raises_in_one_thread_fails_that_thread_only(whole_program):
    class Failing(ch.Context):
        operators = False

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            if f is abs and threading.current_thread().name == "t1":
                raise RuntimeError("hook failed in t1")

    whole_program(Failing())
    work, results, failures = instrumented_work(), {}, []

    def target() -> None:
        try:
            results[threading.current_thread().name] = work(4)
        except RuntimeError as exc:
            failures.append((threading.current_thread().name, str(exc)))

    run_threads(3, target, together=True)
    assert results == {"t0": 6, "t2": 6} and failures == [("t1", "hook failed in t1")]


DAEMON = """
import threading, jobs

def forever(started):
    for i in range(10 ** 9):
        jobs.work(3)
        if i == 100:
            started.set()

jobs.work(1)
started = threading.Event()
threading.Thread(target=forever, args=(started,), daemon=True, name="daemon").start()
started.wait()
print("main done")
"""


def test_a_daemon_thread_still_running_at_exit_is_profiled_as_far_as_it_got(tmp_path):
    write(tmp_path, "jobs.py", JOBS)
    write(tmp_path, "prog.py", DAEMON)
    result = run_cli(tmp_path, "--context", "profile,operators=no,speedscope=prof.json,raw=raw.json",
                     "--output", "table.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, "main done\n", "")
    calls = int(re.search(r"^ +(\d+) .* jobs\.work$", (tmp_path / "table.txt").read_text(), re.M).group(1))
    assert calls > 100
    assert "daemon" in [p["name"] for p in json.loads((tmp_path / "prof.json").read_text())["profiles"]]
    assert ch.ProfileContext.merge([tmp_path / "raw.json"]).stats()["jobs.work"].calls >= calls


def test_a_daemon_thread_still_tracing_at_exit_leaves_a_whole_trace(tmp_path):
    write(tmp_path, "jobs.py", JOBS)
    write(tmp_path, "prog.py", DAEMON)
    result = run_cli(tmp_path, "--context", "trace,operators=no,include=jobs", "--output", "trace.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, "main done\n", "")
    lines = (tmp_path / "trace.txt").read_text().splitlines()
    assert lines[0] == "jobs.work(1) -> 0"
    assert len(lines) > 100 and set(lines[1:]) == {"[daemon] jobs.work(3) -> 3"}


def test_the_profiles_raw_dump_is_whole_when_a_thread_records_a_new_function_meanwhile(whole_program, tmp_path):
    profile = whole_program(ch.ProfileContext(operators=False))
    work = instrumented_work()
    run_threads(1, lambda: work(2))

    def another_thread_meanwhile(frame: Any, event: str, arg: Any) -> Any:
        # The GIL may pass to another thread between any two lines of the report's code;
        # make that happen at each, the other thread recording a function new to it.
        if event == "line":
            work.__qualname__ = f"new{len(profile._locations)}"
            profile._child(profile._trees_now()[0].root, work, None, None)
        return another_thread_meanwhile if frame.f_code.co_filename.endswith("_calltree.py") else None

    sys.settrace(another_thread_meanwhile)
    try:
        profile.dump(tmp_path / "raw.json")
    finally:
        sys.settrace(None)
    assert ch.ProfileContext.merge([tmp_path / "raw.json"]).stats()["builtins.abs"].calls == 2


# -- calls that the standard library or C makes of the program's functions ----------------
# (docs/contexts.md, "Threads": a callback handed to a thread, the event loop, atexit or a
# signal is called as a call site when it runs; on both paths: ``path``)

CALLBACKS = """
import asyncio, atexit, os, signal, threading
from concurrent.futures import ThreadPoolExecutor

calls = {}
threads = set()

def count(name):
    calls[name] = calls.get(name, 0) + 1
    threads.add(threading.current_thread())  # (the objects: idents are reused)

both = threading.Barrier(2)  # (so that each of the pool's two threads runs a worker)

def worker(x):
    count("worker")
    if x < 2:
        both.wait()
    return x * x

def in_thread(x):
    count("in_thread")

def to_thread(x):
    count("to_thread")

def in_executor(x):
    count("in_executor")

def soon(x):
    count("soon")

def on_signal(signum, frame):
    count("on_signal")

def on_exit():
    count("on_exit")
    print(sorted(calls.items()), len(threads))

async def main():
    loop = asyncio.get_running_loop()
    await asyncio.to_thread(to_thread, 1)
    await loop.run_in_executor(None, in_executor, 2)
    loop.call_soon(soon, 3)
    await asyncio.sleep(0)

with ThreadPoolExecutor(2) as pool:
    assert sum(pool.map(worker, range(8))) == 140
thread = threading.Thread(target=in_thread, args=(1,))
thread.start()
thread.join()
asyncio.run(main())
signal.signal(signal.SIGUSR1, on_signal)
os.kill(os.getpid(), signal.SIGUSR1)
atexit.register(on_exit)
"""


@pytest.fixture(params=["c", "pure"])
def path(request: pytest.FixtureRequest) -> dict[str, str]:
    """The runtime the command line's child runs: the C accelerator's or the pure-Python one."""
    return {"CASSETTE_HOOK_PURE_PYTHON": "1"} if request.param == "pure" else {}


def run_cli_on(tmp_path: Path, path: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}, **path}
    return subprocess.run([sys.executable, "-m", "cassette_hook", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def profiled_calls(table: str, function: str) -> int:
    found = re.search(rf"^ +(\d+) .* {re.escape(function)}$", table, re.M)
    return int(found.group(1)) if found else 0


def test_the_profile_counts_each_call_the_standard_library_and_c_make_of_the_programs_functions(tmp_path, path):
    write(tmp_path, "prog.py", CALLBACKS)
    result = run_cli_on(tmp_path, path, "--context", "profile,operators=no", "--output", "prof.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    made = dict(ast.literal_eval(result.stdout.rsplit(" ", 1)[0]))  # the program's own count
    table = (tmp_path / "prof.txt").read_text()
    assert made == {"worker": 8, "in_thread": 1, "to_thread": 1, "in_executor": 1, "soon": 1, "on_signal": 1,
                    "on_exit": 1}
    assert {name: profiled_calls(table, f"__main__.{name}") for name in made} == made


def test_the_profile_counts_every_thread_that_ran_the_programs_code(tmp_path, path):
    write(tmp_path, "prog.py", """
        import threading
        from concurrent.futures import ThreadPoolExecutor

        both = threading.Barrier(2)  # (so that each of the pool's two threads runs a worker)

        def worker(x):
            if x < 2:
                both.wait()

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(worker, range(4)))
        thread = threading.Thread(target=worker, args=(2,))
        thread.start()
        thread.join()
    """)
    result = run_cli_on(tmp_path, path, "--context", "profile,operators=no", "--output", "prof.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    table = (tmp_path / "prof.txt").read_text()
    # main, the pool's two, the thread: each called `worker`, whose body makes no call
    assert " in 4 threads," in table.splitlines()[0] and profiled_calls(table, "__main__.worker") == 5, table


HANDED_BACK = """
import atexit, signal

def handler(signum, frame):
    pass

def at_exit():
    print("at exit")

def removed():
    print("removed: never printed")

print(atexit.register(at_exit) is at_exit)
atexit.register(removed)
atexit.unregister(removed)
previous = signal.signal(signal.SIGUSR1, handler)
print(signal.getsignal(signal.SIGUSR1) is handler, signal.signal(signal.SIGUSR1, previous) is handler)
"""


def test_atexit_and_signal_give_back_the_programs_own_callbacks_under_a_profile(tmp_path, path):
    write(tmp_path, "prog.py", HANDED_BACK)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}
    plain = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert plain.stdout == "True\nTrue True\nat exit\n", plain.stderr
    result = run_cli_on(tmp_path, path, "--context", "profile,operators=no", "--output", "prof.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, "")


def run_plain(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}
    return subprocess.run([sys.executable, script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


FINALIZED = """
import gc, weakref

calls = {}

def count(name):
    calls[name] = calls.get(name, 0) + 1

class Obj:
    pass

def on_exit():
    print(sorted(calls.items()))

import atexit
atexit.register(on_exit)
obj = Obj()
weakref.finalize(obj, count, "collected")
del obj
gc.collect()
kept = Obj()
weakref.finalize(kept, count, "at_exit")
obj = Obj()
weakref.finalize(obj, count, "called")()
other = Obj()
detached = weakref.finalize(other, count, "detached")
plain_ref = weakref.ref(other, count)
print(detached.peek()[1] is count, detached.detach()[1] is count, plain_ref.__callback__ is count)
"""


def test_the_profile_counts_the_calls_a_weakref_finalizer_makes_when_the_garbage_collector_runs_it(tmp_path, path):
    # (docs/contexts.md, "Threads": the finalizer is made a call site where finalize hands it to weakref.ref)
    write(tmp_path, "prog.py", FINALIZED)
    plain = run_plain(tmp_path, "prog.py")
    assert plain.stdout == "True True True\n[('at_exit', 1), ('called', 1), ('collected', 1)]\n", plain.stderr
    result = run_cli_on(tmp_path, path, "--context", "profile,operators=no", "--output", "prof.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, "")
    assert profiled_calls((tmp_path / "prof.txt").read_text(), "__main__.count") == 3  # the program's own count


TARGETS = """
import threading
from concurrent.futures import ThreadPoolExecutor

calls = []

def worker(x):
    calls.append(threading.current_thread().name)
    return abs(-x)

with ThreadPoolExecutor(2) as pool:
    assert sum(pool.map(worker, range(4))) == 6
thread = threading.Thread(target=worker, args=(3,), name="plain")
thread.start()
thread.join()
print(calls.count("plain"), hasattr(thread, "_target"))
"""


def test_the_trace_shows_a_threads_target_as_a_call_in_that_thread(tmp_path, path):
    # (docs/contexts.md, "Threads": the trace runs Thread.start as one call, and the
    # target is made a call site there)
    write(tmp_path, "prog.py", TARGETS)
    plain = run_plain(tmp_path, "prog.py")
    assert plain.stdout == "1 False\n", plain.stderr
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, "")
    lines = (tmp_path / "trace.txt").read_text().splitlines()
    # the program's one call in that thread, as a call of its own (not only the calls inside it)
    assert [line for line in lines if line.startswith("[plain] __main__.worker")] == [
        "[plain] __main__.worker(3)", "[plain] __main__.worker -> 3"], lines


POOLED = """
import asyncio, threading, traceback
from concurrent.futures import ThreadPoolExecutor

calls = {}
lock = threading.Lock()

def count(name):
    with lock:
        calls[name] = calls.get(name, 0) + 1

def submitted(x):
    count("submitted")
    return x

def mapped(x):
    count("mapped")
    return x

def to_thread(x):
    count("to_thread")

def in_executor(x):
    count("in_executor")

def in_own_pool(x):
    count("in_own_pool")

async def run_on_the_loop():
    loop = asyncio.get_running_loop()
    await asyncio.to_thread(to_thread, 1)
    await loop.run_in_executor(None, in_executor, 2)
    with ThreadPoolExecutor(1) as pool:
        await loop.run_in_executor(pool, in_own_pool, 3)

def main():
    with ThreadPoolExecutor(2) as pool:
        assert pool.submit(submitted, 1).result() == 1
        assert list(pool.map(mapped, range(3))) == [0, 1, 2]
    asyncio.run(run_on_the_loop())
    print(sorted(calls.items()))
"""


def traced_calls(trace: str, function: str) -> int:
    """How many calls of ``function`` (its qualified name) a trace shows, in any thread."""
    return len(re.findall(rf"^(?:\[[^]]*\] )? *{re.escape(function)}\(", trace, re.M))


def test_the_trace_shows_each_call_a_thread_pool_makes_of_the_programs_functions(tmp_path, path):
    # (docs/contexts.md, "Threads": submit, map, to_thread and run_in_executor, run as one
    # call each, hand the function on as a call site)
    write(tmp_path, "prog.py", POOLED + "main()\n")
    plain = run_plain(tmp_path, "prog.py")
    made = dict(ast.literal_eval(plain.stdout))  # the program's own count
    assert made == {"submitted": 1, "mapped": 3, "to_thread": 1, "in_executor": 1, "in_own_pool": 1}, plain.stderr
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, "")
    trace = (tmp_path / "trace.txt").read_text()
    assert {name: traced_calls(trace, f"__main__.{name}") for name in made} == made, trace


def test_install_from_envs_trace_shows_each_call_a_thread_pool_makes_of_the_programs_functions(tmp_path, path):
    write(tmp_path, "pooled.py", POOLED)
    write(tmp_path, "prog.py", "import pooled\npooled.main()\n")
    write(tmp_path, "sitecustomize.py", "import cassette_hook\ncassette_hook.install_from_env()\n")
    plain = run_plain(tmp_path, "prog.py")
    made = dict(ast.literal_eval(plain.stdout))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}, **path,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]), "CASSETTE_HOOK_INCLUDE": "pooled",
           "CASSETTE_HOOK_CONTEXT": "trace,operators=no", "CASSETTE_HOOK_OUTPUT": "trace.txt"}
    result = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, "")
    trace = (tmp_path / "trace.txt").read_text()
    assert {name: traced_calls(trace, f"pooled.{name}") for name in made} == made, trace


def test_the_profile_counts_each_call_a_thread_pool_makes_of_the_programs_functions_once(tmp_path, path):
    # (the profile recurses into concurrent.futures and asyncio: their call sites are
    # seen there, and nothing is handed on twice)
    write(tmp_path, "prog.py", POOLED + "main()\n")
    plain = run_plain(tmp_path, "prog.py")
    made = dict(ast.literal_eval(plain.stdout))
    result = run_cli_on(tmp_path, path, "--context", "profile,operators=no", "--output", "prof.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, "")
    table = (tmp_path / "prof.txt").read_text()
    assert {name: profiled_calls(table, f"__main__.{name}") for name in made} == made, table


OWN_SUBMIT = """
import sys
from concurrent.futures import Executor, Future, ThreadPoolExecutor

def work(x):
    return x + 1

class Pool(ThreadPoolExecutor):
    def submit(self, fn, /, *args, **kwargs):
        print("submit got work itself:", fn is work, type(fn).__name__)
        return super().submit(fn, *args, **kwargs)

class Inline(Executor):  # (an executor of the program's own: it runs the function at once)
    def submit(self, fn, /, *args, **kwargs):
        future = Future()
        future.set_result(fn(*args, **kwargs))
        return future

# (3.14+: a map that submits one ahead, the rest as its iterator is read)
lazily = {"buffersize": 1} if sys.version_info >= (3, 14) else {}
with Pool(1) as pool:
    print(pool.submit(work, 1).result(), list(pool.map(work, [2])))
inline = Inline()  # (kept: map's iterator holds it weakly, and submits no more once it is gone)
print(list(inline.map(work, [3, 4, 5], timeout=None, **lazily)))
"""


def test_a_pools_own_submit_gets_the_programs_function_itself_under_the_trace(tmp_path, path):
    # (docs/internals.md, "Callbacks from C": only the standard library's submit gets the call site)
    write(tmp_path, "prog.py", OWN_SUBMIT)
    plain = run_plain(tmp_path, "prog.py")
    assert plain.stdout == ("submit got work itself: True function\n" * 2) + "2 [3]\n[4, 5, 6]\n", plain.stderr
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no,fold=no", "--output", "trace.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, "")
    trace = (tmp_path / "trace.txt").read_text()
    assert traced_calls(trace, "__main__.work") == 5, trace


def test_the_trace_shows_each_call_executor_map_makes_of_a_pools_own_submit(tmp_path, path):
    # (docs/internals.md, "Callbacks from C": map, run as a primitive, runs a copy whose
    # reads of self.submit are call sites where submit is the program's)
    write(tmp_path, "prog.py", OWN_SUBMIT)
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no,fold=no", "--output", "trace.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    trace = (tmp_path / "trace.txt").read_text()
    lines = [re.sub(r" at 0x[0-9a-f]+", "", line) for line in trace.splitlines()]
    assert (traced_calls(trace, "__main__.Pool.submit"), traced_calls(trace, "__main__.Inline.submit")) == (2, 3), trace
    assert "  __main__.Pool.submit(<Pool object>, <function work>, 2)" in lines, lines  # (inside map's call)


POOL_ERRORS = """
import asyncio, traceback
from concurrent.futures import ThreadPoolExecutor

def fails():
    raise ValueError("no")

async def coroutine():
    pass

async def refused():
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, coroutine)
    except TypeError as error:
        print("refused:", error)

with ThreadPoolExecutor(1) as pool:
    error = pool.submit(fails).exception()
print([frame.name for frame in traceback.extract_tb(error.__traceback__)])
asyncio.run(refused(), debug=True)
"""


def test_what_a_thread_pools_function_raises_and_what_asyncio_refuses_are_as_plain_under_the_trace(tmp_path, path):
    write(tmp_path, "prog.py", POOL_ERRORS)
    plain = run_plain(tmp_path, "prog.py")
    # (the pool's frames, then the function's: 3.14 has two of the pool's)
    assert "'run', 'fails']\nrefused: coroutines cannot be used with run_in_executor" in plain.stdout, plain.stderr
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert (result.returncode, result.stdout) == (0, plain.stdout), result.stderr


INTERPRETER_POOL = """
from concurrent.futures import InterpreterPoolExecutor
import posixpath

with InterpreterPoolExecutor(1) as pool:  # (a Python function the other interpreter can import)
    print(pool.submit(posixpath.basename, "a/b").result(), list(pool.map(posixpath.basename, ["c/d"])))
"""


@pytest.mark.skipif(sys.version_info < (3, 14), reason="InterpreterPoolExecutor is new in 3.14")
def test_an_interpreter_pool_gets_the_programs_function_itself_under_the_trace(tmp_path, path):
    # (docs/internals.md, "Callbacks from C": it pickles the function for another interpreter)
    write(tmp_path, "prog.py", INTERPRETER_POOL)
    plain = run_plain(tmp_path, "prog.py")
    assert plain.stdout == "b ['d']\n", plain.stderr
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, ""), result.stderr


SUBCLASSED = """
import threading, traceback

seen = []
lock = threading.Lock()

def note(item):
    with lock:
        seen.append(item)

def work(n):
    return abs(n)

class Worker(threading.Thread):
    def run(self):
        note(sorted(vars(self)))
        note((self.run.__func__ is Worker.run, "run" in vars(self), threading.current_thread() is self))
        work(-3)

class WithTarget(threading.Thread):
    def run(self):
        note("super")
        super().run()

class OwnStart(threading.Thread):
    def start(self):
        note("own start")
        super().start()

    def run(self):
        work(-4)

class OwnBootstrap(threading.Thread):
    def _bootstrap(self):
        note("own bootstrap")
        super()._bootstrap()

    def run(self):
        work(-5)

class OwnInner(threading.Thread):
    def _bootstrap_inner(self):
        note("own bootstrap_inner")
        super()._bootstrap_inner()

    def run(self):
        work(-9)

class Fails(threading.Thread):
    def run(self):
        work(-6)
        raise ValueError("from run")

class FailsInner(OwnInner):
    def run(self):
        raise KeyError("from run")

def hook(args):
    note(("hook", args.exc_type.__name__, args.thread.name,
          [frame.name for frame in traceback.extract_tb(args.exc_traceback)]))
    work(-8)

def main():
    for thread in (Worker(name="worker"), WithTarget(target=work, args=(-7,), name="with-target"),
                   OwnStart(name="own-start"), OwnBootstrap(name="own-bootstrap"), OwnInner(name="own-inner"),
                   Worker(name="daemon", daemon=True), Fails(name="fails-plain")):
        thread.start()
        thread.join()
        note((thread.name, sorted(vars(thread)), "run" in vars(thread), type(thread).run is vars(type(thread))["run"]))
    threading.excepthook = hook
    failing = Fails(name="fails")
    failing.start()
    failing.join()
    failing = FailsInner(name="fails-inner")
    failing.start()
    failing.join()
    note(threading.excepthook is hook)
    for item in seen:
        print(item)
"""


def test_a_thread_subclass_and_threading_excepthook_see_what_they_see_plain_under_the_trace(tmp_path, path):
    # (docs/internals.md, "Callbacks from C": the thread runs copies of threading's code
    # that read run and _invoke_excepthook off a receiver; nothing is put in the thread or
    # in threading)
    write(tmp_path, "prog.py", SUBCLASSED + "main()\n")
    plain = run_plain(tmp_path, "prog.py")
    assert "('hook', 'ValueError', 'fails', ['_bootstrap_inner', 'run'])\nown bootstrap_inner\n" \
           "('hook', 'KeyError', 'fails-inner', ['_bootstrap_inner', 'run'])\nTrue\n" in plain.stdout, plain.stdout
    assert "Exception in thread fails-plain:" in plain.stderr and "own bootstrap" in plain.stdout
    for spec in ("trace,operators=no", "profile,operators=no"):
        result = run_cli_on(tmp_path, path, "--context", spec, "--output", "report.txt", "prog.py")
        assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, plain.stderr), spec


def test_the_trace_shows_a_thread_subclasss_own_run_as_a_call_in_that_thread(tmp_path, path):
    # (docs/internals.md, "Callbacks from C")
    write(tmp_path, "prog.py", SUBCLASSED + "main()\n")
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "trace.txt").read_text().splitlines()
    shown = [re.sub(r" at 0x[0-9a-f]+", "", line) for line in lines if line.startswith("[own-start]")]
    assert shown == ["[own-start] __main__.OwnStart.run(<OwnStart object>)", "[own-start]   __main__.work(-4)",
                     "[own-start]     builtins.abs(-4) -> 4", "[own-start]   __main__.work -> 4",
                     "[own-start] __main__.OwnStart.run -> None"], lines
    runs = {name: traced_calls("\n".join(lines), f"__main__.{name}.run")
            for name in ("Worker", "WithTarget", "OwnStart", "OwnBootstrap", "OwnInner", "Fails")}
    assert runs == {"Worker": 2, "WithTarget": 1, "OwnStart": 1, "OwnBootstrap": 1, "OwnInner": 1, "Fails": 2}, lines
    assert "[with-target]     __main__.work(-7)" in lines, lines  # super().run()'s call of the target


def test_threads_start_as_plain_where_threadings_bootstrap_cannot_be_copied(monkeypatch):
    # (docs/internals.md, "Callbacks from C": threads start plain where the copies cannot be made)
    from cassette_hook.runtime import thread_bootstrap

    def unreadable(func, names):
        raise ValueError("a threading the bytecode package cannot read")

    monkeypatch.setattr(thread_bootstrap, "_swapped_code", unreadable)
    monkeypatch.setattr(thread_bootstrap, "_copies", None)
    thread = threading.Thread(target=lambda: None)
    assert thread_bootstrap.seeing("Thread.start", thread, lambda f: f) is None
    assert thread_bootstrap._copies == {}  # (not tried again at every thread)


def test_the_trace_shows_the_programs_threading_excepthook_called_when_a_threads_run_raises(tmp_path, path):
    # (docs/internals.md, "Callbacks from C")
    write(tmp_path, "prog.py", SUBCLASSED + "main()\n")
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "trace.txt").read_text().splitlines()
    in_the_thread = [line for line in lines if line.startswith("[fails] ")]
    called = next((i for i, line in enumerate(in_the_thread) if line.startswith("[fails] __main__.hook(")), None)
    assert called is not None, lines
    hooked = in_the_thread[called:]
    # after run has raised: the hook's call, the calls made inside it, its return
    assert in_the_thread[called - 1] == "[fails] __main__.Fails.run !! ValueError('from run')", lines
    assert hooked[-1] == "[fails] __main__.hook -> None", lines
    assert hooked[-4:-1] == ["[fails]   __main__.work(-8)", "[fails]     builtins.abs(-8) -> 8",
                             "[fails]   __main__.work -> 8"], lines


def test_the_trace_shows_a_classs_own_bootstrap_and_the_run_it_leads_to_as_calls_in_that_thread(tmp_path, path):
    # (docs/internals.md, "Callbacks from C": a class's own _bootstrap or _bootstrap_inner
    # is handed over as a call site, and its super() call runs threading's copy)
    write(tmp_path, "prog.py", SUBCLASSED + "main()\n")
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    lines = (tmp_path / "trace.txt").read_text().splitlines()
    shown = [re.sub(r" at 0x[0-9a-f]+", "", line) for line in lines if line.startswith("[own-inner]")]
    assert [line for line in shown if "bootstrap_inner(" in line or ".run(" in line] == [
        "[own-inner] __main__.OwnInner._bootstrap_inner(<OwnInner object>)",
        "[own-inner]   threading.Thread._bootstrap_inner(<OwnInner object>)",
        "[own-inner]     __main__.OwnInner.run(<OwnInner object>)"], lines
    assert traced_calls("\n".join(lines), "__main__.OwnBootstrap._bootstrap") == 1, lines


def test_the_trace_shows_threading_excepthook_called_for_a_thread_whose_class_overrides_its_bootstrap(tmp_path, path):
    write(tmp_path, "prog.py", SUBCLASSED + "main()\n")
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    in_the_thread = [line for line in (tmp_path / "trace.txt").read_text().splitlines()
                     if line.startswith("[fails-inner] ")]
    assert "[fails-inner]     __main__.hook -> None" in in_the_thread, in_the_thread
    assert traced_calls("\n".join(in_the_thread), "__main__.hook") == 1, in_the_thread


TIMERS = """
import threading

seen = []

def fire(x):
    timer = threading.current_thread()
    seen.append((x, getattr(timer, "function", None) is fire, "function" in vars(timer)))
    return abs(-x)

class Later(threading.Timer):
    def run(self):
        seen.append("later")
        super().run()

timer = threading.Timer(0.01, fire, args=(1,))
timer.name = "timer"
timer.start()
timer.join()
later = Later(0.0, fire, args=(2,))
later.name = "later"
later.start()
later.join()
cancelled = threading.Timer(60, fire, args=(3,))
cancelled.start()
cancelled.cancel()
cancelled.join()
now = threading.Timer(0.0, fire, args=(4,))
now.run()  # (in this thread: the program's own call of Timer.run)
print(seen, timer.function is fire, sorted(vars(timer)) == sorted(vars(threading.Timer(1, fire))))
"""


def test_the_trace_shows_a_timers_function_as_a_call_in_the_timers_thread(tmp_path, path):
    # (docs/internals.md, "Callbacks from C": Timer.run, run as a primitive, runs a copy
    # that reads its function off a receiver, which hands it over as a call site)
    write(tmp_path, "prog.py", TIMERS)
    plain = run_plain(tmp_path, "prog.py")
    assert plain.stdout == "[(1, True, True), 'later', (2, True, True), (4, False, False)] True True\n", plain.stderr
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, "")
    lines = [re.sub(r" at 0x[0-9a-f]+", "", line) for line in (tmp_path / "trace.txt").read_text().splitlines()]
    assert [line for line in lines if line.startswith("[timer]") and "__main__.fire" in line] == [
        "[timer]   __main__.fire(1)", "[timer]   __main__.fire -> 1"], lines
    # (later's: inside its own run's super().run())
    assert "[later]     __main__.fire(2)" in lines and "  __main__.fire(4)" in lines, lines
    assert traced_calls("\n".join(lines), "__main__.fire") == 3, lines


RAISING_TIMERS = """
import threading

def fire():
    raise ValueError("from the timer")

class OwnInner(threading.Thread):
    def _bootstrap_inner(self):
        super()._bootstrap_inner()

    def run(self):
        raise KeyError("from run")

timer = threading.Timer(0, fire)
timer.name = "timer"
timer.start()
timer.join()
thread = OwnInner(name="own-inner")
thread.start()
thread.join()
"""


def test_what_a_timers_function_and_a_run_behind_a_classs_own_bootstrap_raise_is_reported_as_plain(tmp_path, path):
    # (the copies keep threading's names, files, lines and positions: the default hook's
    # tracebacks, carets included, read as plain)
    write(tmp_path, "prog.py", RAISING_TIMERS)
    plain = run_plain(tmp_path, "prog.py")
    assert "Exception in thread timer:" in plain.stderr and "KeyError: 'from run'" in plain.stderr, plain.stderr
    result = run_cli_on(tmp_path, path, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, plain.stderr)
    trace = (tmp_path / "trace.txt").read_text()
    assert (traced_calls(trace, "__main__.fire"), traced_calls(trace, "__main__.OwnInner.run")) == (1, 1), trace


def test_the_profile_counts_a_timers_function_and_the_timers_thread(tmp_path, path):
    write(tmp_path, "prog.py", TIMERS)
    result = run_cli_on(tmp_path, path, "--context", "profile,operators=no", "--output", "prof.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    table = (tmp_path / "prof.txt").read_text()
    assert profiled_calls(table, "__main__.fire") == 3 and " in 4 threads," in table.splitlines()[0], table


def test_install_from_envs_trace_shows_a_thread_subclasss_run_and_threading_excepthook(tmp_path, path):
    write(tmp_path, "subclassed.py", SUBCLASSED)
    write(tmp_path, "prog.py", "import subclassed\nsubclassed.main()\n")
    write(tmp_path, "sitecustomize.py", "import cassette_hook\ncassette_hook.install_from_env()\n")
    plain = run_plain(tmp_path, "prog.py")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}, **path,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]), "CASSETTE_HOOK_INCLUDE": "subclassed",
           "CASSETTE_HOOK_CONTEXT": "trace,operators=no", "CASSETTE_HOOK_OUTPUT": "trace.txt"}
    result = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, plain.stderr)
    trace = (tmp_path / "trace.txt").read_text()
    assert (traced_calls(trace, "subclassed.Worker.run"), traced_calls(trace, "subclassed.hook")) == (2, 2), trace


def test_the_profile_counts_a_thread_subclasss_run_threading_excepthook_and_their_threads(tmp_path, path):
    # (the profile recurses into threading: _bootstrap_inner's calls are call sites there)
    write(tmp_path, "prog.py", SUBCLASSED + "main()\n")
    result = run_cli_on(tmp_path, path, "--context", "profile,operators=no", "--output", "prof.txt", "prog.py")
    assert result.returncode == 0, result.stderr
    table = (tmp_path / "prof.txt").read_text()
    runs = {name: profiled_calls(table, f"__main__.{name}.run")
            for name in ("Worker", "WithTarget", "OwnStart", "OwnBootstrap", "OwnInner", "Fails", "FailsInner")}
    assert runs == {"Worker": 2, "WithTarget": 1, "OwnStart": 1, "OwnBootstrap": 1, "OwnInner": 1, "Fails": 2,
                    "FailsInner": 1}, table
    assert profiled_calls(table, "__main__.hook") == 2 and profiled_calls(table, "__main__.work") == 10, table
    assert " in 10 threads," in table.splitlines()[0], table  # main and the nine it started


THREAD_FRAMES = """
import sys, threading, traceback

class Worker(threading.Thread):
    def run(self):
        print([frame.name for frame in traceback.extract_stack(sys._getframe())])
        depth, frame = 0, sys._getframe()
        while frame is not None:
            depth, frame = depth + 1, frame.f_back
        print(depth)

worker = Worker()
worker.start()
worker.join()
"""


def test_a_thread_subclasss_run_has_threadings_frames_below_it_as_plain_under_the_trace(tmp_path):
    # (on the C hot path; the pure-Python path's call is Python frames of ours between
    # _bootstrap_inner and run: docs/internals.md, "cassette_hook's frames are visible")
    write(tmp_path, "prog.py", THREAD_FRAMES)
    plain = run_plain(tmp_path, "prog.py")
    assert plain.stdout == "['_bootstrap', '_bootstrap_inner', 'run']\n3\n", plain.stderr
    result = run_cli_on(tmp_path, {}, "--context", "trace,operators=no", "--output", "trace.txt", "prog.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, plain.stdout, "")
