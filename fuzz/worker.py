"""Run one generated program in every mode and compare: the fuzzer's worker process.

``python fuzz/worker.py`` reads requests, one JSON object a line, from stdin
(``{"source": ..., "plain_only": false}``), and answers each with one JSON line on stdout.
The driver (``fuzz/differential.py``) starts it with ``PYTHONHASHSEED=0`` and kills it if
an answer does not come in time.

Each program runs in two shapes:

- **module**: the source compiled as a module and ``exec``-ed in a fresh namespace --
  plain; then its import-hook code (``importhook.switch_or_warn``, every body behind the
  mode switch) with no context (``instrumented``), inside ``with Null():`` (``null``) and
  inside ``with Counting():`` (``counting``: a prehook that counts, operators on);
- **function**: the module's statements as the body of a function ``fuzz_main`` that ends
  with ``return locals()`` -- called plainly, then ``ch.overdub(Null(), fuzz_main)`` and
  ``ch.overdub(Counting(), fuzz_main)``.  (Skipped when the body is not valid in a
  function, such as ``from m import *``.)

An *outcome* is what a run leaves: the exception (type and message) with the program's
own traceback frames ``(function, line)``, the final namespace (``repr`` of each value,
memory addresses masked), and what it printed.  The plain run is made twice; a program
whose two plain outcomes differ is *nondeterministic* and not compared, and one whose
plain run takes longer than the budget is *slow*.  Any other mode whose outcome differs
from the plain one is a divergence, and so is a ``cannot rewrite``/``cannot instrument``
warning (code that ran unrewritten).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import resource
import signal
import sys
import traceback
import warnings
from typing import Any, Callable

import cassette_hook as ch
from cassette_hook.importhook import finder

FILENAME = "<fuzz>"
MODULE = "fuzz_program"
PLAIN_BUDGET = 0.5  # seconds of a plain run; longer programs are not compared
MODE_BUDGET = 20.0  # seconds of an instrumented run of a program whose plain run was quick
MEMORY_LIMIT = 1 << 30
RECURSION_LIMIT = 1000
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
_RESOURCE_ERRORS = ("MemoryError", "Timeout")


class Null(ch.Context):
    """Overloads nothing (the fast path: twins, no operator sites)."""


class Counting(ch.Context):
    """A prehook that counts: every call and operator goes through ``site`` and the hook."""

    def prehook(self, f, /, *args, **kwargs):
        self.metadata[0] += 1


class Timeout(BaseException):
    """A run took longer than its budget (a ``BaseException``, so ``except Exception``
    in the program does not catch it)."""


_armed = False


def _on_alarm(signum: int, frame: Any) -> None:
    if _armed:
        raise Timeout()


def _masked(text: str) -> str:
    return _ADDRESS.sub("0x?", text)


def _summary(value: Any) -> str:
    try:
        return _masked(repr(value))[:400]
    except Exception as e:  # noqa: BLE001 - a repr that fails is part of the outcome
        return f"<repr raised {type(e).__name__}>"


def _namespace(values: dict[str, Any]) -> dict[str, str]:
    return {name: _summary(value) for name, value in values.items() if name != "__builtins__"}


def _program_frames(tb: Any) -> list[Any]:
    """The program's own frames; of a deep stack (``RecursionError``), the number of
    frames and the outermost and innermost few."""
    frames = [(frame.f_code.co_name, lineno) for frame, lineno in traceback.walk_tb(tb)
              if frame.f_code.co_filename == FILENAME]
    return frames if len(frames) <= 12 else [*frames[:6], len(frames), *frames[-6:]]


def outcome(run: Callable[[], dict[str, Any] | None], budget: float) -> dict[str, Any]:
    """Run ``run`` (which returns the namespace to report) under a time budget."""
    global _armed
    stdout = io.StringIO()
    result: dict[str, Any] = {}
    _armed = True
    signal.setitimer(signal.ITIMER_REAL, budget, 0.05)  # and again, if the program swallows it
    try:
        try:
            with contextlib.redirect_stdout(stdout):
                namespace = run()
            result = {"exception": None, "namespace": None if namespace is None else _namespace(namespace)}
        except Timeout:
            raise
        except BaseException as e:  # noqa: BLE001 - SystemExit and friends are outcomes too
            result = {"exception": [type(e).__name__, _masked(str(e))[:400]],
                      "frames": _program_frames(e.__traceback__)}
            if hasattr(e, "namespace"):
                result["namespace"] = e.namespace
    except Timeout:
        result = {"exception": ["Timeout", ""]}
    finally:
        _armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
    result["stdout"] = _masked(stdout.getvalue())[-2000:]
    return result


def _exec_module(code: Any, around: Callable[[], Any] = contextlib.nullcontext) -> Callable[[], dict[str, Any]]:
    def run() -> dict[str, Any]:
        namespace: dict[str, Any] = {"__name__": MODULE}
        try:
            with around():
                exec(code, namespace)
        except BaseException as e:
            e.namespace = _namespace(namespace)  # type: ignore[attr-defined]
            raise
        return namespace

    return run


def function_code(source: str) -> Any:
    """The program's statements as the body of ``fuzz_main`` (same line numbers), or None."""
    tree = ast.parse(source, FILENAME)
    wrapper = ast.parse("def fuzz_main():\n    pass\n    return locals()\n")
    function = wrapper.body[0]
    assert isinstance(function, ast.FunctionDef)
    function.body[:1] = tree.body
    try:
        return compile(wrapper, FILENAME, "exec")
    except SyntaxError:
        return None


def _function_runs(code: Any) -> dict[str, Callable[[], dict[str, Any] | None]]:
    def make(call: Callable[[Any], Any]) -> Callable[[], dict[str, Any] | None]:
        def run() -> dict[str, Any] | None:
            namespace: dict[str, Any] = {"__name__": MODULE}
            exec(code, namespace)
            return call(namespace["fuzz_main"])

        return run

    return {
        "function plain": make(lambda main: main()),
        "function null": make(lambda main: ch.overdub(Null(), main)),
        "function counting": make(lambda main: ch.overdub(Counting([0]), main)),
    }


def _observe(run: Callable[[], Any], budget: float) -> tuple[dict[str, Any], list[str]]:
    """The outcome of ``run``, and the engine's warnings that code ran unrewritten."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = outcome(run, budget)
    return got, [str(w.message) for w in caught if str(w.message).startswith("cassette_hook: cannot")]


def _plain_outcome(run: Callable[[], Any], recursion_limit: int) -> dict[str, Any]:
    sys.setrecursionlimit(recursion_limit)
    try:
        return _observe(run, PLAIN_BUDGET)[0]
    finally:
        sys.setrecursionlimit(RECURSION_LIMIT)


def _recursed(result: dict[str, Any]) -> bool:
    """Did the run hit ``RecursionError`` (raised, or caught and printed)?"""
    raised = result["exception"][0] if result["exception"] else None
    return raised == "RecursionError" or "maximum recursion depth" in result["stdout"]


def _timed_out(result: dict[str, Any]) -> bool:
    return bool(result["exception"]) and result["exception"][0] in _RESOURCE_ERRORS


def check(source: str, plain_only: bool = False) -> dict[str, Any]:
    """Run ``source`` in every mode; the report of what differed from the plain run.

    Before comparing, the plain run is made three times: twice as it is (a program whose
    outcomes differ is *nondeterministic*), and once with a higher recursion limit: a
    program whose outcome depends on how deep it can recurse is *depth-sensitive* and not
    compared, since under a context the limit is raised (docs/internals.md, "The
    recursion-limit budget").  So is one that hits ``RecursionError`` at all: on 3.12+ it
    may be the C recursion limit, which no ``sys.setrecursionlimit`` moves (and which
    overdubbed calls, going through C, reach a few Python frames earlier).
    """
    try:
        code = compile(source, FILENAME, "exec")
    except (SyntaxError, ValueError):
        return {"status": "syntax"}
    plain = _plain_outcome(_exec_module(code), RECURSION_LIMIT)
    if _timed_out(plain):
        return {"status": "slow"}
    if plain_only:
        return {"status": "plain", "plain": plain}
    if _plain_outcome(_exec_module(code), RECURSION_LIMIT) != plain:
        return {"status": "nondeterministic"}
    if _recursed(plain) or _plain_outcome(_exec_module(code), RECURSION_LIMIT + 300) != plain:
        return {"status": "depth-sensitive"}
    divergences: list[dict[str, Any]] = []
    timed_out = False

    def compare(mode: str, expected: dict[str, Any], run: Callable[[], Any]) -> None:
        nonlocal timed_out
        got, unrewritten = _observe(run, MODE_BUDGET)
        timed_out = timed_out or _timed_out(got)
        if got != expected or unrewritten:
            divergences.append({"mode": mode, "expected": expected, "got": got, "unrewritten": unrewritten})

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        switched = finder.switch_or_warn(code, MODULE)
    if caught:
        divergences.append({"mode": "switch", "unrewritten": [str(w.message) for w in caught]})
    compare("instrumented", plain, _exec_module(switched))
    compare("null", plain, _exec_module(switched, lambda: Null()))
    compare("counting", plain, _exec_module(switched, lambda: Counting([0])))

    wrapped = function_code(source)
    if wrapped is not None:
        runs = _function_runs(wrapped)
        function_plain = _plain_outcome(runs.pop("function plain"), RECURSION_LIMIT)
        if not _timed_out(function_plain):
            for mode, run in runs.items():
                compare(mode, function_plain, run)
    report: dict[str, Any] = {"status": "diverged" if divergences else "same", "raised": bool(plain["exception"])}
    if divergences:
        report["divergences"] = divergences
    if timed_out:
        report["restart"] = True  # a run was interrupted inside cassette_hook: start afresh
    return report


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    signal.signal(signal.SIGALRM, _on_alarm)
    sys.setrecursionlimit(RECURSION_LIMIT)
    requests, answers = sys.stdin, sys.stdout
    sys.stdin = io.StringIO()  # a program reading input() gets EOF
    for line in requests:
        request = json.loads(line)
        report = check(request["source"], request.get("plain_only", False))
        answers.write(json.dumps(report) + "\n")
        answers.flush()
        if report.get("restart"):
            return


if __name__ == "__main__":
    main()
