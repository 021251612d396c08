"""Contexts and the active context stack.

The stack lives in a ``ContextVar`` so that each thread and each asyncio task has its own
(tasks inherit the stack active where they were created).  Its top is an :class:`Entry`:
the context, the :class:`~cassette_hook.runtime.plan.Plan` its class runs with, and the entry below.
Rewritten call sites read the top once per call, so the entry carries everything the hot
path needs without further lookups.

The bottom of every stack is the same: the *whole-program* contexts (the command line's,
``install_from_env``'s, the pytest plugin's), which every thread runs under from its first
call.  They are the variable's *default*: a thread or task that has set no stack of its
own -- any new thread, whoever started it, since threads start with an empty
``contextvars.Context`` -- reads them at no cost beyond the read it does anyway.  A
default cannot be changed, so changing the whole-program contexts replaces the variable,
and the modules that keep its methods at hand for speed :func:`follow` it.

The variable is read through :func:`top`, never directly: while a context's hooks run,
the C hot path leaves the variable as it is and records, per thread, that the running
code's innermost entry is the one below (``Popped`` in ``_speedups/internal.h``).  What pushes
sets the variable; what pops puts back what the push found there (``Entry.outer``).
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import operator
import sys
from collections import defaultdict
from contextvars import ContextVar
from functools import partial

from ._budget import recursion_budget

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Any, Callable, ClassVar, Generator, Iterable, Sequence

    from . import dispatch
    from .runtime.interface import Runtime
    from .runtime.plan import Plan

_NOT_SET: Any = object()


class Entry:
    """One level of the active context stack.

    ``direct_twins`` is the plan's table of the twins call sites call directly (all of
    them when the plan is fast: nothing to observe), or ``None``: the one attribute the
    hot path reads for the common case.
    ``raises_limit``: this entry holds a raise of the recursion limit (see
    ``_RecursionBudget.acquire``), so its pop lowers it.
    ``tagged``: its push counted it in its context's tag's ``depth``, so its pop uncounts it.
    ``outer``: what the stack's variable held when this entry was pushed, which its pop
    puts back: ``below``, unless the push was made by a hook running popped on the C
    path, where the variable still holds the hook's own context (see :func:`top`).

    Making one changes nothing: :func:`push` tells the watchers and changes the state.
    An entry has no ``__del__``: what watches entries for as long as they live does it
    with weak references whose callbacks are C (``switch``), which no interrupt can split.
    """

    __slots__ = ("ctx", "plan", "below", "direct_twins", "raises_limit", "tagged", "outer", "__weakref__")

    def __init__(self, ctx: Context, below: Entry | None, raises_limit: bool = False, outer: Any = _NOT_SET) -> None:
        self.ctx = ctx
        self.plan = plan = plan_of(ctx)
        self.below = below
        self.outer = below if outer is _NOT_SET else outer
        self.direct_twins = None if plan.direct_twins is None else plan.direct_twins.values
        self.raises_limit = raises_limit
        self.tagged = False


_made_watchers: list[Callable[[Entry], None]] = []
_settle: Callable[[], None] = lambda: None  # noqa: E731  # (set by the watcher of the flags: switch)
_retired: Callable[[Entry], None] = lambda entry: None  # noqa: E731  # (likewise)


def watch_entries(made: Callable[[Entry], None], settle: Callable[[], None] | None = None,
                  retired: Callable[[Entry], None] | None = None) -> None:
    """Call ``made(entry)`` as each entry of any stack is made, before its context's body
    runs, and ``settle()``, if given, after each pop.  The import hook's runtime switch
    (``switch``) and its light modules (``lazy_mode``) watch, from above: an entry lives as
    long as something holds it, a copied ``contextvars.Context`` or a task, not just while
    a ``with`` block is open, so ``switch`` follows each with a weak reference, and
    ``settle`` turns off what no live entry needs any more.  ``retired(entry)``, if given,
    is called for each entry of a whole-program stack that another replaced
    (:func:`_rebase`): no code reads it any more, though it may live on (below)."""
    global _settle, _retired
    _made_watchers.append(made)
    if settle is not None:
        _settle = settle
    if retired is not None:
        _retired = retired


def _made(entry: Entry) -> Entry:
    for made in _made_watchers:
        made(entry)
    return entry


active: ContextVar[Entry | None] = ContextVar("cassette_hook.active", default=None)
top: Callable[[], Entry | None] = active.get
"""The innermost active entry, as the running code sees it: what the runtime's
``stack_reader`` makes of ``active`` (:func:`read_top_with`), ``active.get`` until then."""
_stack_reader: Callable[[ContextVar[Entry | None]], Callable[[], Entry | None]] = operator.attrgetter("get")
_followers: list[Callable[[ContextVar[Entry | None], Callable[[], Entry | None]], None]] = []


def follow(bind: Callable[[ContextVar[Entry | None], Callable[[], Entry | None]], None]) -> None:
    """Call ``bind(variable, top)`` with the stack's variable and its reader now and
    whenever either is replaced (for modules that keep them in globals, for speed)."""
    _followers.append(bind)
    bind(active, top)


def read_top_with(runtime: Runtime) -> None:
    """Read the stack as the runtime does from now on (``callsites`` calls this as it
    loads: the C path's hooks run popped without setting the variable)."""
    global _stack_reader
    _stack_reader = runtime.stack_reader
    # A with block's exit that an interrupt in pop's first lines has call pop again (a Python
    # __exit__ cannot protect its own first instruction: docs/internals.md, "Interrupts"): C on
    # the C path, _ExitMethod (the class's own) on the pure-Python one.
    Context.__exit__ = runtime.exit_method(Context, pop_at_exit)
    _rebound()


def _rebound() -> None:
    global top
    top = _stack_reader(active)
    for bind in _followers:
        bind(active, top)


def _exiting(ctx: Context) -> Generator[None, None, None]:
    """The exit of a ``with`` block of ``ctx`` on the pure-Python path: made, and run to its
    ``yield``, as the block is entered (:class:`_ExitMethod`), resumed as the block ends.

    A Python ``__exit__`` cannot protect its own first instruction: the interpreter checks
    for signals as a frame starts (``RESUME``), before any ``try`` of the frame's own.  A
    generator resumed is already inside its ``try``: its ``RESUME`` after the ``yield``
    is covered by the handler, so an interrupt anywhere from the resumption on is caught
    here, and ``pop`` is called again if it arrived before ``pop`` changed anything, as the
    C path's ``__exit__`` does (``_speedups/context.c``, ``context_exit``).  "Before it
    changed anything": the innermost entry is still the one that was (``was``: compared
    by identity only, not held, since ``pop`` lets the entry go, and ``settle`` then finds
    it gone).  The first exception is the one that goes on.
    """
    was: int | None = None  # (None: pop not called yet)
    try:
        yield
        was = id(top())
        pop_at_exit(ctx)
    except GeneratorExit:  # (closed unresumed: the block's __enter__ failed, or it never ended)
        return
    except BaseException:
        now = top()
        if now is not None and now.ctx is ctx and (was is None or id(now) == was):
            pop_at_exit(ctx)  # an interrupt before pop changed anything
        raise


class _ExitMethod:
    """``Context.__exit__`` on the pure-Python path (the C path's is C), which pops even
    when an interrupt arrives as the ``with`` statement calls it.

    A ``with`` statement looks ``__exit__`` up, and binds it, as the block is entered,
    before it calls ``__enter__``: here the binding makes the block's own exit
    (:func:`_exiting`) and runs it to its ``yield``, inside its ``try``, and hands the
    statement a callable made only of C parts that resumes it: ``str.format`` takes the
    three exception values and ignores them (unused arguments are allowed), reads field
    ``{0[x]}`` of a ``defaultdict`` whose missing key calls ``next(exiting, None)``, and
    formats the ``None`` that gives as nothing (``!s:.0``): ``""``, false, so the
    exception goes on.  No Python frame starts, and no signal is checked, between the
    statement's call and the resumption.  An interrupt in the binding itself comes before
    ``__enter__``: nothing is pushed, and the unused exit is closed.  Read off the class
    (``type(ctx).__exit__``, as ``contextlib.ExitStack`` does), it is this object, called
    as ``Context.__exit__(ctx, *exc_info)`` (an ordinary method's exposure).
    """

    def __get__(self, ctx: Context | None, owner: type | None = None) -> Any:
        if ctx is None:
            return self
        exiting = _exiting(ctx)
        next(exiting)
        return partial(_RESUME_IGNORING_ARGUMENTS, defaultdict(partial(next, exiting, None)))

    def __call__(self, ctx: Context, *exc_info: object) -> None:
        self.__get__(ctx)(*exc_info)


_RESUME_IGNORING_ARGUMENTS = "{0[x]!s:.0}".format


class Context:
    """An execution context: subclass it, give it overloads, and run code inside it.

    Class-level options (override in a subclass):

    - ``operators``: operators (``a + b``, ``a[i]``, ...) are call sites, seen as calls to
      the matching ``operator`` function.
    - ``include`` / ``exclude``: module-name patterns (prefixes like ``"pkg"`` or globs like
      ``"pkg.*.io"``) bounding recursion.  Functions outside are still seen by hooks but run
      as primitives, so the calls they make are not seen.
    - ``libraries``: ``True`` recurses into the standard library and installed packages
      like any code; ``False`` runs their functions and classes as primitives (seen by
      hooks, not entered; the program's functions they call back are still seen where
      the import hook instrumented them); a sequence of module patterns enters only
      those libraries.  A library's code is told by its file (see ``_libraries``).

    Methods named ``prehook``, ``posthook``, ``raisehook``, ``overdub``, ``fallback`` or
    ``execute`` defined on a subclass are registered as overloads of the generic of that
    name for the subclass (their annotations, if any, constrain the other arguments).
    """

    operators: ClassVar[bool] = True
    include: ClassVar[Sequence[str] | None] = None
    exclude: ClassVar[Sequence[str]] = ()
    libraries: ClassVar[bool | Sequence[str]] = True

    # What ``__init__`` sets, as class defaults too: a subclass whose own ``__init__`` does
    # not call ``super().__init__()`` is a context with no metadata and no pass.
    metadata: Any = None
    pass_: Any = None
    tag: Any = None
    hooks_enabled: bool = True

    def __init__(self, metadata: Any = None, pass_: Any = None) -> None:
        _check_pass(pass_)
        self.metadata = metadata
        self.pass_ = pass_
        self.tag = None  # bound once, by enabletagging, before the copy is handed out (_speedups relies on it)
        self.hooks_enabled = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if _register_hooks is None:
            load_runtime()
        _register_hooks(cls)  # type: ignore[misc]  # (loaded)

    def __class_getitem__(cls, metadata_type: Any) -> dispatch.Parametric:
        """``Ctx[M]``: an annotation matching a ``Ctx`` whose metadata is an ``M``."""
        from . import dispatch  # (with ``typing``: a start needs no dispatch)

        try:
            return dispatch.Parametric(cls, "metadata", metadata_type)
        except TypeError:
            from ._saferepr import short_repr

            raise TypeError(f"{cls.__qualname__}[{short_repr(metadata_type)}]: the metadata type must be a class, "
                            "Is[...], a union, Any or Optional") from None

    def __enter__(self) -> Context:
        held = active.get()
        try:
            push(self)
            return self  # (inside the try: the with block's own protection starts after the return)
        except BaseException:  # an interrupt after the push: the with block will not pop it
            pop_if_pushed(self, held)
            raise

    __exit__ = _ExitMethod()  # (C on the C path: see read_top_with)

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(metadata={getattr(self, 'metadata', None)!r})"


def context(name: str, *, operators: bool = True, include: Sequence[str] | None = None,
            exclude: Sequence[str] = ()) -> type[Context]:
    """Make a new ``Context`` subclass named ``name`` (Cassette's ``@context``)."""
    if not name.isidentifier():
        raise ValueError(f"context name must be an identifier, not {name!r}")
    namespace = {"operators": operators, "include": include, "exclude": tuple(exclude)}
    cls = type(name, (Context,), namespace)
    cls.__module__ = sys._getframe(1).f_globals.get("__name__", __name__)
    return cls


def current_context() -> Context | None:
    """The innermost active context of this thread or task, or ``None``."""
    entry = top()
    return None if entry is None else entry.ctx


def _copy(ctx: Context, **changes: Any) -> Context:
    new = object.__new__(type(ctx))
    new.__dict__.update(ctx.__dict__)
    new.__dict__.update(changes)
    return new


_UNSET: Any = object()


def similarcontext(ctx: Context, *, metadata: Any = _UNSET, pass_: Any = _UNSET) -> Context:
    """A copy of ``ctx`` with new metadata and/or pass; the tag and hooks switch are kept."""
    _check(ctx, "similarcontext")
    changes = {}
    if metadata is not _UNSET:
        changes["metadata"] = metadata
    if pass_ is not _UNSET:
        _check_pass(pass_)
        changes["pass_"] = pass_
    return _copy(ctx, **changes)


def disablehooks(ctx: Context) -> Context:
    """A copy of ``ctx`` whose prehooks and posthooks are not called."""
    _check(ctx, "disablehooks")
    return _copy(ctx, hooks_enabled=False)


def _check_pass(pass_: Any) -> None:
    if pass_ is None:
        return
    from .passes import Pass  # (with ``bytecode``: only a context that has a pass needs it)

    if not isinstance(pass_, Pass):
        from ._saferepr import short_repr

        raise TypeError(f"pass_ must be a cassette_hook.Pass (or None), not {short_repr(pass_)}; "
                        "wrap a transform(ctx_type, func, code) as ch.Pass(transform)")


def _check(ctx: object, what: str) -> None:
    if not isinstance(ctx, Context):
        raise TypeError(not_a_context(ctx, what))


def checked(ctx: Context, what: str) -> Context:
    """``ctx``, if it is a context; else the error ``what()`` gives for it."""
    _check(ctx, what)
    return ctx


def not_a_context(obj: object, what: str) -> str:
    """The message for ``what(obj, ...)`` given something that is not a context instance."""
    if isinstance(obj, type) and issubclass(obj, Context):
        name = obj.__qualname__
        return (f"{what}() takes a context instance as its first argument, not the class {name}; "
                f"write {what}({name}(), ...)")
    from ._saferepr import short_repr

    return f"{what}() takes a context as its first argument, not {short_repr(obj)}; write {what}(ctx, ...)"


def _named(ctx: Context) -> str:
    """``ctx`` as an error names it: its class and a short repr of its metadata that runs
    no code of the program's (``_saferepr.context_repr``)."""
    from ._saferepr import context_repr  # (only for an error: not at every start)

    return context_repr(ctx)


# -- the runtime above the stack -------------------------------------------------------

# The runtime -- the generics, the plans, the hot path -- reads the stack, so it sits above
# this module, and ``import cassette_hook`` does not import it (it costs more than the rest
# of a start).  The first context class made or context entered loads it: ``load_runtime``
# is set by the package's ``__init__``, which sits above everything, and as the runtime
# loads it hands this module what the stack asks of it (:func:`provide`).
_register_hooks: Callable[[type[Context]], None] | None = None
_plan_for: Callable[[Context], Plan] | None = None


def provide(*, register_hooks: Callable[[type[Context]], None] | None = None,
            plan_for: Callable[[Context], Plan] | None = None) -> None:
    """What the runtime hands the stack as it loads: ``generics`` the registration of a
    context class's hook methods (early: the runtime defines context classes of its own),
    ``callsites`` the plans, last, once the hot path they feed is ready."""
    global _register_hooks, _plan_for
    if register_hooks is not None:
        _register_hooks = register_hooks
    if plan_for is not None:
        _plan_for = plan_for


def load_runtime() -> None:
    """Import the runtime: replaced by the package's ``__init__`` as it loads this module,
    before anything can make a context class or enter a context."""
    raise AssertionError("cassette_hook/__init__.py sets context_stack.load_runtime")


def plan_of(ctx: Context) -> Plan:
    """The plan ``ctx``'s class runs with (see :mod:`cassette_hook.runtime.plan`)."""
    if _plan_for is None:
        load_runtime()
    return _plan_for(ctx)  # type: ignore[misc]  # (loaded)


# -- the stack -------------------------------------------------------------------------

# Each change of the stack is atomic with respect to an interrupt (a KeyboardInterrupt, an
# exception from a signal handler, at any line or signal check): ``push`` either pushes or
# raises having changed nothing; ``pop``, once it has checked its context, pops, even when
# it raises the interrupt.  Each step of them is one line whose only call comes last, or
# is idempotent, or is recorded on the entry in the same line (``raises_limit``,
# ``tagged``), so that what follows an interrupt knows what it has to undo or finish.
# (See docs/internals.md, "Interrupts".)

def push(ctx: Context) -> Entry:
    """Make ``ctx`` the innermost active context (a :class:`Context`: callers check)."""
    below = top()
    entry = _made(Entry(ctx, below, outer=active.get()))  # (the watchers' changes hold without the push)
    try:
        _push_steps(entry)
        return entry
    except BaseException:
        _pop_steps(entry, pushed=active.get() is entry)
        raise


def _push_steps(entry: Entry) -> None:
    if entry.below is None:
        recursion_budget.acquire(entry)
    tag = entry.ctx.tag
    if tag is not None:  # the tag's dynamic extent (see ``tagging.leave``)
        tag.depth += 1; entry.tagged = True  # noqa: E702  # (one step: no signal check between)
    active.set(entry)


def _pop_steps(entry: Entry, pushed: bool = True) -> None:
    """Undo what ``entry``'s push did; each step may run twice."""
    if pushed:
        active.set(entry.outer)
    if entry.tagged:
        entry.ctx.tag.depth -= 1; entry.tagged = False  # noqa: E702
    recursion_budget.release(entry)  # (if it holds the raise)


def pop(ctx: Context) -> None:
    """Deactivate ``ctx``, which must be the innermost active context."""
    entry = top()
    if entry is None or entry.ctx is not ctx:
        if entry is None and _closed:
            return  # (a generator closed at exit leaving its ``with ctx:`` block: see close)
        raise RuntimeError(f"cannot deactivate {_named(ctx)}: the innermost active context is "
                           f"{'none' if entry is None else _named(entry.ctx)}")
    try:
        _pop_steps(entry)
    except BaseException:
        _pop_steps(entry)  # an interrupt: the steps it cut short, finished
        raise
    del entry  # (the last reference, most often: it is no longer live)
    _settle()


def pop_at_exit(ctx: Context) -> None:
    """What a ``with`` block of ``ctx`` does as it ends: :func:`pop`, then, for a tagging
    context, the end of its tag's extent if this was its outermost activation
    (``Tag.leave``: the wrappers made inside it unwrapped).  Done here, by the exit that
    calls ``pop`` again after an interrupt, rather than by a Python ``__exit__`` of the
    tagging class, whose first line an interrupt could cut short before anything was
    popped (docs/internals.md, "Interrupts")."""
    pop(ctx)
    tag = ctx.tag
    if tag is not None:
        tag.leave(None)


def pop_if_pushed(ctx: Context, held: Any) -> None:
    """Pop ``ctx`` if it was pushed since the stack's variable held ``held`` (what it held
    before a :func:`push` of ``ctx``): for code that pushes and must pop even when an
    interrupt arrives right after the push, before the push's result is stored (a
    ``with`` block's ``__enter__``, ``recurse``).  ``push`` itself either pushed or left
    the variable as it was."""
    if active.get() is not held:
        pop(ctx)


_closed = False


def close() -> None:
    """At interpreter exit: no context is active in this thread from now on.  A ``with``
    block of a context that a generator suspended in it, or a finalizer, leaves later
    deactivates nothing, as the context already is."""
    global _closed
    _closed = True
    active.set(None)


# -- the whole-program contexts: the bottom of every stack ------------------------------

_whole_program: list[Context] = []
_bottom: Entry | None = None  # the top of the whole-program stack: the variable's default


def whole_program() -> list[Context]:
    """The whole-program contexts, outermost first."""
    return list(_whole_program)


def push_whole_program(contexts: Iterable[Context]) -> None:
    """Make ``contexts`` (the last one innermost) active in every thread and task, from
    now on, below the contexts each of them activates itself."""
    contexts = list(contexts)
    for ctx in contexts:
        _check(ctx, "activating")
    _whole_program.extend(contexts)
    _rebase()


def pop_whole_program(contexts: Iterable[Context]) -> None:
    """Deactivate whole-program contexts (any of them, in any order)."""
    for ctx in contexts:
        for index, active_ctx in enumerate(_whole_program):
            if active_ctx is ctx:
                del _whole_program[index]
                break
        else:
            raise RuntimeError(f"cannot deactivate {_named(ctx)}: it is not a whole-program context")
    _rebase()
    _settle()


def _rebase() -> None:
    """Replace the stack's variable by one whose default is the whole-program stack.

    The calling thread keeps the contexts it activated itself (a ``with`` block around
    this call), now above the new whole-program stack.  Stacks that other threads and
    tasks had set belong to the old variable: activate whole-program contexts before the
    program starts threads with contexts of their own (as the command line does).
    """
    global active, _bottom
    was, bottom = _bottom, None
    for ctx in _whole_program:
        bottom = _made(Entry(ctx, bottom))
    new: ContextVar[Entry | None] = ContextVar("cassette_hook.active", default=bottom)
    own = active.get(_NOT_SET)
    if own is not _NOT_SET:
        new.set(_moved(own, was, bottom))
    if bottom is not None and was is None:
        recursion_budget.acquire(bottom)
    elif bottom is None and was is not None:
        recursion_budget.release(was)
    elif bottom is not None and was is not None:
        bottom.raises_limit, was.raises_limit = was.raises_limit, False  # (the raise moves to the new bottom)
    active, _bottom = new, bottom
    _rebound()
    _retire(was)


def _retire(entry: Entry | None) -> None:
    """Tell the watchers that the whole-program stack ``entry`` tops is read no more.  It
    may live on: the old variable stays, holding it as its default, in every
    ``contextvars.Context`` that set it -- on the pure-Python path, that of each thread
    where a hook ran (``callees.run_popped`` puts the stack back by value) -- and no
    context of it must seem active for that (``switch.active``: the lazy hook would never
    give idle code back its compiled code after ``attach``)."""
    while entry is not None:
        _retired(entry)
        entry = entry.below


def _moved(stack: Entry | None, old_bottom: Entry | None, new_bottom: Entry | None) -> Entry | None:
    """``stack`` with the entries above ``old_bottom`` moved onto ``new_bottom``; a stack
    not built on ``old_bottom`` (inside a hook of a whole-program context) stays as it is.

    Each moved entry is replaced by a copy, which the ``with`` block's pop will pop: the
    copy takes over what the original's pop would undo (its raise of the recursion limit,
    its count in its tag's depth), and the original, which the old variable still holds in
    this thread, is retired, as the old whole-program entries are (``_retire``)."""
    above: list[Entry] = []
    entry = stack
    while entry is not old_bottom:
        if entry is None:
            return stack
        above.append(entry)
        entry = entry.below
    for entry in reversed(above):
        new_bottom = _made(_taken_over(entry, new_bottom))
        _retired(entry)
    return new_bottom


def _taken_over(entry: Entry, below: Entry | None) -> Entry:
    """A copy of ``entry`` on ``below`` that holds what ``entry`` held, which holds nothing more."""
    copy = Entry(entry.ctx, below, entry.raises_limit)
    copy.tagged, entry.raises_limit, entry.tagged = entry.tagged, False, False
    return copy
