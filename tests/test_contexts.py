"""The built-in contexts' common protocol, ``null`` and ``trace``.

``tests/test_contexts_profile.py`` has the profile and its report files.
"""

from __future__ import annotations

import configparser
import functools
import io
import json
import re
import sys
import threading
from pathlib import Path

import pytest

import cassette_hook as ch
from cassette_hook import _specs
from cassette_hook.contexts import NullContext, ProfileContext, ReportingContext, ReportPathError, TraceContext

M = __name__  # the module name the trace shows for this file's functions


def times(x, y):
    return x * y


def check(x):
    if x < 0:
        raise ValueError("negative")
    return x


def program(x, y, z):
    try:
        check(-1)
    except ValueError:
        pass
    return times(x, y) + times(y, z)


PROGRAM_TRACE = f"""\
{M}.program(2, 3, 4)
  {M}.check(-1)
    builtins.ValueError('negative') -> ValueError('negative')
  {M}.check !! ValueError('negative')
  {M}.times(2, 3) -> 6
  {M}.times(3, 4) -> 12
{M}.program -> 18
"""

PROGRAM_TRACE_WITH_OPERATORS = f"""\
{M}.program(2, 3, 4)
  {M}.check(-1)
    operator.lt(-1, 0) -> True
    builtins.ValueError('negative') -> ValueError('negative')
  {M}.check !! ValueError('negative')
  {M}.times(2, 3)
    operator.mul(2, 3) -> 6
  {M}.times -> 6
  {M}.times(3, 4)
    operator.mul(3, 4) -> 12
  {M}.times -> 12
  operator.add(6, 12) -> 18
{M}.program -> 18
"""


def trace(f, *args, **options):
    out = io.StringIO()
    ctx = TraceContext(out, **options)
    result = ctx.runcall(f, *args)
    ctx.write_report()
    return result, out.getvalue()


# -- the protocol ----------------------------------------------------------------------

@pytest.mark.parametrize("cls", [NullContext, TraceContext, ProfileContext])
def test_builtin_contexts_are_reporting_contexts_exported_by_the_package(cls):
    assert issubclass(cls, ReportingContext)
    assert getattr(ch, cls.__name__) is cls
    assert cls.__name__ in ch.__all__


@pytest.mark.parametrize("name, cls", [("null", NullContext), ("trace", TraceContext), ("profile", ProfileContext)])
def test_entry_points_name_the_builtin_contexts(name, cls):
    importlib_metadata = pytest.importorskip("importlib_metadata")
    found = {ep.name: ep for ep in importlib_metadata.entry_points(group="cassette_hook.contexts")}
    if name not in found:
        pytest.skip("cassette_hook is not installed, so its entry points are not registered")
    assert found[name].load() is cls


def test_the_names_found_without_metadata_are_the_package_s_own_entry_points():
    config = configparser.ConfigParser()
    config.read(Path(__file__).resolve().parent.parent / "setup.cfg")
    declared = config["options.entry_points"]["cassette_hook.contexts"].strip().splitlines()
    assert dict(tuple(part.strip() for part in line.split("=")) for line in declared) == _specs.BUILT_IN


def test_from_options_parses_values_into_constructor_arguments():
    options = {"depth": "3", "include": "pkg+other.*", "exclude": "operator", "width": "20"}
    ctx = TraceContext.from_options(options, None)
    assert ctx.depth == 3
    assert ctx.filter.include == ("pkg", "other.*")
    assert ctx.filter.exclude == ("operator",)
    assert ctx.abbreviate.width == 20
    assert ctx.output is None


def test_from_options_passes_output_through(tmp_path):
    ctx = ProfileContext.from_options({"sort": "calls", "limit": "5", "dot": "g.dot"}, str(tmp_path / "t.txt"))
    assert (ctx.output, ctx.sort, ctx.limit, ctx.files["dot"]) == (str(tmp_path / "t.txt"), "calls", 5, "g.dot")


@pytest.mark.parametrize("cls, options, message", [
    (TraceContext, {"depht": "3"},
     "unknown option 'depht' (valid options: depth, events, exclude, fold, include, libraries, lines, operators, "
     "reprs, timeline, width)"),
    (TraceContext, {"depth": "three"}, "bad value for option depth='three': expected a number >= 1, or all"),
    (TraceContext, {"depth": "0"}, "bad value for option depth='0': expected a number >= 1, or all"),
    (TraceContext, {"include": "a++b"},
     "bad value for option include='a++b': expected module patterns separated by '+'"),
    (ProfileContext, {"sort": "speed"},
     "bad value for option sort='speed': expected one of self, cumulative, calls, name"),
    (ProfileContext, {"dot": ""}, "bad value for option dot='': expected a file name"),
    (NullContext, {"depth": "1"}, "unknown option 'depth' (valid options: none)"),
])
def test_from_options_refuses_bad_options_naming_them_and_the_valid_keys(cls, options, message):
    with pytest.raises(ValueError) as info:
        cls.from_options(options, None)
    assert message in str(info.value)
    assert str(info.value).startswith(cls.__name__)
    if "unknown" not in message:
        assert "(valid options: " in str(info.value)


@pytest.mark.parametrize("cls, option", [(TraceContext, None), (NullContext, None), (ProfileContext, None),
                                         *[(ProfileContext, key) for key in ("speedscope", "collapsed", "dot",
                                                                             "flamegraph", "raw")]])
def test_from_options_refuses_a_report_file_in_a_missing_directory(tmp_path, cls, option):
    missing = str(tmp_path / "missing" / "report.txt")
    options, output = ({}, missing) if option is None else ({option: missing}, None)
    with pytest.raises(ReportPathError) as info:
        cls.from_options(options, output)
    assert info.value.option == option
    assert str(info.value).startswith(f"{cls.__name__}: cannot write ")
    assert f"no such directory {str(tmp_path / 'missing')!r}" in str(info.value)


@pytest.mark.parametrize("make_path, why", [
    (lambda tmp: tmp, "is a directory"),
    (lambda tmp: (tmp / "file").touch() or tmp / "file" / "report.txt", "is not a directory"),
])
def test_from_options_refuses_a_report_file_that_cannot_be_a_file(tmp_path, make_path, why):
    path = str(make_path(tmp_path))
    with pytest.raises(ReportPathError, match=why):
        ProfileContext.from_options({"flamegraph": path}, None)


def test_from_options_leaves_an_existing_report_file_as_it_is_until_the_report(tmp_path):
    existing = tmp_path / "prof.txt"
    existing.write_text("from an earlier run")
    ProfileContext.from_options({"dot": str(tmp_path / "new.dot")}, str(existing))
    assert existing.read_text() == "from an earlier run"
    assert not (tmp_path / "new.dot").exists()


def test_a_third_party_reporting_context_gets_from_options_from_the_base():
    class Counting(ReportingContext):
        option_parsers = {"start": int}

        def __init__(self, output=None, *, start=0):
            super().__init__(output)
            self.count = start

        def prehook(self, f, *args, **kwargs):
            self.count += 1

        def write_report(self):
            print(self.count, file=self.output)

    out = io.StringIO()
    ctx = Counting.from_options({"start": "10"}, out)
    ch.overdub(ctx, program, 1, 2, 3)
    ctx.write_report()
    assert out.getvalue() == "18\n"


def test_contexts_keep_metadata_and_refuse_what_is_not_a_pass():
    assert TraceContext(metadata={"a": 1}).metadata == {"a": 1}
    assert ProfileContext().metadata is None
    with pytest.raises(TypeError, match="pass_ must be a cassette_hook.Pass"):
        NullContext(pass_=object())


def test_a_context_whose_init_does_not_call_super_init_runs_with_no_metadata_and_no_pass():
    class Recording(ch.Context):
        def __init__(self):  # (no super().__init__())
            self.seen = []

        def prehook(self, f, /, *args, **kwargs):
            self.seen.append(f)

    ctx = Recording()
    assert ch.overdub(ctx, program, 2, 3, 4) == program(2, 3, 4)
    assert ctx.seen.count(times) == 2  # (its prehook ran)
    assert (ctx.metadata, ctx.pass_, ctx.tag, ctx.hooks_enabled) == (None, None, None, True)
    assert ch.similarcontext(ctx, metadata=1).metadata == 1


# -- null --------------------------------------------------------------------------------

def test_null_context_gives_the_same_results():
    assert ch.overdub(NullContext(), program, 2, 3, 4) == program(2, 3, 4) == 18
    with NullContext() as ctx:
        assert ch.overdub(ctx, sorted, [3, 1, 2], key=lambda v: -v) == [3, 2, 1]


def test_null_context_overloads_nothing():
    for generic in (ch.prehook, ch.posthook, ch.overdub, ch.fallback, ch.execute):
        assert not generic.has_methods_for(NullContext)


def test_null_context_reports_nothing(capsys):
    NullContext.from_options({}, None).write_report()
    assert capsys.readouterr() == ("", "")


# -- trace: the tree -------------------------------------------------------------------

def test_trace_shows_the_call_tree_with_arguments_results_and_exceptions():
    assert trace(program, 2, 3, 4) == (18, PROGRAM_TRACE)


def test_trace_under_with_is_the_same():
    out = io.StringIO()
    with TraceContext(out) as ctx:
        assert ctx.runcall(program, 2, 3, 4) == 18
    assert out.getvalue() == PROGRAM_TRACE


def test_trace_depth_limits_the_levels_shown():
    assert trace(program, 2, 3, 4, depth=2)[1] == f"""\
{M}.program(2, 3, 4)
  {M}.check(-1) !! ValueError('negative')
  {M}.times(2, 3) -> 6
  {M}.times(3, 4) -> 12
{M}.program -> 18
"""


def nest(n):
    return 0 if n == 0 else nest(n - 1)


def test_trace_shows_ten_levels_by_default():
    lines = trace(nest, 12)[1].splitlines()
    assert max(len(line) - len(line.lstrip()) for line in lines) // 2 == 9
    assert lines[9] == f"{' ' * 18}{M}.nest(3) -> 0"


def test_trace_depth_all_shows_every_level():
    ctx = TraceContext.from_options({"depth": "all"}, None)
    assert ctx.depth is None
    assert len(trace(nest, 12, depth=None)[1].splitlines()) == 2 * 12 + 1


def by_negation(items):
    return sorted(items, key=lambda v: times(v, -1))


def test_trace_exclude_hides_calls_but_not_the_calls_inside_them():
    assert trace(by_negation, [1, 2], exclude=["builtins", "operator"])[1] == f"""\
{M}.by_negation([1, 2])
  {M}.by_negation.<locals>.<lambda>(1)
    {M}.times(1, -1) -> -1
  {M}.by_negation.<locals>.<lambda> -> -1
  {M}.by_negation.<locals>.<lambda>(2)
    {M}.times(2, -1) -> -2
  {M}.by_negation.<locals>.<lambda> -> -2
{M}.by_negation -> [2, 1]
"""


def test_trace_include_shows_only_matching_modules():
    assert trace(program, 2, 3, 4, include=["operator"], operators=True)[1] == """\
operator.lt(-1, 0) -> True
operator.mul(2, 3) -> 6
operator.mul(3, 4) -> 12
operator.add(6, 12) -> 18
"""


def test_trace_names_builtin_methods_classes_and_keyword_arguments():
    class Box:
        def __init__(self, items):
            self.items = items

        def __repr__(self):
            return f"Box({self.items})"

    def use():
        box = Box(items=[])
        box.items.append(1)
        ", ".join(["a", "b"])
        return box

    box_object, text = trace(use, exclude=["operator"])
    box = f"{M}.test_trace_names_builtin_methods_classes_and_keyword_arguments.<locals>.Box"
    assert text.splitlines()[1:-1] == [
        f"  {box}(items=[])",
        f"    {box}.__init__(<Box object at 0x{id(box_object):x}>, items=[]) -> None",
        f"  {box} -> <Box object at 0x{id(box_object):x}>",  # not its __repr__: the program did not call it
        "  list.append([], 1) -> None",
        "  str.join(', ', ['a', 'b']) -> 'a, b'",
    ]


def test_trace_abbreviates_values_to_the_width():
    def take(*values):
        return len(values)

    def call():
        return take("x" * 500, list(range(1000)), {i: i for i in range(100)}, {1, 2, 3})

    text = trace(call, width=30, exclude=["builtins", "operator"])[1]
    line = text.splitlines()[1]
    args = line[line.index("(") + 1: line.rindex(")")]
    assert args == "'xxxxxxxxxxxx...xxxxxxxxxxxxx', [0, 1, 2, 3, 4, 5, ...], {0: 0, 1: 1, 2: 2, 3: 3, ...}, {1, 2, 3}"


def test_trace_with_user_reprs_shows_floats_none_and_instances_by_their_repr_cut_to_the_width():
    class Long:
        def __repr__(self):
            return "L" * 50

    def take(*values):
        return len(values)

    text = trace(take, 0.1, None, Long(), width=20, exclude=["builtins"], reprs="user")[1]
    assert text == f"{M}.test_trace_with_user_reprs_shows_floats_none_and_instances_by_their_repr_cut_to_the_width." \
                   f"<locals>.take(0.1, None, {'L' * 17}...) -> 3\n"


@pytest.mark.parametrize("value", [0, -7, 10**40, 10**5000, "", "short", "it's", "a\nb", "x" * 100, True],
                         ids=["0", "-7", "10**40", "10**5000", "empty", "short", "quote", "newline", "long", "bool"])
def test_trace_abbreviates_ints_and_strings_as_reprlib_does(value):
    abbreviate = TraceContext(width=20).abbreviate
    text = abbreviate.repr(value)  # reprlib's way (10**5000 has no repr on 3.11+: repr1 names it instead)
    assert abbreviate(value) == (text if len(text) <= 20 else text[:17] + "...")


def test_trace_with_user_reprs_survives_reprs_that_raise():
    class Bad:
        def __repr__(self):
            raise RuntimeError("no repr")

    def use(x):
        return [x]

    result, text = trace(use, Bad(), reprs="user")
    assert len(result) == 1
    bad = f"<Bad object at 0x{id(result[0]):x}>"
    assert text == f"{M}.test_trace_with_user_reprs_survives_reprs_that_raise.<locals>.use({bad}) -> [{bad}]\n"


def test_trace_with_user_reprs_survives_a_class_named_like_a_builtin():
    class dict:  # noqa: A001 -- reprlib would dispatch on the name
        def __repr__(self):
            return "mine"

    assert trace(len, [dict()], reprs="user") == (1, "builtins.len([mine]) -> 1\n")
    assert TraceContext(reprs="user").abbreviate(dict()) == "mine"


def test_trace_does_not_change_exceptions():
    error = KeyError("k")

    def fail():
        raise error

    def outer():
        return fail()

    ctx = TraceContext(io.StringIO())
    with pytest.raises(KeyError) as info:
        ctx.runcall(outer)
    assert info.value is error


def test_trace_passes_keyword_arguments_named_like_its_own_parameters():
    def kw(self, f):
        return self - f

    def call():
        return kw(f=1, self=3)

    name = f"{M}.test_trace_passes_keyword_arguments_named_like_its_own_parameters.<locals>.kw"
    assert trace(call, exclude=["operator"])[1].splitlines()[1] == f"  {name}(f=1, self=3) -> 2"


def test_trace_to_a_broken_stream_stops_the_trace_not_the_program():
    out = io.StringIO()
    out.close()
    ctx = TraceContext(out)
    assert ctx.runcall(program, 2, 3, 4) == 18
    ctx.write_report()


def test_trace_to_a_stream_that_cannot_encode_a_value_escapes_it():
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="ascii")
    ctx = TraceContext(out)
    assert ctx.runcall(str.upper, "é") == "É"
    assert ctx.runcall(lambda s: s.upper(), "é") == "É"
    ctx.write_report()
    lambda_ = f"{M}.test_trace_to_a_stream_that_cannot_encode_a_value_escapes_it.<locals>.<lambda>"
    assert raw.getvalue().decode("ascii").endswith(f"str.upper('\\xe9') -> '\\xc9'\n{lambda_} -> '\\xc9'\n")


def test_trace_writes_a_file_and_closes_it_at_write_report(tmp_path):
    ctx = TraceContext.from_options({}, str(tmp_path / "trace-{pid}.txt"))
    ctx.runcall(program, 2, 3, 4)
    ctx.write_report()
    ctx.runcall(program, 2, 3, 4)  # after the report: not written, no error
    [file] = tmp_path.iterdir()
    assert file.name == f"trace-{__import__('os').getpid()}.txt"
    assert file.read_text(encoding="utf-8") == PROGRAM_TRACE


def test_trace_defaults_to_stderr_at_the_time_of_writing(capsys):
    ctx = TraceContext()
    ctx.runcall(abs, -2)
    ctx.write_report()
    assert capsys.readouterr() == ("", "builtins.abs(-2) -> 2\n")


def test_trace_of_deep_recursion_does_not_hit_the_recursion_limit():
    def down(n):
        return 0 if n == 0 else 1 + down(n - 1)

    n = sys.getrecursionlimit() - 60
    assert down(n) == n
    result, text = trace(down, n, depth=None)
    assert result == n
    assert len(text.splitlines()) == 2 * n + 1


# -- trace: threads ----------------------------------------------------------------------

def test_trace_keeps_each_threads_tree_and_names_the_other_threads():
    out = io.StringIO()
    ctx = TraceContext(out)
    barrier = threading.Barrier(3)

    def run():
        barrier.wait()
        ctx.runcall(program, 2, 3, 4)

    threads = [threading.Thread(target=run, name=f"worker-{i}") for i in range(3)]
    ctx.runcall(abs, -1)  # the thread that made the context: its lines are not prefixed
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = out.getvalue().splitlines()
    assert lines[0] == "builtins.abs(-1) -> 1"
    for t in threads:
        prefix = f"[{t.name}] "
        mine = [line[len(prefix):] for line in lines if line.startswith(prefix)]
        assert "\n".join(mine) + "\n" == PROGRAM_TRACE
    assert len(lines) == 1 + 3 * len(PROGRAM_TRACE.splitlines())


def test_threads_started_under_a_context_do_not_inherit_it():
    out = io.StringIO()
    ctx = TraceContext(out, exclude=["threading"], libraries=True)  # inside threading too

    def start():
        t = threading.Thread(target=times, args=(1, 2))
        t.start()
        t.join()

    ctx.runcall(start)
    assert f"{M}.times(" not in out.getvalue()
    name = f"{M}.test_threads_started_under_a_context_do_not_inherit_it.<locals>.start"
    assert out.getvalue().endswith(f"{name} -> None\n")


# -- options shared by trace and profile, and child processes ------------------------------

@pytest.mark.parametrize("cls, default, other", [(TraceContext, False, "yes"), (ProfileContext, False, "yes")])
def test_operators_option_makes_a_variant_of_the_class(cls, default, other):
    variant = cls.from_options({"operators": other}, None)
    assert isinstance(variant, cls) and type(variant) is not cls
    assert type(variant).__name__ == cls.__name__ and repr(variant) == f"{cls.__name__}(metadata=None)"
    assert type(variant).operators is (not default) and cls.operators is default
    assert type(cls(operators=not default)) is type(variant)  # made once
    assert type(cls(operators=default)) is cls


def test_trace_shows_operators_only_when_asked():
    assert trace(program, 2, 3, 4)[1] == PROGRAM_TRACE
    assert trace(program, 2, 3, 4, operators=True)[1] == PROGRAM_TRACE_WITH_OPERATORS


def dumps_twice(value):
    return json.dumps(value) + json.dumps(value)


def test_trace_runs_library_functions_as_one_call():
    assert trace(dumps_twice, [1])[1] == f"""\
{M}.dumps_twice([1])
  json.dumps([1]) -> '[1]'
  json.dumps([1]) -> '[1]'
{M}.dumps_twice -> '[1][1]'
"""


@pytest.mark.parametrize("options", [{"libraries": True}, {"include": ["json", M]}])
def test_trace_shows_inside_libraries_when_asked_or_named(options):
    lines = [re.sub("0x[0-9a-f]+", "0x...", line) for line in trace(dumps_twice, [1], **options)[1].splitlines()]
    assert "  json.dumps([1])" in lines
    assert "    json.encoder.JSONEncoder.encode(<JSONEncoder object at 0x...>, [1])" in lines


def test_separate_gives_report_files_the_process_id(tmp_path):
    profile = ProfileContext.from_options({"dot": str(tmp_path / "g.dot"), "raw": str(tmp_path / "r-{pid}.json")},
                                          str(tmp_path / "table.txt"))
    profile.separate()
    assert profile.output == str(tmp_path / "table.{pid}.txt")
    assert profile.files["dot"] == str(tmp_path / "g.{pid}.dot")
    assert profile.files["raw"] == str(tmp_path / "r-{pid}.json")
    assert profile.files["flamegraph"] is None
    stream = io.StringIO()
    trace_to_stream = TraceContext(stream)
    trace_to_stream.separate()
    assert trace_to_stream.output is stream


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_traces_to_a_file_of_its_own(tmp_path):
    import os

    ctx = TraceContext(tmp_path / "trace.txt")
    ctx.runcall(abs, -1)
    pid = os.fork()
    if pid == 0:  # the child
        try:
            ctx.separate()
            ctx.runcall(abs, -2)
            ctx.write_report()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    ctx.runcall(abs, -3)
    ctx.write_report()
    assert (tmp_path / "trace.txt").read_text(encoding="utf-8") == "builtins.abs(-1) -> 1\nbuiltins.abs(-3) -> 3\n"
    assert (tmp_path / f"trace.{pid}.txt").read_text(encoding="utf-8") == "builtins.abs(-2) -> 2\n"


def test_a_trace_to_a_file_in_a_directory_that_does_not_exist_is_refused_when_made(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        ch.TraceContext(tmp_path / "missing" / "trace.txt")


def test_trace_names_each_function_one_decorator_wrapped_by_its_own_name():
    def shout(func):
        @functools.wraps(func)
        def wrapper(*args):
            return func(*args)
        return wrapper

    @shout
    def first(x):
        return x

    @shout
    def second(x):
        return x

    def use():
        return first(1), second(2)

    local = f"{M}.test_trace_names_each_function_one_decorator_wrapped_by_its_own_name.<locals>"
    _, text = trace(use, exclude=["operator"])
    assert [line.strip() for line in text.splitlines()[1:-1]] == [
        f"{local}.first(1)", f"{local}.first(1) -> 1", f"{local}.first -> 1",
        f"{local}.second(2)", f"{local}.second(2) -> 2", f"{local}.second -> 2",
    ]
