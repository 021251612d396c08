"""The pytest plugin of the real-world check's ``late`` run (``run_peers.py``).

``python -m cassette_hook --include P... -m pytest -p peers_late``: the project's modules
are imported while no context is active (collection), so the import hook -- lazy, as by
default -- imports them as compiled.  Once collection is done, this plugin makes the
counting context active in pytest's thread; that first activation switches every
function the project's modules made (``cassette_hook.importhook.lazy_mode``), and the tests then run
switched code under the context.  So the run checks, on a real suite, what a program
that activates a context late sees: the same results as plain, and calls counted.

It writes the counting context's report (``peers counting context: N prehook calls``)
when pytest ends.
"""

from __future__ import annotations

from typing import Any

from peers_counting import CountingContext

_context = CountingContext()


def pytest_collection_finish(session: Any) -> None:
    _context.__enter__()  # for the rest of the run: pytest runs the tests in this thread


def pytest_unconfigure(config: Any) -> None:
    _context.write_report()
