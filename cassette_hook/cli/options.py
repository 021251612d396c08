"""What the command lines share in reading their options: ``python -m cassette_hook``'s
(``main``) and ``attach``'s."""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import os


def trace_inside(spec: str, include: list[str]) -> str:
    """``spec``, but for the built-in ``trace`` given no ``libraries=`` option, with
    ``libraries=`` the module patterns of ``--include``: a user who asked for a library to
    be instrumented wants to see inside it, where the trace would show each call of it as
    one line (docs/cli.md, "What is instrumented").  Directories are left out: the
    trace's patterns are module names.  Other contexts are given their spec as it is."""
    modules = [p for p in include if not (os.sep in p or "/" in p or p in (".", ".."))]
    name, *pairs = spec.split(",")
    if not modules or name.strip() != "trace" or any(pair.partition("=")[0].strip() == "libraries" for pair in pairs):
        return spec
    return f"{spec},libraries={'+'.join(modules)}"
