"""The profile's view of generators and coroutines: each resume of one's frame is a call of
its function (docs/contexts.md, "Generators and coroutines").

A call site sees the call that makes a generator, which returns at once; what runs its
body is each ``next()``, ``send``, ``throw``, a ``for`` loop's step, ``yield from`` or
``await``, none of which is a call site.  Without more, the body's time and the calls it
makes are charged to whoever iterates it.  cProfile's accounting, which this one
follows, charges each resume of the frame to the generator's function instead: a call of
its row under the running call, that ends when the frame yields, returns or raises.

It is told by ``sys.monitoring`` (3.12+), through a tool id of its own, with callbacks
that push and pop the generator's node on the running thread's stack of every profile
that counts this way, as ``<garbage collection>`` and ``<import ...>`` rows are pushed.
The callbacks here are the reference; where ``_recording`` is built its C ones
(``_recording.c``, "Resumes") are registered instead, the same steps at a fifth of the
cost.  Only frames of code cassette_hook rewrote are counted (a generator of the
program's, run under the profile): the other frames' events are disabled at their first
(``sys.monitoring.DISABLE``), so that a generator of the standard library, whose calls the
profile does not see either, stays in the time of the call that runs it, as any of its
code does.  ``PY_UNWIND`` and ``PY_THROW`` cannot be disabled: they are a test of the
code's flags for frames that are not generators.

3.10 and 3.11 have no ``sys.monitoring``: there the profile gives the caller's view.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import atexit
import sys
import threading
import weakref
from time import perf_counter_ns
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

from ._calltree import _recording

if TYPE_CHECKING:
    from ._calltree import Node
    from .profile import ProfileContext

_GENERATORS = 0x20 | 0x80 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR
_OURS = "__cassette_hook_"  # the prefix of every name switched code loads (rewrite/_names.py)
_COMPILED = frozenset({str, bytes, int, float, complex, bool, type(None), type(...), tuple, frozenset, CodeType})
"""The types of the constants compiled code holds."""
_TOOL_NAME = "cassette_hook profile"
_TOOL_IDS = (4, 3)  # the ids no tool of CPython's claims (DEBUGGER 0, COVERAGE 1, PROFILER 2, OPTIMIZER 5)

_profiles: tuple[weakref.ref[ProfileContext], ...] = ()
"""The profiles that count this way, weakly: a tuple, which the callbacks go through in
a few nanoseconds where a ``WeakSet``'s iteration costs microseconds."""
_tool: int | None = None


class _Running(threading.local):
    """Per thread: the generator frames running now that pushed nodes, innermost last, as
    ``(code, [(stack, node), ...])``."""

    def __init__(self) -> None:
        self.frames: list[tuple[CodeType, list[tuple[list[Node], Node]]]] = []


_running = _Running()


def counted(code: CodeType) -> bool:
    """Is ``code`` a generator's or coroutine's that cassette_hook rewrote?  A twin's code
    holds the hooks its call sites call among its constants, objects no compiler makes;
    switched code loads them by names of ours (``rewrite/_names.py``)."""
    if not code.co_flags & _GENERATORS:
        return False
    for constant in code.co_consts:  # (loops, not any(): a callback runs this at each event of a generator)
        if type(constant) not in _COMPILED:
            return True
    for name in code.co_names:
        if name.startswith(_OURS):
            return True
    return False


def watch(profile: ProfileContext) -> bool:
    """Charge the resumes of generators to them in ``profile``, from now on; False where
    this cannot be done (3.10, 3.11, or no tool id free), where it gives the caller's view."""
    global _tool, _profiles
    if sys.version_info < (3, 12):
        return False
    if _tool is None:
        monitoring = sys.monitoring
        tool = next((i for i in _TOOL_IDS if monitoring.get_tool(i) is None), None)
        if tool is None:
            return False
        monitoring.use_tool_id(tool, _TOOL_NAME)
        events = monitoring.events
        c: Any = _recording  # (the same callbacks in C, where it is built)
        callbacks = (_resumed, _thrown_into, _suspended, _unwound) if c is None else (
            c.resumed, c.thrown_into, c.suspended, c.unwound)
        for event, callback in ((events.PY_START, callbacks[0]), (events.PY_RESUME, callbacks[0]),
                                (events.PY_THROW, callbacks[1]), (events.PY_YIELD, callbacks[2]),
                                (events.PY_RETURN, callbacks[2]), (events.PY_UNWIND, callbacks[3])):
            monitoring.register_callback(tool, event, callback)
        _tool = tool
        atexit.register(_stop)
    if not _profiles:
        events = sys.monitoring.events
        sys.monitoring.set_events(_tool, events.PY_START | events.PY_RESUME | events.PY_THROW | events.PY_YIELD
                                  | events.PY_RETURN | events.PY_UNWIND)
    _profiles += (weakref.ref(profile, _forget),)
    _share()
    return True


def _share() -> None:
    """Tell the C callbacks, where they are the ones registered, which profiles there are."""
    if _recording is not None and sys.version_info >= (3, 12):
        _recording.set_resume_profiles(_profiles, sys.monitoring.DISABLE)


def _forget(dead: weakref.ref[ProfileContext]) -> None:
    """A profile is gone: no longer one the callbacks go through; with none left, no
    events either (they would cost the program for nothing)."""
    global _profiles
    _profiles = tuple(ref for ref in _profiles if ref is not dead)
    _share()
    if not _profiles and _tool is not None and sys.version_info >= (3, 12):
        sys.monitoring.set_events(_tool, 0)


def _stop() -> None:
    """At exit, before the reports are written: no more events (the interpreter's
    finalization, which runs frames and unwinds them, would call back into this module
    as it is torn down).  The generators still running are counted as the calls still
    running are (``ProfileContext.process_ending``)."""
    global _tool
    if _tool is not None and sys.version_info >= (3, 12):
        sys.monitoring.set_events(_tool, 0)
        sys.monitoring.free_tool_id(_tool)
        _tool = None


def _resumed(code: CodeType, offset: int) -> Any:
    """``PY_START`` or ``PY_RESUME``: a frame starts or resumes (a generator's first
    ``next()`` is its start; calling a generator function does not start its frame)."""
    if not counted(code):
        return _DISABLE
    _push(code)
    return None


def _thrown_into(code: CodeType, offset: int, exception: BaseException) -> None:
    """``PY_THROW``: ``throw()`` or ``close()`` resumes a frame with an exception (not to
    be disabled: tested here)."""
    if counted(code):
        _push(code)


def _suspended(code: CodeType, offset: int, value: object) -> Any:
    """``PY_YIELD`` or ``PY_RETURN``: the frame yields or returns."""
    if not counted(code):
        return _DISABLE
    _pop(code)
    return None


def _unwound(code: CodeType, offset: int, exception: BaseException) -> None:
    """``PY_UNWIND``: the frame ends by an exception (every frame's: not to be disabled)."""
    if code.co_flags & _GENERATORS:
        _pop(code)


def _push(code: CodeType) -> None:
    """A call of the generator's function starts, under the running call, in each profile
    that counts this way and times calls in this thread."""
    pushed = []
    name = None
    for ref in _profiles:
        profile = ref()
        if profile is None:
            continue
        stack = getattr(profile._threads, "stack", None)
        if stack is None or len(stack) == 1:  # (else a profiled call runs: the common case, at once)
            stack = profile._resuming_stack()
            if stack is None:
                continue
        if name is None:
            frame: FrameType = sys._getframe(2)  # (the generator's: this, then the callback)
            name = _name(code, frame)
        parent = stack[-1]
        node = parent.children.get(name)
        if node is None:
            node = profile._generator_node(parent, name, code)
        stack.append(node)
        pushed.append((stack, node))
        node.start = perf_counter_ns()
    _running.frames.append((code, pushed))


def _pop(code: CodeType) -> None:
    """The call :func:`_push` started ends: counted and timed, if still the running one."""
    end = perf_counter_ns()
    frames = _running.frames
    if not frames or frames[-1][0] is not code:
        return  # (a frame that was running before the profile began, or that no profile saw start)
    for stack, node in frames.pop()[1]:
        if stack and stack[-1] is node:
            stack.pop()
            node.total += end - node.start
            node.calls += 1


def _name(code: CodeType, frame: FrameType) -> str:
    """The generator function's name as ``_names.name_of`` names it: the module its
    function was made in (its globals' ``__name__``) and the code's qualname."""
    if sys.version_info >= (3, 11):  # (always: called on 3.12+ only)
        qualname = code.co_qualname
    else:
        qualname = code.co_name
    module = frame.f_globals.get("__name__")
    return f"{module}.{qualname}" if type(module) is str and module else qualname


if sys.version_info >= (3, 12):
    _DISABLE: Any = sys.monitoring.DISABLE
else:
    _DISABLE = None
