"""Programs that look at their own frames, for ``test_frames.py``.

Each ``case_*`` function is a small program that observes the call stack the way
libraries do (``sys._getframe``, ``inspect``, ``traceback``, ``logging``, ``warnings``,
``f_back`` walks, recursion probing) and returns what it saw as plain data.  The test
runs each one through :func:`entry` plainly and under contexts, and compares.

A frame is described as ``(file name, function name, line number)``.  Stacks are cut at
:func:`entry`'s frame (included): what lies above it is the test's own machinery (pytest
plainly, and ``overdub``'s one frame under a context), which the contract leaves out.

Line numbers matter here: the observations carry them, but plain and instrumented runs
load this same file, so they compare as they are.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
import traceback
import warnings
from types import FrameType
from typing import Any, Callable, Iterator

Frame = tuple[str, str, int]

HERE = os.path.abspath(__file__)


def entry(case: Callable[[], Any]) -> Any:
    """The top of every observed stack: ``case()`` called from here."""
    return case()


def _is_entry(name: str, filename: str) -> bool:
    return name == "entry" and os.path.abspath(filename) == HERE


def describe(frame: FrameType) -> Frame:
    return os.path.basename(frame.f_code.co_filename), frame.f_code.co_name, frame.f_lineno


def summary(item: traceback.FrameSummary | inspect.FrameInfo) -> Frame:
    return os.path.basename(item.filename), str(item.name if isinstance(item, traceback.FrameSummary)
                                                else item.function), item.lineno or 0


def up_to_entry(frames: list[Frame], filenames: list[str]) -> list[Frame]:
    """``frames`` (innermost first) up to and including the first one of :func:`entry`."""
    for i, (name, filename) in enumerate(zip((f[1] for f in frames), filenames)):
        if _is_entry(name, filename):
            return frames[:i + 1]
    raise AssertionError(f"entry() is not on the stack: {frames}")


def f_back_chain(frame: FrameType | None) -> list[Frame]:
    """Frames from ``frame`` outwards along ``f_back``, up to :func:`entry`."""
    out = []
    while frame is not None:
        out.append(describe(frame))
        if _is_entry(frame.f_code.co_name, frame.f_code.co_filename):
            return out
        frame = frame.f_back
    raise AssertionError(f"entry() is not on the stack: {out}")


def stack_below(frame: FrameType | None) -> list[tuple[str, str]]:
    """The whole stack from ``frame`` outwards along ``f_back``, uncut, as (file name,
    function name): at the top of a program, its first frame and what lies below it
    (``test_cli.py`` runs it under the command line; not a case: nothing is cut)."""
    out = []
    while frame is not None:
        out.append((os.path.basename(frame.f_code.co_filename), frame.f_code.co_name))
        frame = frame.f_back
    return out


# --- sys._getframe(n), inspect, traceback.extract_stack ------------------------------------

def case_getframe_by_depth() -> list[Frame]:
    return _getframe_outer()


def _getframe_outer() -> list[Frame]:
    return _getframe_inner(0)


def _getframe_inner(unused: int) -> list[Frame]:
    out = []
    depth = 0
    while True:  # sys._getframe(n) for n = 0, 1, ... as a library asking "who called me" does
        frame = sys._getframe(depth)
        out.append(describe(frame))
        if _is_entry(frame.f_code.co_name, frame.f_code.co_filename):
            return out
        depth += 1


def case_inspect_stack() -> list[Frame]:
    return _inspect_outer()


def _inspect_outer() -> list[Frame]:
    return _inspect_inner()


def _inspect_inner() -> list[Frame]:
    stack = inspect.stack(0)
    return up_to_entry([summary(info) for info in stack], [info.filename for info in stack])


def case_currentframe_f_back() -> list[Frame]:
    return _currentframe_outer()


def _currentframe_outer() -> list[Frame]:
    return _currentframe_inner()


def _currentframe_inner() -> list[Frame]:
    return f_back_chain(inspect.currentframe())


def case_stack_depth_along_f_back() -> int:
    """How deep am I?  Counted as libraries do, along ``f_back`` up to a known frame."""
    return _depth_outer()


def _depth_outer() -> int:
    return _depth_inner()


def _depth_inner() -> int:
    return len(f_back_chain(sys._getframe()))


def case_extract_stack() -> list[Frame]:
    return _extract_outer()


def _extract_outer() -> list[Frame]:
    return _extract_inner()


def _extract_inner() -> list[Frame]:
    stack = traceback.extract_stack()[::-1]
    return up_to_entry([summary(item) for item in stack], [item.filename for item in stack])


def case_extract_tb_of_a_caught_exception() -> list[Frame]:
    try:
        _raise_outer()
    except KeyError as exc:
        return [summary(item) for item in traceback.extract_tb(exc.__traceback__)]
    raise AssertionError("no KeyError")


def _raise_outer() -> None:
    _raise_inner({})


def _raise_inner(table: dict[str, int]) -> None:
    table["missing"]  # raises KeyError


# --- caught exceptions: their tracebacks ---------------------------------------------------
# What a program that handles an exception sees of where it went: ``traceback.extract_tb``,
# and the ``tb_next`` chain walked by hand, as libraries that rewrite tracebacks do (Jinja2's
# debug module takes the ``tb_next`` of a traceback it made with ``exec``).

def tb_frames(tb: Any) -> list[Frame]:
    """The frames of a traceback, walked along ``tb_next`` (outermost first)."""
    out = []
    while tb is not None:
        out.append((os.path.basename(tb.tb_frame.f_code.co_filename), tb.tb_frame.f_code.co_name, tb.tb_lineno))
        tb = tb.tb_next
    return out


def _caught(run: Callable[[], object]) -> tuple[str, list[Frame], list[Frame]]:
    """The exception ``run()`` raised: its type, and its traceback by ``extract_tb`` and by
    ``tb_next``."""
    try:
        run()
    except Exception as exc:
        return (type(exc).__name__, [summary(item) for item in traceback.extract_tb(exc.__traceback__)],
                tb_frames(exc.__traceback__))
    raise AssertionError("nothing raised")


def case_traceback_of_an_exception_raised_deep_inside() -> tuple[str, list[Frame], list[Frame]]:
    return _caught(lambda: _deep(3))


def _deep(level: int) -> int:
    return _deep(level - 1) + 1 if level else _fail_inside()


def _fail_inside() -> int:
    return int("not a number")  # raised by C code the program calls


def case_traceback_of_an_exception_raised_in_a_callback_from_c() -> tuple[str, list[Frame], list[Frame]]:
    return _caught(lambda: sorted([3, 1, 2], key=_failing_key))


def _failing_key(x: int) -> int:
    if x == 1:
        raise LookupError(x)
    return x


def case_traceback_of_an_exception_re_raised() -> tuple[str, list[Frame], list[Frame]]:
    return _caught(_re_raise)


def _re_raise() -> None:
    try:
        _deep(1)
    except ValueError:
        raise


def case_traceback_of_an_exception_chained_with_from() -> list[Any]:
    try:
        _chain()
    except RuntimeError as exc:
        cause = exc.__cause__
        assert cause is not None
        return [tb_frames(exc.__traceback__), type(cause).__name__, tb_frames(cause.__traceback__)]
    raise AssertionError("nothing raised")


def _chain() -> None:
    try:
        _deep(2)
    except ValueError as exc:
        raise RuntimeError("while parsing") from exc


def case_traceback_of_exceptions_from_a_constructor_and_an_operator() -> list[Any]:
    return [_caught(lambda: _Strict(-1)), _caught(lambda: _Strict(1) + _Strict(2))]


class _Strict:
    def __init__(self, value: int) -> None:
        if value < 0:
            raise ValueError(value)
        self.value = value

    def __add__(self, other: _Strict) -> _Strict:
        return _Strict(self.value - other.value)


def case_traceback_tb_next_of_code_run_by_exec() -> tuple[str, int, list[Frame]]:
    """A library that makes a frame at a line of its choosing, as Jinja2 makes a template's:
    code compiled there, run by ``exec`` with its own namespaces, raises, and the
    traceback's ``tb_next`` is that code's frame."""
    code = compile("\n" * 41 + "raise LookupError('template')", "template.html", "exec")
    try:
        exec(code, {"__name__": "template"}, {})
    except LookupError:
        tb = sys.exc_info()[2]
        assert tb is not None and tb.tb_next is not None
        made = tb.tb_next
        return made.tb_frame.f_code.co_filename, made.tb_lineno, tb_frames(tb)
    raise AssertionError("nothing raised")


# --- logging and warnings: the caller fields ----------------------------------------------

class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def case_logging_caller_fields() -> list[tuple[str, int, str, str]]:
    logger = logging.getLogger("frames_program.case")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = _Capture()
    logger.addHandler(handler)
    try:
        _log_outer(logger)
    finally:
        logger.removeHandler(handler)
    return [(r.funcName, r.lineno, os.path.basename(r.pathname), r.module) for r in handler.records]


def _log_outer(logger: logging.Logger) -> None:
    logger.info("outer")
    _log_inner(logger)


def _log_inner(logger: logging.Logger) -> None:
    logger.warning("inner %d", 1)
    logger.info("one level up", stacklevel=2)


def case_warnings_stacklevel() -> list[tuple[str, int]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _warn_outer()
    return [(os.path.basename(w.filename), w.lineno) for w in caught]


def _warn_outer() -> None:
    _warn_inner()


def _warn_inner() -> None:
    for level in (1, 2, 3):
        warnings.warn(f"stacklevel {level}", UserWarning, stacklevel=level)


# --- recursion limits ---------------------------------------------------------------------

HEADROOM = 120


def case_recursion_depth_probe() -> int:
    """How many levels can I recurse from here before ``RecursionError``?  The limit is
    set ``HEADROOM`` frames above the current depth (so the answer is the same wherever
    the test runs), and the frames between here and the deepest one are what decide it."""
    depth = len(_all_frames(sys._getframe()))
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + HEADROOM)
    try:
        return _dive(0)
    finally:
        sys.setrecursionlimit(old)


def _all_frames(frame: FrameType | None) -> list[FrameType]:
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


def _dive(level: int) -> int:
    try:
        return _dive(level + 1)
    except RecursionError:
        return level


# --- TypeErrors from bad calls --------------------------------------------------------------

def _two(a: int, b: int) -> int:
    return a + b


class Foo:
    def __init__(self, a: int) -> None:
        self.a = a


def _caught_type_error(call: Callable[[], object]) -> tuple[str, list[Frame]]:
    try:
        call()
    except TypeError as exc:
        return str(exc), [summary(item) for item in traceback.extract_tb(exc.__traceback__)]
    raise AssertionError("no TypeError")


def case_type_error_of_a_call_with_wrong_arguments() -> tuple[str, list[Frame]]:
    return _caught_type_error(lambda: _two(1))


def case_type_error_of_a_bad_constructor_call() -> tuple[str, list[Frame]]:
    return _caught_type_error(lambda: Foo(1, 2, 3))


def case_traceback_entry_count_of_a_bad_call_caught_by_depth() -> list[str]:
    """A parser that tells an arity error from an error inside the callee by the number of
    traceback entries, as some command-line libraries do."""
    verdicts = []
    for args in ((1,), (1, "x")):
        try:
            _two(*args)
        except TypeError as exc:
            entries = len(traceback.extract_tb(exc.__traceback__))
            verdicts.append("arity" if entries == 1 else f"inner ({entries} entries)")
    return verdicts


# --- generators and coroutines ------------------------------------------------------------

def case_generator_frames() -> list[list[Frame]]:
    gen = _gen_frames()
    seen = [next(gen)]
    seen.extend(gen)
    return seen


def _gen_frames() -> Iterator[list[Frame]]:
    yield f_back_chain(sys._getframe())
    yield f_back_chain(sys._getframe())
    yield from _gen_delegate()


def _gen_delegate() -> Iterator[list[Frame]]:
    yield f_back_chain(sys._getframe())


def case_coroutine_frames() -> list[Frame]:
    coro = _coro_outer()
    try:
        coro.send(None)
    except StopIteration as stop:
        return list(stop.value)
    raise AssertionError("the coroutine did not finish")


async def _coro_outer() -> list[Frame]:
    return await _coro_inner()


async def _coro_inner() -> list[Frame]:
    return f_back_chain(sys._getframe())


# --- methods, decorators, partials, callbacks from C -------------------------------------------

class Base:
    def hello(self) -> list[Frame]:
        return f_back_chain(sys._getframe())


class Derived(Base):
    def hello(self) -> list[Frame]:
        return super().hello()

    @classmethod
    def make(cls) -> list[Frame]:
        return f_back_chain(sys._getframe())

    @staticmethod
    def static() -> list[Frame]:
        return f_back_chain(sys._getframe())

    @property
    def prop(self) -> list[Frame]:
        return f_back_chain(sys._getframe())


def case_methods_classmethods_properties_and_super() -> list[list[Frame]]:
    obj = Derived()
    return [obj.hello(), Derived.make(), obj.static(), obj.prop]


def _logged(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)
    return wrapper


@_logged
def _decorated(x: int) -> tuple[str, str, list[Frame]]:
    return _decorated.__name__, _decorated.__wrapped__.__name__, f_back_chain(sys._getframe())


def case_decorators_with_functools_wraps() -> tuple[str, str, list[Frame]]:
    return _decorated(1)


def _partial_target(a: int, b: int) -> list[Frame]:
    return f_back_chain(sys._getframe())


def case_call_through_functools_partial() -> list[Frame]:
    return functools.partial(_partial_target, 1)(2)


def _callback(x: int) -> list[Frame]:
    return f_back_chain(sys._getframe())


def _key(x: int) -> int:
    _keys_seen.append(f_back_chain(sys._getframe()))
    return -x


_keys_seen: list[list[Frame]] = []


def case_callbacks_from_map_and_sorted_key() -> tuple[list[list[Frame]], list[int], list[list[Frame]]]:
    mapped = list(map(_callback, [1, 2]))
    _keys_seen.clear()
    order = sorted([1, 3, 2], key=_key)
    return mapped, order, list(_keys_seen)


class Ranked:
    """Its special methods are called by C: ``sorted``, a ``set``, ``len``, a ``for`` loop."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __lt__(self, other: Ranked) -> bool:
        _specials_seen.append(f_back_chain(sys._getframe()))
        return self.rank < other.rank

    def __hash__(self) -> int:
        _specials_seen.append(f_back_chain(sys._getframe()))
        return self.rank

    def __len__(self) -> int:
        _specials_seen.append(f_back_chain(sys._getframe()))
        return self.rank

    def __iter__(self) -> Ranked:
        return self

    def __next__(self) -> int:
        _specials_seen.append(f_back_chain(sys._getframe()))
        self.rank -= 1
        if self.rank < 0:
            raise StopIteration
        return self.rank


_specials_seen: list[list[Frame]] = []


def case_special_methods_called_by_c() -> tuple[list[int], int, int, list[int], list[list[Frame]]]:
    _specials_seen.clear()
    order = [r.rank for r in sorted([Ranked(2), Ranked(1)])]
    distinct = len({Ranked(1), Ranked(2)})
    length = len(Ranked(3))
    counted = [n for n in Ranked(2)]
    return order, distinct, length, counted, list(_specials_seen)


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}
