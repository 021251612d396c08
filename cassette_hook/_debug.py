"""``--debug CATEGORY[,CATEGORY]`` / ``CASSETTE_HOOK_DEBUG``: say what cassette_hook decided.

Like pytest's and coverage's ``--debug``: one line per decision on standard error,
prefixed ``cassette_hook: CATEGORY:``.  The import hook's finder is asked about every
import in the process, so when a category is off the code that would explain it costs
one flag test (``if _debug.imports:``) and nothing else.
"""

from __future__ import annotations

import sys
from typing import Iterable

CATEGORIES = {
    "import": "for each import the hook is asked about: rewritten or not, why, and what the code cache did",
}
imports = False  # is "import" on?  (a plain module attribute: the finder tests it per import)


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
    global imports
    for category in parse(",".join(categories)):
        if category == "import":
            imports = True


def say(category: str, message: str) -> None:
    """One line of debug output; never raises (a closed stderr must not break an import)."""
    try:
        print(f"cassette_hook: {category}: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass
