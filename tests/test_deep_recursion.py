"""Deep recursion under a context ends as it ends plain, never in a crash
(docs/internals.md, "The recursion-limit budget").

Each program runs in a subprocess (a crash would kill the test run), plain and under a
null context, a counting prehook and an ``overdub`` overload calling ``recurse``, on
whichever hot path the suite runs on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = """
import sys
import cassette_hook as ch

def r(k):
    return 0 if k == 0 else r(k - 1) + 1

class Counting(ch.Context):
    operators = False

    def prehook(self, f, *args, **kwargs):
        self.metadata[0] += 1

class Recursing(ch.Context):
    operators = False

@ch.overdub.register
def _(ctx: Recursing, f: ch.Is[r], k):
    return ch.recurse(ctx, f, k)

sys.setrecursionlimit({limit})
run = {{"plain": r, "null": lambda n: ch.overdub(ch.NullContext(), r, n),
       "counting": lambda n: ch.overdub(Counting([0]), r, n),
       "recursing": lambda n: ch.overdub(Recursing(), r, n)}}[{mode!r}]
try:
    print(run({depth}))
except RecursionError:
    print("RecursionError")
"""

CONTEXTS = ["null", "counting", "recursing"]


def ends(mode: str, limit: int, depth: int) -> str:
    """How the program ends: what it prints, or the signal that killed it."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROGRAM.format(limit=limit, mode=mode, depth=depth))],
                          capture_output=True, text=True, timeout=300, env=os.environ)
    if done.returncode < 0:
        return f"killed by signal {-done.returncode}"
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("mode", CONTEXTS)
@pytest.mark.parametrize("limit", [4_000, 20_000])
def test_recursion_without_end_raises_recursion_error_under_a_context_as_plain(mode, limit):
    assert ends("plain", limit, 10**8) == "RecursionError"
    assert ends(mode, limit, 10**8) == "RecursionError"


@pytest.mark.parametrize("mode", CONTEXTS)
def test_deep_recursion_that_finishes_plain_finishes_under_a_context(mode):
    assert ends("plain", 3_000, 2_000) == "2000"
    assert ends(mode, 3_000, 2_000) == "2000"


@pytest.mark.parametrize("mode", CONTEXTS)
@pytest.mark.parametrize(("limit", "depth"), [(20_000, 19_000), (10_000, 9_900)])
def test_recursion_close_to_what_the_c_stack_holds_never_crashes_under_a_context(mode, limit, depth):
    # Plain it finishes; under a context each level may cost more C stack than the main
    # thread has on 3.10 and 3.11, where it raises RecursionError instead (a known limitation).
    assert ends("plain", limit, depth) == str(depth)
    assert ends(mode, limit, depth) in (str(depth), "RecursionError")
