"""Calling C code as the plain program would.

Most primitives are just called.  A few builtins behave differently when called from
cassette_hook's frames rather than the user's, or need their Python callbacks
overdubbed, and are handled here, found by identity (``id``: these builtins live as long
as the interpreter, and an ``id`` lookup works for any callee, hashable or not):

- frame-sensitive builtins (``locals()``, ``super()``, ``sys._getframe()``,
  ``warnings.warn`` ...) are evaluated against the user's frame;
- higher-order builtins (``map``, ``sorted(key=)``, ``re.sub`` ...) get their Python
  callbacks wrapped as call sites, so C code calling back into Python is overdubbed, and
  builtins that iterate an argument (``sum``, ``list``, ``str.join`` ...) get a
  stand-in whose ``iter()`` is a call site when its class defines ``__iter__`` in Python;
- ``sys.getrecursionlimit``/``setrecursionlimit`` read and set the limit the program
  set, not the one raised for the extra frames of overdubbed calls.

On CPython 3.11+ a fast context calls primitives straight from the user's frame, where
the frame-sensitive ones need no help; see ``callsites.callable_for``.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__, program_namespace  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import __future__
import _signal  # type: ignore[import-not-found]  # (signal.signal is its Python wrapper)
import _thread
import atexit
import contextvars
import functools
import itertools
import operator
import re
import sys
import threading
import warnings
import weakref
from types import BuiltinFunctionType, FrameType, FunctionType, MethodDescriptorType, MethodType, ModuleType
from typing import Any, Callable, cast

from . import hotpath, operators, receivers, thread_bootstrap
from .. import context_stack, dispatch, generics
from .._budget import recursion_budget
from .._own import is_own_frame, strip_traceback

Handler = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]  # (f, args, kwargs) -> result

# A builtin method bound that takes its defining class (METH_METHOD: ``re.Pattern.match``,
# ``array.array.extend``), of type ``builtin_method``: a subclass of BuiltinFunctionType
# with its layout, which ``types`` does not name.  Every test of a callee's kind that asks
# for BuiltinFunctionType asks for this one too, as the C path's ``is_builtin`` does
# (docs/internals.md, "Callee kinds").
CMethodType = cast("type[BuiltinFunctionType]", type(re.compile("").match))


def call_primitive(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call ``f(*args, **kwargs)`` as the plain program would, from the user's frame."""
    handler = SPECIAL.get(id(f))
    if handler is None and (type(f) is BuiltinFunctionType or type(f) is CMethodType) and f.__name__ in INDIRECT_NAMES:
        unbound = getattr(type(f.__self__), f.__name__, None)  # a bound method: ``items.sort``
        handler = SPECIAL.get(id(unbound))
        if handler is not None:
            f, args = unbound, (f.__self__, *args)
    if handler is not None:
        return handler(f, args, kwargs)
    return f(*args, **kwargs)


def primitive(f: Any, /, *args: Any, **kwargs: Any) -> Any:
    try:
        return call_primitive(f, args, kwargs)
    except BaseException as exc:  # (the program's traceback: without this frame and ours below it)
        strip_traceback(exc)
        raise


# -- frames ----------------------------------------------------------------------------

_frame_at = sys._getframe  # bound now: a program may delete sys._getframe (attrs tests do)


def user_frame() -> FrameType:
    """The frame of the program that made the call being emulated: the innermost one that
    is neither cassette_hook's own nor an overload's (see :func:`_program_frame`)."""
    frame = _program_frame(_frame_at(1))
    assert frame is not None
    return frame


def _program_frame(frame: FrameType | None) -> FrameType | None:
    """``frame``, or the first frame above it, that the plain program would have.

    Skipped: cassette_hook's frames, and a user's overload that handed the call on with
    ``recurse``.  Under ``def overdub(self, f, *args): return ch.recurse(self, f, *args)``
    the call ``eval("a * b")`` reaches the primitive from the overload's frame, but the
    program made it one frame further out: that is where ``a`` is.  An overload is told
    from a program function by its code (an ``overdub`` or ``execute`` method's).  On the C
    hot path ``recurse`` has no frame, and the overload's frame is the callee's caller; on
    the pure path (and past a thread's budget of C levels) ``recurse``'s frame sits between.
    An overload is kept where it called ``ch.overdub`` itself: the call being emulated is
    then the new context's, made there (the frames of ours just below the overload's are
    the entry point's: ``generics.overdub``'s call, or ``callees._default_overdub`` called
    as a function).
    """
    overloads = _overload_codes()
    entered = False  # do the frames of ours just below this one include the entry point's?
    while frame is not None:
        code = frame.f_code
        if is_own_frame(frame):
            entered = entered or code is _OVERDUB_CALL or code.co_name == "_default_overdub"  # (the one so named)
        elif code not in overloads or entered:
            return frame
        else:
            entered = False
        frame = frame.f_back
    return None


def _overload_codes() -> frozenset[Any]:
    """The code objects the ``overdub`` and ``execute`` methods registered now run (a
    method registered with a ``f`` that is not positional-only runs a copy that makes it so)."""
    global _overloads
    if _overloads[0] != dispatch.generation:  # a method was registered or removed
        _overloads = (dispatch.generation, frozenset(
            getattr(method, "__code__", None) for generic in (generics.overdub, generics.execute)
            for method in generic.running_methods()))
    return _overloads[1]


_overloads: tuple[int, frozenset[Any]] = (-1, frozenset())  # (dispatch.generation, the codes then)


_OVERDUB_CALL = generics.OverdubGeneric.__call__.__code__


def _outer_frame(frame: FrameType, depth: int) -> FrameType:
    """``depth`` program frames above ``frame`` (see :func:`_program_frame`)."""
    for _ in range(depth):
        up = _program_frame(frame.f_back)
        if up is None:
            raise ValueError("call stack is not deep enough")
        frame = up
    return frame


def _locals_of(frame: FrameType) -> dict[str, Any]:
    found = frame.f_locals
    return found if type(found) is dict else dict(found)  # 3.13: a snapshot, as locals() gives


def _on_user_frame(emulate: Callable[[FrameType, tuple[Any, ...]], Any]) -> Handler:
    """A handler that runs ``emulate(user_frame, args)`` when the call has no keyword
    arguments and matches ``emulate``'s case, else the builtin itself."""

    def handler(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not kwargs:
            result = emulate(user_frame(), args)
            if result is not _NOT_MINE:
                return result
        return f(*args, **kwargs)

    return handler


_NOT_MINE: Any = object()


def _no_args(emulate: Callable[[FrameType], Any]) -> Handler:
    return _on_user_frame(lambda frame, args: _NOT_MINE if args else emulate(frame))


def _namespaced(frame: FrameType, args: tuple[Any, ...]) -> Any:
    """``eval``/``exec`` arguments with the user's namespaces where the call left them out."""
    return (args[0], frame.f_globals, _locals_of(frame)) if len(args) == 1 else _NOT_MINE


# The compiler flags a ``from __future__ import`` sets (``annotations``, ``barry_as_FLUFL``
# ...; not nested_scopes' CO_NESTED, which every nested function has: it changes nothing).
_FUTURE_FLAGS = functools.reduce(
    operator.or_, (getattr(__future__, name).compiler_flag for name in __future__.all_feature_names)
) & ~__future__.nested_scopes.compiler_flag
_CALLERS: dict[int, Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]] = {}


def _caller_with_future(flags: int) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]:
    """``call(f, args, kwargs)``, calling ``f`` from a frame whose code has the ``__future__``
    flags ``flags`` (made once per set of flags; its file is this one: a frame of ours)."""
    call = _CALLERS.get(flags)
    if call is None:
        source = "def call(f, args, kwargs):\n    return f(*args, **kwargs)\n"
        namespace = program_namespace({})  # (what exec(source, {}) finds from there: the program's)
        exec(compile(source, __file__, "exec", flags=flags, dont_inherit=True), namespace)
        call = _CALLERS.setdefault(flags, namespace["call"])
    return call


def _compiling(namespaced: bool) -> Handler:
    """``compile``, and ``eval``/``exec`` (``namespaced``: with the user's namespaces where the
    call left them out).  Given source, each compiles it with the ``from __future__``
    imports of the frame that calls it (CPython reads them off the calling frame's code):
    called from one of ours, the source would get ours (``annotations``: under a context
    with a hook, ``exec("def f(x: int): ...")`` made ``f.__annotations__`` strings, and on
    3.14 hid the ``NameError`` of an undefined name).  So the builtin is called from a frame
    with the user's."""

    def handler(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        frame = user_frame()
        call = _caller_with_future(frame.f_code.co_flags & _FUTURE_FLAGS)
        if namespaced and not kwargs:
            given = _namespaced(frame, args)
            if given is not _NOT_MINE:
                return call(f, given, {})
        return call(f, args, kwargs)

    return handler


def _super(frame: FrameType) -> Any:
    code = frame.f_code
    if code.co_argcount == 0:
        raise RuntimeError("super(): no arguments")
    if "__class__" not in code.co_freevars:
        raise RuntimeError("super(): __class__ cell not found")
    names = _locals_of(frame)
    return super(names["__class__"], names[code.co_varnames[0]])


def _getframe(frame: FrameType, args: tuple[Any, ...]) -> Any:
    return _outer_frame(frame, operator.index(args[0]) if args else 0)


def _warn(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``warnings.warn`` with its ``stacklevel`` counted in user frames."""
    kwargs = dict(kwargs)
    positional, level = list(args), kwargs.pop("stacklevel", None)
    if level is None:
        level = positional.pop(2) if len(positional) > 2 else 1
    try:
        target: FrameType | None = _outer_frame(user_frame(), max(level, 1) - 1)
    except ValueError:
        target = None
    frame: FrameType | None = _frame_at(0)
    raw = 1
    while frame is not None and frame is not target:
        frame, raw = frame.f_back, raw + 1
    return f(*positional, stacklevel=raw if target is not None else sys.maxsize, **kwargs)


def _with_the_programs_builtins(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``FunctionType(code, globals)`` gives the function the builtins of the frame that
    calls it where ``globals`` has none: from a frame of ours, the engine's
    (docs/internals.md, "The engine's builtins"); so it is called from one with the
    program's, as ``exec``'s."""
    return _caller_with_future(0)(f, args, kwargs)


_FRAME_SENSITIVE: dict[Any, Handler] = {
    locals: _no_args(_locals_of), vars: _no_args(_locals_of),
    dir: _no_args(lambda frame: sorted(_locals_of(frame))),
    globals: _no_args(lambda frame: frame.f_globals), super: _no_args(_super),
    eval: _compiling(namespaced=True), exec: _compiling(namespaced=True), compile: _compiling(namespaced=False),
    sys._getframe: _on_user_frame(_getframe), warnings.warn: _warn, FunctionType: _with_the_programs_builtins,
}
if sys.version_info >= (3, 12):
    _FRAME_SENSITIVE[sys._getframemodulename] = _on_user_frame(
        lambda frame, args: _outer_frame(frame, args[0] if args else 0).f_globals.get("__name__")
    )


# -- callbacks from C ------------------------------------------------------------------

def _overdubbed(callback: Any) -> Any:
    """``callback`` as a call site: C code calling it back is overdubbed like a call would be."""
    if type(callback) in _CALLED_BACK:
        return functools.partial(hotpath.call, callback)
    return callback


_CALLED_BACK = frozenset({FunctionType, MethodType, functools.partial})  # what _overdubbed makes a call site


class _Arguments:
    """A builtin whose arguments lead back into Python.

    ``callbacks`` (positions) and ``keyword`` are Python callbacks: they become call sites,
    so C code calling them back is overdubbed (only in calls with ``nargs`` or more
    positional arguments).  ``iterates`` are positions the builtin iterates at once: when
    the class of such an argument defines ``__iter__`` in Python, the builtin gets a
    stand-in whose ``iter()`` is a call site (``operators.iterated``; ``iterates_alone``:
    only when it is the only positional argument, as ``max(xs)`` but not ``max(a, b)``),
    except for instances of ``copies``, which the builtin copies without iterating
    (``set(s)`` of a ``set`` subclass).

    :meth:`prepare` only makes the arguments, so that the C hot path can call the builtin
    itself: the callbacks then run with the program's frame below them, as plain.
    """

    __slots__ = ("callbacks", "keyword", "nargs", "iterates", "iterates_alone", "copies")

    def __init__(self, *callbacks: int, keyword: str | None = None, nargs: int = 0, iterates: tuple[int, ...] = (),
                 iterates_alone: bool = False, copies: tuple[type, ...] = ()) -> None:
        self.callbacks, self.keyword, self.nargs = tuple(sorted(callbacks)), keyword, nargs
        self.iterates, self.iterates_alone, self.copies = tuple(sorted(iterates)), iterates_alone, copies

    def prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # The positions are visited in order up to the last argument, and the arguments
        # copied only where one of them is replaced: most calls replace none (a builtin
        # callback, a tuple iterated), and this runs at each call of the builtin
        # (docs/performance.md, "A builtin's arguments prepared without copies").
        count, made = len(args), None
        if count >= self.nargs:
            for index in self.callbacks:
                if index >= count:
                    break
                if type(args[index]) in _CALLED_BACK:
                    made = made or list(args)
                    made[index] = _overdubbed(args[index])
        if self.keyword is not None and self.keyword in kwargs:
            kwargs = {**kwargs, self.keyword: _overdubbed(kwargs[self.keyword])}
        if self.iterates and not (self.iterates_alone and count != 1):
            for index in self.iterates:
                if index >= count:
                    break
                argument = args[index] if made is None else made[index]
                if type(argument) not in operators.ITERATED_IN_C and not isinstance(argument, self.copies):
                    iterated = operators.iterated(argument)
                    if iterated is not argument:
                        made = made or list(args)
                        made[index] = iterated
        return (args if made is None else tuple(made)), kwargs

    def __call__(self, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        args, kwargs = self.prepare(args, kwargs)
        return f(*args, **kwargs)


class _Extend(_Arguments):
    """``list.extend``: ``xs.extend(xs)`` is handed ``xs`` itself, which it may copy
    without iterating (3.13 does, for a ``list`` subclass too)."""

    __slots__ = ()

    def prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if len(args) == 2 and args[1] is args[0]:
            return args, kwargs
        return super().prepare(args, kwargs)


_extend = _Extend(iterates=(1,))


_EVERY = tuple(range(64))  # every positional argument (zip, map's iterables)

_HIGHER_ORDER: dict[Any, Handler] = {
    map: _Arguments(0, iterates=_EVERY[1:]), filter: _Arguments(0, iterates=(1,)),
    functools.reduce: _Arguments(0, iterates=(1,)),
    sorted: _Arguments(keyword="key", iterates=(0,)), list.sort: _Arguments(keyword="key"),
    min: _Arguments(keyword="key", iterates=(0,), iterates_alone=True),
    max: _Arguments(keyword="key", iterates=(0,), iterates_alone=True),
    functools.cmp_to_key: _Arguments(0),
    iter: _Arguments(0, nargs=2),  # iter(callable, sentinel)
    itertools.starmap: _Arguments(0, iterates=(1,)), itertools.takewhile: _Arguments(0, iterates=(1,)),
    itertools.dropwhile: _Arguments(0, iterates=(1,)), itertools.filterfalse: _Arguments(0, iterates=(1,)),
    itertools.groupby: _Arguments(1, keyword="key", iterates=(0,)),
    itertools.accumulate: _Arguments(1, keyword="func", iterates=(0,)),
    re.Pattern.sub: _Arguments(1), re.Pattern.subn: _Arguments(1),
}
if sys.version_info >= (3, 13):  # (what threading.Thread.start calls there)
    _HIGHER_ORDER[_thread.start_joinable_thread] = _Arguments(0, keyword="function")


# -- callbacks kept for later: threads, the event loop, atexit, signal handlers ----------
#
# Whatever a program's call hands to these runs later, from C, in another thread or at
# another time: a thread's ``_bootstrap`` (and so ``Thread.run``, a pool's worker loop and
# the program's functions it calls), a callback of the event loop (``Handle._run`` calls
# it through ``Context.run``), an ``atexit`` handler, a signal handler.  Wrapped as call
# sites, they are overdubbed by whatever context is active where and when they run: in a
# new thread, the whole-program contexts (docs/contexts.md, "Threads").

_HIGHER_ORDER[_thread.start_new_thread] = _Arguments(0)
_HIGHER_ORDER[contextvars.Context.run] = _Arguments(1)  # (bound, ``ctx.run(f)``: the context comes first)


class _Kept(functools.partial):  # type: ignore[type-arg]
    """A callback that ``atexit`` or ``signal`` keeps, as a call site: equal to the
    callback itself, so that ``atexit.unregister(f)`` finds it, and given back as the
    callback where those modules would show it (:func:`_shown`)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return other is self or bool(self.args[0] == other)

    def __hash__(self) -> int:
        return hash(self.args[0])


def _kept(callback: Any) -> Any:
    if type(callback) in (FunctionType, MethodType, functools.partial):
        return _Kept(hotpath.call, callback)
    return callback


def _shown(value: Any) -> Any:
    """What the program handed over, in place of the call site made of it."""
    return value.args[0] if type(value) is _Kept else value


def _atexit_register(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if not args:
        return f(*args, **kwargs)
    f(_kept(args[0]), *args[1:], **kwargs)
    return args[0]  # (what ``register`` returns: ``@atexit.register`` keeps the function)


def _signal_signal(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if len(args) == 2 and not kwargs:
        args = (args[0], _kept(args[1]))
    return _shown(f(*args, **kwargs))


def _signal_getsignal(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _shown(f(*args, **kwargs))


# -- threads started by a library's code that runs plain -------------------------------
#
# Where a plan runs ``threading`` as a primitive (the trace: ``libraries = False``),
# ``Thread.start`` is the call site, and the ``start_new_thread`` inside it is not: the
# thread's bootstrap, ``Thread.run`` and so its target run plain in the new thread,
# whatever contexts are active there, and the target would not be a call of its own
# (docs/internals.md, "Callbacks from C").  So ``Thread.start`` run as a primitive makes
# the target a call site before it starts the thread, and starts it from copies of
# ``threading``'s code that hand a subclass's own ``run``, ``_bootstrap`` and
# ``_bootstrap_inner``, the program's ``threading.excepthook`` and a ``Timer``'s function
# over as call sites (``thread_bootstrap``): the whole-program contexts, which are the new
# thread's, see those calls.

def _handed_to_a_thread(callback: Any) -> Any:
    """``callback``, which code that runs plain will call in another thread, as a call
    site (a :class:`_Kept`, equal to it); itself where no whole-program context will be
    active there to see it, or where it is not a Python callback."""
    return _kept(callback) if context_stack.whole_program() else callback


def _thread_start(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Thread.start`` run as a primitive, where whole-program contexts will see the new
    thread: its own code run from copies that hand a subclass's own ``run`` and the
    program's ``threading.excepthook`` over as call sites (``thread_bootstrap``), and,
    where the class keeps ``Thread.run``, the target as a call site for the time of the
    run (``Thread.run`` deletes ``_target`` when it returns; a start that fails puts it
    back; a subclass's ``super().run()`` is a call site: :func:`_thread_run`).  Read and set
    in the thread's ``__dict__``, and its class asked by ``type``: no code of the
    program's (a ``__setattr__``, a ``__class__`` property) is run."""
    thread: Any = args[0] if len(args) == 1 and not kwargs else None
    if not issubclass(type(thread), threading.Thread) or not context_stack.whole_program():
        return f(*args, **kwargs)
    own: dict[str, Any] = vars(thread)
    started: Any = own.get("_started")
    if not issubclass(type(started), threading.Event) or started.is_set():
        return f(*args, **kwargs)  # (not initialised, or started: start's own error)
    start = thread_bootstrap.seeing("Thread.start", thread, _kept) or functools.partial(f, thread)
    target = own.get("_target")
    kept = _kept(target) if type(thread).run is threading.Thread.run else target
    if kept is target:
        return start()
    own["_target"] = kept
    try:
        return start()
    except BaseException:
        own["_target"] = target
        raise


def _thread_run(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Thread.run`` run as a primitive: called from the program's code (a subclass's
    ``super().run()``, or ``thread.run()``), it calls the target plain; so the target is
    a call site for the time of the call, as :func:`_thread_start` makes it for a thread
    whose class keeps ``Thread.run`` (``run`` deletes ``_target`` when it returns)."""
    thread: Any = args[0] if len(args) == 1 and not kwargs else None
    own: dict[str, Any] = vars(thread) if issubclass(type(thread), threading.Thread) else {}
    target = own.get("_target")
    kept = _kept(target)
    if kept is target:
        return f(*args, **kwargs)
    own["_target"] = kept
    try:
        return f(*args, **kwargs)
    finally:
        if own.get("_target") is kept:  # (still there: run did not get to delete it)
            own["_target"] = target


def _thread_code(name: str) -> Handler:
    """A handler for ``threading``'s method of qualified name ``name`` (``Thread._bootstrap``,
    ``Thread._bootstrap_inner``, ``Timer.run``) run as a primitive: called from the
    program's code (a subclass's own ``_bootstrap`` calling ``super()._bootstrap()``, or a
    ``Timer``'s ``run``, which the copy of ``_bootstrap_inner`` calls as a call site, or the
    program does), it runs the copy of that code that hands the thread's ``run``, the
    program's ``threading.excepthook`` and a timer's ``function`` over as call sites
    (``thread_bootstrap``).  It runs in the calling thread, seen by its contexts."""

    def handler(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        thread: Any = args[0] if len(args) == 1 and not kwargs else None
        if issubclass(type(thread), threading.Thread):  # (asked by type: no __class__ of the program's read)
            copy = thread_bootstrap.seeing(name, thread, _kept)
            if copy is not None:
                return copy()
        return f(*args, **kwargs)

    return handler


# -- functions handed to a thread pool by a library's code that runs plain -------------
#
# Likewise a thread pool's function, under such a plan: ``pool.submit(f)``, ``pool.map(f,
# xs)``, ``asyncio.to_thread(f)`` and ``loop.run_in_executor(None, f)`` are each one call
# of a library's function, whose plain code puts ``f`` in a work item that a worker
# thread's plain loop calls (``_WorkItem.run``).  So each, run as a primitive, hands ``f``
# on as a call site (a :class:`_Kept`, equal to it), which the worker thread's
# whole-program contexts see called.  Only where the function reaches the standard
# library's work item as it was given: a pool whose class has its own ``submit`` (the
# program's, which would receive the call site: it is a call site of its own, and its
# ``super().submit(f)`` is the one wrapped) or, 3.14+, its own ``prepare_context`` (an
# ``InterpreterPoolExecutor``, which pickles the function for another interpreter) gets
# ``f`` itself.  The program could see the call site only in the pool's private queue
# (``pool._work_queue``'s items' ``fn``, or ``task`` on 3.14+): a ``Future`` holds no
# function (docs/internals.md, "Callbacks from C").

def _runs_work_as_given(executor: Any, *, through_submit: bool) -> bool:
    """Does the standard library's thread pool code run the function ``executor`` is given
    as it was given: is it a ``ThreadPoolExecutor`` whose class keeps the pool's
    ``prepare_context`` (3.14+) and, ``through_submit``, its ``submit``?"""
    from concurrent.futures import thread  # (imported: the call being run is of its code)

    pool = thread.ThreadPoolExecutor
    kind = type(executor)
    return issubclass(kind, pool) and all(
        operators.class_attribute(kind, name) is vars(pool).get(name)
        for name in (("submit", "prepare_context") if through_submit else ("prepare_context",)))


def _thread_pool_submit(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``ThreadPoolExecutor.submit(pool, fn, ...)`` run as a primitive: ``fn`` as a call
    site where the pool runs it as given."""
    if len(args) > 1 and _runs_work_as_given(args[0], through_submit=False):
        args = (args[0], _handed_to_a_thread(args[1]), *args[2:])
    return f(*args, **kwargs)


class _Submitting:
    """What the copy of ``Executor.map`` reads ``submit`` off (``receivers``): the pool's
    ``submit``, read as ``self.submit`` reads it, as a call site where it is code the
    running context's plan recurses into -- the program's own ``submit`` -- and as read
    otherwise (a library's executor's: as plain).  The pool is held weakly, as ``map``'s
    iterator holds it (3.14+, which submits more as it is iterated, through
    ``executor_weakref``): the copy of the iterator's code holds this receiver."""

    __slots__ = ("_pool",)

    def __init__(self, pool: Any) -> None:
        self._pool: weakref.ref[Any] = weakref.ref(pool)

    @property
    def submit(self) -> Any:
        pool: Any = self._pool()  # (alive: map, or its iterator that has just read it, holds it)
        submit = pool.submit  # (the program's lookup, if any)
        func = submit.__func__ if type(submit) is MethodType else None
        entry = context_stack.top()
        if type(func) is FunctionType and entry is not None and entry.plan.recurses_into(func):
            return _kept(submit)
        return submit


_map_copy: list[Any] = []  # [the copy's code, or None where it cannot be made], once made


def _map_submitting(map_: FunctionType, pool: Any) -> Any:
    """``Executor.map`` (``map_``) bound to ``pool``, run from a copy that reads each
    ``self.submit`` off a :class:`_Submitting` (in ``map``, in the comprehension or
    generator expression that submits and, 3.14+, in the iterator that submits more, as
    ``executor.submit``); None where the copy cannot be made."""
    if not _map_copy:
        try:
            code, found = receivers.swapped_code(map_.__code__, ("submit",), ("self", "executor"))
        except (RecursionError, MemoryError):
            return None  # (plain this time; tried again at the next)
        except Exception:  # a concurrent.futures or bytecode the copy cannot be made of: map runs plain
            code, found = None, {}
        _map_copy.append(code if found.get("submit") else None)
    code = _map_copy[0]
    if code is None:
        return None
    func = FunctionType(receivers.with_receiver(code, _Submitting(pool)), map_.__globals__, map_.__name__,
                        map_.__defaults__, map_.__closure__)
    func.__kwdefaults__, func.__qualname__ = map_.__kwdefaults__, map_.__qualname__
    return MethodType(func, pool)


def _executor_map(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Executor.map(pool, fn, *iterables)`` run as a primitive: for the standard library's
    thread pool, ``fn`` as a call site; for a pool whose ``submit`` is its own, a copy of
    ``map`` whose calls of ``self.submit`` are call sites (the program's ``submit``, which
    ``map`` calls plainly, would not be a call of its own)."""
    if len(args) < 2:
        return f(*args, **kwargs)
    pool = args[0]
    if _runs_work_as_given(pool, through_submit=True):
        return f(pool, _handed_to_a_thread(args[1]), *args[2:], **kwargs)
    from concurrent.futures import _base  # (imported: the call being run is of its code)

    if issubclass(type(pool), _base.Executor) and operators.class_attribute(type(pool), "submit") is not vars(
            _base.Executor).get("submit"):
        copy = _map_submitting(f, pool)
        if copy is not None:
            return copy(*args[1:], **kwargs)
    return f(*args, **kwargs)


def _hands_to_a_thread_pool(loop: Any, executor: Any) -> bool:
    """Does ``loop.run_in_executor(executor, f)`` give ``f`` as it is to the standard
    library's thread pool?  (``None``: the loop's default executor, which it makes a
    ``ThreadPoolExecutor`` where the program set none.)"""
    if executor is None:
        executor = getattr(loop, "__dict__", {}).get("_default_executor", _NOT_MINE)
        if executor is None:
            return True
    return executor is not _NOT_MINE and _runs_work_as_given(executor, through_submit=True)


def _is_coroutine_function(func: Any) -> bool:
    """Is ``func`` what asyncio's debug mode refuses in ``run_in_executor`` (a
    ``TypeError``)?  It would not know a call site made of one: such a function is left
    as it is."""
    import inspect  # (imported: asyncio imports it)

    return inspect.iscoroutinefunction(func) or getattr(func, "_is_coroutine", None) is not None


def _run_in_executor(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``loop.run_in_executor(executor, func, *args)`` (``BaseEventLoop``'s) run as a primitive."""
    if len(args) > 2 and not kwargs and not _is_coroutine_function(args[2]) \
            and _hands_to_a_thread_pool(args[0], args[1]):
        args = (*args[:2], _handed_to_a_thread(args[2]), *args[3:])
    return f(*args, **kwargs)


def _to_thread(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``asyncio.to_thread(func, *args)`` run as a primitive: it hands ``run_in_executor``
    of the running loop a ``functools.partial`` of ``contextvars.Context.run`` and ``func``
    (``func`` is wrapped where that loop gives it to the standard library's pool)."""
    from asyncio import base_events, events  # (imported: the call being run is asyncio's)

    loop = events._get_running_loop()
    if args and loop is not None and _hands_to_a_thread_pool(loop, None) and operators.class_attribute(
            type(loop), "run_in_executor") is vars(base_events.BaseEventLoop)["run_in_executor"]:
        args = (_handed_to_a_thread(args[0]), *args[1:])
    return f(*args, **kwargs)


# -- functions handed to a process pool by a library's code that runs plain ------------
#
# A process pool's function, under such a plan: ``Pool.map(f, xs)`` (and ``apply``,
# ``imap`` ...) and ``ProcessPoolExecutor.submit``/``map`` are each one call of
# ``multiprocessing``'s or ``concurrent.futures``' code, which pickles ``f`` into a task
# that a worker process's plain loop unpickles and calls.  So each, run as a primitive,
# hands ``f`` on as a :class:`_Shipped`: a call site that pickles as ``_received(f)``,
# which the worker unpickles as a call site of its own whole-program contexts (or as ``f``
# itself where it has none), so that they see the call.  Only a function that pickles by
# reference (its module's attribute of its qualified name is itself) is shipped this way:
# pickling it cannot fail, and so nothing else can (a lambda or a local function is
# handed on as it is, and fails to pickle as plain, with the same exception and notes).
# A bound method of such a function is shipped as a :class:`_ShippedMethod`, which
# pickles its object and its function's name as plain pickles the method, so that only
# what fails plain fails, and as plain.
# A ``multiprocessing.pool.ThreadPool``, a ``Pool`` whose workers are threads, calls the
# ``_Shipped`` itself: a call site there too.  Only where the function reaches the
# standard library's task as it was given: a pool whose class has its own version of a
# method the call goes through (the program's ``apply_async``, which ``apply`` calls)
# gets ``f`` itself (docs/internals.md, "Callbacks from C").

class _Shipped(_Kept):
    """A call site made of a process pool's function: pickled, it becomes
    ``_received(function)`` (the call site is made again on the other side, where the
    contexts are that process's)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return _received, (self.args[0],)


class _ShippedMethod(_Shipped):
    """A call site made of a process pool's bound method: pickled, it becomes
    ``_received_method(obj, name)``, as plain pickles the method as ``getattr(obj, name)``
    (multiprocessing's reducer, and the method's own ``__reduce__``), ``name`` its
    function's ``__name__``.  So its object is pickled once, where plain pickles it, and
    what it raises is plain's; the class is named as the method's type (``method``, of
    ``builtins``) because 3.14+ pickling names the type of the object whose reconstructor
    arguments fail in the exception's notes ("when serializing method reconstructor
    arguments"), which are then plain's too."""

    __slots__ = ()
    __module__ = "builtins"
    __qualname__ = "method"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        method = self.args[0]
        return _received_method, (method.__self__, method.__func__.__name__)


_ShippedMethod.__name__ = "method"


def _received_method(obj: Any, name: str) -> Any:
    """What a worker process unpickles a :class:`_ShippedMethod` as: the bound method
    plain unpickles (``getattr(obj, name)``) as :func:`_received` gives a function."""
    return _received(getattr(obj, name))


def _received(function: Any) -> Any:
    """What a worker process unpickles a :class:`_Shipped` as: a call site of its
    whole-program contexts, or the function itself where it has none (as a thread is
    handed one)."""
    return _handed_to_a_thread(function)


def _pickles_by_reference(function: Any) -> bool:
    """Is ``function`` a Python function that pickle saves as its module and qualified
    name, and finds again there?  (Read in the namespaces' dicts, kinds asked by
    ``type``: no module ``__getattr__``, class property or metaclass of the program's is
    run.)"""
    if type(function) is not FunctionType or type(function.__module__) is not str:
        return False
    found: Any = sys.modules.get(function.__module__)
    for part in function.__qualname__.split("."):  # (a local function's has "<locals>": not found)
        if issubclass(type(found), ModuleType):
            found = found.__dict__.get(part)
        elif issubclass(type(found), type):
            found = operators.class_attribute(found, part)
        else:
            return False
        if type(found) is staticmethod:
            found = found.__func__
    return found is function


def _shipped(function: Any) -> Any:
    """``function``, which a process pool's plain code pickles for a worker, as a call
    site the worker unpickles as its own (a :class:`_Shipped`, equal to it); itself where
    no whole-program context is active, or where it neither pickles by reference nor is a
    bound method of a function that does.  A ``functools.partial`` of either is handed on
    as a partial of the same type, arguments and attributes whose function is shipped
    (:func:`_partial_shipping`)."""
    if not context_stack.whole_program():
        return function
    site = _shipping(function)
    if site is not None:
        return site
    if type(function) is functools.partial:
        site = _shipping(function.func)
        if site is not None:
            return _partial_shipping(function, site)
    return function


def _shipping(function: Any) -> _Shipped | None:
    """The call site ``function`` is shipped as, where it pickles as a function by
    reference or as a bound method of one; else None."""
    if _pickles_by_reference(function):
        return _Shipped(hotpath.call, function)
    if type(function) is MethodType and _pickles_by_reference(function.__func__):
        return _ShippedMethod(hotpath.call, function)
    return None


def _partial_shipping(given: functools.partial[Any], site: _Shipped) -> Any:
    """A ``functools.partial`` like ``given`` whose function is ``site``, the call site
    of ``given``'s.  Pickled, it is what ``given`` is, but for its function: the same type,
    the same arguments, keywords and attributes, pickled by the same reduction in the
    same order, so what fails to pickle among them fails as plain (the same exception,
    message and, 3.14+, notes), and the program's ``__reduce__`` of an argument runs once,
    where the pool pickles the task.  Made by ``__setstate__``, which keeps the function
    as given: ``partial(shipped, ...)`` would flatten a partial subclass into its own."""
    made: Any = functools.partial(_Shipped)  # (any callable: replaced by the state)
    attributes = given.__dict__
    made.__setstate__((site, given.args, given.keywords or None,
                       dict(attributes) if attributes else None))
    return made


def _keeps(kind: type, base: type, names: tuple[str, ...]) -> bool:
    """Does ``kind``, a subclass of ``base``, keep ``base``'s own ``names``?"""
    return issubclass(kind, base) and all(
        operators.class_attribute(kind, name) is vars(base).get(name) for name in names)


# A Pool's methods that take the function, and the methods of the pool each goes through.
_POOL_ROUTES = {
    "apply": ("apply_async",), "apply_async": (),
    "map": ("_map_async", "_guarded_task_generation"), "starmap": ("_map_async", "_guarded_task_generation"),
    "map_async": ("_map_async", "_guarded_task_generation"),
    "starmap_async": ("_map_async", "_guarded_task_generation"),
    "imap": ("_guarded_task_generation",), "imap_unordered": ("_guarded_task_generation",),
}


def _shipping_method(module: str, pool: str, route: tuple[str, ...]) -> Handler:
    """A handler for a method of the process pool class ``module.pool`` that takes the
    function after the receiver: the function as a :class:`_Shipped` where the pool's
    class keeps ``route``, the pool's own methods the call goes through."""

    def handler(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        base = getattr(sys.modules[module], pool)  # (imported: the call being run is of its code)
        if len(args) > 1 and _keeps(type(args[0]), base, route):
            args = (args[0], _shipped(args[1]), *args[2:])
        return f(*args, **kwargs)

    return handler


# Functions of modules that cassette_hook does not import (asyncio's costs 20 ms), by module
# and qualified name: a plan that meets one as a primitive enters it in SPECIAL
# (:func:`note_primitive`), once it is sure it is the module's own.
_LATER: dict[tuple[str, str], Handler] = {
    ("concurrent.futures.thread", "ThreadPoolExecutor.submit"): _thread_pool_submit,
    ("concurrent.futures._base", "Executor.map"): _executor_map,
    ("asyncio.threads", "to_thread"): _to_thread,
    ("asyncio.base_events", "BaseEventLoop.run_in_executor"): _run_in_executor,
    **{("multiprocessing.pool", f"Pool.{name}"): _shipping_method("multiprocessing.pool", "Pool", route)
       for name, route in _POOL_ROUTES.items()},
    ("concurrent.futures.process", "ProcessPoolExecutor.submit"):
        _shipping_method("concurrent.futures.process", "ProcessPoolExecutor", ()),
    ("concurrent.futures.process", "ProcessPoolExecutor.map"):
        _shipping_method("concurrent.futures.process", "ProcessPoolExecutor", ("submit",)),
}
_ENTERED: list[FunctionType] = []  # those entered: kept alive, so that no other object takes their ids


def note_primitive(func: FunctionType) -> None:
    """A plan runs ``func`` as a primitive (its code is out of the plan's scope): if it is
    one of the functions of :data:`_LATER`, calls of it are emulated from now on."""
    module, name = func.__module__, func.__qualname__
    handler = _LATER.get((module, name)) if type(module) is str else None
    if handler is None or id(func) in SPECIAL:
        return
    found: Any = sys.modules.get(module)
    for part in name.split("."):
        found = getattr(found, "__dict__", {}).get(part)
    if found is func:
        _ENTERED.append(func)
        SPECIAL[id(func)] = handler
        INDIRECT.add(id(func))


class _FinalizerRef(_Arguments):
    """``weakref.ref(obj, callback)`` where the callback is a ``weakref.finalize``: what
    ``finalize.__init__`` makes, which the garbage collector calls back from C when
    ``obj`` dies, and whose ``__call__`` calls the program's function.  The finalizer is
    made a call site (a :class:`_Kept`), so that ``__call__`` runs overdubbed (where the
    plan recurses into ``weakref``) and its call of the function is seen.  The reference
    is the finalizer's own (``_registry``'s); ``peek()`` and ``detach()`` still give the
    function itself.  Any other callback is left alone: ``ref.__callback__`` gives it back
    to the program.  A preparer (an ``_Arguments``), not a handler: the C path calls the
    builtin itself, with one Python call for ``prepare``, where ``ref`` is common."""

    __slots__ = ()

    def prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if len(args) == 2 and issubclass(type(args[1]), weakref.finalize):  # (no __class__ read)
            return (args[0], _Kept(hotpath.call, args[1])), kwargs
        return args, kwargs


_KEPT: dict[Any, Handler] = {
    atexit.register: _atexit_register, _signal.signal: _signal_signal, _signal.getsignal: _signal_getsignal,
    threading.Thread.start: _thread_start, threading.Thread.run: _thread_run,
    **{getattr(threading, kind).__dict__[name]: _thread_code(f"{kind}.{name}")
       for kind, name in (("Thread", "_bootstrap"), ("Thread", "_bootstrap_inner"), ("Timer", "run"))},
    weakref.ref: _FinalizerRef(),
}


# Builtins that iterate an argument but take no callbacks (not called from the hot path
# through a wrapper: only contexts with hooks, whose primitives run here, reach into them).
_CONSUMERS: dict[Any, Handler] = {
    **{f: _Arguments(iterates=(0,)) for f in (sum, any, all, list, tuple, enumerate)},
    **{f: _Arguments(iterates=(0,), copies=(set, frozenset)) for f in (set, frozenset)},
    zip: _Arguments(iterates=_EVERY), str.join: _Arguments(iterates=(1,)), list.extend: _extend,
}


# -- the recursion limit ---------------------------------------------------------------

def _getrecursionlimit(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return recursion_budget.limit() if not args and not kwargs else f(*args, **kwargs)


def _setrecursionlimit(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if len(args) != 1 or kwargs:
        return f(*args, **kwargs)
    return recursion_budget.set_limit(args[0])


_RECURSION_LIMIT: dict[Any, Handler] = {
    sys.getrecursionlimit: _getrecursionlimit, sys.setrecursionlimit: _setrecursionlimit,
}

# Builtins the user's frame must not call directly (see ``callsites.callable_for``), and
# their names, which the hot path checks before anything else.
INDIRECT = {id(f) for f in (*_HIGHER_ORDER, *_KEPT, *_RECURSION_LIMIT)}
# (Of builtins only: the hot path asks a builtin callee its name first, and only it; a
# Python function such as ``Thread.start`` is found by ``id`` in ``INDIRECT``.)
INDIRECT_NAMES = frozenset(f.__name__ for f in (*_HIGHER_ORDER, *_KEPT, *_RECURSION_LIMIT)
                           if type(f) is not FunctionType)
# Their types: an instance of one is told apart by its id (``callees.note_called_as_is``).
INDIRECT_KINDS = frozenset(type(f) for f in (*_HIGHER_ORDER, *_KEPT, *_RECURSION_LIMIT))
# Of those, the functions of a module (``min``, ``sorted``, ``sys.getrecursionlimit``) and
# the methods of a class unbound (``list.sort``, as a method site loads it): they live as
# long as the process, so what a call site calls for each is made once.
INDIRECT_FUNCTIONS = tuple(f for f in (*_HIGHER_ORDER, *_KEPT, *_RECURSION_LIMIT)
                           if type(f) is MethodDescriptorType
                           or type(f) is BuiltinFunctionType and isinstance(f.__self__, ModuleType))
SPECIAL: dict[int, Handler] = {
    id(f): handler
    for f, handler in {**_CONSUMERS, **_FRAME_SENSITIVE, **_HIGHER_ORDER, **_KEPT, **_RECURSION_LIMIT}.items()
}
# The handlers that only make the arguments: id(f) -> prepare(args, kwargs) -> (args, kwargs).
PREPARERS = {key: handler.prepare for key, handler in SPECIAL.items() if isinstance(handler, _Arguments)}
