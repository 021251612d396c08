"""Light code at import; switched code once a context is active.

While no context is active anywhere, the import hook hands out *light* code: the module
as compiled.  Idle, that code is the program's own, so it runs at its speed, and
importing it costs about what compiling does (not 15-25 times that); most processes that
import instrumented code never activate a context.

When a context is next activated (as its stack entry is made, before its body runs),
:func:`switch_waiting` finds every function made from a light module's code among all
live objects, since any of them may be called from anywhere under the context (a
decorator's closure, a registry, a bound method), and readies it to run its switched
code: made then, or read from the cache (``code_cache.FUNCTIONS``).  A running frame keeps the
code it started with, as a running frame of switched code keeps the body it chose; a
frame's code cannot be exchanged, so a function must hold its switched code before it
is entered.  How:

- On CPython 3.12+ with the C accelerators (``_watch.c``), the activation *arms* the
  functions, and the first call of one of them switches its module: see "switched at the
  first call" below.  A program runs few of the modules it imports.
- Elsewhere (3.10, 3.11, the pure-Python path) there is no way to catch a first call
  before its frame exists, and the activation switches them all.

A module imported while a context is active runs only its body switched, and its
functions are armed as they are made (:func:`arm_module`, 3.12+ with ``_watch.c``; elsewhere
it is switched at import); reading ``__code__`` of an armed function gives it its switched
code first (:func:`code_read`), so that what a decorator records at import is what runs.

From then on the module is as if imported switched, but that when the process goes idle
for long the functions get their light code back (see "the compiled code again while no
context is active" below).

A frame that was running at the activation goes on making functions from its light
code's constants: the closures of a ``with ctx:`` block's body, the rest of a module body
that activated a context.  With ``_watch.c``, a function watcher arms each function made
from a light function's code as it is made, or gives it the switched code once its module
is switched.  Elsewhere those functions stay light: the frame that makes them runs its
plain body anyway, and what it hands them to reaches them through call sites, which
overdub them.  Switching every nested function at import instead, to cover that case, was
most of the cost of a cold import of a package with many closures (``docs/internals.md``).
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import gc
import sys
import time
import warnings
import weakref
from types import CodeType, FunctionType

from .._locks import rlock
from .. import context_stack, _debug, _native, rewrite
from ..runtime import standins
from . import code_cache, switch
from .._budget import recursion_budget
from ..rewrite import _names

TYPE_CHECKING = False  # (typing's would import typing at every start, as importhook says)
if TYPE_CHECKING:
    from typing import Any, Callable

_switching = rlock()  # another thread activating, or first-calling a module being switched, waits for it
_UNLOADED = object()
_watch: Any = _UNLOADED  # the function watcher: ``_watch.c``, or None where there is none


def watcher() -> Any:
    """The function watcher (``_watch.c``: 3.12+, with the C accelerators), or None.  Loaded
    by the first light import, not with the package: from then on it looks at every
    function the process makes."""
    global _watch
    if _watch is _UNLOADED:
        _watch = _native.optional(".importhook._watch")
    return _watch


def set_code(func: FunctionType, code: CodeType) -> None:
    """``func.__code__ = code``, leaving calls to ``func`` as specializable as they were:
    CPython 3.13 versions a function (what specialized calls guard on) only as it is made,
    and the C accelerators give an assigned one the version of its new code
    (``_speedups.set_code``); the pure-Python path on 3.13 cannot."""
    _native.runtime.set_code(func, code)  # (an activation has chosen it; ch.instrument may choose it here)


class LightModule:
    """A module imported light, waiting for a context.  Where its source is known
    (``source_path``) and so is the ``.pyc`` of CPython's whose code it runs (``basis``), its
    switched functions are cached (``code_cache.FUNCTIONS``, keyed on that ``.pyc`` and the
    rewriting ``options``); the file's name and header are worked out at the activation,
    not at every import of a module that may never be switched."""

    __slots__ = ("name", "code", "source_path", "basis", "options")

    def __init__(self, name: str, code: CodeType, source_path: str | None = None,
                 basis: code_cache.Basis | None = None, options: str = "") -> None:
        self.name, self.code = name, code
        self.source_path, self.basis, self.options = source_path, basis, options

    def cached_functions(self, light: list[CodeType]) -> tuple[list[CodeType | None] | None, str, str | None]:
        """The switched code of each of ``light`` from the cache, None for each one not
        switched yet (functions switched alone at their first call are cached one by one),
        or None if no cache file holds this module's; what was found there, in words; and
        the cache file's path (None: no cache for this module)."""
        found = "none"
        cache = None if self.source_path is None else code_cache.path_for(self.source_path, code_cache.FUNCTIONS)
        if cache is not None and self.basis is not None:
            key = code_cache.key(self.basis, self.name, self.options, code_cache.FUNCTIONS)
            cached, found = code_cache.read(cache, key)
            if isinstance(cached, tuple) and _same_functions(cached, light):
                return list(cached), found, cache
        return None, found, cache

    def switched_functions(self, light: list[CodeType]) -> list[CodeType]:
        """The switched code of each of ``light`` (this module's :func:`functions`, nested
        ones too), or the light code itself where it cannot be switched: read from the
        cache, and made for those it does not hold (the cache then holds them too)."""
        cached, found, cache = self.cached_functions(light)
        missing = [index for index in range(len(light)) if cached is None or cached[index] is None]
        if cached is not None and not missing:
            if _debug.imports:
                _debug.say("import", f"{self.name}: functions switched; cache hit: {cache}")
            return [code for code in cached if code is not None]  # (all of them)
        from . import dual_code  # (``bytecode`` with it)

        _debug.progress.begin(self.name)
        try:
            with recursion_budget.headroom(rewrite.HEADROOM):
                results = dual_code.switched_functions([light[index] for index in missing], self.name)
        finally:
            _debug.progress.end()
        failed = [result for result in results if isinstance(result, Exception)]
        entries = _merged(cached, len(light), {index: result for index, result in zip(missing, results)
                                               if not isinstance(result, Exception)})
        written = "not cached"
        if failed:
            warnings.warn(f"cassette_hook: cannot instrument {len(failed)} function(s) of module {self.name!r}: "
                          f"{failed[0]}; they run unrewritten", RuntimeWarning, stacklevel=2)
        elif cache is not None:
            written = code_cache.write(cache, tuple(entries), self.basis, self.name, self.options,
                                       code_cache.FUNCTIONS)
        if _debug.imports:
            _debug.say("import", f"{self.name}: functions switched ({len(missing)} of {len(light)} made); "
                                 f"cache {found}, {written}")
        return [code if switched is None else switched for code, switched in zip(light, entries)]

    def keep(self, light: list[CodeType], made: dict[int, CodeType]) -> None:
        """Add ``made`` (the switched code of ``light[index]`` for each index) to the cache
        file, with what it holds now (another process may have added to it meanwhile): one
        file, written whole and renamed into place (``code_cache.write``)."""
        cached, found, cache = self.cached_functions(light)
        if cache is None:
            return
        entries = _merged(cached, len(light), made)
        written = code_cache.write(cache, tuple(entries), self.basis, self.name, self.options, code_cache.FUNCTIONS)
        if _debug.imports:
            _debug.say("import", f"{self.name}: {len(made)} function(s) switched alone kept; "
                                 f"cache {found}, {written}: {cache}")


def _merged(cached: list[CodeType | None] | None, count: int, made: dict[int, CodeType]) -> list[CodeType | None]:
    """A ``.functions`` file's entries for ``count`` functions: what it held (None for a
    function not switched yet; all None without a file), with ``made`` put in by place."""
    entries: list[CodeType | None] = [None] * count if cached is None else cached
    for index, code in made.items():
        entries[index] = code
    return entries


def functions(code: CodeType) -> list[CodeType]:
    """The code of the functions a light module's code makes -- those its body and its
    class bodies define, and those they define in turn -- in a fixed order (depth first)."""
    found: list[CodeType] = []

    def walk(code: CodeType) -> None:
        for const in code.co_consts:
            if isinstance(const, CodeType):
                if not _names.is_part(const):
                    found.append(const)
                walk(const)

    walk(code)
    return found


def _same_functions(cached: tuple[CodeType | None, ...], light: list[CodeType]) -> bool:
    """Does the cache file hold one entry per light function, in order (each a switched
    code, or None for a function not switched yet)?"""
    return len(cached) == len(light) and all(
        a is None or a.co_name == b.co_name and a.co_firstlineno == b.co_firstlineno for a, b in zip(cached, light))


_waiting: list[LightModule] = []  # each module imported light, until switched
_waiting_lock = rlock()  # re-entrant: an entry may die in a collection while it is held


def wait_for_context(module: LightModule) -> None:
    """Have ``module`` switched when a context is next activated; meanwhile a ``__code__``
    read of one of its functions switches that function first (:func:`code_read`)."""
    with _waiting_lock:
        _waiting.append(module)
    watch = watcher()
    if watch is not None:
        _idle_light[module.name] = module
        _read_modules.add(module.name)
        _catch_reads(watch)


def waiting() -> list[LightModule]:
    """The modules waiting to be switched.  They wait until :func:`switched` says they
    are done, so that another thread's activation meanwhile waits for them too."""
    with _waiting_lock:
        return _waiting[:]


def switched(modules: list[LightModule]) -> None:
    """``modules`` (from :func:`waiting`) no longer wait."""
    done = {id(module) for module in modules}
    with _waiting_lock:
        _waiting[:] = list(module for module in _waiting if id(module) not in done)  # (not a comprehension: _locks)
        _forget_idle(modules)


def _forget_idle(modules: list[LightModule]) -> None:
    # (a loop of its own, not under the ``with`` above: docs/internals.md, "Loops under a
    # ``with`` block on 3.13 and 3.14")
    for module in modules:
        if _idle_light.get(module.name) is module:
            del _idle_light[module.name]


def switch_waiting() -> None:
    """Give every function made from the code of a module imported light its switched
    code (see the module's docstring).  One pass over the live objects for all the
    modules imported since the last activation."""
    with _switching:
        modules = waiting()
        if modules:
            _switch_functions(modules)
            switched(modules)


def _entry_made(entry: context_stack.Entry) -> None:
    if _waiting:  # modules imported light: switched before the context's body runs
        switch_waiting()


context_stack.watch_entries(_entry_made)


def _switch_functions(waiting: list[LightModule]) -> None:
    switch.install_builtins()
    watch = watcher()
    if watch is not None:
        _arm(waiting, watch)
        return
    replacement: dict[int, tuple[CodeType, CodeType]] = {}  # id(light code) -> (it, switched code)
    for module in waiting:
        light = functions(module.code)
        if not light:
            continue  # (constants and imports only: nothing to switch, nor to cache)
        for code, switched in zip(light, module.switched_functions(light)):
            if switched is not code:
                replacement[id(code)] = (code, switched)
    _switched_of.update(replacement)  # what their light code makes while idle, for the activation after a restore
    _switch_live(replacement)


def _switch_live(replacement: dict[int, tuple[CodeType, CodeType]]) -> None:
    """Give every live function holding one of ``replacement``'s light codes its switched
    code, and track it (one pass over the heap; ``replacement`` keeps its codes, and so
    their ids, alive)."""
    if not replacement:
        return
    _watch_activity()
    for obj in gc.get_objects():
        if type(obj) is FunctionType:
            known = replacement.get(id(obj.__code__))
            if known is not None:
                set_code(obj, known[1])
                _switched_by_activations.append((weakref.ref(obj), *known))


# -- switched at the first call of one of its functions (with a function watcher) ---------
# A program rarely runs more than a few of the functions it imports (a networkx script
# calls functions of 13 of its 286 modules, and few of theirs), so where a function watcher
# is, the activation only *arms* the functions of the waiting modules (``_watch.arm``: their
# vectorcall slot), and the first call of one of them -- from a call site, from C, or as a
# plan makes its twin -- switches that function's code alone.  The trampoline is C, so the
# callee's frame has its caller's below it; what it runs here is a frame of ours, under none
# of the program's.  Functions made from an armed module's code before it is switched are
# armed as they are made.  What a run switches is kept in the module's ``.functions`` cache
# (written at exit, :func:`keep_made`), so that the next run switches it from there.

class _Armed:
    """A light module whose functions wait for their first call; ``at_import``: imported
    while a context was active (:func:`arm_module`), its functions are then given their
    switched code for good, as if it had been switched at import."""

    __slots__ = ("module", "light", "at_import", "switching", "_cached", "_index", "made")

    def __init__(self, module: LightModule, light: list[CodeType], at_import: bool) -> None:
        self.module, self.light, self.at_import = module, light, at_import
        self.switching = False  # (by the thread holding _switching: a call it makes meanwhile runs light)
        self._cached: list[CodeType | None] | None = None  # the cache file's entries, read at the first switch
        self._index = {id(code): index for index, code in enumerate(light)}  # id(light code) -> its place in ``light``
        self.made: dict[int, CodeType] = {}  # place in ``light`` -> switched code made this run, not cached yet

    def cached(self, light: CodeType) -> CodeType | None:
        """``light``'s switched code from the module's cache file (read once), or None."""
        if self._cached is None:
            cached, _, _ = self.module.cached_functions(self.light)
            self._cached = [] if cached is None else cached
        return self._cached[self._index[id(light)]] if self._cached else None

    def holds(self, code: CodeType) -> bool:
        """Is ``code`` one of this module's light function codes?"""
        index = self._index.get(id(code))
        return index is not None and self.light[index] is code

    def made_now(self, light: CodeType, switched: CodeType) -> None:
        """``switched`` was made for ``light`` this run: kept in the cache at exit, where one
        can be written (none is where ``sys.dont_write_bytecode``: every run makes it again)."""
        module = self.module
        if module.source_path is None or module.basis is None or sys.dont_write_bytecode:
            return
        self.made[self._index[id(light)]] = switched
        if not _unkept:
            import atexit  # (built in: no import cost)

            atexit.register(keep_made)
        _unkept[id(self)] = self


_armed: dict[int, tuple[CodeType, _Armed]] = {}  # id(light code) -> (it, its module), until it is switched
_for_good: dict[int, CodeType] = {}  # id(light code) -> it, for the modules armed at import once switched
_unkept: dict[int, _Armed] = {}  # the modules with switched code made this run, not yet in their cache
_first_calls_caught = False  # are the trampoline's, the plans' and ``__code__``'s callbacks in place?


def keep_made() -> None:
    """Write what this run switched to the modules' caches (at exit: once, not at every
    first call; each module's file whole, with what it held, renamed into place)."""
    with _switching:
        _keep_each(list(_unkept.values()))
        _unkept.clear()


def _keep_each(modules: list[_Armed]) -> None:
    # (a loop of its own, not in the ``with`` above: docs/internals.md, "Loops under a
    # ``with`` block on 3.13 and 3.14")
    for armed in modules:
        if armed.made:
            armed.module.keep(armed.light, armed.made)
            armed.made = {}


def _arm(waiting: list[LightModule], watch: Any) -> None:
    found: set[int] = set()  # (the light codes stay alive in _armed)
    for module in waiting:
        armed = _armed_module(module, watch, at_import=False)
        if armed is not None:
            found.update(id(code) for code in armed.light)
    for obj in gc.get_objects():
        if type(obj) is FunctionType and id(watch.code_of(obj)) in found:  # (not obj.__code__: that would switch it)
            watch.arm(obj)


def arm_module(module: LightModule) -> None:
    """``module``, imported while a context is active, is about to run its body switched
    with the functions it defines as compiled (``dual_code.switched_body``): the functions
    it makes are armed as they are made, and each switched at its first call, or as its
    ``__code__`` is read (``_watch.c``), for good."""
    with _switching:
        _armed_module(module, watcher(), at_import=True)


def _armed_module(module: LightModule, watch: Any, at_import: bool) -> _Armed | None:
    """The functions made from now on from ``module``'s light function code are armed (the
    caller holds ``_switching``); None if it makes none."""
    global _first_calls_caught
    light = functions(module.code)
    if not light:
        return None
    if not _first_calls_caught:
        watch.set_first_call(first_call)
        _catch_reads(watch)
        from ..runtime import plan  # (the runtime: loaded by the activation, or the active context)

        plan.switch_before_twin = first_call
        _watch_activity()
        _first_calls_caught = True
    armed = _read_before.pop(id(module), None) or _Armed(module, light, at_import)
    for code in light:
        _armed[id(code)] = (code, armed)
        watch.arm_at_creation(code)
    return armed


def first_call(function: FunctionType) -> None:
    """``function`` is called for the first time since it was armed (``_watch``'s
    trampoline), or a plan is making its twin: switch its code if it waits (:func:`_switch`),
    and give it its switched code.  A function that cannot be switched runs light, with a
    warning."""
    watch = watcher()
    if watch is None or _finalizing(watch, function):
        return
    code = watch.code_of(function)
    known = _armed.get(id(code))
    if known is not None and known[0] is code:  # (else switched already, or never waited)
        with _switching:
            if known[1].switching:
                return  # reached by the switching of its own module: light, this once
            if id(code) in _armed:  # (not switched by another thread meanwhile)
                _switch(known[1], code)
    _give(function, code, watch.switched_of(code))


def code_read(function: FunctionType) -> None:
    """The ``__code__`` of ``function`` is being read (``_watch.c``'s getter), and it is armed
    or of a module imported light: give it the code it will run from now on, so that what
    is read is what its frames will run.

    An armed function first gets what its first call would give it.  Its code alone is
    switched, as at a first call: decorators read ``__code__`` as a module is imported
    (networkx's ``argmap`` through ``inspect.isgeneratorfunction``, ``inspect.signature``),
    and switching the module of each would switch most of what a program imports, which
    arming them is there to save.

    Then, unless the reader is one that looks at a code's attributes without keeping the
    code (:data:`KEEPS_NO_CODE`), the function's code is settled for good
    (:func:`_settle_read`): a decorator may keep it (jinja2's ``@internalcode`` puts it in
    a set, and its tracebacks leave out the frames running a code of the set), and a
    function whose code changed later would run code the program never saw -- switched at
    the next activation, or given back its compiled code while idle."""
    watch = watcher()
    if watch is None:
        return  # (the watcher taken away by a test: nothing is armed or switched at reads)
    if watch.armed(function):
        first_call(function)
    try:
        reader = _frame_at(1).f_globals.get("__name__")
    except ValueError:  # (read by C with no frame of Python's below: not an introspection module's)
        reader = None
    if type(reader) is str and (reader in KEEPS_NO_CODE or reader.partition(".")[0] == "cassette_hook"):
        return
    _settle_read(function, watch)


KEEPS_NO_CODE = frozenset({"inspect", "typing", "dis"})
"""The modules whose ``__code__`` reads leave a function's code free to change: the standard
library's introspection reads a code's attributes (flags, names, first line), which a
function's switched code shares with its compiled code, and keeps no code object."""

_frame_at = sys._getframe  # (bound now: a program may delete sys._getframe)
_read_modules: set[str] = set()  # the modules imported light: ``_watch``'s getter calls code_read for their functions
_idle_light: dict[str, LightModule] = {}  # module name -> the module imported light while idle, last
_read_before: dict[int, _Armed] = {}  # id(waiting module) -> its functions switched at reads, until it is armed
_reads_caught = False


def _catch_reads(watch: Any) -> None:
    """Have ``_watch``'s getter of ``__code__`` call :func:`code_read` (from the first module
    imported light, or the first arming, on)."""
    global _reads_caught
    if not _reads_caught:
        watch.set_code_read(code_read, _read_modules)
        _reads_caught = True


def _settle_read(function: FunctionType, watch: Any) -> None:
    """``function``'s ``__code__`` is read by the program: it gets the code it will run for
    good -- its switched code, made now if need be, where its code is light and can be
    switched -- and no activation or idle spell changes it again."""
    if _finalizing(watch, function):
        return
    code = watch.code_of(function)
    with _switching:
        light, switched = _light_and_switched(function, code)
        if light is None:
            return
        _for_good[id(light)] = light
        if switched is not None and code is light:
            watch.disarm(function)
            set_code(function, switched)


def _light_and_switched(function: FunctionType, code: CodeType) -> tuple[CodeType | None, CodeType | None]:
    """The light code ``function`` was made from and its switched code (switched now where it
    was not yet; None where it cannot be), if ``code`` (the code it holds) is either; (None,
    None) for a function whose code cassette_hook does not change."""
    known = _armed.get(id(code))
    if known is not None and known[0] is code:  # armed: its module was waiting at an activation
        return _switched_for_read(known[1], code)
    switched = watcher().switched_of(code)
    if switched is not None:
        return code, switched
    module = _idle_light.get(function.__module__)  # (a light module's functions have its name)
    if module is not None and module in _waiting:
        armed = _read_before.get(id(module))
        if armed is None:
            armed = _read_before[id(module)] = _Armed(module, functions(module.code), at_import=False)
        if armed.holds(code):
            return _switched_for_read(armed, code)
    for ref, light, switched in _switched_by_activations:  # switched by an activation (code), or given it back
        if ref() is function and code in (light, switched):
            return light, switched
    return None, None


def _switched_for_read(armed: _Armed, light: CodeType) -> tuple[CodeType | None, CodeType | None]:
    """``light`` switched for a read of a function made from it, as at a first call."""
    if armed.switching:
        return None, None  # read by what its own switching runs: left free, as a first call then is
    _switch(armed, light)
    return light, watcher().switched_of(light)


def _qualname(code: CodeType) -> str:
    if sys.version_info >= (3, 11):
        return code.co_qualname
    return code.co_name  # (3.10 has no co_qualname; nor is anything switched alone there)


def _finalizing(watch: Any, function: FunctionType) -> bool:
    """Is the interpreter tearing down (a finalizer, a weakref callback)?  Then ``function``
    is disarmed and keeps its compiled code: the builtins are CPython's startup copy, so
    nothing can be switched (docs/importhook.md, "At interpreter shutdown"), and no
    context is active to see its calls."""
    if not sys.is_finalizing():
        return False
    watch.disarm(function)
    return True


def _switch(armed: _Armed, light: CodeType) -> None:
    """Switch one light function code of an armed module (the caller holds ``_switching``):
    every function made from it gets that switched code (``_watch``: a code is switched
    once), the cache's where the module's ``.functions`` file holds it, else made now and
    kept there at exit.  Not the module's other functions: a program runs few of the
    functions of the modules it calls (sympy's first run under a context switched 61
    modules, 3,900 functions, at first calls, 5.4 s of CPU, most of them never run)."""
    if watcher().switched_of(light) is not None:  # (switched already: its ``__code__`` was read while idle)
        _armed.pop(id(light), None)
        return
    switched = armed.cached(light)
    if switched is not None:
        said = "cache hit"
    else:
        switched, said = _made(armed, light), "made"
    _armed.pop(id(light), None)
    if armed.at_import:
        _for_good[id(light)] = light
    if switched is None:
        watcher().disarm_at_creation(light)
    else:
        watcher().switch_at_creation(light, switched)
    if _debug.imports:
        _debug.say("import", f"{armed.module.name}: {_qualname(light)} switched at its first call; {said}")


def _made(armed: _Armed, light: CodeType) -> CodeType | None:
    """``light`` switched (None, with a warning, where it cannot be), kept for the cache.  A
    ``KeyboardInterrupt`` reaches the program's call, and the function stays armed."""
    from . import dual_code  # (``bytecode`` with it)

    armed.switching = True
    try:
        with recursion_budget.headroom(rewrite.HEADROOM):
            made = dual_code.switched_functions([light], armed.module.name)[0]
    except Exception as error:  # (at a call of the program's: it runs light, as code that cannot be rewritten)
        made = error
    finally:
        armed.switching = False
    if isinstance(made, Exception):
        warnings.warn(f"cassette_hook: cannot instrument function {_qualname(light)!r} of module "
                      f"{armed.module.name!r}: {made!r}; it runs unrewritten", RuntimeWarning, stacklevel=4)
        return None
    armed.made_now(light, made)
    return made


def _give(function: FunctionType, light: CodeType, switched: CodeType | None) -> None:
    """Disarm ``function`` and give it ``switched``, tracked as the activations' functions
    are; first called while no context is active, it keeps its compiled code until the next
    activation switches the tracked functions (as after a restore).  A function of a
    module armed at import gets ``switched`` for good, untracked, as if switched at import:
    a ``__code__`` read under the context (a decorator's) stays what it runs."""
    global _restored
    watch = watcher()
    watch.disarm(function)
    if switched is not None and watch.code_of(function) is light:
        if _for_good.get(id(light)) is light:
            set_code(function, switched)
            return
        if switch.active():
            set_code(function, switched)
        else:
            _restored = True
        _switched_by_activations.append((weakref.ref(function), light, switched))


# -- the compiled code again while no context is active ------------------------------------
# Idle, switched code costs a check per call (3-5% of a run, up to 25% for code made of
# tiny functions).  So when the last live entry goes, the functions an activation switched
# get their light code back, and the next activation switches them again: a pass over
# them each way, which is only worth it when the process stays idle for a while.  How long
# it will cannot be known; how long it stayed idle last time can, so the functions are
# given back their light code when the last idle spell lasted RESTORE_AFTER times what the
# last pass cost (and the first time the process goes idle), which keeps the passes to
# about 2 / RESTORE_AFTER of the time spent idle where spells are alike, and off when
# contexts come and go in a loop.  The closures that restored code makes while idle come
# out switched where a function watcher is (its marks on the light code stay); elsewhere
# the next activation finds them with a pass over the heap, as the first one did.
# Functions the watcher switched as they were made are not tracked, and stay switched.
# The stand-ins ``standins`` puts in the program's classes follow the same rule (and on
# the pure-Python path leave at every idle: see ``standins.idle``).

RESTORE_AFTER: float | None = 100.0
"""The idle spell, in passes' time, that makes the next one worth a pass; ``None``: never."""

_switched_by_activations: list[tuple[weakref.ref[FunctionType], CodeType, CodeType]] = []  # (f, light, switched)
_switched_of: dict[int, tuple[CodeType, CodeType]] = {}  # without a watcher: every activation's replacement
_restored = False  # do the functions of _switched_by_activations hold their light code now?
_pass_seconds = 0.0  # what the last pass over them took
_idle_since: float | None = None  # when the last live entry went
_last_idle: float | None = None  # how long the process then stayed idle (None: it has not been yet)


def track(function: FunctionType, light: CodeType, switched: CodeType) -> None:
    """Track ``function``, given ``switched`` in place of its ``light`` code by
    ``finder.instrument_until_idle``, as the activations' functions are: its compiled
    code back while idle, its switched code again at the next activation (without a
    function watcher, what ``light`` makes meanwhile too)."""
    _watch_activity()
    _switched_by_activations.append((weakref.ref(function), light, switched))
    _switched_of[id(light)] = (light, switched)


def give_back() -> None:
    """Give the tracked functions their compiled code now, if no context is active: where
    a program is left as it was (``attach``), rather than when the idle spells say it pays
    (which may be never: contexts that came and went fast)."""
    global _restored
    with _switching:
        if not switch.active() and not _restored and (_switched_by_activations or standins.tracked()):
            _restored = True
            _timed(_restore)


def _busy() -> None:
    global _last_idle, _restored
    standins.busy()
    if _idle_since is not None:
        _last_idle = time.perf_counter() - _idle_since
    if _restored:
        _timed(_switch_again)
        _restored = False


def _idle() -> None:
    global _idle_since, _restored
    _idle_since = time.perf_counter()
    if (_switched_by_activations or standins.tracked()) and RESTORE_AFTER is not None and (
            _last_idle is None or _last_idle >= RESTORE_AFTER * _pass_seconds):
        _restored = True  # (first: an interrupt in the pass leaves the next busy() to switch them all again)
        _timed(_restore)
    else:
        standins.idle(give_back=False)


def _restore() -> None:
    _give_each(switched=False)
    standins.idle(give_back=True)


def _timed(one_pass: Callable[[], None]) -> None:
    global _pass_seconds
    start = time.perf_counter()
    one_pass()
    _pass_seconds = time.perf_counter() - start


def _switch_again() -> None:
    """Switch the functions the last idle spell restored, before the context's body runs;
    without a watcher, also those their light code made meanwhile: one pass over the heap
    finds both."""
    if watcher() is not None:
        _give_each(switched=True)
    else:
        _switched_by_activations.clear()
        _switch_live(_switched_of)


def _give_each(switched: bool) -> None:
    """Give each function of ``_switched_by_activations`` its switched (or light) code.  One
    whose code the program has replaced meanwhile keeps it, and is no longer tracked."""
    kept = []
    watch = watcher()
    code_of = _code_attribute if watch is None else watch.code_of  # (not through the getter: code_read)
    for tracked in _switched_by_activations:
        ref, light, switched_code = tracked
        function = ref()
        if function is None:
            continue
        if _for_good.get(id(light)) is light:  # (its ``__code__`` was read: it keeps switched_code)
            continue
        old, new = (light, switched_code) if switched else (switched_code, light)
        code = code_of(function)
        if code is old:
            set_code(function, new)
        elif code is not new:
            continue
        kept.append(tracked)
    _switched_by_activations[:] = kept


def _code_attribute(function: FunctionType) -> CodeType:
    return function.__code__


_watching_activity = False


def _watch_activity() -> None:
    """Have :func:`_busy` and :func:`_idle` called from the first function switched (or the
    first class given stand-ins, ``standins``) on: they cost an activation about 0.3 µs,
    which a process with nothing to restore need not pay."""
    global _watching_activity
    if not _watching_activity:
        _watching_activity = True
        switch.watch_activity(_busy, _idle)


standins.when_tracking(_watch_activity)  # (the stand-ins in the classes of modules a context reached)
