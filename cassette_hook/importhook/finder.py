"""Instrumenting code without calling ``overdub``: the import hook and ``instrument``.

:func:`install` puts a finder at the front of ``sys.meta_path``.  For a module it is told
to instrument, it asks the finders behind it for the module's spec and swaps in a loader
that hands out *switched* code (``importhook.dual_code``): every body twice, plain and rewritten,
behind a check of whether a context is active.  The rewritten code is cached on disk
(``code_cache``).  :func:`instrument` gives objects imported before the hook the same code.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__, program_namespace  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import io
import os
import sys
import threading
import warnings
from importlib._abc import Loader  # importlib.abc's own Loader, without importlib.resources (5-7 ms)
from importlib.machinery import (BuiltinImporter, ExtensionFileLoader, ModuleSpec, SourceFileLoader,
                                 SourcelessFileLoader)
from importlib.util import LazyLoader
from types import CodeType, FunctionType, MethodType, ModuleType

from .. import _debug, rewrite
from . import lazy_mode, code_cache, switch
from .._budget import recursion_budget
from .._libraries import library_prefixes
from .._own import PACKAGE, RUNS_ON
from .._patterns import ModulePatterns, is_glob
from ..rewrite import _names

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Sequence, TypeVar

    T = TypeVar("T")

# What the hook never rewrites: itself and what it runs on.  Rewritten code calls into
# cassette_hook, which must not call back into rewritten code of its own.
NEVER = (PACKAGE, *RUNS_ON)
_NEVER = ModulePatterns(NEVER)
OPTIONS = "switched operators"  # what the rewritten code depends on besides its source


class Patterns:
    """Which modules to instrument: include and exclude patterns.

    A pattern is a module name -- ``"pkg"`` means ``pkg`` and everything in it -- or a
    glob over module names (``"pkg.*.io"``), or a directory (anything with a path
    separator, or ``.``): the modules whose files lie under it.  Modules of the standard
    library and of ``site-packages`` are instrumented only when a name pattern (not a
    directory, not a glob starting with a wildcard) includes them, so that including a
    project's directory does not take in the virtual environment inside it.
    """

    def __init__(self, include: Iterable[str], exclude: Iterable[str] = ()) -> None:
        self.include, self.exclude = _check_patterns(include, "include"), _check_patterns(exclude, "exclude")
        # The finder asks for every import in the process, so the patterns are sorted once:
        named = [p for p in self.include if not _is_path(p)]
        self._names = ModulePatterns(p for p in named if not is_glob(p[0]))  # the library too
        self._wild = ModulePatterns(p for p in named if is_glob(p[0]))  # a glob starting with a wildcard
        self._directories = tuple(p for p in self.include if _is_path(p))
        self._excluded = ModulePatterns((*NEVER, *(p for p in self.exclude if not _is_path(p))))
        self._excluded_directories = tuple(p for p in self.exclude if _is_path(p))
        self._library: tuple[str, ...] | None = None  # see _in_library
        self._real_directories: dict[str, str] = {}  # realpath per directory, asked once

    def __repr__(self) -> str:
        return f"Patterns(include={list(self.include)!r}, exclude={list(self.exclude)!r})"

    def may_match(self, name: str) -> bool:
        """Can ``name`` match without knowing its file?  (Saves a spec lookup if not.)"""
        if self._excluded.matches(name):
            return False
        return bool(self._directories) or self._names.matches(name) or self._wild.matches(name)

    def matches(self, name: str, origin: str | None) -> bool:
        if not self.may_match(name):
            return False
        named = self._names.matches(name)
        if named and not self._excluded_directories:
            return True  # (where its file is does not matter)
        path = self._realpath(origin) if origin else None
        if path and any(_under(path, p) for p in self._excluded_directories):
            return False
        if named:
            return True
        if not (self._wild.matches(name) or path and any(_under(path, p) for p in self._directories)):
            return False
        return not (path and self._in_library(path))

    def why(self, name: str, origin: str | None) -> str:
        """What :meth:`matches` decides, in words naming the pattern that decided it
        (for ``--debug import``; starts with ``included`` exactly when it matches)."""
        never = _NEVER.first_match(name)
        if never is not None:
            return f"not rewritten: cassette_hook never rewrites what it runs on ({never!r})"
        excluded = self._excluded.first_match(name)
        if excluded is not None:
            return f"not rewritten: excluded by {excluded!r}"
        path = self._realpath(origin) if origin else None
        excluded_directory = next((p for p in self._excluded_directories if path and _under(path, p)), None)
        if excluded_directory is not None:
            return f"not rewritten: its file is under the excluded directory {excluded_directory!r}"
        named = self._names.first_match(name)
        if named is not None:
            return f"included by {named!r}"
        wild = self._wild.first_match(name)
        directory = next((p for p in self._directories if path and _under(path, p)), None)
        if wild is None and directory is None:
            return "not rewritten: no include pattern matches it"
        if path and self._in_library(path):
            return "not rewritten: in the standard library or site-packages, which only a name pattern includes"
        return f"included by {wild!r}" if wild is not None else f"included by the directory {directory!r}"

    def _in_library(self, path: str) -> bool:
        """Is ``path`` in the standard library or a site-packages directory?  Asked only of
        a module a directory or wildcard pattern includes.

        The directories are found when first asked (``sysconfig``: 13 ms on 3.12, which a
        program that imports nothing from its own directory never pays).  Finding them
        imports modules, through this finder, which may ask again for one of them: those
        are the standard library's, and said to be so without asking further."""
        library = self._library
        if library is None:
            if getattr(_finding_library, "active", False):
                return True
            _finding_library.active = True
            try:
                library = self._library = library_prefixes()
            finally:
                _finding_library.active = False
        return path.startswith(library)

    def _realpath(self, origin: str) -> str:
        """``os.path.realpath(origin)``, resolving each directory once per process."""
        directory, base = os.path.split(origin)
        real = self._real_directories.get(directory)
        if real is None:
            real = self._real_directories[directory] = os.path.realpath(directory)
        path = os.path.join(real, base)
        return os.path.realpath(path) if os.path.islink(path) else path


_finding_library = threading.local()  # .active: this thread is finding the library's directories


class SwitchingFinder:
    """The meta-path finder :func:`install` puts first.  (Not an ``importlib.abc.MetaPathFinder``:
    that ABC adds nothing the import system asks for, and importing it costs what all of
    ``import cassette_hook`` should.)"""

    def __init__(self, patterns: Patterns) -> None:
        self.patterns = patterns

    def __repr__(self) -> str:
        return f"<cassette_hook finder {self.patterns!r}>"

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not self.patterns.may_match(fullname):
            if _debug.imports:
                _debug.say("import", f"{fullname}: {self.patterns.why(fullname, None)}")
            return None
        spec = _spec_from_others(self, fullname, path, target)
        origin = spec.origin if spec is not None and spec.has_location else None  # not "frozen", "built-in"
        if spec is None or not self.patterns.matches(fullname, origin):
            if _debug.imports:
                _debug.say("import", f"{fullname}: " + ("not found by the other finders" if spec is None else
                                                        self.patterns.why(fullname, origin)))
            return spec
        loader = switching_loader(spec.loader)
        if _debug.imports:
            _debug.say("import", f"{fullname}: {self.patterns.why(fullname, origin)}; " +
                       ("rewriting" if loader is not None else _why_no_code(spec.loader)))
        if loader is not None:
            spec.loader = loader
        return spec

    def invalidate_caches(self) -> None:
        pass  # nothing cached here; the finders behind this one keep their own


_asking = threading.local()  # .names: the modules this thread is asking the other finders about


def _spec_from_others(me: object, fullname: str, path: Sequence[str] | None,
                      target: ModuleType | None) -> ModuleSpec | None:
    """The spec the finders behind ``me`` give.  Another finder may do the same (ask every
    finder but itself); when it asks us back about the module we are asking it about, we
    answer ``None`` rather than asking it again, for ever."""
    asking = _asking.__dict__.setdefault("names", set())
    if fullname in asking:
        return None
    asking.add(fullname)
    try:  # (the loop in a function of its own: see _locks)
        return _first_spec(me, fullname, path, target)
    finally:
        asking.discard(fullname)


def _first_spec(me: object, fullname: str, path: Sequence[str] | None,
                target: ModuleType | None) -> ModuleSpec | None:
    for finder in list(sys.meta_path):
        if finder is me or isinstance(finder, SwitchingFinder):
            continue
        find_spec = getattr(finder, "find_spec", None)
        spec: ModuleSpec | None = None if find_spec is None else find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _keep_importing(fullname: str) -> None:
    """Remember the module being imported as ``fullname`` for interpreter shutdown (see
    ``switch.keep_at_shutdown``): the import system puts it in ``sys.modules`` before it
    asks for its code.  Done in ``get_code``, not in an ``exec_module`` of ours, because
    that would leave a frame of ours under the module's body, seen by everything that
    walks its stack (``warnings.warn(stacklevel=...)``, libraries that count frames)."""
    module = sys.modules.get(fullname)
    if module is not None:
        switch.keep_at_shutdown(module)


class _SwitchingSource(SourceFileLoader):
    """A ``SourceFileLoader`` (so code checking for one still finds one) handing out
    switched code, cached beside CPython's own ``.pyc``.

    What it switches is what CPython's own ``get_code`` gives, and its cache files hold
    while CPython would give the same (``code_cache``): so the hook is never staler than a plain
    import.  To know which ``.pyc`` of CPython's the code came from, ``get_code`` is watched
    (:class:`_Watch`) as it reads, compiles and writes."""

    def get_code(self, fullname: str) -> CodeType:
        _keep_importing(fullname)
        source_path = self.get_filename(fullname)
        light = _light_now(fullname)
        armed = not light and _armed_now(fullname)
        kind = code_cache.LIGHT if light else code_cache.BODY if armed else code_cache.SWITCHED
        cpython = code_cache.cpython_path(source_path)
        cache = None if cpython is None else code_cache.beside(cpython, kind)
        found = "miss"
        if cache is not None and cpython is not None:
            cached, found, basis = code_cache.read_mirroring(cache, cpython, source_path, fullname, OPTIONS, kind)
            # (a .body file holds the body and the compiled code: one marshal, so the
            # functions' code they share is one object, as lazy_mode needs)
            if armed:
                both = _body_and_compiled(cached)
            else:
                both = (cached, cached) if isinstance(cached, CodeType) else None
            if both is not None:
                if _debug.imports:
                    _debug.say("import", f"{fullname}: cache hit: {cache}")
                if not light:
                    switch.install_builtins()  # (switch_or_warn does it for code it makes)
                return _handed_out(both[0], both[1], True, light, armed, fullname, source_path, basis)
        plain, basis = self._compiled(fullname, cpython)
        # Light code is cached even when it is the compiled code (a copy of CPython's .pyc):
        # the next import then reads one file, not a missing one of ours and then CPython's.
        code, made = _made(plain, fullname, light, armed)
        written = "no cache for this source"
        if made and cache is not None:
            written = code_cache.write(cache, (code, plain) if armed else code, basis, fullname, OPTIONS, kind)
        if _debug.imports:
            said = f"cache {found}, {written}: {cache}" if cache is not None else written
            _say_made(fullname, plain, code, light, armed, said if made else None)
        return _handed_out(code, plain, made, light, armed, fullname, source_path, basis)

    def _compiled(self, fullname: str, cpython: str | None) -> tuple[CodeType, code_cache.Basis | None]:
        """CPython's code for the module, as its ``get_code`` gives it (reading its ``.pyc``
        at ``cpython``, or compiling the source and writing one), and the ``.pyc`` that code
        is: the one it read and trusted, or the one it wrote; ``None`` where there is neither."""
        watch = _Watch(self, cpython)
        outer = getattr(_watching, "watch", None)
        _watching.watch = watch
        try:
            plain = super().get_code(fullname)
        finally:
            _watching.watch = outer
        assert plain is not None  # a source file always compiles to code, or raises
        return plain, watch.basis()

    def get_data(self, path: str) -> bytes:
        """As CPython's; the ``.pyc`` a watched ``get_code`` reads is read through one
        descriptor with its ``fstat``, which names the file those bytes came from."""
        watch = _watched(self, path)
        if watch is None:
            return super().get_data(path)
        with io.open_code(path) as file:  # (as FileLoader.get_data reads a .pyc)
            stat = os.fstat(file.fileno())
            data = file.read()
        watch.read = (stat, data)
        return data

    def set_data(self, path: str, data: Any, *, _mode: int = 0o666) -> None:
        """As CPython's (which gives up quietly where it cannot write); remembers what a
        watched ``get_code`` wrote as its ``.pyc``."""
        super().set_data(path, data, _mode=_mode)
        watch = _watched(self, path)
        if watch is not None:
            watch.wrote = bytes(data)

    def source_to_code(self, data: Any, path: Any, *args: Any, **kwargs: Any) -> CodeType:  # type: ignore[override]
        """As CPython's; called by ``get_code`` only when no ``.pyc`` it trusts was there.
        (Its arguments are passed on as they come: 3.15 added ``fullname``.)"""
        watch = getattr(_watching, "watch", None)
        if watch is not None and watch.loader is self:
            watch.compiled = True
        return super().source_to_code(data, path, *args, **kwargs)


def _body_and_compiled(cached: object) -> tuple[CodeType, CodeType] | None:
    """What a ``.body`` file holds: the module's body switched and its compiled code."""
    if isinstance(cached, tuple) and len(cached) == 2:
        body, plain = cached
        if isinstance(body, CodeType) and isinstance(plain, CodeType):
            return body, plain
    return None


class _Watch:
    """What one call of CPython's ``SourceLoader.get_code`` did with the ``.pyc`` at
    ``cpython``: the file it read (its ``stat``, from the descriptor it was read through,
    and its bytes), whether it compiled the source instead (having found no ``.pyc`` it
    trusts), and what it wrote."""

    __slots__ = ("loader", "cpython", "read", "compiled", "wrote")

    def __init__(self, loader: _SwitchingSource, cpython: str | None) -> None:
        self.loader, self.cpython = loader, cpython
        self.read: tuple[os.stat_result, bytes] | None = None
        self.compiled = False
        self.wrote: bytes | None = None

    def basis(self) -> code_cache.Basis | None:
        """The ``.pyc`` whose code ``get_code`` gave, if there is one."""
        if not self.compiled:  # it gave the code of the .pyc it read, which it trusted
            return None if self.read is None else code_cache.Basis.of(*self.read)
        if self.wrote is None or self.cpython is None:
            return None  # (compiled, and nothing written: sys.dont_write_bytecode, an unwritable tree)
        return code_cache.written(self.cpython, self.wrote)


_watching = threading.local()  # .watch: the _Watch of the get_code this thread is in


def _watched(loader: _SwitchingSource, path: str) -> _Watch | None:
    """The watch on ``loader``'s ``get_code`` if ``path`` is the ``.pyc`` it watches."""
    watch: _Watch | None = getattr(_watching, "watch", None)
    return watch if watch is not None and watch.loader is loader and path == watch.cpython else None


def _say_made(module: str, plain: CodeType, code: CodeType, light: bool, armed: bool, cached: str | None) -> None:
    """Tell ``--debug import`` what the hook made of ``module``'s compiled code; ``cached``
    says what became of its cache file (``None``: nothing was made to cache)."""
    if armed and cached is not None:
        what = "its body rewritten; its functions switched at the first call of one"
    elif code is not plain:
        what = "rewritten"
    elif _names.nothing_to_rewrite(plain):
        what = "nothing to rewrite (no function, class or call): imported as compiled"
    elif light and cached is not None:
        what = "light: as compiled (switched under a context)"
    else:
        return  # it could not be rewritten, and the warning said so
    _debug.say("import", f"{module}: {what}" if cached is None else f"{module}: {what}; {cached}")


class _SwitchingSourceless(SourcelessFileLoader):
    """A ``.pyc`` without its source: rewritten at every import (there is nothing to key
    a cache on that the file itself does not already hold)."""

    def get_code(self, fullname: str) -> CodeType:
        _keep_importing(fullname)
        plain = super().get_code(fullname)
        assert plain is not None
        return code_for(plain, fullname, "a .pyc without its source")


class _SwitchingLoader(Loader):
    """Any other loader that gives code (a zip import, say): its code, switched.
    Everything else -- resources, source, ``is_package`` -- is the wrapped loader's.

    A loader may turn out to give no code only when asked (``get_code`` returning
    ``None``, as ``InspectLoader``'s does for a module without source, or raising
    ``ImportError``): the module is then the wrapped loader's to load, untouched, since
    an import that works plain must work instrumented."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        create = getattr(self.loader, "create_module", None)
        return None if create is None else create(spec)

    def get_code(self, fullname: str) -> CodeType | None:
        plain = self.loader.get_code(fullname)
        return None if plain is None else code_for(plain, fullname, f"loaded by {_loader_name(self.loader)}")

    def exec_module(self, module: ModuleType) -> None:
        name = module.__name__
        try:
            plain = self.loader.get_code(name)
        except (ImportError, NotImplementedError):
            plain = None  # its own exec_module knows better, or raises this again
        if plain is None:
            if _debug.imports:
                _debug.say("import", f"{name}: no code: loaded by its own loader ({_loader_name(self.loader)})")
            self._hand_back(module)
            self.loader.exec_module(module)
            return
        code = code_for(plain, name, f"loaded by {_loader_name(self.loader)}")
        switch.keep_at_shutdown(module)
        exec(code, program_namespace(module.__dict__))  # (the program's builtins, as importlib gives)

    def _hand_back(self, module: ModuleType) -> None:
        """Make the wrapped loader the module's loader, as if we had never been there."""
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.loader


def switching_loader(loader: Any) -> Loader | None:
    """A loader giving switched code for what ``loader`` loads, or ``None`` if it has no
    code to give (see :func:`_why_no_code`): the module is then left to ``loader``."""
    if type(loader) is SourceFileLoader:
        return _SwitchingSource(loader.name, loader.path)
    if type(loader) is SourcelessFileLoader:
        return _SwitchingSourceless(loader.name, loader.path)
    if isinstance(loader, LazyLoader):  # a finder making modules lazy: lazy, and switched
        inner = switching_loader(_lazy_inner(loader))
        return None if inner is None else LazyLoader(inner)
    if _has_no_code(loader):
        return None
    if callable(getattr(loader, "get_code", None)) and callable(getattr(loader, "exec_module", None)):
        return _SwitchingLoader(loader)
    return None


def _lazy_inner(loader: LazyLoader) -> Any:
    """The loader a ``LazyLoader`` wraps (set by its ``__init__``; typeshed does not declare it)."""
    return vars(loader)["loader"]


def _has_no_code(loader: Any) -> bool:
    """Loaders known never to give code: namespace packages, extension and built-in modules."""
    return (loader is None or loader is BuiltinImporter or isinstance(loader, ExtensionFileLoader)
            or type(loader).__name__ in ("NamespaceLoader", "_NamespaceLoader"))


def _why_no_code(loader: Any) -> str:
    """Why :func:`switching_loader` gives nothing for ``loader``, in words (``--debug import``)."""
    if isinstance(loader, LazyLoader):
        return _why_no_code(_lazy_inner(loader))
    if type(loader).__name__ in ("NamespaceLoader", "_NamespaceLoader"):
        return "a namespace package: no code of its own"
    if loader is BuiltinImporter or isinstance(loader, ExtensionFileLoader):
        kind = "a built-in" if loader is BuiltinImporter else "an extension"
        return f"{kind} module: no code: loaded by its own loader"
    return f"no code: loaded by its own loader ({_loader_name(loader)})"


def _loader_name(loader: Any) -> str:
    return loader.__name__ if isinstance(loader, type) else type(loader).__name__


def _light_now(module: str) -> bool:
    """Should ``module`` be imported light (see ``lazy_mode``): the hook was installed
    ``lazy``, no context is active anywhere, and it is not the program's main module."""
    return _lazy and not switch.active() and module not in MAIN_MODULES


_lazy = True  # install(lazy=...)


# The modules the command line runs as the program (``-m``, or a directory's or zip
# file's ``__main__``): handed out switched even while no context is active, because a
# main module's body may activate a context and then define and call functions, which
# light code would leave unswitched (``lazy_mode``: a running frame keeps its code).
MAIN_MODULES = {"__main__"}


def code_for(plain: CodeType, module: str, uncached: str) -> CodeType:
    """What the hook hands out for ``plain`` where it keeps no cache (``uncached`` says why,
    for ``--debug import``): light code waiting for a context when none is active, else
    switched code."""
    light = _light_now(module)
    armed = not light and _armed_now(module)
    code, made = _made(plain, module, light, armed)
    if _debug.imports:
        _say_made(module, plain, code, light, armed, f"not cached ({uncached})" if made else None)
    return _handed_out(code, plain, made, light, armed, module)


def _armed_now(module: str) -> bool:
    """Should ``module`` have only its body switched, its functions to be switched at the
    first call of one of them (``lazy_mode.arm_module``): the hook was installed ``lazy``,
    a context is active, a function watcher is there to arm the functions (3.12+, the C
    accelerators), and it is not the program's main module."""
    return _lazy and switch.active() and module not in MAIN_MODULES and lazy_mode.watcher() is not None


def _made(plain: CodeType, module: str, light: bool, armed: bool) -> tuple[CodeType, bool]:
    """``plain`` light, with only its body switched (``armed``) or switched, and whether
    that was made (not so when rewriting failed, with a warning, or switching found nothing
    to rewrite: then ``plain`` itself).  Light code is the compiled code (``lazy_mode``):
    neither ``bytecode`` nor the rewriter is imported for it."""
    if light:
        return plain, True
    if armed:  # (made even where the body has no call of its own: the functions it defines wait)
        if _names.nothing_to_rewrite(plain):
            return plain, False
        switch.install_builtins()
        from . import dual_code  # (``bytecode`` with it)

        body = _rewritten_or_warn(plain, module, dual_code.switched_body)
        return (plain, False) if body is None else (body, True)
    switched = switch_or_warn(plain, module)
    return switched, switched is not plain


def _handed_out(code: CodeType, plain: CodeType, made: bool, light: bool, armed: bool, module: str,
                source_path: str | None = None, basis: code_cache.Basis | None = None) -> CodeType:
    """``code``, about to run: if it is light, made to wait for a context; if it is
    ``plain`` with its body switched (``armed``), the functions it makes are armed, to be
    switched at the first call of one of them.  Where the source and the ``.pyc`` of
    CPython's it is the code of are known, their switched code will be cached."""
    if made and light:
        lazy_mode.wait_for_context(lazy_mode.LightModule(module, plain, source_path, basis, OPTIONS))
    elif made and armed:
        lazy_mode.arm_module(lazy_mode.LightModule(module, plain, source_path, basis, OPTIONS))
    return code


def switch_or_warn(code: CodeType, module: str) -> CodeType:
    """``code`` switched; on failure, ``code`` itself, with one warning naming the module.

    Running out of stack or memory is no failure of the code: it propagates, as it would
    from the plain import (the import fails, and can be tried again).

    The hooks switched code loads are put among the builtins when it is first made here
    (or read from the cache), not when the hook is installed: they come with the
    generics and the hot path, which a program that imports nothing to rewrite never
    needs (``python -m cassette_hook -c pass``).
    """
    if _names.nothing_to_rewrite(code):
        return code
    switch.install_builtins()
    from . import dual_code  # (``bytecode`` with it: imported when something is rewritten)

    switched = _rewritten_or_warn(code, module, dual_code.switched)
    return code if switched is None else switched


def _rewritten_or_warn(code: CodeType, module: str,
                       rewrite_module: Callable[[CodeType, str], CodeType]) -> CodeType | None:
    """``rewrite_module(code, module)``, or ``None`` (and a warning) if it fails."""
    _debug.progress.begin(module)
    try:
        try:
            with recursion_budget.headroom(rewrite.HEADROOM):
                return rewrite_module(code, module)
        finally:
            _debug.progress.end()  # (before anything else is said on stderr)
    except rewrite.RESOURCE_ERRORS:
        raise
    except Exception as exc:  # never break an import: run it as compiled
        if _debug.imports:
            _debug.say("import", f"{module}: rewrite failed: {exc}; imported unrewritten")
        warnings.warn(f"cassette_hook: cannot instrument module {module!r}: {exc}; it is imported unrewritten",
                      RuntimeWarning, stacklevel=3)  # (the caller of switch_or_warn or _made)
        return None


# -- installing ------------------------------------------------------------------------

def install(include: Iterable[str] = (), exclude: Iterable[str] = (), *, lazy: bool = True) -> SwitchingFinder:
    """Instrument the modules matching ``include`` and not ``exclude`` as they are imported.

    ``lazy`` (the default): while no context is active, import them as compiled (but for
    the functions their functions define) and switch their functions when a context is
    first activated, so an import costs little more than a plain one and idle code runs
    as compiled until then (see ``lazy_mode``).  ``lazy=False`` switches every module as it
    is imported: the first activation then costs nothing, and the few things lazy cannot
    reach (docs/importhook.md) are reached.

    Installing again replaces the patterns and ``lazy`` (the finder stays single).
    Modules imported before stay as they are: :func:`instrument` them.  Returns the finder.
    """
    global _lazy
    if not isinstance(lazy, bool):
        raise TypeError(f"install(lazy=...) takes True or False, not {lazy!r}")
    _lazy = lazy
    patterns = Patterns(include, exclude)
    for finder in sys.meta_path:
        if isinstance(finder, SwitchingFinder):
            finder.patterns = patterns
            return finder
    finder = SwitchingFinder(patterns)
    sys.meta_path.insert(0, finder)
    return finder


def uninstall() -> None:
    """Remove the import hook; modules it instrumented stay instrumented (and idle, cheap)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, SwitchingFinder)]


def installed() -> Patterns | None:
    """The patterns of the installed hook, or ``None``."""
    return next((f.patterns for f in sys.meta_path if isinstance(f, SwitchingFinder)), None)


# -- instrumenting objects already imported --------------------------------------------

def instrument(obj: T) -> T:
    """Give ``obj`` -- a module, class or function imported before the hook -- switched
    code, in place, and return it.

    A module's functions and classes (those defined in it), a class's methods, static and
    class methods, properties and nested classes, and the functions a function defines
    when it runs later, all get it.  Objects of cassette_hook itself are refused.
    """
    if isinstance(obj, ModuleType):
        _instrument_module(obj, track=False)
    elif isinstance(obj, (type, FunctionType, MethodType, staticmethod, classmethod, property)):
        _instrument_member(obj, set())
    else:
        raise TypeError(f"instrument() takes a module, class or function, not {type(obj).__name__}: {obj!r}")
    return obj


def instrument_until_idle(module: ModuleType) -> None:
    """:func:`instrument` ``module``, its functions tracked as those an activation switches
    in a light module are (``lazy_mode.track``): given their compiled code back when the
    process goes idle, and switched again by the next activation.  For ``attach``, which
    instruments a running program for a while and leaves it as it was."""
    _instrument_module(module, track=True)


def _instrument_module(module: ModuleType, track: bool) -> None:
    _refuse_own(module.__name__, module)
    for value in list(vars(module).values()):
        if getattr(value, "__module__", None) == module.__name__ and isinstance(value, (type, FunctionType)):
            _instrument_member(value, set(), track)


def _instrument_member(obj: Any, seen: set[int], track: bool = False) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, (MethodType, staticmethod, classmethod)):
        _instrument_member(obj.__func__, seen, track)
    elif isinstance(obj, property):
        for accessor in (obj.fget, obj.fset, obj.fdel):
            if accessor is not None:
                _instrument_member(accessor, seen, track)
    elif isinstance(obj, FunctionType):
        _instrument_function(obj, track)
    elif isinstance(obj, type):
        _refuse_own(obj.__module__, obj)
        for value in list(vars(obj).values()):
            if isinstance(value, type) and not value.__qualname__.startswith(obj.__qualname__ + "."):
                continue  # a class merely referenced from this one
            if isinstance(value, (type, FunctionType, staticmethod, classmethod, property)):
                _instrument_member(value, seen, track)


_switched_codes: dict[int, tuple[CodeType, CodeType]] = {}  # id(plain) -> (plain, switched)


def _instrument_function(func: FunctionType, track: bool = False) -> None:
    module = func.__module__ if isinstance(func.__module__, str) else "?"
    _refuse_own(module, func)
    code = func.__code__
    if _names.is_switched(code):
        return
    known = _switched_codes.get(id(code))
    if known is None:
        known = _switched_codes[id(code)] = (code, switch_or_warn(code, module))
    lazy_mode.set_code(func, known[1])
    if track and known[1] is not code:
        lazy_mode.track(func, code, known[1])
    switch.keep_at_shutdown(func)  # its globals: a module's, or any dict exec gave it


def _refuse_own(module: str, obj: object) -> None:
    if _NEVER.matches(module):
        raise ValueError(f"cassette_hook does not instrument its own code or what it runs on: {obj!r}")


# -- patterns --------------------------------------------------------------------------

def _check_patterns(patterns: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(patterns, str):
        raise TypeError(f"{what} takes a list of patterns, not the string {patterns!r}")
    checked = tuple(patterns)
    for pattern in checked:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{what}: a pattern must be a non-empty string, not {pattern!r}")
    return tuple(os.path.realpath(p) if _is_path(p) else p for p in checked)


def _is_path(pattern: str) -> bool:
    return os.sep in pattern or "/" in pattern or pattern in (".", "..")


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(os.path.join(directory, ""))
