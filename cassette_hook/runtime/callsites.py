"""The hot path: what rewritten call sites run.

On CPython 3.11+ a rewritten call site ``f(*args)`` becomes ``resolve(f)(*args)``: the
user's frame still makes the call, to whatever :func:`resolve` picked.  With no context
that is ``f``.  With a *fast* plan (the context overloads nothing, so there is nothing to
observe) a Python function resolves to its cached twin -- one dict lookup, no allocation
(a bound method: one), no extra frame, and CPython inlines the call.  So does a function
that no overload names under a plan with no hooks (``Plan.direct_twin``).  Otherwise it
is :func:`site`'s closure for the call, which runs prehook, overdub and posthook.

:func:`call` is the same thing in one step, ``resolve(f)(*args)`` from this frame: what
3.10 call sites, operator sites, partial objects and callbacks from C code run.

This module is the reference: ``_speedups`` (C, built when the package is installed with
a compiler at hand) replaces :func:`resolve`, :func:`call`, :func:`overload_of` and
:func:`present` (and the callables the program's frame calls for a builtin that takes
callbacks and for a Python class) with the same logic, which costs less per call and
adds no Python frame between the program's frames: what ``resolve`` returns under hooks
runs :func:`site`'s steps in C (but for recursion deeper than its budget of C stack,
where it is :func:`site`'s closure), and so does ``call``.
``CASSETTE_HOOK_PURE_PYTHON=1`` keeps these.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import functools
from types import (BuiltinFunctionType, FunctionType, MethodDescriptorType, MethodType, MethodWrapperType, ModuleType,
                   WrapperDescriptorType)
from typing import Any, Callable

from .. import context_stack, _native, _own, generics, rewrite
from . import hotpath, callees, operators, primitives
from .._weakid import WeakIdCache
from ..dispatch import Guard
from ..generics import OverdubInstead
from .plan import Plan, plan_for

_INDIRECT_NAMES = primitives.INDIRECT_NAMES
_CMethodType = primitives.CMethodType
_CALLED_AS_IS = callees.CALLED_AS_IS.values
_top: Callable[[], context_stack.Entry | None]
_get_active: Callable[[], Any]
_set_active: Callable[[context_stack.Entry | None], Any]

_runtime = _native.runtime


def _follow(variable: Any, top: Callable[[], context_stack.Entry | None]) -> None:
    """Keep the stack's reader and its variable's methods at hand, as globals (see
    ``context_stack.follow``)."""
    global _top, _get_active, _set_active
    _top, _get_active, _set_active = top, variable.get, variable.set


context_stack.follow(_follow)


def resolve(f: Any, /) -> Any:
    """What a rewritten call site calls in place of ``f``."""
    entry = _top()
    if entry is None:
        return f
    twins = entry.direct_twins
    if twins is not None:
        found = twins.get(id(f))
        if found is not None:  # f is that function (or class); its twin holds while f keeps these:
            twin, code, defaults, kwdefaults = found
            if code is None or f.__code__ is code and f.__defaults__ is defaults and f.__kwdefaults__ is kwdefaults:
                return twin
        run = _resolve_direct(entry.plan, f)
        if run is not None:
            return run
        if type(f) is FunctionType and entry.plan.overloads:  # (a named function met before: _named_route)
            run = _named_route(entry.plan, f)
            if run is not None:
                return run
    return site(entry, f)


def _resolve_direct(plan: Any, f: Any) -> Any:
    """``resolve`` past the table of direct twins: what the call site may call in place
    of ``f`` without running hooks (methods, classes, primitives under a fast plan), or
    None: the call must go through :func:`site`."""
    kind = type(f)
    if not plan.fast:  # a plan whose overloads name their callees: Plan.direct_twin
        if kind is FunctionType:
            return plan.direct_twin(f)
        if isinstance(f, type):
            run = callees.direct_constructor(plan, f)
            if run is not None or not plan.sparse or plan.names(f):
                return run
        elif (plan.sparse and kind is MethodType and (found := plan.direct_twins.values.get(id(f.__func__)))
              is not None and found[1] is f.__func__.__code__):
            pass  # (its function has a current twin in the table: no overload names it, asked once)
        elif not plan.sparse or _may_be_named(plan, f):
            return None
        elif kind is MethodType:
            plan.direct_twin(f.__func__)  # (its function entered in the table, as a fast plan's twins are)
        # (a callee no overload of a sparse plan names: what a fast plan runs)
    if kind is MethodType:  # (first: the commonest callee here, made afresh by each call)
        func_kind = type(f.__func__)
        if id(func_kind) in _CALLED_AS_IS:  # (an lru_cache on a method)
            return f
        run = callees.runnable(plan, f)
        if run is None:
            callees.note_called_as_is(func_kind)
        return run or f
    if id(kind) in _CALLED_AS_IS:  # (an lru_cache wrapper: asked once per type, not per call)
        return f
    constructor = plan.constructors.values.get(id(f))
    if constructor is not None:
        return constructor
    if (kind is BuiltinFunctionType or kind is _CMethodType) and f.__name__ not in _INDIRECT_NAMES:
        if type(f.__self__) is ModuleType:  # (``len``: one object for every call, found first from now on)
            plan.enter_direct(f, (f, None, None, None))
        return f  # C code with no callbacks: nothing to overdub
    run = callees.runnable(plan, f)
    if run is not None:
        return run
    run = callable_for(f)
    if run is f and not isinstance(f, type):
        callees.note_called_as_is(kind)
    if isinstance(f, type) and plan.constructions.values.get(id(f)) == "primitive":
        # A class constructed by C (``dict``, ``zip``): the plan's answer for good, so it goes
        # into the table the hot path reads first, as a class with a Python ``__init__`` is
        # found among the constructors; else ``dict(...)`` came here at every call.
        plan.enter_direct(f, (run, None, None, None))
    return run


def _named_route(plan: Plan, f: FunctionType) -> Any:
    """Under a sparse plan with no hooks, what the pure-Python ``resolve`` enters in the
    table of direct twins for a named function whose overload ``overload_by_callee``
    decided at its first call (a method, or a ``Guard`` of fixed arity): a closure,
    made once per plan and callee, that runs the overload as :func:`site`'s closure would
    (popped, recorded for ``recurse``), with no closure made, no dispatch and no
    ``_overloaded`` per call; later calls find it with ``resolve``'s one look-up.  None
    when the call must go through :func:`site` (docs/internals.md, "The hot path").  The
    C path never runs this: its ``resolve`` is C, and its ``Site`` does the same steps.
    A registration empties the table (``Plan.stale``), so the closure is not met after
    one; ``Plan.enter_direct`` keeps it out if one came while it was made."""
    decided = plan.overloads.get(id(f)) if plan.overloads is not None else None  # (staled meanwhile: None)
    if (decided is None or decided is False or plan.prehook_call is not None or plan.posthook_call is not None
            or plan.raisehook_call is not None or type(decided) is Guard and decided[3]):
        return None
    run = _named_runner(plan, f, decided)
    plan.enter_direct(f, (run, None, None, None))  # type: ignore[arg-type]  # (a Twin whose code is None: called as it is)
    return run


def _named_runner(plan: Plan, f: FunctionType, decided: Any) -> Callable[..., Any]:
    """The closure :func:`_named_route` enters for ``f``: ``decided`` is the method every
    call of ``f`` runs, or a ``Guard`` of fixed arity, whose checks of the later arguments'
    types (``Guard.admits``: by the arguments' count, then ``issubclass(type(arg), cls)``
    at each constrained position) are worked out here, per count, once.  A call the guard
    does not admit (no overload applies), or one made after the stack changed under the
    call site or an overload was registered (in the evaluation of an argument), takes the
    general route."""
    if type(decided) is Guard:
        method, required, nparams, _, classes = decided
        checks: dict[int, tuple[tuple[int, type], ...]] | None = {
            n - 2: tuple((i, cls) for i, cls in enumerate(classes[:n - 2]) if cls is not None)
            for n in range(required, nparams + 1)}
    else:
        method, checks = decided, None

    def overloaded(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        try:
            entry = _top()  # (on the pure-Python path, the variable's value: context_stack.read_top_with)
            if entry is None or entry.plan is not plan or plan.overloads is None:  # (staled: Plan.stale)
                return resolve(f)(*args, **kwargs)
            if checks is not None and not _admitted(checks, args):  # (no overload applies)
                return site(entry, f)(*args, **kwargs)
            below, outer = entry.below, _running.running
            try:  # (as in _overloaded)
                _set_active(below)
                _running.running = (entry, below)
                out = ((method(entry.ctx, f, *args, **kwargs) if kwargs else method(entry.ctx, f, *args))
                       if below is None else callees.seen_below(method, (entry.ctx, f, *args), kwargs))
                _running.running = outer
                _set_active(entry)
            except BaseException:
                _running.running = outer
                _set_active(entry)
                raise
            if out is OverdubInstead:  # (an ``execute`` overload's: the callee's body runs, as in site)
                run = plan.twin(f)
                out = callees.without_body(entry, f, args, kwargs) if run is None else run(*args, **kwargs)
            return out
        except BaseException as exc:  # (the program's traceback: without this frame and ours below it)
            _strip(exc)
            raise

    overloaded.__qualname__, overloaded.__module__ = f.__qualname__, f.__module__  # (named in a star call's error)
    return overloaded


def _admitted(checks: dict[int, tuple[tuple[int, type], ...]], args: tuple[Any, ...]) -> bool:
    """Does a ``Guard``'s overload take ``args``: a count it admits, each constrained
    argument an instance (by its type) of its position's class?  (A loop of its own, not
    inside the caller's ``try``: docs/internals.md, "Loops under a ``with`` block on 3.13
    and 3.14".)"""
    constrained = checks.get(len(args))
    if constrained is None:
        return False
    for i, cls in constrained:
        if not issubclass(type(args[i]), cls):
            return False
    return True


def _may_be_named(plan: Plan, f: Any) -> bool:
    """Under a sparse plan, may a call of ``f`` (not a function or class) be presented as
    a callee its overloads name (``Plan.named``)?  A bound method is presented as its
    function; C code bound to an object as its method descriptor, when the plan names
    any such (``Plan.named_methods``); any other callable, a callable instance or a
    ``partial``, is left to the hooks."""
    kind = type(f)
    if kind is MethodType:
        return type(f.__func__) is not FunctionType or plan.names(f.__func__)
    if kind is BuiltinFunctionType or kind is _CMethodType:
        return plan.names(f) or plan.named_methods and type(f.__self__) is not ModuleType
    if kind is MethodDescriptorType or kind is WrapperDescriptorType:
        return plan.names(f)
    if kind is MethodWrapperType:
        return plan.names(f) or plan.named_methods
    return True


def callable_for(f: Any) -> Any:
    """What the user's frame calls for the primitive ``f``: ``f`` itself, unless it is
    one of the builtins that must not be called directly even from there."""
    kind = type(f)
    builtin = kind is BuiltinFunctionType or kind is _CMethodType
    if builtin or kind is MethodDescriptorType:
        caller = _indirect_callers.get(f)
        if caller is not None:
            return caller
    indirect = f.__name__ in _INDIRECT_NAMES if builtin else id(f) in primitives.INDIRECT
    return functools.partial(primitive, f) if indirect else f


def _callers_of(primitive: Callable[..., Any]) -> dict[Any, Any]:
    """``callable_for`` of each builtin function or unbound method that takes callbacks
    (``min``, ``list.sort``), made once: the C path finds them here, where they cost a
    look-up, not three frames."""
    return {f: functools.partial(primitive, f) for f in primitives.INDIRECT_FUNCTIONS}


def enter(f: Any, /, *args: Any) -> Any:
    """What an entering call site calls in place of ``f``, given ``f``'s positional
    arguments: a call site of a twin made for a plan that ``enters`` (its only hook a
    prehook).  Under such a plan, a Python function or bound method with a twin has the
    prehook run here and its twin (bound alike) returned, for the site's own frame to
    call as it would ``f``; anything else is what :func:`resolve` gives."""
    entry = _top()
    if entry is None:
        return f
    plan = entry.plan
    try:
        if plan.enters:
            method = type(f) is MethodType
            callee = f.__func__ if method else f
            twin = plan.twin(callee) if type(callee) is FunctionType else None
            if twin is not None:
                presented = (f.__self__, *args) if method else args
                _run_popped(entry, plan.prehook_call, (entry.ctx, callee, *presented), {})  # type: ignore[arg-type]  # (one that enters has one)
                return MethodType(twin, f.__self__) if method else twin
        return resolve(f)
    except BaseException as exc:
        _strip(exc)
        raise


def resolve_star(f: Any, /) -> Any:
    """``resolve`` for a star call ``f(*args, **kwargs)``.

    CPython names the callee in the error for a bad ``*`` or ``**`` argument, so a hooked
    call's closure takes the callee's names here (a twin has them already).
    """
    run = resolve(f)
    if type(run) is FunctionType and run.__code__ is _OVERDUBBED_CODE:
        qualname, module = getattr(f, "__qualname__", None), getattr(f, "__module__", None)
        if type(qualname) is str:  # not, say, a Mock's attribute
            run.__qualname__ = qualname
            run.__module__ = module if type(module) is str else None  # type: ignore[assignment]  # typeshed says str; None is valid
    return run


def call(f: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run ``f(*args, **kwargs)`` as the innermost active context sees it."""
    __tracebackhide__ = True  # pytest: show the user's frames, not this one
    try:
        run = resolve(f)
        if run is f:  # a primitive, maybe frame-sensitive (locals(), super() ...): emulate
            return primitives.call_primitive(f, args, kwargs)
        return run(*args, **kwargs)
    except BaseException as exc:  # (the program's traceback: without this frame and ours below it)
        _strip(exc)
        raise


def call_ex(f: Any, args: Any, kwargs: Any = None, /) -> Any:
    """A star call ``f(*args, **kwargs)`` (3.10): unpacked here, with the plain call's errors."""
    __tracebackhide__ = True
    try:
        if type(args) is not tuple and not _iterable(args) or kwargs is not None and not hasattr(kwargs, "keys"):
            return f(*args, **kwargs or {})  # raises the plain call's error, naming f
        return call(f, *args) if kwargs is None else call(f, *args, **kwargs)
    except BaseException as exc:
        _strip(exc)
        raise


def _iterable(obj: object) -> bool:
    try:
        iter(obj)  # type: ignore[call-overload]  # probing: TypeError is the answer
    except TypeError:
        return False
    return True


def operator_site(op: Any) -> Any:
    """The callable an operator site loads: ``site(a, b)`` is ``call(op, a, b)``."""
    if op not in _operator_sites:
        _operator_sites[op] = _OperatorSite(op)
    return _operator_sites[op]


_operator_sites: dict[Any, Any] = {}
_strip = _own.strip_traceback
construct_by_ref = callees.construct_by_ref  # what a plan's constructor of a Python class calls
primitive = primitives.primitive  # what the program's frame calls for a builtin that takes callbacks
_run_popped = callees.run_popped  # a hook run popped: in C, by the thread's record, no ContextVar.set
_running = callees.overloads
_indirect_callers = _callers_of(_runtime.accelerated("primitive", primitive))


def site(entry: context_stack.Entry, f: Any) -> Any:
    """The overdubbed call of ``f``: prehook, overdub (by default, recurse), then posthook,
    or raisehook if it raised.

    A closure rather than a partial: the user's frame calls it like any Python function,
    which CPython inlines, so deep recursion under hooks costs Python frames (the budget
    in ``context_stack`` covers them) but no C stack.  It captures only ``entry`` and ``f`` (a
    cell each, made per call) and reads the rest from the entry.  Hooks run with the
    context popped (``active`` set to the entry below).
    """

    def overdubbed(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        try:
            plan, callee = entry.plan, f
            if type(callee) is MethodType:  # seen as (type(obj).m, obj, ...)
                args, callee = (callee.__self__, *args), callee.__func__
            elif type(callee) is BuiltinFunctionType or type(callee) is _CMethodType:
                callee, args = present(callee, args)
            if plan.prehook_call is not None:
                _run_popped(entry, plan.prehook_call, (entry.ctx, callee, *args), kwargs)
            try:
                out: Any = OverdubInstead
                if plan.overdub or plan.execute:
                    out = _overloaded(entry, callee, args, kwargs)
                if out is OverdubInstead:
                    run = plan.twin(callee) if type(callee) is FunctionType else callees.runnable(plan, callee)
                    out = callees.without_body(entry, callee, args, kwargs) if run is None else run(*args, **kwargs)
            except BaseException as exc:
                if plan.raisehook_call is not None:
                    _strip(exc)  # (the raisehook sees the traceback the program will)
                    _run_popped(entry, plan.raisehook_call, (entry.ctx, exc, callee, *args), kwargs)
                raise
            if plan.posthook_call is not None:
                _run_popped(entry, plan.posthook_call, (entry.ctx, out, callee, *args), kwargs)
            return out
        except BaseException as exc:  # (the program's traceback: without this frame and ours below it)
            _strip(exc)
            raise

    return overdubbed


def _overloaded(entry: context_stack.Entry, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What an ``overdub`` or ``execute`` overload makes of the call, or ``OverdubInstead``.

    The overload runs popped, by the stack's variable (not ``_run_popped``: the C one
    would call it from C, and its ``recurse`` of the callee would then cost a level of C
    stack per level of the program's recursion, which this closure exists to avoid), and
    recorded for this thread in ``callees.overloads``, so that its ``recurse(ctx, f, ...)``
    puts this entry back instead of pushing a new one."""
    plan = entry.plan
    method: Any = plan.overdub_call
    if method is None:
        call = (entry.ctx, f, *args)
        overloads = plan.overloads
        method = False if overloads is None else overloads.get(id(f), _UNKNOWN)
        if method is _UNKNOWN:
            method = overload_by_callee(plan, call)
        method = overload_of(call) if method is False else _guarded(method, call)
    if method is None:
        return OverdubInstead
    below, held, outer = entry.below, _get_active(), _running.running  # callees.run_popped, one frame less per level
    try:  # (as in callees.run_popped; the record put back by value too)
        _set_active(below)
        _running.running = (entry, below)
        out = (method(entry.ctx, f, *args, **kwargs) if below is None
               else callees.seen_below(method, (entry.ctx, f, *args), kwargs))
        _running.running = outer
        _set_active(held)
    except BaseException:
        _running.running = outer
        _set_active(held)
        raise
    return out


def overload_of(call: tuple[Any, ...]) -> Any:
    """The ``overdub`` method for ``call`` (``(ctx, f, *args)``) if it has one, else the
    ``execute`` one, else None.  (An ``execute`` overload's ``OverdubInstead`` and no
    overload both mean: run the callee's body.)"""
    method = generics.overdub.resolve(call)
    if method is _default_overdub:
        method = generics.execute.resolve(call)
        if method is _default_execute:
            return None
    return method


def overload_by_callee(plan: Plan, call: tuple[Any, ...]) -> Any:
    """``overload_of(call)`` under a sparse plan, decided for every call of the callee
    (``call[1]``) at its first: the method, when every call gets it; None, when none
    applies (the callee's body runs); a ``dispatch.Guard``, when one method only may apply
    and the types of the later arguments say whether it does (``_guarded``); else False
    (dispatch decides per call).  Entered in ``Plan.overloads``, where later calls find
    it without dispatch.  A callee no overload names gets None, not entered (every
    overload of a sparse plan names its callee, so dispatch would find none; the table
    holds named callees only, which registration keeps alive, so an id in it is never
    another object's).  Both paths ask this at a named callee's first call."""
    overloads, ctx_type, callee = plan.overloads, type(call[0]), call[1]
    if overloads is None:  # (staled meanwhile)
        return False
    if id(callee) not in plan.named:  # (one an overload takes by its class: dispatch decides, not entered)
        return False if plan.names(callee) else None
    by_overdub = generics.overdub.callee_guard(ctx_type, 1, callee)
    by_execute = generics.execute.callee_guard(ctx_type, 1, callee)
    if by_overdub is True or by_overdub is None and by_execute in (True, None):
        decided = overload_of(call)  # (overdub's, for every call; else execute's, or none)
    elif by_overdub is None and type(by_execute) is Guard or type(by_overdub) is Guard and by_execute is None:
        decided = by_overdub or by_execute  # (when it does not apply, the other has none)
    else:
        decided = False
    overloads[id(callee)] = decided  # (if staled meanwhile, a table no call reads any more)
    return decided


def _guarded(decided: Any, call: tuple[Any, ...]) -> Any:
    """The method ``overload_by_callee``'s answer gives ``call``: a guard's method when it
    applies, else None."""
    if type(decided) is Guard:
        return decided[0] if decided.admits(call, 1) else None
    return decided


_UNKNOWN: Any = object()
_OVERDUBBED_CODE = next(c for c in site.__code__.co_consts if getattr(c, "co_name", None) == "overdubbed")
_default_overdub = generics.overdub.default
_default_execute = generics.execute.default


def present(f: Any, args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """How hooks see a builtin method call ``items.append(x)``: ``(list.append, items, x)``.

    The method is looked up along the receiver's MRO and must bind to ``f`` itself: a
    subclass may override the name (``super().append`` is ``list.append``, not the
    subclass's ``append``).
    """
    receiver = f.__self__
    if receiver is None or isinstance(receiver, (type, type(generics))):
        return f, args
    name = f.__name__
    for klass in type(receiver).__mro__:
        unbound = klass.__dict__.get(name)
        if unbound is not None and hasattr(unbound, "__get__") and unbound.__get__(receiver, klass) == f:
            return unbound, (receiver, *args)
    return f, args


# The runtime's hot path: in C, the same logic at less cost per call and with no Python
# frame between the program's frames, handed the Python parts it delegates the rare cases
# to; in Python, the functions above.
_runtime.configure(
    entry_type=context_stack.Entry, plan_type=Plan, id_table_type=WeakIdCache, resolve_direct=_resolve_direct,
    overload_by_callee=overload_by_callee, guard_type=Guard,
    site_closure=site(None, None),  # type: ignore[arg-type]  # a sample: C makes the others alike
    call_primitive=primitives.call_primitive, special=primitives.SPECIAL, preparers=primitives.PREPARERS,
    indirect_names=_INDIRECT_NAMES, indirect_callers=_indirect_callers, called_as_is=_CALLED_AS_IS,
    present=present, overdub=generics.overdub, execute=generics.execute, overdub_default=_default_overdub,
    execute_default=_default_execute, fallback=generics.fallback, fallback_default=generics.fallback.default,
    plain_operators=operators.PLAIN_OPERATORS, c_operands=operators.C_OPERANDS,
    operator_dunders=operators.DUNDERS, operator_body=operators.body, call_ex=call_ex,
    runnable=callees.runnable, without_body=callees.without_body,
    seen_below=callees.seen_below, overdub_instead=OverdubInstead, construct=callees.construct,
    own_directory=_own.DIRECTORY)
resolve, enter = _runtime.accelerated("resolve", resolve), _runtime.accelerated("enter", enter)
resolve_star = _runtime.accelerated("resolve_star", resolve_star)
call, call_ex = _runtime.accelerated("call", call), _runtime.accelerated("call_ex", call_ex)
overload_of, present = _runtime.accelerated("overload_of", overload_of), _runtime.accelerated("present", present)
construct_by_ref = _runtime.accelerated("construct_by_ref", construct_by_ref)
primitive = _runtime.accelerated("primitive", primitive)
_OperatorSite = _runtime.accelerated("OperatorSite", functools.partial(functools.partial, call))
context_stack.read_top_with(_runtime)

HOOKS = rewrite.Hooks(resolve=resolve, resolve_star=resolve_star, call=call, call_ex=call_ex,
                      operator_site=operator_site,
                      yield_from=_runtime.accelerated("yield_from", operators.yield_from_operand),
                      current_context=context_stack.current_context, enter=enter,
                      # (one site per attribute name, shared by the twins; none in pure Python,
                      # where a method site would cost more than the bound method it saves)
                      method_site=_runtime.method_site)

# What the modules below call back, and what the stack asks of the runtime: now ready.
hotpath.publish(resolve=resolve, call=call, construct_by_ref=construct_by_ref, hooks=HOOKS)
context_stack.provide(plan_for=plan_for)
