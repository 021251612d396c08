"""Instrumented code run while the interpreter shuts down behaves as plain code does.

CPython restores the builtins from its startup copy before it collects the last objects,
so code reading cassette_hook's names from the builtins would fail there.  Each test runs
a program plain, instrumented, and under ``--context null``, and wants the same stderr
-- which, plain, holds the line the finalizer prints (so a finalizer that does not run
at all fails the test too).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

WATCHER = """
import sys, weakref

refs = []

def gone(ref):
    print("weakref callback", abs(-1), file=sys.stderr)

def watch(obj):
    refs.append(weakref.ref(obj, gone))
"""

PROGRAMS = {
    "del_at_shutdown": ("del 2", """
        import sys

        class Noisy:
            def __del__(self):
                print("del", len([1, 2]), file=sys.stderr)

        keep = Noisy()
    """),
    "object_in_a_cycle_collected_at_exit": ("cycle del 2", """
        import sys

        class Cycle:
            def __init__(self):
                self.me = self

            def __del__(self):
                print("cycle del", max(1, 2), file=sys.stderr)

        keep = Cycle()
    """),
    "weakref_callback_at_shutdown": ("weakref callback 1", """
        import sys
        import watcher

        class Target:
            pass

        def function_in_this_module():  # these globals are a cycle, collected after the builtins are restored
            pass

        target = Target()
        sys.keep_watcher = watcher  # outlives this module
        watcher.watch(target)
    """),
    "atexit_handler": ("atexit 1", """
        import atexit, sys

        @atexit.register
        def bye():
            print("atexit", min(1, 2), file=sys.stderr)
    """),
    "generator_suspended_at_exit_is_closed": ("generator closed 2", """
        import sys

        def lines():
            try:
                yield 1
                yield 2
            finally:
                print("generator closed", len("ab"), file=sys.stderr)

        pending = lines()
        next(pending)
    """),
    "generator_suspended_inside_a_context_at_exit_is_closed": ("generator closed 2", """
        import sys
        import cassette_hook as ch

        def lines():
            with ch.NullContext():
                try:
                    yield 1
                    yield 2
                finally:
                    print("generator closed", len("ab"), file=sys.stderr)

        pending = lines()
        next(pending)
    """),
    "instrumented_function_runs_at_shutdown": ("del 2", """
        import sys
        import cassette_hook as ch

        class Noisy:
            def __del__(self):
                print("del", len([1, 2]), file=sys.stderr)

        ch.instrument(Noisy)
        keep = Noisy()
    """),
}


def run(tmp_path: Path, *prefix: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, *prefix, "prog.py"], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("how", [("-m", "cassette_hook"), ("-m", "cassette_hook", "--context", "null")],
                         ids=["instrumented", "under a context"])
def test_code_running_at_shutdown_prints_what_it_prints_plain(tmp_path, name, how):
    line, source = PROGRAMS[name]
    (tmp_path / "prog.py").write_text(textwrap.dedent(source))
    (tmp_path / "watcher.py").write_text(textwrap.dedent(WATCHER))
    plain, hooked = run(tmp_path), run(tmp_path, *how)
    assert plain.stderr == f"{line}\n"
    assert (hooked.stderr, hooked.returncode) == (plain.stderr, plain.returncode)


def test_no_context_sees_the_code_that_runs_once_the_interpreter_shuts_down(tmp_path):
    (tmp_path / "counting.py").write_text(textwrap.dedent("""
        import cassette_hook as ch

        class Count(ch.Context):
            def prehook(self, f, *args, **kwargs):
                self.metadata.append(getattr(f, "__name__", f))
    """))
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import sys
        import cassette_hook as ch
        import counting

        def lines():
            try:
                yield 1
            finally:
                print("generator closed", len("ab"), counting.seen, file=sys.stderr)

        counting.seen = []
        ch.instrument(lines)
        counting.Count(counting.seen).__enter__()  # left active for good, as the command line's contexts are
        pending = lines()
        next(pending)  # suspended in the rewritten body, closed at exit
    """))
    assert run(tmp_path).stderr == "generator closed 2 []\n"
