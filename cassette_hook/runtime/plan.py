"""What a context class runs with: which hooks it overloads, and the twins of functions.

A *twin* is a copy of a Python function whose code has been rewritten so that its call
sites go through :mod:`cassette_hook.runtime.callsites`.  It shares the original's globals,
closure cells and defaults, so running it is running the original body, overdubbed.
The user's function object is never modified.

Twins are cached per (plan, function), rewritten code per (variant, code object); both
caches are keyed by ``id`` and emptied by weak-reference callbacks, so a function or code
object that is garbage collected releases its twin.  A twin shares its function's closure
cells, and a cell may lead back to the function (a recursive inner function, a method's
``__class__`` cell): the cache would then keep the function alive for ever.  So every full
garbage collection starts by dropping all twins, letting such cycles go; the survivors' twins
are remade on their next call, from the cached rewritten code.  A :class:`Plan` is shared by all
contexts of one class with the same pass and hooks switch, and is recomputed after any
overload registration on the context generics.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__, function_with_builtins  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import builtins
import gc
import warnings
import weakref
from types import (BuiltinMethodType, ClassMethodDescriptorType, CodeType, FunctionType, MethodDescriptorType,
                   MethodWrapperType, ModuleType, WrapperDescriptorType)
from typing import TYPE_CHECKING, Any, Callable

from . import hotpath, primitives, standins
from .. import _native, generics, rewrite
from .._budget import recursion_budget
from .._libraries import LIBRARIES
from .._own import is_own_module
from .._patterns import ModulePatterns
from .._weakid import WeakIdCache
from ..rewrite import _names

if TYPE_CHECKING:
    from ..context_stack import Context

Twin = tuple[FunctionType, CodeType, Any, Any]
# What the twins of a code's functions are made from (Plan.shared): the twin code, and the
# globals, __module__ and builtins of the function whose twin was made, the builtins its
# twin reads, the size of the globals then, and a box where the C hot path keeps the twin
# of the last function of the code it met, while that lives (``_speedups``' ``TwinSlot``:
# a closure made per call is not entered in ``twins``).
Shared = tuple[CodeType, dict[str, Any], Any, Any, Any, int, list[Any]]


# (operators, pass_, enters) -> rewritten code objects; shared by all plans of that variant.
_rewritten: dict[tuple[bool, Any, bool], WeakIdCache[CodeType | None]] = {}
_plans: dict[tuple[type, Any, bool], Plan] = {}


class Plan:
    """Per context class: which overloads exist, and the twins its contexts run."""

    __slots__ = ("fast", "enters", "prehook", "posthook", "raisehook", "overdub", "execute", "fallback", "prehook_call",
                 "posthook_call", "raisehook_call", "overdub_call", "operators", "twins", "direct_twins", "named",
                 "sparse", "named_table", "named_classes", "named_methods", "overloads",
                 "constructions", "constructors", "_in_scope", "_primitives", "_codes", "_modules", "shared",
                 "ctx_type", "pass_", "__weakref__")

    def __init__(self, ctx_type: type[Context], pass_: Any, hooks_enabled: bool) -> None:
        self.prehook = hooks_enabled and generics.prehook.has_methods_for(ctx_type)
        self.posthook = hooks_enabled and generics.posthook.has_methods_for(ctx_type)
        self.raisehook = hooks_enabled and generics.raisehook.has_methods_for(ctx_type)
        self.overdub = generics.overdub.has_methods_for(ctx_type)
        self.execute = generics.execute.has_methods_for(ctx_type)
        self.fallback = generics.fallback.has_methods_for(ctx_type)
        # What a call site calls for each hook, or None: the hook does nothing for this type.
        # A hook that does not depend on the call's arguments is called without dispatch.
        self.prehook_call = (generics.prehook.sole_method(ctx_type, 2) or generics.prehook) if self.prehook else None
        self.posthook_call = ((generics.posthook.sole_method(ctx_type, 3) or generics.posthook)
                              if self.posthook else None)
        self.raisehook_call = ((generics.raisehook.sole_method(ctx_type, 3) or generics.raisehook)
                               if self.raisehook else None)
        # Likewise the overload of every call, when one takes them all (the C path asks
        # ``execute`` only where ``overdub`` has none); else None: dispatch decides.
        self.overdub_call = generics.overdub.sole_method(ctx_type, 2) if self.overdub else None
        # Nothing is observed or replaced: calls only need to be recursed into.  (Not with
        # tagging: primitives must get untagged arguments, from ``fallback``.)
        hooks = self.prehook or self.posthook or self.raisehook
        self.fast = not (hooks or self.overdub or self.execute or self.fallback
                         or getattr(ctx_type, "tags_values", False))
        # The callees the overloads of every generic name (``Is[...]``), and the classes
        # they take as their callee (``f: SomeType``), or None: some overload takes Any or
        # a pattern as its callee (or the context tags values).
        named_callees = (None if self.fast or getattr(ctx_type, "tags_values", False)
                         else _callees_named(ctx_type))
        named_objects, named_classes = named_callees if named_callees is not None else (None, ())
        # A *sparse* plan: each of its overloads and hooks names its callees, so a call of any
        # other callee runs what it runs under a fast plan, and only the named ones go through
        # the hooks and dispatch (``callsites._resolve_direct``; ``direct_run`` in C).
        self.sparse = named_objects is not None
        # Operator sites cost a call each; a context that observes nothing has no use for
        # them, nor a sparse one that names no operator (or a Python dunder C may call).
        self.operators = (bool(ctx_type.operators) and not self.fast
                          and (named_objects is None or _names_operators(named_objects, named_classes)))
        # A prehook is all there is to run around a call (a counting or recording context):
        # the twins' call sites hand ``callsites.enter`` the callee and its arguments, which
        # runs the prehook and gives back the twin for the site's own frame to call, inlined
        # (a ``Site`` would call it from C, in an evaluation loop of its own).  Not with a
        # pass: its twins are the pass's rewrite; nor a sparse plan's: most of its calls
        # run no prehook, and its call sites resolve (an entering site copies its arguments).
        self.enters = (self.prehook and not (self.posthook or self.raisehook or self.overdub or self.execute
                                             or self.fallback or getattr(ctx_type, "tags_values", False))
                       and pass_ is None and not self.sparse)
        # With no hooks, and overloads that name their callees (``Is[...]``: forward-mode AD's
        # rules, mocks), a call of any other Python function only runs its twin: call
        # sites call it directly, as under a fast plan (``direct_twin``).  (A fallback
        # overload that takes any callee still leaves Python functions direct: it runs for
        # callees with no body only.)
        overdubs = generics.overdub.second_arguments_named(ctx_type)
        executes = generics.execute.second_arguments_named(ctx_type)
        direct = self.sparse or not (self.fast or hooks) and overdubs is not None and executes is not None
        # ids of the callees those overloads name: never called directly.
        self.named = (frozenset(named_objects) if named_objects is not None
                      else overdubs | executes if direct else frozenset())  # type: ignore[operator]  # direct: both sets
        # The named callees by id, for the C hot path's look-up by address (``by_id``), under
        # a sparse plan; else None.  ``named_methods``: one of them is C code that a call
        # presents by a method descriptor (``items.append`` as ``list.append``), so every
        # builtin bound to an object goes through the hooks.
        self.named_table = named_objects
        # The classes the overloads take as their callee: a callee that is an instance of
        # one of them is named too (as dispatch decides it: ``issubclass(type(f), cls)``),
        # asked once per function or class (entered in ``direct_twins``), per call for
        # others (``names``; C: ``named_callee``).
        self.named_classes = named_classes
        self.named_methods = named_objects is not None and _names_c_methods(named_objects, named_classes)
        # Under a sparse plan with overloads: id(named callee) -> the ``overdub`` or
        # ``execute`` method every call of it runs, None when none applies (its body runs),
        # or False when dispatch decides per call (an overload constrains the other
        # arguments too); filled at a callee's first call (``callsites.overload_by_callee``),
        # so that a matched overload costs its call, not a dispatch.  Else None.
        self.overloads: dict[int, Any] | None = (
            {} if named_objects is not None and (self.overdub or self.execute) else None)
        # id(function) -> (twin, and the code, defaults and keyword defaults it was made
        # from): a twin is only good while the function still has those.  The hot path
        # reads ``twins.values`` directly.
        self.twins: WeakIdCache[Twin] = WeakIdCache()
        # The twins call sites call directly: all of them under a fast plan; else those
        # ``direct_twin`` found (None for a function that must go through the hooks).
        self.direct_twins: WeakIdCache[Twin | None] | None = WeakIdCache() if direct else None
        if self.fast:
            self.direct_twins = self.twins  # type: ignore[assignment]  # (it holds no None)
        self._primitives: WeakIdCache[bool] = WeakIdCache()  # functions that have no twin
        # id(class) -> how calling it constructs: "python", "metaclass" or "primitive";
        # and for "python" classes, the callable the hot path returns for them (it holds
        # the class weakly, so the cache does not keep the class alive).
        self.constructions: WeakIdCache[str] = WeakIdCache()
        self.constructors: WeakIdCache[Callable[..., Any]] = WeakIdCache()
        self._codes = _rewritten.setdefault((self.operators, pass_, self.enters), WeakIdCache())
        # id(code) -> what the twins of its other functions are made from, once one has its
        # twin (see _make_twin; the C hot path reads ``shared.values`` directly).
        self.shared: WeakIdCache[Shared] = WeakIdCache()
        self._in_scope = _scope_test(ctx_type)  # (module name, is it a library's?) -> may it be recursed into?
        self._modules: dict[str, bool] = {}  # runs_module's answers
        self.ctx_type, self.pass_ = ctx_type, pass_
        _every_plan.add(self)

    def stale(self) -> None:
        """An overload was registered or removed: what this plan found about which
        callees its overloads name no longer holds, so until its contexts are entered
        again (with a new plan) every call they make that it would have made directly
        goes through the hooks and dispatch (as the calls of a plan with hooks always
        did), and the change applies at the next call.  A fast plan is left as it is: a
        context that overloaded nothing when entered keeps calling twins directly."""
        if self.direct_twins is None or self.fast:
            return
        self.named = _EVERY_CALLEE  # (first: a look-up under way finds it named)
        self.sparse, self.named_table, self.named_classes = False, None, ()
        self.overloads = None  # (replaced, not emptied: a fill under way stores into the old one)
        self.direct_twins.clear()

    def runs_module(self, module: str) -> bool:
        """May code of ``module`` run rewritten (the import hook's switch asks, per call)?"""
        known = self._modules.get(module)
        if known is None:  # a switched body's rewritten half has no pass: a pass makes twins only
            known = self._modules[module] = self.pass_ is None and self._in_scope(
                module, lambda: LIBRARIES.is_library_module(module))
        return known

    def recurses_into(self, obj: FunctionType | type) -> bool:
        """May the code of this function or class be recursed into (the context's
        ``include``, ``exclude`` and ``libraries``), rather than run as a primitive?"""
        module = _module_of(obj) if type(obj) is FunctionType else getattr(obj, "__module__", None)
        return self._in_scope(module if type(module) is str else "", lambda: LIBRARIES.defined(obj))

    def twin(self, func: FunctionType) -> FunctionType | None:
        """The overdubbed twin of ``func``, or ``None`` if it must run as a primitive."""
        key = id(func)
        found = self.twins.values.get(key)
        twin: FunctionType | None
        if found is not None:  # current while func keeps the code and defaults it was made from
            twin, code, defaults, kwdefaults = found
            if func.__code__ is code and func.__defaults__ is defaults and func.__kwdefaults__ is kwdefaults:
                return twin
        if key in self._primitives.values:
            return None
        try:
            twin = self._make_twin(func)
        except rewrite.RESOURCE_ERRORS:  # out of stack or memory even so: a primitive this once
            return None
        if twin is None:
            self._primitives.set(func, True)
        else:
            self.twins.set(func, (twin, func.__code__, func.__defaults__, func.__kwdefaults__))
        return twin

    def direct_twin(self, func: FunctionType) -> FunctionType | None:
        """The twin a call site may call in place of ``func`` under this plan (not a fast
        one), or None: calling ``func`` runs more than its twin (a hook, an overload that
        names it), or it has none.  Entered in ``direct_twins`` either way."""
        if self.direct_twins is None:
            return None
        twin = None if self.names(func) else self.twin(func)
        self.enter_direct(func, None if twin is None else self.twins.values[id(func)])
        return twin

    def names(self, callee: object) -> bool:
        """May an overload of this plan apply to calls presenting ``callee``: named by
        ``Is[...]``, or an instance of a class an overload takes as its callee?"""
        return id(callee) in self.named or bool(self.named_classes) and issubclass(type(callee), self.named_classes)

    def enter_direct(self, obj: FunctionType | type, found: Twin | None) -> None:
        """Enter what ``resolve`` finds for ``obj`` in ``direct_twins``, unless another
        thread staled the plan while it was being worked out: the answer was given for the
        overloads before that registration, and entered now it would outlive the emptying
        of the table and skip the new overload at every later call.  Stored, then checked:
        ``stale`` marks the plan before it empties the table, so a registration either
        empties the table after this store or is seen here and the entry undone (checked,
        then stored, a whole ``stale`` could run between the two)."""
        assert self.direct_twins is not None
        self.direct_twins.set(obj, found)
        if self.named is _EVERY_CALLEE and found is not None:
            self.direct_twins.set(obj, None)

    def _skip_the_question(self, twin: FunctionType, func: FunctionType) -> None:
        """Let the twin of a switched function run its rewritten body without asking whether
        its module runs rewritten here (``importhook.dual_code``): its frames read a mirror of the
        builtins, where ``__cassette_hook_twin__`` is true.  The twin is called by a site
        under this plan, so the answer is this plan's for the module the switch asks about
        (not always ``func.__module__``, which decided that ``func`` has a twin).  Where the
        builtins cannot be mirrored (before 3.12, the pure-Python path) the twin asks, as
        ``func`` does."""
        global _twin_builtins
        if _twin_builtins is _UNMADE:
            _twin_builtins = _native.runtime.mirror_builtins(vars(builtins), {_names.TWIN: True})
        if _twin_builtins is None or getattr(func, "__builtins__", None) is not vars(builtins):  # (its own: left alone)
            return
        code = func.__code__
        module = _switch_modules.get(code)
        if module is None:
            module = _names.switch_module(code)
            _switch_modules.set(code, module)
        if self.runs_module(module):
            _native.runtime.set_builtins(twin, _twin_builtins)

    def _make_twin(self, func: FunctionType) -> FunctionType | None:
        code = func.__code__
        shared = self.shared.values.get(id(code))
        if (shared is not None and shared[1] is func.__globals__ and shared[2] is func.__module__
                and shared[3] is getattr(func, "__builtins__", None) and shared[5] == len(func.__globals__)):
            # Another function of a code that has a twin (a closure or lambda made anew):
            # the answers below were given for its code, globals and module, and hold.
            return _twin_from(shared[0], func, shared[4] if shared[4] is not shared[3] else None)
        if not self.recurses_into(func):
            primitives.note_primitive(func)  # (one the runtime emulates, of a module imported since)
            return None
        if _names.is_annotate(code):
            return None
        if switch_before_twin is not None:  # (its module may wait for its first call: switched now)
            switch_before_twin(func)
        given = code
        code = func.__code__
        switched = _names.is_switched(code) and self.pass_ is None
        if switched:  # loaded by the import hook: rewritten already
            # (its own code, not a copy that skips the switch: code that finds its frames by
            # their code object -- jinja2's ``internalcode`` -- must find them under a context)
            twin_code: CodeType | None = code
        elif id(code) in self._codes.values:
            twin_code = self._codes.values[id(code)]
        elif self.pass_ is None and _is_own_twin(code):  # (nothing to rewrite)
            twin_code = code
        else:
            twin_code = _rewrite_or_warn(func, code, self.operators, self)
            self._codes.set(code, twin_code)
        if twin_code is None:
            return None
        twin = _twin_from(twin_code, func, None)
        if switched:
            self._skip_the_question(twin, func)
        standins.reach(func, _module_of(func))  # (stand-ins in its module's classes: what C calls of them)
        if code is given and (switched or switch_before_twin is None):
            # Not for light code of the lazy hook's, which an activation may arm for its
            # first call (given a new __code__ then, the function would skip it).
            self.shared.set(code, (twin_code, func.__globals__, func.__module__, getattr(func, "__builtins__", None),
                                   getattr(twin, "__builtins__", None), len(func.__globals__), [None]))
        return twin


def _is_own_twin(code: CodeType) -> bool:
    """Is ``code`` its own twin's (``_names.twin_is_itself``)?  The answer is kept, as a
    rewritten code is in ``Plan._codes``: a closure made anew at each call asks at each
    call, and the check reads every instruction.  (Not in ``_codes``: an entry whose value
    is its key would keep the key alive.)"""
    if id(code) in _own_twins.values:
        return True
    if _names.twin_is_itself(code):
        _own_twins.set(code, True)
        return True
    return False


def _twin_from(twin_code: CodeType, func: FunctionType, builtins: dict[str, Any] | None) -> FunctionType:
    """``func``'s twin: ``twin_code`` made a function with ``func``'s globals, defaults,
    closure and names, whose frames read ``builtins`` if given (the mirror of
    ``_skip_the_question``), else its globals' (``_speedups.shared_twin`` makes the same
    in C)."""
    if "__builtins__" in func.__globals__:
        twin = FunctionType(twin_code, func.__globals__, func.__name__, func.__defaults__, func.__closure__)
    else:  # (made with bare globals: FunctionType would give it our frame's builtins, not ``func``'s)
        builtins_of = func.__builtins__  # type: ignore[attr-defined,unused-ignore]  # (3.10 typeshed)
        twin = function_with_builtins(builtins_of, twin_code, func.__globals__, func.__name__, func.__defaults__,
                                      func.__closure__)
    twin.__kwdefaults__ = func.__kwdefaults__
    twin.__qualname__ = func.__qualname__
    if _version_like is not None:  # (3.13 versions only what MAKE_FUNCTION makes)
        _version_like(twin, func)
    if builtins is not None:  # (the mirror: only where the runtime made one)
        _native.runtime.set_builtins(twin, builtins)
    return twin


switch_before_twin: Callable[[FunctionType], None] | None = None
"""Set by the lazy import hook (``lazy_mode``) once it arms functions to be switched at their
first call: a twin is then made from the switched code, as for a module switched at import."""

_version_like = _native.runtime.version_like
_UNMADE: Any = object()
_twin_builtins: dict[str, Any] | None = _UNMADE  # see Plan._skip_the_question
_switch_modules: WeakIdCache[str] = WeakIdCache()  # switched code -> the module its switch asks about
_own_twins: WeakIdCache[bool] = WeakIdCache()  # the codes found to be their own twins' (``_is_own_twin``)
_every_plan: weakref.WeakSet[Plan] = weakref.WeakSet()  # including invalidated plans still in use


def _drop_twins_before_full_collections(phase: str, info: dict[str, int]) -> None:
    """Let a full collection free functions that only their twins' closure cells kept alive
    (and namespaces that only ``Plan.shared`` holds, with the functions in them), and
    context classes that only their plans kept alive (a plan holds its class, and the
    overloads and twins it runs, which may too): the plans of the classes still in use are
    remade at their next entry; contexts already active keep theirs."""
    if phase == "start" and info["generation"] == 2:
        _plans.clear()
        for plan in list(_every_plan):
            plan.twins.clear()
            plan.shared.clear()
            if plan.direct_twins is not None:
                plan.direct_twins.clear()


gc.callbacks.append(_drop_twins_before_full_collections)


def plan_for(ctx: Context) -> Plan:
    """The plan of ``ctx``'s class, pass and hooks switch.  Remade after an overload was
    registered or removed (``generics.changes``); contexts already active keep the plan
    they started with until they are re-entered, staled (``Plan.stale``) so that the change
    applies to their next call."""
    global _changes
    if _changes != generics.changes:
        _plans.clear()
        _changes = generics.changes
    key = (type(ctx), ctx.pass_, ctx.hooks_enabled)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = Plan(*key)
    return plan


_changes = -1  # generics.changes when _plans was last emptied


# The generics whose overloads a sparse plan asks about, and the position of the callee
# among each one's arguments (a posthook's and a raisehook's follow the result or exception).
_CALLEE_AT = ((generics.prehook, 1), (generics.posthook, 2), (generics.raisehook, 2), (generics.overdub, 1),
              (generics.execute, 1), (generics.fallback, 1))
_OPERATORS = frozenset(map(id, _names.OPERATORS))
_C_METHODS = (BuiltinMethodType, MethodDescriptorType, WrapperDescriptorType, MethodWrapperType,
              ClassMethodDescriptorType)


class _EveryCallee(frozenset[int]):
    """The ``named`` of a stale plan: every callee is named."""

    def __contains__(self, key: object) -> bool:
        return True


_EVERY_CALLEE = _EveryCallee()


def _stale_plans() -> None:
    for plan in list(_every_plan):
        plan.stale()


generics.on_change.append(_stale_plans)


def _callees_named(ctx_type: type) -> tuple[dict[int, object], tuple[type, ...]] | None:
    """The callees (by id) that the overloads and hooks for ``ctx_type`` name, and the
    classes they take as their callee, when each of them names its callee with ``Is[...]``
    or a class; else None."""
    named: dict[int, object] = {}
    classes: dict[type, None] = {}
    for generic, position in _CALLEE_AT:
        if generic.has_methods_for(ctx_type):
            found = generic.callees_named(ctx_type, position)
            if found is None:
                return None
            named.update(found[0])
            classes.update(dict.fromkeys(found[1]))
    if classes and issubclass(FunctionType, tuple(classes)):
        return None  # (every Python function named, ``f: types.FunctionType``: nothing to save; kept general)
    return named, tuple(classes)


def _names_operators(named: dict[int, object], classes: tuple[type, ...]) -> bool:
    """Does a sparse plan need operator sites: is a named callee an operator, or a Python
    function named as a special method (which an operator's body may run)?  Or may one be,
    an instance of a named class?"""
    return (any(key in _OPERATORS or type(obj) is FunctionType and obj.__name__.startswith("__")
                for key, obj in named.items())
            or bool(classes) and (issubclass(FunctionType, classes)
                                  or any(issubclass(type(op), classes) for op in _names.OPERATORS)))


def _names_c_methods(named: dict[int, object], classes: tuple[type, ...]) -> bool:
    """Is a named callee C code bound to or looked up on an object (a call presents
    ``items.append`` as ``list.append``), rather than a module's function?  Or may one be,
    an instance of a named class?"""
    return (any(isinstance(obj, _C_METHODS) and not isinstance(getattr(obj, "__self__", None), ModuleType)
                for obj in named.values())
            or bool(classes) and any(issubclass(kind, classes) for kind in _C_METHODS))


def _module_of(func: FunctionType) -> str:
    return getattr(func, "__module__", None) or func.__globals__.get("__name__") or ""


def _scope_test(ctx_type: type[Context]) -> Callable[[str, Callable[[], bool]], bool]:
    """``in_scope(module, is_library)`` for the options of ``ctx_type``: is code of
    ``module`` recursed into?  ``is_library()`` says if the code is a library's, and is
    asked only when ``libraries`` is not ``True``: answering reads file paths."""
    include = None if ctx_type.include is None else ModulePatterns(ctx_type.include)
    exclude = ModulePatterns(ctx_type.exclude)
    libraries = ctx_type.libraries
    if isinstance(libraries, str) or not (isinstance(libraries, bool) or _is_patterns(libraries)):
        raise TypeError(f"{ctx_type.__qualname__}.libraries must be True, False or a sequence of module "
                        f"patterns, not {libraries!r}")
    named = None if isinstance(libraries, bool) else ModulePatterns(libraries)

    def in_scope(module: str, is_library: Callable[[], bool]) -> bool:
        if is_own_module(module) or include is not None and not include.matches(module) or exclude.matches(module):
            return False
        return libraries is True or (named is not None and named.matches(module)) or not is_library()

    return in_scope


def _is_patterns(value: object) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(p, str) for p in value)


def _rewrite_or_warn(func: FunctionType, code: CodeType, operators: bool, plan: Plan) -> CodeType | None:
    """``code`` rewritten, or None (with a warning) if it cannot be; raises what
    ``rewrite.RESOURCE_ERRORS`` says is no fault of the code.  With a pass, the pass's
    rewrite, or its ``PassError``: never the body without the pass."""
    if plan.pass_ is not None:
        from ..passes import rewrite_with_pass  # (with ``bytecode``, which a context with no pass may never need)

        with recursion_budget.headroom(rewrite.HEADROOM):
            return rewrite_with_pass(plan.pass_, plan.ctx_type, func, code, hotpath.hooks, operators=operators)
    try:
        with recursion_budget.headroom(rewrite.HEADROOM):
            return rewrite.rewrite_code(code, hotpath.hooks, operators=operators, enters=plan.enters)
    except rewrite.RESOURCE_ERRORS:
        raise
    except Exception as exc:  # any failure: run the original as a primitive, never crash
        where = f"{code.co_filename}:{code.co_firstlineno}"
        warnings.warn(
            f"cassette_hook: cannot rewrite {func.__qualname__} ({where}): {exc}; "
            "it runs as a primitive (its calls are not overdubbed)",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
