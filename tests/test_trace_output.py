"""What keeps a whole program's trace readable (docs/contexts.md, "trace"): runs of calls
of one shape folded into one entry, the text capped, and the timeline file."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from cassette_hook.contexts import TraceContext
from cassette_hook.contexts import trace as trace_module

M = __name__


def trace(f, *args, **options):
    out = io.StringIO()
    ctx = TraceContext(out, **options)
    result = ctx.runcall(f, *args)
    ctx.write_report()
    return result, out.getvalue()


def square(x):
    return x * x


def halve(x):
    if x % 2:
        raise ValueError("odd")
    return x // 2


def squares(n):
    return [square(i) for i in range(n)]


# -- folding ---------------------------------------------------------------------------

def test_a_run_of_calls_of_one_shape_is_its_first_call_marked_with_the_count():
    assert trace(squares, 5) == ([0, 1, 4, 9, 16], f"""\
{M}.squares(5)
  builtins.range(5) -> range(0, 5)
  {M}.square(0) -> 0  (× 5, the first shown)
{M}.squares -> [0, 1, 4, 9, 16]
""")


def test_a_run_folds_from_fold_calls_on():
    assert trace(squares, 2)[1] == f"""\
{M}.squares(2)
  builtins.range(2) -> range(0, 2)
  {M}.square(0) -> 0
  {M}.square(1) -> 1
{M}.squares -> [0, 1]
"""
    assert "(× 2, the first shown)" in trace(squares, 2, fold=2)[1]


def halves(xs):
    out = []
    for x in xs:
        try:
            out.append(halve(x))
        except ValueError:
            out.append(None)
    return out


def test_calls_that_end_differently_are_of_different_shapes():
    text = trace(halves, [2, 4, 6, 1, 3, 5], exclude=["builtins"])[1]
    assert text == f"""\
{M}.halves([2, 4, 6, 1, 3, 5])
  {M}.halve(2) -> 1  (× 3, the first shown)
  {M}.halve(1) !! ValueError('odd')  (× 3, the first shown)
{M}.halves -> [1, 2, 3, None, None, None]
"""


def rows(n):
    return [squares(2) for _ in range(n)]


def growing(n):
    return [squares(i) for i in range(n)]


def test_a_run_of_calls_with_calls_inside_folds_when_their_calls_are_the_same():
    lines = trace(growing, 4)[1].splitlines()  # (squares(0), squares(1) ...: different calls inside)
    assert sum(f"{M}.squares(" in line for line in lines) == 4
    assert not any(f"{M}.squares(" in line and "×" in line for line in lines)
    assert trace(rows, 4)[1] == f"""\
{M}.rows(4)
  builtins.range(4) -> range(0, 4)
  {M}.squares(2)  (× 4, the first shown)
    builtins.range(2) -> range(0, 2)
    {M}.square(0) -> 0
    {M}.square(1) -> 1
  {M}.squares -> [0, 1]
{M}.rows -> [[0, 1], [0, 1], [0, 1], [0, 1]]
"""




def test_fold_no_shows_every_call():
    ctx = TraceContext.from_options({"fold": "no"}, None)
    assert ctx.fold is None
    assert trace(squares, 5, fold=None)[1].count(f"{M}.square(") == 5


def test_the_outermost_calls_are_written_as_they_end_not_held_to_fold():
    out = io.StringIO()
    ctx = TraceContext(out)
    for i in range(4):
        ctx.runcall(squares, 3)
        assert out.getvalue().count("\n") == 4 * (i + 1)  # (no write_report: nothing held)
    assert out.getvalue().count(f"  {M}.square(0) -> 0  (× 3, the first shown)\n") == 4


def big(n):
    return [str(i) for i in range(n)]


def test_a_call_with_many_calls_inside_is_written_as_it_runs():
    out = io.StringIO()
    ctx = TraceContext(out, fold=None)
    seen = []

    def outer():
        big(trace_module.HOLD + 10)
        seen.append(out.getvalue())  # (outer is still running)

    ctx.runcall(outer)
    ctx.write_report()
    assert seen[0].startswith(f"{M}.{outer.__qualname__}()\n  {M}.big({trace_module.HOLD + 10})\n")


def test_write_report_writes_what_the_calls_still_running_hold():
    out = io.StringIO()
    ctx = TraceContext(out, exclude=["cassette_hook"])

    def report_inside():
        squares(4)
        ctx.write_report()
        return out.getvalue()

    written = ctx.runcall(report_inside)
    assert written == f"""\
{M}.{report_inside.__qualname__}()
  {M}.squares(4)
    builtins.range(4) -> range(0, 4)
    {M}.square(0) -> 0  (× 4, the first shown)
  {M}.squares -> [0, 1, 4, 9]
"""


def test_folding_keeps_each_threads_runs_apart():
    out = io.StringIO()
    ctx = TraceContext(out)
    barrier = threading.Barrier(2)

    def run():
        barrier.wait()
        ctx.runcall(squares, 6)

    threads = [threading.Thread(target=run, name=f"w{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctx.write_report()
    for t in threads:
        assert f"[{t.name}]   {M}.square(0) -> 0  (× 6, the first shown)" in out.getvalue()


# -- the cap ---------------------------------------------------------------------------

def test_the_text_stops_at_the_cap_with_a_line_saying_what_was_left_out():
    text = trace(squares, 5, lines=2, fold=None)[1]
    assert text == f"""\
{M}.squares(5)
  builtins.range(5) -> range(0, 5)
... 6 more lines left out: the trace stops at 2 lines (the option lines=all shows them all)
"""


def test_the_cap_is_ten_thousand_lines_by_default():
    assert TraceContext().lines == trace_module.DEFAULT_LINES == 10_000
    text = trace(squares, 10_005, fold=None)[1].splitlines()
    assert len(text) == 10_001
    assert text[-1].startswith("... 8 more lines left out: the trace stops at 10000 lines")


def test_lines_all_lifts_the_cap():
    assert TraceContext.from_options({"lines": "all"}, None).lines is None
    assert len(trace(squares, 10_005, fold=None, lines=None)[1].splitlines()) == 10_008


def test_the_program_runs_the_same_past_the_cap():
    assert trace(squares, 50, lines=1)[0] == squares(50)


# -- the timeline ----------------------------------------------------------------------

def check_trace_event_format(data):
    """The fields the Trace Event Format document requires: a JSON object with a
    ``traceEvents`` list; complete events (``ph`` "X") with ``name``, ``ts`` and ``dur``
    (microseconds), ``pid`` and ``tid``; metadata events (``ph`` "M") naming processes and
    threads in ``args.name``.  Returns the complete events."""
    assert isinstance(data, dict) and isinstance(data["traceEvents"], list)
    assert data.get("displayTimeUnit", "ms") in ("ms", "ns")
    complete = []
    for event in data["traceEvents"]:
        assert isinstance(event["name"], str) and event["ph"] in ("X", "M")
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        if event["ph"] == "M":
            assert event["name"] in ("process_name", "thread_name") and isinstance(event["args"]["name"], str)
        else:
            assert isinstance(event["ts"], (int, float)) and isinstance(event["dur"], (int, float))
            assert event["dur"] >= 0 and isinstance(event.get("args", {}), dict)
            complete.append(event)
    return complete


def nested_within_their_callers(events):
    """Each thread's events nest: a call that starts inside another ends inside it."""
    for track in {(e["pid"], e["tid"]) for e in events}:
        open_ends: list[float] = []
        for e in sorted((e for e in events if (e["pid"], e["tid"]) == track), key=lambda e: (e["ts"], -e["dur"])):
            while open_ends and e["ts"] >= open_ends[-1]:
                open_ends.pop()
            if open_ends and e["ts"] + e["dur"] > open_ends[-1] + 0.002:  # (rounded to the nanosecond)
                return False
            open_ends.append(e["ts"] + e["dur"])
    return True


def test_timeline_is_a_trace_event_file_with_an_event_per_call(tmp_path):
    file = tmp_path / "timeline.json"
    assert trace(halves, [2, 1], timeline=str(file))[0] == [1, None]
    data = json.loads(file.read_text(encoding="utf-8"))
    events = check_trace_event_format(data)
    assert [(e["name"], e["args"]) for e in sorted(events, key=lambda e: e["ts"])] == [
        (f"{M}.halves", {"arguments": "[2, 1]", "result": "[1, None]"}),
        (f"{M}.halve", {"arguments": "2", "result": "1"}),
        ("list.append", {"arguments": "[], 1", "result": "None"}),
        (f"{M}.halve", {"arguments": "1", "exception": "ValueError('odd')"}),
        ("builtins.ValueError", {"arguments": "'odd'", "result": "ValueError('odd')"}),
        ("list.append", {"arguments": "[1], None", "result": "None"}),
    ]
    assert {(e["pid"], e["tid"]) for e in events} == {(os.getpid(), threading.get_native_id())}
    assert nested_within_their_callers(events)


def test_timeline_keeps_every_call_of_a_folded_run(tmp_path):
    file = tmp_path / "timeline.json"
    assert "(× 5, the first shown)" in trace(squares, 5, timeline=str(file))[1]
    events = check_trace_event_format(json.loads(file.read_text(encoding="utf-8")))
    assert [e["args"]["arguments"] for e in events if e["name"] == f"{M}.square"] == ["0", "1", "2", "3", "4"]


def test_timeline_names_each_threads_track(tmp_path):
    file = tmp_path / "timeline.json"
    ctx = TraceContext(io.StringIO(), timeline=str(file))
    t = threading.Thread(target=ctx.runcall, args=(squares, 2), name="worker-7")
    ctx.runcall(square, 3)
    t.start()
    t.join()
    ctx.write_report()
    data = json.loads(file.read_text(encoding="utf-8"))
    events = check_trace_event_format(data)
    names = {e["tid"]: e["args"]["name"] for e in data["traceEvents"] if e["name"] == "thread_name"}
    assert {names[e["tid"]] for e in events} == {"MainThread", "worker-7"}
    assert nested_within_their_callers(events)


def test_timeline_names_the_process_by_its_program_and_leaves_the_id_to_the_viewer(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/srv/app/primes.py", "3000"])
    file = tmp_path / "timeline.json"
    trace(square, 2, timeline=str(file))
    data = json.loads(file.read_text(encoding="utf-8"))
    assert [(e["pid"], e["args"]["name"]) for e in data["traceEvents"] if e["name"] == "process_name"] == [
        (os.getpid(), "primes.py")]


def test_timeline_stops_at_its_cap_and_says_how_many_calls_it_left_out(tmp_path):
    file = tmp_path / "timeline.json"
    trace(squares, 5, timeline=str(file), events=3)
    data = json.loads(file.read_text(encoding="utf-8"))
    assert len(check_trace_event_format(data)) == 3
    assert data["otherData"]["calls_left_out"] == 4
    assert "events=all" in data["otherData"]["note"]


def test_timeline_option_is_a_file_checked_before_the_program_runs(tmp_path):
    ctx = TraceContext.from_options({"timeline": str(tmp_path / "t.json"), "events": "all"}, None)
    assert (ctx.timeline, ctx.events) == (str(tmp_path / "t.json"), None)
    with pytest.raises(ValueError, match="cannot write timeline="):
        TraceContext.from_options({"timeline": str(tmp_path / "missing" / "t.json")}, None)


# -- from the command line -------------------------------------------------------------

PROGRAM = """
import sys
def square(x):
    return x * x
def main():
    print(sum(square(i) for i in range(200)))
    print(sys.argv[1:])
main()
"""


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=120)


def test_a_program_under_a_timeline_trace_prints_what_it_prints_plain(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    plain = run(tmp_path, "prog.py", "x")
    traced = run(tmp_path, "-m", "cassette_hook", "--context", "trace,timeline=t.json", "--output", "trace.txt",
                 "prog.py", "x")
    assert (traced.stdout, traced.returncode) == (plain.stdout, plain.returncode) == (plain.stdout, 0)
    events = check_trace_event_format(json.loads((tmp_path / "t.json").read_text(encoding="utf-8")))
    assert sum(e["name"] == "__main__.square" for e in events) == 200
    assert "__main__.square(0) -> 0  (× 200, the first shown)" in (tmp_path / "trace.txt").read_text()


def test_each_process_of_a_tree_writes_its_timeline(tmp_path):
    # (a child runs its script uninstrumented, as python does: its calls are made in lib)
    (tmp_path / "lib.py").write_text("def square(x):\n    return x * x\ndef main():\n    print(square(3))\n")
    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import subprocess, sys
        import lib
        lib.main()
        if sys.argv[1:] != ["child"]:
            subprocess.run([sys.executable, __file__, "child"], check=True)
    """))
    result = run(tmp_path, "-m", "cassette_hook", "--subprocesses", "--context",
                 "trace,timeline=t.{pid}.json", "--output", "trace.{pid}.txt", "prog.py")
    assert result.returncode == 0 and result.stdout == "9\n9\n"
    files = sorted(tmp_path.glob("t.*.json"))
    assert len(files) == 2
    pids = set()
    for file in files:
        events = check_trace_event_format(json.loads(file.read_text(encoding="utf-8")))
        pids |= {e["pid"] for e in events if e["name"] == "lib.square"}
    assert len(pids) == 2
