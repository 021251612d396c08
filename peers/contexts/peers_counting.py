"""The counting-prehook context of the real-world check (``run_peers.py``, run ``counting``).

``null`` overloads nothing, so it never makes cassette_hook call a hook: every call site
takes the path where the hook generics have no method for the context.  This context is
what a user's first context looks like -- a ``Context`` subclass with a ``prehook``
method, given to the command line as ``--context peers_counting:CountingContext`` --
so every call the suite makes under it goes through the dispatch of ``prehook``, calls
Python code the user wrote, and only then runs.  Counting changes nothing the program
sees, so the suite must give the same results as plain.

At exit it writes ``peers counting context: N prehook calls`` to standard error:
``run_peers.py`` reads the number from the run's log and fails the run if it is 0 (a
context that saw no calls would compare nothing).

This directory is on ``PYTHONPATH`` in every run of the check (plain ones too, so that
all runs see the same ``sys.path``); it is never instrumented.
"""

from __future__ import annotations

import sys
from typing import Any

import cassette_hook as ch

REPORT_PREFIX = "peers counting context: "


class CountingContext(ch.Context):
    """Counts the calls its ``prehook`` sees (the calls of the main thread: threads
    the program starts do not inherit process-wide contexts)."""

    def __init__(self, metadata: Any = None, pass_: Any = None) -> None:
        super().__init__(metadata, pass_)
        self.calls = 0

    def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
        self.calls += 1

    def write_report(self) -> None:
        sys.stdout.flush()  # so that the report is a line of its own in a shared log
        print(f"\n{REPORT_PREFIX}{self.calls} prehook calls", file=sys.stderr, flush=True)
