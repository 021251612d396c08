"""Shared by the bench_* scripts: the contexts under test and the comparison tracers."""

from __future__ import annotations

import sys
import traceback
from types import CodeType, FunctionType, ModuleType
from typing import Any

from harness import Thunk

try:
    import cassette_hook as ch

    ch.Context, ch.overdub  # noqa: B018  (fail here if the package is not there yet)
    CH_ERROR: str | None = None
except (ImportError, AttributeError) as exc:
    ch = None  # type: ignore[assignment]
    CH_ERROR = f"{type(exc).__name__}: {exc}"

if ch is not None:
    class Null(ch.Context):
        """Overloads nothing: measures the machinery alone."""

    class Count(ch.Context):
        """Counts every call (operators excluded) that the context sees."""

        operators = False

        def prehook(self, f: Any, *args: Any, **kwargs: Any) -> None:
            self.metadata[0] += 1


def no_package_note() -> str:
    return f"cassette_hook not usable yet ({CH_ERROR}): running the plain variants only"


def with_setprofile(run: Thunk) -> object:
    """``run()`` under a no-op ``sys.setprofile`` function."""
    sys.setprofile(lambda frame, event, arg: None)
    try:
        return run()
    finally:
        sys.setprofile(None)


def with_monitoring(run: Thunk, counter: list[int] | None = None) -> object:
    """``run()`` with a counting ``sys.monitoring`` CALL callback (3.12+)."""
    mon = sys.monitoring  # type: ignore[attr-defined]
    tool = next(t for t in (mon.PROFILER_ID, *range(6)) if mon.get_tool(t) is None)
    box = counter if counter is not None else [0]

    def on_call(code: CodeType, offset: int, callable: object, arg0: object) -> None:
        box[0] += 1

    mon.use_tool_id(tool, "cassette_hook-bench")
    mon.register_callback(tool, mon.events.CALL, on_call)
    mon.set_events(tool, mon.events.CALL)
    try:
        return run()
    finally:
        mon.set_events(tool, 0)
        mon.register_callback(tool, mon.events.CALL, None)
        mon.free_tool_id(tool)


def code_snapshot(module: ModuleType) -> dict[str, CodeType]:
    """``__code__`` of every function defined at module level or in a module-level class
    (and in the pyperformance program a ``pp_*`` workload wraps as ``bm``)."""
    out: dict[str, CodeType] = {}
    spaces: list[tuple[str, dict[str, Any]]] = [(module.__name__, vars(module))]
    if isinstance(getattr(module, "bm", None), ModuleType):
        spaces.append((module.bm.__name__, vars(module.bm)))
    for prefix, ns in spaces:
        for name, obj in ns.items():
            members = vars(obj).items() if isinstance(obj, type) else [("", obj)]
            for sub, fn in members:
                if isinstance(fn, FunctionType):
                    out[f"{prefix}.{name}{'.' + sub if sub else ''}"] = fn.__code__
    return out


def report_failure(what: str) -> None:
    """Print the exception being handled, innermost frames only (a RecursionError has 1000s)."""
    exc = sys.exc_info()[1]
    print(f"\n!! {what} failed: {type(exc).__name__}: {exc}\n   innermost frames:", file=sys.stderr)
    traceback.print_exc(limit=-12)
