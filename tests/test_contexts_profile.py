"""``ProfileContext``: counts and times, and every report file it writes."""

from __future__ import annotations

import functools
import gc
import io
import json
import os
import re
import sys
import threading
import time
import xml.etree.ElementTree as ET

import pytest

import cassette_hook as ch
from cassette_hook.contexts import ProfileContext, _calltree

M = __name__


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def ping(n):
    return 0 if n == 0 else pong(n - 1) + 1


def pong(n):
    return 0 if n == 0 else ping(n - 1) + 1


def nap(seconds):
    time.sleep(seconds)
    return seconds


def fail():
    raise ValueError("no")


def tolerant():
    try:
        fail()
    except ValueError:
        return "caught"


def program():
    parts = [fib(5), ping(3), nap(0.02), tolerant()]  # the sleep outweighs any other call
    return sorted(parts, key=lambda p: str(p))


def profile(f, *args, **options):
    ctx = ProfileContext(io.StringIO(), **options)
    ctx.runcall(f, *args)
    return ctx


def total(ctx):
    return sum(t.total() for t in ctx._trees)


# -- counting and timing ---------------------------------------------------------------

def test_profile_counts_every_call_including_the_top_level_one():
    stats = profile(fib, 10).stats()
    assert stats[f"{M}.fib"].calls == 177
    assert set(stats) == {f"{M}.fib"}  # operators are not calls by default


def test_profile_counts_operators_when_asked():
    stats = profile(fib, 10, operators=True).stats()
    assert stats[f"{M}.fib"].calls == 177
    assert stats["operator.lt"].calls == 177
    assert stats["operator.add"].calls == 88


def test_profile_gives_the_same_result():
    ctx = ProfileContext()
    assert ch.overdub(ctx, program) == program()


def test_profile_names_functions_by_module_and_qualname():
    names = set(profile(program).stats())
    assert {f"{M}.program", f"{M}.program.<locals>.<lambda>", "builtins.sorted", "builtins.str",
            "time.sleep", f"{M}.fail", "builtins.ValueError"} <= names


def test_cumulative_time_is_at_least_self_time():
    for s in profile(program).stats().values():
        assert s.cumulative_ns >= s.self_ns >= 0, s


def test_self_times_add_up_to_the_total():
    ctx = profile(program)
    assert sum(s.self_ns for s in ctx.stats().values()) == total(ctx) > 0


def test_the_top_level_function_has_all_the_time():
    ctx = profile(program)
    assert ctx.stats()[f"{M}.program"].cumulative_ns == total(ctx)


def test_recursion_does_not_double_count_cumulative_time():
    ctx = profile(fib, 12)
    assert ctx.stats()[f"{M}.fib"].cumulative_ns == total(ctx)


def test_mutual_recursion_does_not_double_count_cumulative_time():
    ctx = profile(ping, 9)
    stats = ctx.stats()
    assert stats[f"{M}.ping"].calls == 5 and stats[f"{M}.pong"].calls == 5
    assert stats[f"{M}.ping"].cumulative_ns == total(ctx)
    assert stats[f"{M}.pong"].cumulative_ns < total(ctx)


def test_time_in_a_callee_is_the_callers_cumulative_not_self_time():
    stats = profile(nap, 0.02).stats()
    assert stats["time.sleep"].self_ns >= 20_000_000
    assert stats[f"{M}.nap"].cumulative_ns >= 20_000_000
    assert stats[f"{M}.nap"].self_ns < 20_000_000


def test_calls_that_raise_are_counted():
    stats = profile(tolerant).stats()
    assert stats[f"{M}.fail"].calls == 1
    assert stats[f"{M}.tolerant"].cumulative_ns >= stats[f"{M}.fail"].cumulative_ns


def test_profile_locations_are_the_functions_first_lines():
    stats = profile(program).stats()
    assert stats[f"{M}.fib"].location == (__file__, fib.__code__.co_firstlineno)
    assert stats["builtins.sorted"].location is None


def test_profile_under_with_accumulates_runs():
    ctx = ProfileContext()
    with ctx:
        ctx.runcall(fib, 5)
        ctx.runcall(fib, 5)
    assert ctx.stats()[f"{M}.fib"].calls == 30


def test_profile_of_deep_recursion_does_not_hit_the_recursion_limit(tmp_path):
    def down(n):
        return 0 if n == 0 else 1 + down(n - 1)

    n = sys.getrecursionlimit() - 60
    ctx = profile(down, n)
    down = f"{M}.test_profile_of_deep_recursion_does_not_hit_the_recursion_limit.<locals>.down"
    assert ctx.stats()[down].calls == n + 1
    for key in ("speedscope", "collapsed", "dot", "flamegraph", "raw"):
        ctx.files[key] = tmp_path / key
    ctx.write_report()
    assert ProfileContext.merge([tmp_path / "raw"]).stats() == ctx.stats()


def test_each_thread_has_its_own_call_stack():
    ctx = ProfileContext()
    barrier = threading.Barrier(2)

    def run():
        barrier.wait()
        ctx.runcall(fib, 8)

    threads = [threading.Thread(target=run, name=f"worker {i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ctx.threads() == ["worker 0", "worker 1"] or ctx.threads() == ["worker 1", "worker 0"]
    stats = ctx.stats()
    assert stats[f"{M}.fib"].calls == 2 * 67
    assert stats[f"{M}.fib"].cumulative_ns == total(ctx)  # each thread's fib is its own root
    assert {line.split(";")[0] for line in ctx.collapsed().splitlines()} == {"worker_0", "worker_1"}


# -- the table -------------------------------------------------------------------------

def test_table_lists_functions_sorted_by_self_time():
    text = profile(program).table()
    lines = text.splitlines()
    assert re.fullmatch(r"\d+ calls of \d+ functions in 1 thread, [0-9.]+ ms; sorted by self", lines[0])
    assert lines[2].split() == ["calls", "self", "ms", "self", "%", "cum", "ms", "cum", "%", "function"]
    rows = [line.split() for line in lines[3:]]
    assert [float(r[1]) for r in rows] == sorted((float(r[1]) for r in rows), reverse=True)
    assert {r[-1] for r in rows} == set(profile(program).stats())


def test_table_sorts_by_calls_and_limits_rows():
    lines = profile(fib, 6, operators=True).table(sort="calls", limit=2).splitlines()
    assert [line.split()[0] for line in lines[3:5]] == ["25", "25"]  # fib and operator.lt
    assert lines[5] == "... and 2 more functions"


def test_write_report_writes_the_table_to_output(tmp_path):
    ctx = ProfileContext.from_options({"sort": "name", "operators": "yes"}, str(tmp_path / "table.txt"))
    ch.overdub(ctx, fib, 3)
    ctx.write_report()
    text = (tmp_path / "table.txt").read_text(encoding="utf-8")
    assert [line.split()[-1] for line in text.splitlines()[3:]] == [
        "operator.add", "operator.lt", "operator.sub", f"{M}.fib"]


def test_write_report_defaults_to_stderr(capsys):
    ctx = ProfileContext()
    ctx.runcall(abs, -1)
    ctx.write_report()
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines()[-1].split()[-1] == "builtins.abs"


# -- the files -------------------------------------------------------------------------

@pytest.fixture
def reports(tmp_path):
    """A profile of ``program`` with every file written by write_report."""
    options = {key: str(tmp_path / f"{key}-{{pid}}") for key in ("speedscope", "collapsed", "dot", "flamegraph", "raw")}
    ctx = ProfileContext.from_options(options, str(tmp_path / "table.txt"))
    ctx.runcall(program)
    ctx.write_report()
    files = {key: tmp_path / f"{key}-{os.getpid()}" for key in options}
    assert all(f.exists() for f in files.values())
    return ctx, files


def test_collapsed_stacks_are_one_path_and_count_per_line(reports):
    ctx, files = reports
    lines = files["collapsed"].read_text(encoding="utf-8").splitlines()
    assert lines and all(re.fullmatch(r"[^ ]+( [0-9]+)", line) for line in lines)
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == total(ctx)
    assert f"{M}.program;{M}.nap;time.sleep" in {line.rsplit(" ", 1)[0] for line in lines}
    assert f"{M}.program;{M}.fib;{M}.fib;{M}.fib" in {line.rsplit(" ", 1)[0] for line in lines}


def test_speedscope_file_follows_the_schema(reports):
    ctx, files = reports
    data = json.loads(files["speedscope"].read_text(encoding="utf-8"))
    assert data["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = data["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames)
    assert {f["name"] for f in frames} == set(ctx.stats())
    fib_frame = next(f for f in frames if f["name"] == f"{M}.fib")
    assert (fib_frame["file"], fib_frame["line"]) == (__file__, fib.__code__.co_firstlineno)
    [prof] = data["profiles"]
    assert prof["type"] == "sampled" and prof["unit"] == "nanoseconds" and prof["name"] == "MainThread"
    assert len(prof["samples"]) == len(prof["weights"]) > 0
    assert all(0 <= i < len(frames) for sample in prof["samples"] for i in sample)
    assert prof["startValue"] == 0 and prof["endValue"] == sum(prof["weights"]) == total(ctx)
    assert data["activeProfileIndex"] == 0 and data["exporter"].startswith("cassette_hook ")


def test_dot_call_graph_has_an_edge_per_caller_and_callee(reports):
    ctx, files = reports
    text = files["dot"].read_text(encoding="utf-8")
    assert text.startswith('digraph "cassette_hook profile" {') and text.rstrip().endswith("}")
    labels = dict(re.findall(r'^  (n\d+) \[label="([^"\\]+)\\n', text, re.MULTILINE))
    edges = {(labels[a], labels[b]): int(calls) for a, b, calls in
             re.findall(r'^  (n\d+) -> (n\d+) \[label="(\d+) calls?', text, re.MULTILINE)}
    assert set(labels.values()) == set(ctx.stats())
    assert edges[f"{M}.program", f"{M}.fib"] == 1
    assert edges[f"{M}.fib", f"{M}.fib"] == 14
    assert edges[f"{M}.ping", f"{M}.pong"] == 2 and edges[f"{M}.pong", f"{M}.ping"] == 1
    assert edges[f"{M}.nap", "time.sleep"] == 1
    assert edges["builtins.sorted", f"{M}.program.<locals>.<lambda>"] == 4


def test_flamegraph_is_an_svg_with_a_box_per_function(reports):
    ctx, files = reports
    root = ET.parse(files["flamegraph"]).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    shown = {t.rsplit(" (", 1)[0] for t in titles}
    assert {"all", f"{M}.program", f"{M}.nap", "time.sleep", f"{M}.program.<locals>.<lambda>"} <= shown
    all_title = next(t for t in titles if t.startswith("all ("))
    assert all_title.endswith(", 100.00%)")


def test_flamegraph_of_nothing_is_still_an_svg():
    root = ET.fromstring(ProfileContext().flamegraph())
    assert "no calls recorded" in "".join(root.itertext())


def test_raw_dump_merges_back_into_the_same_statistics(reports):
    ctx, files = reports
    merged = ProfileContext.merge([files["raw"]])
    assert merged.stats() == ctx.stats()
    assert merged.threads() == ["MainThread"]
    assert merged.collapsed() == ctx.collapsed()


def test_merge_adds_up_several_processes(reports, tmp_path):
    ctx, files = reports
    data = json.loads(files["raw"].read_text(encoding="utf-8"))
    data["pid"] += 1  # as if a child process had written the same profile
    child = tmp_path / "child.json"
    child.write_text(json.dumps(data), encoding="utf-8")
    merged = ProfileContext.merge([files["raw"], child], sort="calls")
    assert merged.sort == "calls"
    assert merged.threads() == [f"MainThread (pid {os.getpid()})", f"MainThread (pid {os.getpid() + 1})"]
    for name, s in ctx.stats().items():
        m = merged.stats()[name]
        assert (m.calls, m.self_ns, m.cumulative_ns) == (2 * s.calls, 2 * s.self_ns, 2 * s.cumulative_ns)


def test_merge_refuses_a_file_that_is_not_a_dump(tmp_path):
    (tmp_path / "x.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="not a cassette_hook profile dump"):
        ProfileContext.merge([tmp_path / "x.json"])


def logged(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapper


@logged
def decorated_one():
    return 1


@logged
def decorated_two():
    return 2


def call_both_decorated():
    return decorated_one() + decorated_two() + decorated_two()


def test_profile_names_each_function_one_decorator_wrapped_by_its_own_name():
    stats = profile(call_both_decorated).stats()
    assert stats[f"{M}.decorated_one"].calls == 2  # the wrapper and the function it wraps
    assert stats[f"{M}.decorated_two"].calls == 4


def test_overdub_alone_profiles_the_calls_inside_but_not_the_top_level_one():
    ctx = ProfileContext()
    ch.overdub(ctx, fib, 5)
    stats = ctx.stats()
    assert stats[f"{M}.fib"].calls == 14  # fib(5) makes 14 calls of fib; runcall counts the 15th
    assert [set(tree.root.children) for tree in ctx._trees] == [{f"{M}.fib"}]


def test_runcall_counts_a_top_level_call_that_raises_and_raises_it():
    ctx = ProfileContext()
    with pytest.raises(ValueError, match="no"):
        ctx.runcall(fail)
    assert ctx.stats()[f"{M}.fail"].calls == 1
    assert ctx._trees[0].stack == [ctx._trees[0].root]  # nothing left running


def named(module, qualname, value):
    """A new function called ``module.qualname`` (as ``name_of`` reads it)."""
    def f():
        return value
    f.__module__, f.__qualname__ = module, qualname
    return f


def test_functions_of_one_qualname_in_two_modules_are_two_rows():
    here, there = named("mod.here", "run", 1), named("mod.there", "run", 2)
    stats = profile(lambda: [g() for g in (here, there, there, here, there)]).stats()
    assert (stats["mod.here.run"].calls, stats["mod.there.run"].calls) == (2, 3)


def test_a_name_two_module_and_qualname_pairs_make_does_not_name_a_third_function():
    # "a.b" + "c" and "a" + "b.c" are both named a.b.c; "a" + "c" is a.c, though it shares
    # its qualname with the first and its module with the second.
    first, second, third = named("a.b", "c", 1), named("a", "b.c", 2), named("a", "c", 3)
    stats = profile(lambda: [g() for g in (first, second, third, first, third, second, third)]).stats()
    assert (stats["a.b.c"].calls, stats["a.c"].calls) == (4, 3)


def test_a_function_renamed_between_calls_is_counted_under_each_name():
    f = named("mod", "before", 1)

    def program():
        f()
        f.__qualname__ = "after"
        f()
        f.__module__ = "elsewhere"
        f()

    stats = profile(program).stats()
    assert [stats[n].calls for n in ("mod.before", "mod.after", "elsewhere.after")] == [1, 1, 1]


def test_bound_methods_builtins_and_classes_are_named_as_name_of_names_them():
    class Box:
        def get(self):
            return 1

    def program():
        for _ in range(3):
            Box().get()
            len([1, 2])
            [].append(1)
            object.__init__(Box())

    stats = profile(program).stats()
    qualname = Box.__qualname__
    assert {name: s.calls for name, s in stats.items() if not name.endswith(".program")} == {
        "builtins.range": 1, f"{M}.{qualname}": 6, f"{M}.{qualname}.get": 3, "builtins.len": 3,
        "list.append": 3, "object.__init__": 3}


def test_a_copy_of_the_profile_records_into_the_same_trees():
    from cassette_hook import context_stack

    ctx = ProfileContext()
    ch.overdub(context_stack._copy(ctx), fib, 3)  # as enabletagging copies a context: object.__new__
    assert ctx.stats()[f"{M}.fib"].calls == 4


def test_the_hooks_are_c_where_the_run_requires_the_c_path():
    from cassette_hook.contexts import _calltree

    if os.environ.get("CASSETTE_HOOK_REQUIRE_SPEEDUPS"):
        assert type(ProfileContext.prehook).__name__ == "method_descriptor"
        assert _calltree.Recording.__module__ == "cassette_hook.contexts._recording"


# -- the profile and the garbage collector (docs/contexts.md) ------------------------------

def collect_fully():
    gc.collect()


def collect_the_young():
    gc.collect(0)


def test_a_full_collection_in_a_profiled_call_is_a_row_called_by_the_running_function():
    ctx = profile(collect_fully)
    (thread,) = ctx._trees_now()
    collect = thread.root.children[f"{M}.collect_fully"].children["gc.collect"]
    assert collect.children["<garbage collection>"].calls == 1
    assert ctx.stats()["<garbage collection>"].calls == 1


def test_a_young_generations_collection_is_not_a_row():
    assert "<garbage collection>" not in profile(collect_the_young).stats()


def test_a_full_collection_outside_profiled_calls_is_not_a_row():
    ctx = profile(fib, 3)
    gc.collect()
    assert "<garbage collection>" not in ctx.stats()


@pytest.mark.skipif(_calltree._recording is None, reason="the C recording only: the pure-Python reference's "
                    "nodes are Python objects with slots, which the collector always tracks")
def test_the_c_recordings_nodes_are_not_tracked_by_the_collector():
    (thread,) = profile(program)._trees_now()
    nodes = [node for _, node in _calltree.events(thread.root)]
    assert nodes and not any(gc.is_tracked(node) or gc.is_tracked(node.children) for node in nodes)
