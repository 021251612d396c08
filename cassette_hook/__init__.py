"""cassette_hook: Cassette.jl-style execution contexts for unmodified Python code.

Run any Python function inside a user-defined context that can observe, replace or extend
what every call in it does::

    import cassette_hook as ch

    class PrintCtx(ch.Context):
        def prehook(self, f, *args, **kwargs):
            print(f.__name__, args)

    ch.overdub(PrintCtx(), some_function, 1, 2)

This module is the whole public API; every other module is internal.  The package's
tree is its architecture (docs/internals.md, "Architecture"): ``context_stack`` (contexts
and the active stack), ``dispatch`` (generic functions with Julia's dispatch rules),
``generics`` (overdub and the hooks), ``passes`` and ``tagging`` (Cassette's concepts of
those names); ``runtime/`` (what a rewritten call site runs: Cassette's ``overdub``),
``rewrite/`` (bytecode rewriting, one module per CPython version), ``importhook/`` (the
import hook: finder, lazy mode, switched code, code cache), ``contexts/`` (the built-in
contexts and their reports) and ``cli/`` (the command line).  This module, on top, is
also where the stack learns to load the runtime (``_load_runtime``).

PYTEST_DONT_REWRITE: pytest must not try to rewrite this package's assertions; its plugin
imports it before pytest could, and the warning that would give is an error in suites
run with ``filterwarnings = error``.
"""

from __future__ import annotations

__version__ = "0.1.0"  # (before the imports: the code cache keys on it, read once)

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from . import context_stack
from .context_stack import Context, context, current_context, disablehooks, similarcontext
from ._process import install_from_env
from .importhook.finder import install, instrument, uninstall

TYPE_CHECKING = False  # (typing's would import typing at every start: see __getattr__)
if TYPE_CHECKING:
    from typing import Any

    from .contexts import NullContext, ProfileContext, TraceContext
    from .dispatch import AmbiguityError, Generic, Is, NoMethodError
    from .runtime.callees import canoverdub, canrecurse, recurse
    from .generics import OverdubInstead, execute, fallback, overdub, posthook, prehook, raisehook
    from .passes import Pass, PassError, insert_statements, replace_match
    from .rewrite._markers import contextslot, nooverdub
    from .tagging import (
        NoMetaData,
        Tagged,
        enabletagging,
        hasmetadata,
        hastagging,
        istagged,
        istaggedtype,
        metadata,
        metadatatype,
        overdub_tagged,
        tag,
        untag,
        untagtype,
    )


__all__ = [
    "AmbiguityError",
    "Context",
    "Generic",
    "Is",
    "NoMetaData",
    "NoMethodError",
    "NullContext",
    "OverdubInstead",
    "Pass",
    "PassError",
    "ProfileContext",
    "Tagged",
    "TraceContext",
    "canoverdub",
    "canrecurse",
    "context",
    "contextslot",
    "current_context",
    "disablehooks",
    "enabletagging",
    "execute",
    "fallback",
    "hasmetadata",
    "hastagging",
    "insert_statements",
    "install",
    "install_from_env",
    "instrument",
    "istagged",
    "istaggedtype",
    "metadata",
    "metadatatype",
    "nooverdub",
    "overdub",
    "overdub_tagged",
    "posthook",
    "prehook",
    "raisehook",
    "recurse",
    "replace_match",
    "similarcontext",
    "tag",
    "uninstall",
    "untag",
    "untagtype",
]


_LAZY = {
    **dict.fromkeys(["AmbiguityError", "Generic", "Is", "NoMethodError"], "dispatch"),
    **dict.fromkeys(["OverdubInstead", "execute", "fallback", "overdub", "posthook", "prehook", "raisehook"],
                    "generics"),
    **dict.fromkeys(["canoverdub", "canrecurse", "recurse"], "runtime.callees"),
    **dict.fromkeys(["NoMetaData", "Tagged", "enabletagging", "hasmetadata", "hastagging", "istagged",
                     "istaggedtype", "metadata", "metadatatype", "overdub_tagged", "tag", "untag", "untagtype"],
                    "tagging"),
    **dict.fromkeys(["contextslot", "nooverdub"], "rewrite._markers"),
    **dict.fromkeys(["NullContext", "ProfileContext", "TraceContext"], "contexts"),
    **dict.fromkeys(["Pass", "PassError", "insert_statements", "replace_match"], "passes"),
}


def __getattr__(name: str) -> Any:
    """Everything a program needs only once it overdubs, tags, dispatches or rewrites is
    imported when first named (``ch.overdub``, ``ch.TraceContext``, ``ch.Pass``): the
    generics with the hot path and ``typing``, the report writers, the ``bytecode``
    package the passes work on.  What stays is what ``python -m cassette_hook`` and
    ``install_from_env`` need to start a program: contexts, the import hook and the
    process-wide contexts, none of which imports ``typing`` at run time (each module
    says ``TYPE_CHECKING = False`` for its annotations).

    The first name imports them all, and this function removes itself: CPython 3.11+
    never specializes attribute reads of a module that has a ``__getattr__``, so with it
    every ``ch.tag`` in an overload would be a generic lookup, about 20 ns more a read
    (measured in docs/performance.md).  A program that names one of these rewrites code
    too, nearly always, and so imports ``bytecode`` anyway."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    _load_runtime()
    namespace = globals()
    for lazy, module in _LAZY.items():
        namespace[lazy] = getattr(importlib.import_module(f".{module}", __name__), lazy)
    namespace.pop("__getattr__", None)
    return namespace[name]


def _load_runtime() -> None:
    """Import the runtime -- the generics, the plans, the hot path -- which ``import
    cassette_hook`` leaves out: ``runtime.callsites`` is its top, and imports the rest.  The
    stack (``context_stack``) sits below the runtime and calls this the first time it needs it."""
    from .runtime import callsites  # noqa: F401  (as it loads, it hands the stack what it asks of the runtime)


context_stack.load_runtime = _load_runtime


def __dir__() -> list[str]:
    """The public names too, before they are imported."""
    return sorted({*globals(), *__all__})
