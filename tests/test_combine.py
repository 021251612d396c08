"""``python -m cassette_hook combine``: the files of many processes made one report
(docs/cli.md, "Combining the reports of many processes")."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from cassette_hook.cli import combine
from cassette_hook.contexts import ProfileContext, TraceContext


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def profile_dump(path, pid=None, version=None):
    ctx = ProfileContext(io.StringIO())
    ctx.runcall(fib, 6)
    ctx.dump(path)
    if pid is not None or version is not None:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["pid"] = data["pid"] if pid is None else pid
        data["cassette_hook"] = data["cassette_hook"] if version is None else version
        path.write_text(json.dumps(data), encoding="utf-8")
    return path


def timeline(path, pid=None):
    ctx = TraceContext(io.StringIO(), timeline=str(path))
    ctx.runcall(fib, 3)
    ctx.write_report()
    if pid is not None:
        data = json.loads(path.read_text(encoding="utf-8"))
        for event in data["traceEvents"]:
            event["pid"] = pid
        path.write_text(json.dumps(data), encoding="utf-8")
    return path


def refused(capsys, *argv):
    with pytest.raises(SystemExit) as info:
        combine.main([str(a) for a in argv])
    assert info.value.code == 2
    return " ".join(capsys.readouterr().err.split())


def test_profile_dumps_of_several_processes_make_one_profile_and_its_reports(tmp_path):
    a, b = profile_dump(tmp_path / "prof.1.json"), profile_dump(tmp_path / "prof.2.json", pid=os.getpid() + 1)
    assert combine.main([str(a), str(b), "--output", str(tmp_path / "table.txt"), "--flamegraph",
                         str(tmp_path / "all.svg"), "--speedscope", str(tmp_path / "all.json")]) == 0
    table = (tmp_path / "table.txt").read_text()
    assert "in 2 threads" in table.splitlines()[0] and f"{__name__}.fib" in table
    speedscope = json.loads((tmp_path / "all.json").read_text())
    assert [p["name"] for p in speedscope["profiles"]] == [f"MainThread (pid {os.getpid()})",
                                                           f"MainThread (pid {os.getpid() + 1})"]
    assert (tmp_path / "all.svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_the_table_goes_to_stdout_by_default(tmp_path, capsys):
    assert combine.main([str(profile_dump(tmp_path / "p.json"))]) == 0
    assert f"{__name__}.fib" in capsys.readouterr().out


def test_map_moves_the_source_files_of_a_dump_to_where_they_are_here(tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    dump = profile_dump(tmp_path / "p.json")
    combine.main([str(dump), "--output", str(tmp_path / "t.txt"), "--map", f"{here}=/home/me/app",
                  "--speedscope", str(tmp_path / "s.json")])
    frames = json.loads((tmp_path / "s.json").read_text())["shared"]["frames"]
    assert [f["file"] for f in frames if f["name"].endswith(".fib")] == [f"/home/me/app/{os.path.basename(__file__)}"]


def test_dumps_of_different_versions_are_refused_naming_them(tmp_path, capsys):
    a = profile_dump(tmp_path / "a.json", version="0.0.1")
    b = profile_dump(tmp_path / "b.json", version="9.9")
    assert f"dumps of different versions: {a} was written by cassette_hook 0.0.1, {b} by 9.9" in refused(
        capsys, a, b)


def test_a_dump_of_a_format_version_it_does_not_read_is_refused(tmp_path, capsys):
    a = profile_dump(tmp_path / "a.json")
    data = json.loads(a.read_text())
    data["version"] = 2
    a.write_text(json.dumps(data))
    assert f"{a}: cannot merge: a profile dump of format version 2" in refused(capsys, a)


def test_timelines_of_several_processes_make_one_with_a_track_per_process(tmp_path):
    a, b = timeline(tmp_path / "t.1.json"), timeline(tmp_path / "t.2.json", pid=os.getpid() + 1)
    c = timeline(tmp_path / "t.3.json")  # (the same process id as a: from another machine, say)
    assert combine.main([str(a), str(b), str(c), "--timeline", str(tmp_path / "all.json")]) == 0
    merged = json.loads((tmp_path / "all.json").read_text())
    calls = [e for e in merged["traceEvents"] if e["ph"] == "X"]
    assert len(calls) == 3 * len([e for e in json.loads(a.read_text())["traceEvents"] if e["ph"] == "X"])
    assert all({"name", "ts", "dur", "pid", "tid"} <= e.keys() for e in calls)
    pids = {e["pid"] for e in calls}
    assert len(pids) == 3 and {os.getpid(), os.getpid() + 1} < pids
    names = [e["args"]["name"] for e in merged["traceEvents"] if e["name"] == "process_name"]
    assert len(names) == 3 and names[2].endswith(f"[{c}]")


def test_profile_dumps_and_timelines_are_not_combined_together(tmp_path, capsys):
    message = refused(capsys, profile_dump(tmp_path / "p.json"), timeline(tmp_path / "t.json"), "--timeline",
                      tmp_path / "x.json")
    assert "give profile dumps or timelines, not both" in message and "t.json is a timeline" in message


def test_a_file_of_neither_kind_is_refused_naming_it(tmp_path, capsys):
    other = tmp_path / "notes.json"
    other.write_text("{}")
    assert f"{other}: neither a profile dump" in refused(capsys, other)


def test_timelines_need_a_timeline_file(tmp_path, capsys):
    assert "give --timeline FILE" in refused(capsys, timeline(tmp_path / "t.json"))


def test_a_bad_map_is_refused(tmp_path, capsys):
    assert "--map 'nowhere': expected OLD=NEW" in refused(capsys, profile_dump(tmp_path / "p.json"), "--map",
                                                          "nowhere")


def test_combine_is_a_command_of_the_command_line(tmp_path):
    dump = profile_dump(tmp_path / "p.json")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-m", "cassette_hook", "combine", str(dump)], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0 and "fib" in result.stdout
