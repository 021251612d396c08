"""The runtime interface: what the runtime's accelerated part provides, declared once.

Two implementations provide it, as each ``rewrite/_py3XX`` module provides
``rewrite._family.Family``: ``_native.C`` (the C accelerator ``_speedups``) and
``_native.Python`` (the pure-Python reference versions).  ``_native`` chooses one, once,
as :data:`_native.runtime`; the modules of the runtime ask it, never whether C is loaded
(docs/internals.md, "The runtime interface").
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from contextvars import ContextVar
from types import CodeType, FunctionType, ModuleType
from typing import Any, Callable, Protocol, TypeVar

T = TypeVar("T")


class Runtime(Protocol):
    """The runtime's accelerated part."""

    name: str
    """``"C"`` or ``"Python"``."""
    why: str
    """Why this implementation runs (said under ``--debug runtime``)."""
    method_site: Callable[[str], tuple[object, ...]] | None
    """What a twin's method call ``obj.name(...)`` loads as its callee's site (C's
    ``MethodSite``, one per name), or None: method calls stay attribute loads."""
    method_of: Callable[[Any, str], Any] | None
    """What switched code's method sites call by name (``method_of(obj, "name")``: a
    ``.pyc`` file holds no site object), or None where :attr:`method_site` is."""
    version_like: Callable[[FunctionType, FunctionType], None] | None
    """``version_like(twin, func)``: give ``twin`` a function version, as ``func`` has
    (3.13 specializes calls on it); or None: Python cannot."""
    Dispatcher: Any
    """A class walking a generic's type cache without a Python frame, or None: the walk
    is ``dispatch.Generic``'s Python closure."""
    run_popped: Callable[..., Any] | None
    """``run_popped(entry, method, *args, **kwargs)``: an overload run popped, recorded so
    that its ``recurse`` needs no frame; or None: ``generics.Overdub`` does it itself."""

    def accelerated(self, name: str, python: T) -> T:
        """This implementation's ``name``, one of ``_native.ACCELERATED``: ``python`` (the
        reference, defined in the module that asks) or the C function that does the same."""

    def configure(self, **parts: Any) -> None:
        """Hand the hot path the Python parts it delegates the rare cases to (``callsites``)."""

    def configure_tagging(self, **parts: Any) -> None:
        """Hand tagging's accelerated functions their Python parts (``tagging``)."""

    def stack_reader(self, variable: ContextVar[Any]) -> Callable[[], Any]:
        """What reads the innermost active entry of the stack held in ``variable``."""

    def exit_method(self, context: type, pop_at_exit: Callable[..., Any]) -> Any:
        """``Context.__exit__``: one that an interrupt cannot cut short before it pops."""

    def recurse_from(self, reference: T, strip: Callable[[BaseException], Any]) -> T:
        """``recurse``, given its Python reference (and what strips our frames from a traceback)."""

    def mirror_builtins(self, builtins: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any] | None:
        """A mirror of ``builtins`` with ``overrides``, kept in step; or None: no mirror."""

    def set_builtins(self, func: FunctionType, builtins: dict[str, Any]) -> None:
        """Make ``func``'s frames read ``builtins`` (a mirror :meth:`mirror_builtins` made)."""

    def set_code(self, func: FunctionType, code: CodeType) -> None:
        """``func.__code__ = code``, keeping ``func``'s calls as specializable as they were."""

    def watch_live(self, live: set[Any], live_operators: set[Any], builtins: ModuleType, active: str,
                   operators_on: str) -> None:
        """Turn the builtins flags ``active`` and ``operators_on`` off as soon as the sets empty."""
