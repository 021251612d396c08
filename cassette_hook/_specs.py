"""Naming contexts from outside Python: ``--context SPEC`` and ``CASSETTE_HOOK_CONTEXT``.

A spec is ``NAME`` -- a built-in context (``null``, ``trace``, ``profile``: found in
``BUILT_IN`` without reading any package's metadata) or one registered in the entry-point
group ``cassette_hook.contexts`` -- or
``module:attr``, a ``Context`` subclass or instance; either may be followed by options,
``NAME,key=value,key=value``, which a class takes through its ``from_options(options,
output)`` classmethod (see ``cassette_hook.contexts``).
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import importlib
import sys

from .context_stack import Context

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    import importlib_metadata

GROUP = "cassette_hook.contexts"

BUILT_IN = {"null": "cassette_hook.contexts:NullContext", "trace": "cassette_hook.contexts:TraceContext",
            "profile": "cassette_hook.contexts:ProfileContext"}
"""The package's own entry points (``setup.cfg``'s, which a test compares with this), by
name: a built-in name is found here without ``importlib_metadata`` (30 ms to import, and
more to read every installed package's metadata: a third of the command line's start-up
with ``--context null``).  These names are reserved: another package's entry point of the
same name never replaces the built-in one (``shadowing`` finds such entry points, for
``--list-contexts`` to say so)."""


class SpecError(ValueError):
    """A context spec names nothing usable; the message says what and lists the choices."""


def _entry_points() -> list[importlib_metadata.EntryPoint]:
    """Every entry point of the group, ours included, as installed."""
    import importlib_metadata  # (a tenth of a second: only when an entry point is looked up)

    return list(importlib_metadata.entry_points(group=GROUP))


def available() -> dict[str, str]:
    """The contexts ``--context NAME`` can name, by name: each one's ``module:attr``.

    The built-in ones are ours whatever the installed metadata says (``BUILT_IN``).
    """
    found = {ep.name: ep.value for ep in _entry_points() if ep.name not in BUILT_IN}
    return {**BUILT_IN, **found}


def shadowing() -> list[importlib_metadata.EntryPoint]:
    """The installed entry points that name a built-in context but point elsewhere: never
    loaded (the built-in name wins), so the package that declares them should be told."""
    return [ep for ep in _entry_points() if ep.name in BUILT_IN and ep.value != BUILT_IN[ep.name]]


def parse(spec: str) -> tuple[str, dict[str, str]]:
    """``"trace,depth=3"`` -> ``("trace", {"depth": "3"})``."""
    target, *pairs = spec.split(",")
    options: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise SpecError(f"context option {pair!r} in {spec!r} is not key=value")
        options[key.strip()] = value
    if not target.strip():
        raise SpecError(f"context spec {spec!r} names no context")
    return target.strip(), options


def make(spec: str, output: str | None = None) -> Context:
    """The context ``spec`` describes, made ready to activate.

    Raises ``SpecError`` for a spec that names nothing usable, and whatever the context's
    own construction raises (a bad option value, say) as it is.
    """
    target, options = parse(spec)
    found = load(target)
    if isinstance(found, Context):
        if options:
            raise SpecError(f"{target!r} is a context instance: it takes no options")
        return found
    if not (isinstance(found, type) and issubclass(found, Context)):
        from ._saferepr import short_repr

        raise SpecError(
            f"{target!r} is {type(found).__name__} {short_repr(found)}, not a cassette_hook Context class or instance")
    from_options = getattr(found, "from_options", None)
    if from_options is not None:
        return from_options(options, output)  # type: ignore[no-any-return]  # the class's own constructor
    if options:
        raise SpecError(f"context {target!r} takes no options (it has no from_options), got {sorted(options)}")
    return found()


def make_all(specs: Sequence[str], output: str | None = None) -> list[Context]:
    """The contexts ``specs`` describe (as :func:`make` makes each), refusing a report file
    that two of them would write: each writes its report to ``output`` whole, the last
    over the others' (docs/cli.md, "Contexts").  Raises ``ReportPathError`` for the report
    file (``option`` None) then."""
    contexts = [make(spec, output) for spec in specs]
    if isinstance(output, str):  # (a file name; standard error, None, takes every report)
        from .contexts import ReportingContext, ReportPathError

        writers = [type(ctx).__name__ for ctx in contexts  # (those that write one: not null)
                   if isinstance(ctx, ReportingContext) and ctx.output == output
                   and type(ctx).write_report is not ReportingContext.write_report]
        if len(writers) > 1:
            raise ReportPathError(
                f"{len(writers)} contexts ({', '.join(writers)}) would write their reports to the same file "
                f"{output!r}, each over the one before: run the program once per context, each with a "
                f"report file of its own", None)
    return contexts


def load(target: str) -> Any:
    """What ``target`` (a spec's ``NAME`` or ``module:attr``) names, loaded."""
    if target in BUILT_IN:
        return _load_object(BUILT_IN[target], target)
    if ":" in target:
        module_name, _, attr = target.partition(":")
        _check_before_importing(target, module_name, attr)
        return _load_object(target, target)
    contexts = {ep.name: ep for ep in _entry_points() if ep.name not in BUILT_IN}
    if target not in contexts:
        names = ", ".join(sorted({*BUILT_IN, *contexts}))
        raise SpecError(f"unknown context {target!r} (available: {names}; or give module:attr)")
    return contexts[target].load()


def _load_object(reference: str, target: str) -> Any:
    """The object ``reference`` (``module:attr``, checked) names, imported, for ``target``."""
    module_name, _, attr = reference.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise SpecError(f"cannot import {module_name!r} for context {target!r}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SpecError(f"module {module_name!r} has no attribute {attr!r} (context {target!r})") from None
    return obj


def _check_before_importing(target: str, module_name: str, attr: str) -> None:
    """Refuse a ``module:attr`` spec that cannot name a context before importing anything
    for it: importing runs the module's code (``prog.py:Ctx`` would run ``prog``, the
    user's program, before saying that there is no module ``prog.py``).

    ``module`` and ``attr`` must be dotted names; and a dotted ``module`` must lie in a
    package, which is found, not imported, to tell (a package's ``__init__`` runs, as an
    import of a module in it would run it).
    """
    if not all(part.isidentifier() for part in module_name.split(".")) or not all(
            part.isidentifier() for part in attr.split(".")):
        raise SpecError(f"context {target!r} is not NAME or module:attr (a dotted module name, a colon, "
                        "a dotted attribute name)")
    parts = module_name.split(".")
    for length in range(1, len(parts)):
        parent = ".".join(parts[:length])
        if not _may_hold_modules(parent):
            raise SpecError(f"cannot import {module_name!r} for context {target!r}: {parent!r} is a module, "
                            "not a package")
        if parent not in sys.modules:
            return  # a package not imported yet: importing it is what importing the module starts with


def _may_hold_modules(name: str) -> bool:
    """Is ``name`` a package, as far as can be told without importing it?  (A module that
    cannot be found may: the import will say what is wrong.)"""
    module = sys.modules.get(name)
    if module is not None:
        return hasattr(module, "__path__")
    from importlib.util import find_spec

    try:
        spec = find_spec(name)
    except (ImportError, ValueError):
        return True
    return spec is None or spec.submodule_search_locations is not None


def describe_error(exc: Exception, context_source: str, output_source: str) -> str:
    """What went wrong making a context, for a user who gave the specs in ``context_source``
    (``--context``, an environment variable ...) and the report file in ``output_source``."""
    from .contexts import ReportPathError

    if isinstance(exc, ReportPathError):
        return f"{output_source if exc.option is None else context_source}: {exc}"
    if isinstance(exc, SpecError):
        return f"{context_source}: {exc}"
    return f"{context_source}: cannot make the context: {type(exc).__name__}: {exc}"
