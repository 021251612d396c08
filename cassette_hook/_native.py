"""The one place that chooses the runtime's implementation: C (``_speedups``) or Python.

The runtime's accelerated part is declared once, as ``runtime.interface.Runtime``; this
module makes the one object that provides it, :data:`runtime`, the first time a module
of the runtime asks for it, and every other module asks that object, never whether C is
loaded (``tests/test_structure.py`` checks both).  The C implementation is the extension
``_speedups``, built when the package is installed where a C compiler is at hand;
without it, or with ``CASSETTE_HOOK_PURE_PYTHON=1``, or if it fails to import, the
pure-Python one runs: the reference versions, defined in the modules that use them.
Under ``--debug runtime`` the choice and its reason are said (once ``--debug`` is read), as coverage.py's
``Core`` says which tracer it took; ``python -m cassette_hook --version`` says it too, with
which of the C accelerators (:data:`ACCELERATORS`) load (:func:`accelerators`).

The variable is read once, here, so that all modules agree.  The profile's own extension
(``contexts/_recording.c``) is loaded through :func:`optional` too, by
``contexts/_calltree.py``, when the built-in contexts are first imported, and so is the
lazy import hook's function watcher (``importhook/_watch.c``, 3.12+), by
``importhook.lazy_mode``, and the assembler's line table and loop (``rewrite/_assembly.c``) and
the decoder's loop (``rewrite/_decoding.c``), by ``rewrite._nullslot``, the passes'
instructions placed and found by name (``rewrite/_decoding.c`` too), by ``rewrite._instr``,
and the stack walks' loops (``rewrite/_stacking.c``), by ``rewrite._stack``.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import importlib
import os

from . import _debug

TYPE_CHECKING = False  # (not typing's: the lazy hook's first import loads this module, and typing is slow to import)
if TYPE_CHECKING:
    from contextvars import ContextVar
    from types import CodeType, FunctionType, ModuleType
    from typing import Any, Callable, TypeVar

    from .runtime.interface import Runtime

    T = TypeVar("T")

PURE_PYTHON = bool(os.environ.get("CASSETTE_HOOK_PURE_PYTHON"))
ENVIRONMENT_VARIABLE = "CASSETTE_HOOK_PURE_PYTHON"

ACCELERATED = frozenset({
    # the hot path (runtime.callsites)
    "resolve", "resolve_star", "enter", "call", "call_ex", "construct_by_ref", "primitive",
    "overload_of", "present", "yield_from", "OperatorSite",
    # a hook or overload run popped (runtime.callees.run_popped)
    "popped_call",
    # generic functions (dispatch), stand-ins (runtime.standins), tagging
    "Refiner", "Special", "TaggedFields", "tag", "untag", "metadata", "istagged",
    "hasmetadata", "make",
    # switched code (importhook.switch) and the exception being handled (_own, 3.10)
    "entry_gone", "operator_call", "runs_here", "handled_traceback",
})
"""What the C implementation provides in place of a Python definition of the same role
(:meth:`Python.accelerated` / :meth:`C.accelerated`): each name is handed to
``accelerated`` by the module that defines the Python version."""


ACCELERATORS = ("._speedups", ".contexts._recording", ".importhook._watch", ".rewrite._assembly",
                ".rewrite._decoding", ".rewrite._stacking")
"""Every C accelerator, by module (relative to the package): the runtime's, the profile's
hooks, the lazy import hook's function watcher (3.12+: before, it refuses to import), the
assembler's line table and loop (3.11+'s format; it loads on 3.10 too, unused there), the
decoder's loop (likewise: used on 3.12+; its passes' functions on 3.10+), the stack walks'
loops (every version)."""


def optional(name: str) -> Any:
    """The extension module ``name`` (relative to the package), or None where it is not
    built or the pure-Python versions are asked for.  In a source checkout where
    ``_speedups`` is not built, the directory of its C sources (``cassette_hook/_speedups/``)
    imports as a namespace package of the same name: that is not the extension either."""
    return None if PURE_PYTHON else _extension(name)[0]


def _extension(name: str) -> tuple[Any, str]:
    """The built extension module ``name`` and what it is ("is built (path)"), or None
    and why not."""
    try:
        module = importlib.import_module(name, __package__)
    except ImportError as exc:
        return None, f"is not built or failed to import ({exc})"
    if getattr(module, "__file__", None) is None:  # (a checkout's directory of sources)
        return None, "is not built (its sources' directory imported as a namespace)"
    return module, f"is built ({module.__file__})"


class Python:
    """The pure-Python implementation of ``runtime.interface.Runtime``: each accelerated
    name is the Python definition its module hands in, and what only C can do (configure
    C, a mirror of the builtins, method sites, recurse without a frame) is nothing here."""

    name = "Python"
    method_site: Callable[[str], tuple[object, ...]] | None = None  # (costlier than the bound method it saves)
    Dispatcher: Any = None  # (dispatch walks its cache in a Python closure)
    run_popped: Callable[..., Any] | None = None  # (overdub runs an overload popped in its own frame)
    method_of: Callable[[Any, str], Any] | None = None  # (no method sites: see method_site)
    # Python cannot give a function a version (3.13 specializes it less); None, not a no-op
    # method, so that twins are made with no frame more than before (tests/test_interrupts.py)
    version_like: Callable[[FunctionType, FunctionType], None] | None = None

    def __init__(self, why: str) -> None:
        self.why = why

    def accelerated(self, name: str, python: T) -> T:
        """``python``: the Python definition is this implementation's ``name``."""
        return python

    def configure(self, **parts: Any) -> None:
        """Nothing to hand over: the Python hot path calls the runtime's modules directly."""

    def configure_tagging(self, **parts: Any) -> None:
        """Nothing to hand over (see :meth:`configure`)."""

    def stack_reader(self, variable: ContextVar[Any]) -> Callable[[], Any]:
        """The stack's top is the variable's value."""
        return variable.get

    def exit_method(self, context: type, pop_at_exit: Callable[..., Any]) -> Any:
        """The context class's own ``__exit__``: a descriptor whose binding resumes, from C,
        a generator already inside its ``try`` (``context_stack._ExitMethod``)."""
        return context.__dict__["__exit__"]

    def recurse_from(self, reference: T, strip: Callable[[BaseException], Any]) -> T:
        """``reference``: ``recurse`` pushes, or finds its entry on top, in Python."""
        return reference

    def mirror_builtins(self, builtins: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any] | None:
        """None: a Python function's frames cannot be given other builtins than its globals'."""
        return None

    def set_builtins(self, func: FunctionType, builtins: dict[str, Any]) -> None:
        """Never asked: :meth:`mirror_builtins` made no mirror."""
        raise NotImplementedError("the pure-Python path has no mirror of the builtins")

    def set_code(self, func: FunctionType, code: CodeType) -> None:
        """``func.__code__ = code`` (3.13 versions the function only as it is made)."""
        func.__code__ = code

    def watch_live(self, live: set[Any], live_operators: set[Any], builtins: ModuleType, active: str,
                   operators_on: str) -> None:
        """Nothing: ``importhook.switch.settle`` turns the flags off in Python."""


class C(Python):
    """The C implementation: ``_speedups``'s functions, configured with the Python parts
    they delegate their rare cases to."""

    name = "C"

    def __init__(self, module: Any, why: str) -> None:
        super().__init__(why)
        self.module = module
        self.Dispatcher = module.Dispatcher
        self.run_popped = module.run_popped
        self.method_site = _method_sites(module.MethodSite)
        self.method_of = module.method_of
        self.configure = module.configure  # type: ignore[method-assign]  # (the C function itself)
        self.configure_tagging = module.configure_tagging  # type: ignore[method-assign]
        self.exit_method = module.exit_method  # type: ignore[method-assign]
        self.mirror_builtins = module.mirror_builtins  # type: ignore[method-assign]
        self.set_builtins = module.set_builtins  # type: ignore[method-assign]
        self.version_like = module.version_like
        self.set_code = module.set_code  # type: ignore[method-assign]
        self.watch_live = module.watch_live  # type: ignore[method-assign]

    def accelerated(self, name: str, python: T) -> T:
        """``_speedups``'s ``name``, which does what ``python`` does."""
        if name not in ACCELERATED:
            raise AssertionError(f"{name!r} is not declared in _native.ACCELERATED")
        return getattr(self.module, name)  # type: ignore[no-any-return]

    def stack_reader(self, variable: ContextVar[Any]) -> Callable[[], Any]:
        """``_speedups.top``, reading ``variable``: the C path's hooks run popped without
        setting the variable, and its reader knows."""
        self.module.bind(variable)
        return self.module.top  # type: ignore[no-any-return]

    def recurse_from(self, reference: T, strip: Callable[[BaseException], Any]) -> T:
        """``recurse`` whose common case (an overload of ``ctx``'s own entry) puts that
        entry back for the call (``_speedups.unpop``) instead of pushing a new one; the
        C side calls it past its budget of C levels only (docs/internals.md, "recurse
        without a frame"); ``_speedups.install_recurse`` hands back what ``recurse`` is
        (the closure, or where a call site would inline it whatever its ``vectorcall``,
        an object of a C type calling through it, and ``reference`` where ``unpop`` does
        not apply)."""
        unpop, repop, unpopped = self.module.unpop, self.module.repop, self.module.unpopped

        def recurse(ctx: Any, f: Any, /, *args: Any, **kwargs: Any) -> Any:
            """Run ``f``'s own body under ``ctx``, its calls overdubbed; ``fallback`` if it has none."""
            # The unpop inside the try, and the repop decided by the thread's record, not by a
            # local: an interrupt right after the unpop still repops.  (An unpop in force before
            # is an outer recurse's, for it to undo: then unpop changes nothing.)
            ours = not unpopped()
            try:  # (the repop as the try's last step, as in callees.recurse)
                run = unpop(ctx, f)
                if run is None:
                    return reference(ctx, f, *args, **kwargs)  # type: ignore[operator]
                out = run(*args, **kwargs) if kwargs else run(*args)  # (no dict handed on when empty)
                repop()
            except BaseException as exc:
                if ours and unpopped():
                    repop()
                strip(exc)  # (the program's traceback: without this frame and ours below it)
                raise
            return out

        recurse.__module__, recurse.__qualname__ = reference.__module__, reference.__qualname__  # type: ignore[attr-defined]
        return self.module.install_recurse(recurse, reference)  # type: ignore[no-any-return]


def _method_sites(method_site: Callable[[str], Any]) -> Callable[[str], tuple[object, ...]]:
    """One ``MethodSite`` per attribute name, shared by the twins."""
    import functools  # (not at start: see TYPE_CHECKING)

    return functools.cache(lambda name: (method_site(name),))


def _speedups() -> tuple[Any, str]:
    """``_speedups``, or None where the pure-Python runtime runs, and why."""
    if PURE_PYTHON:
        return None, f"{ENVIRONMENT_VARIABLE} is set"
    module, why = _extension("._speedups")
    return module, f"the C accelerator {why}"


def choose() -> Runtime:
    """The implementation this process runs, and why (said under ``--debug runtime``)."""
    module, why = _speedups()
    chosen = Python(why) if module is None else C(module, why)
    _debug.note("runtime", f"{chosen.name} implementation: {chosen.why}")
    return chosen


def accelerators() -> str:
    """Which C accelerators this process loads, as ``python -m cassette_hook --version``
    says it: so that a user can tell a silent fallback to the pure-Python path (an
    extension that was not built, or fails to import) from the accelerated one.  Where the
    runtime is pure Python, why (what ``--debug runtime`` says); then the ones that load,
    then the ones that do not, each with why."""
    module, why = _speedups()
    if PURE_PYTHON:  # (no accelerator is loaded: ``optional`` gives None for each)
        return f"pure-Python runtime: {why}"
    parts = [] if module is not None else [f"pure-Python runtime: {why}"]
    loaded: list[str] = []
    missing: list[str] = []
    for name in ACCELERATORS:
        short = name.rpartition(".")[2]
        if name == "._speedups":
            if module is not None:
                loaded.append(short)
            continue
        extension, extension_why = _extension(name)
        if extension is None:
            missing.append(f"{short} {extension_why}")
        else:
            loaded.append(short)
    if loaded:
        parts.append(f"C accelerators: {', '.join(loaded)}")
    if missing:
        parts.append(f"not loaded: {'; '.join(missing)}")
    return "; ".join(parts)


runtime: Runtime  # chosen when a module of the runtime first asks (by :func:`__getattr__`)


def __getattr__(name: str) -> Any:
    """``runtime``, chosen when a module of the runtime first imports it; not before, since
    the import hook loads this module for its function watcher alone (``lazy_mode``)."""
    if name != "runtime":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    global runtime
    runtime = choose()
    return runtime
