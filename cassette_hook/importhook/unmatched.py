"""A warning for include patterns that matched nothing.

``--include networx`` (for ``networkx``) instruments nothing and would say nothing: the
program runs, uninstrumented, and the reports are empty.  So where a person typed the
patterns (the command line, ``CASSETTE_HOOK_INCLUDE``, ``--cassette-include``), each one
that matched no module the process imported is named on stderr when it ends.  A name or
glob is checked against ``sys.modules`` at that point; a directory only for whether it
exists (a directory the program imports nothing from is normal: the command line's
default is one).  ``ch.install()`` called by a program does not warn: the program
decides what it imports, and ``--debug import`` shows what the hook decided.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import atexit
import os
import sys

from .._patterns import ModulePatterns
from .finder import _is_path

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Iterable, Sequence


def unmatched(include: Sequence[str], modules: Iterable[str], cwd: str | None = None) -> list[str]:
    """The patterns of ``include`` that match none of ``modules``, or name a directory
    (relative to ``cwd``) that does not exist, each with why, naming it as given."""
    names = list(modules)
    found = []
    for pattern in include:
        if _is_path(pattern):
            if not os.path.isdir(os.path.join(cwd or os.getcwd(), pattern)):
                found.append(f"{pattern!r}: no such directory")
        elif not any(map(ModulePatterns((pattern,)).matches, names)):
            found.append(f"{pattern!r} matched no imported module")
    return found


def imported() -> list[str]:
    """The names of the modules imported so far: those of ``sys.modules``, and the names
    the main modules were run under (``python -m mod`` runs ``mod`` as ``__main__``;
    ``multiprocessing``'s children run it as ``__mp_main__``)."""
    names = list(sys.modules)
    for main in ("__main__", "__mp_main__"):
        spec = getattr(sys.modules.get(main), "__spec__", None)
        name = getattr(spec, "name", None)
        if isinstance(name, str):
            names.append(name)
    return names


def warn(include: Sequence[str], option: str, cwd: str | None = None) -> None:
    """One line on stderr for each pattern of ``include`` that matched nothing so far."""
    for problem in unmatched(include, imported(), cwd):
        try:
            print(f"cassette_hook: {option} {problem}", file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):  # stderr closed at exit: nothing to tell
            return


def warn_at_exit(include: Sequence[str], option: str) -> None:
    """:func:`warn` when the process ends (after the program's own ``atexit`` handlers),
    with relative directories taken from here, as the hook took them."""
    atexit.register(warn, tuple(include), option, os.getcwd())
