"""``--debug CATEGORY[,CATEGORY]`` / ``CASSETTE_HOOK_DEBUG``: say what cassette_hook decided.

Like pytest's and coverage's ``--debug``: one line per decision on standard error,
prefixed ``cassette_hook: CATEGORY:``.  The import hook's finder is asked about every
import in the process, so when a category is off the code that would explain it costs
one flag test (``if _debug.imports:``) and nothing else.

Apart from the categories, :data:`progress` says on a terminal which module a long cold
start is rewriting.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import os
import sys
import time

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Iterable

CATEGORIES = {
    "import": "for each import the hook is asked about: rewritten or not, why, and what the code cache did",
    "runtime": "which implementation of the runtime runs (C or Python) and why, once, as it is chosen",
}
imports = False  # is "import" on?  (a plain module attribute: the finder tests it per import)
runtime = False  # is "runtime" on?


def parse(value: str) -> list[str]:
    """The categories in ``value`` (``"import"``, ``"import,other"``); an unknown one is a
    ``ValueError`` that lists the known ones."""
    categories = [part.strip() for part in value.split(",") if part.strip()]
    for category in categories:
        if category not in CATEGORIES:
            raise ValueError(f"unknown debug category {category!r} (available: {', '.join(sorted(CATEGORIES))})")
    return categories


def enable(categories: Iterable[str]) -> None:
    """Turn ``categories`` on for the rest of the process (checked as :func:`parse` does)."""
    global imports, runtime
    for category in parse(",".join(categories)):
        if category == "import":
            imports = True
        elif category == "runtime":
            runtime = True
        if category in _noted:
            say(category, _noted.pop(category))


_noted: dict[str, str] = {}  # decisions made before their category could be turned on (see note)


def note(category: str, message: str) -> None:
    """A decision made once, maybe before the command line or the environment turned
    ``category`` on (the runtime is chosen as the package imports): said now if the
    category is on, else when :func:`enable` turns it on."""
    if category in _enabled():
        say(category, message)
    else:
        _noted[category] = message


def _enabled() -> set[str]:
    return {category for category, on in (("import", imports), ("runtime", runtime)) if on}


def say(category: str, message: str) -> None:
    """One line of debug output; never raises (a closed stderr must not break an import)."""
    try:
        print(f"cassette_hook: {category}: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


class Progress:
    """A status line on stderr while a cold start rewrites module after module.

    Rewriting costs milliseconds per function, so the first run of a program over a large
    package (nothing cached yet) can make its user wait many seconds before it starts.
    Once rewriting has gone on for :attr:`DELAY` seconds with no pause of a second, each
    module rewritten after that is named on one line, rewritten in place, and erased
    when that module is done -- before its body runs, so that nothing the program prints
    meets it.  Only on a terminal: a log or a pipe gets nothing.
    """

    DELAY = 1.5  # seconds of rewriting before the line appears
    PAUSE = 1.0  # a gap this long between two rewrites starts the count again
    NOTICE = 2.0  # seconds of rewriting that no cache keeps before :meth:`not_cached` says so

    def __init__(self) -> None:
        self.started = self.last = self.begun = float("-inf")
        self.modules = 0
        self.shown = False
        self.took = 0.0  # the last rewrite's seconds, until :meth:`not_cached` counts them
        self.uncached = 0.0
        self.noticed = False

    def begin(self, module: str) -> None:
        """``module`` is about to be rewritten."""
        now = time.perf_counter()
        if now - self.last > self.PAUSE:
            self.started, self.modules = now, 0
        self.modules += 1
        self.last = self.begun = now
        if now - self.started >= self.DELAY and _on_terminal():
            line = (f"cassette_hook: instrumenting, module {self.modules} in {now - self.started:.0f} s "
                    f"(cached for the next run): {module}")
            self.shown = _write(f"\r{line[:_width() - 1]}\x1b[K")  # one row: a wrapped line would not be erased

    def end(self) -> None:
        """The module named by :meth:`begin` is rewritten (or failed to be)."""
        self.last = time.perf_counter()
        self.took = self.last - self.begun
        if self.shown:
            self.shown = not _write("\r\x1b[K")

    def not_cached(self, why: str, way_out: str) -> None:
        """What the last rewrite made cannot be cached (``why``).  Where that is so, every run
        pays the cold start again, and the status line (a terminal's only) is the one sign:
        once such rewriting has taken :attr:`NOTICE` seconds in this process, say so, once,
        on stderr whatever it is, with ``way_out`` (docs/importhook.md, "The code cache")."""
        self.uncached += self.took
        self.took = 0.0
        if self.uncached >= self.NOTICE and not self.noticed:
            self.noticed = True
            say("cache", f"instrumenting code that cannot be cached ({why}) has taken {self.uncached:.1f} s "
                         f"of this run so far, and every run will take it again; {way_out}")


progress = Progress()


def _on_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


def _width() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):  # no file descriptor, or not a terminal after all
        return 80


def _write(text: str) -> bool:
    """Write ``text`` to stderr at once; never raises (see :func:`say`)."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
        return True
    except (OSError, ValueError, AttributeError):
        return False
