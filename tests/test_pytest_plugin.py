"""The pytest plugin: ``--cassette-include``, ``--cassette-context`` and the ``cassette_context`` fixture."""

from __future__ import annotations

import sys

import pytest

pytest_plugins = ["pytester"]

PACKAGE = """
def convert(amount, currency):
    return amount * rate(currency)

def rate(currency):
    raise LookupError("no network in tests")
"""

COUNTING = """
import cassette_hook as ch

class Counting(ch.Context):
    def prehook(self, f, *args, **kwargs):
        self.metadata.append(getattr(f, "__name__", "?"))

    def write_report(self):
        print("calls seen:", len(self.metadata))

def from_options(options, output):
    return Counting([])

Counting.from_options = staticmethod(from_options)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(money=PACKAGE, counting=COUNTING)
    pytester.syspathinsert()
    return pytester


def test_included_package_is_instrumented_for_the_tests(project):
    project.makepyfile(test_it="""
        import cassette_hook as ch
        import money
        import pytest
        def test_switched():
            with ch.NullContext():  # (switched at the first activation, or at its first call)
                with pytest.raises(LookupError):
                    money.convert(1, "EUR")
                assert "__cassette_hook_enter__" in money.convert.__code__.co_names
    """)
    project.runpytest_subprocess("--cassette-include", "money").assert_outcomes(passed=1)


def test_without_the_option_nothing_is_instrumented(project):
    project.makepyfile(test_it="""
        import money
        def test_plain():
            assert "__cassette_hook_enter__" not in money.convert.__code__.co_names
    """)
    project.runpytest_subprocess().assert_outcomes(passed=1)


TEST_MODULE_CALLING_A_HELPER = """
    from counting import Counting

    def helper():
        return 3

    def calls_helper():  # entered under the context, so its calls are seen
        return helper()

    def test_seen_by_a_context():
        ctx = Counting([])
        with ctx:
            calls_helper()
        assert ctx.metadata == ["helper"]

    def test_explained_by_pytest():
        assert helper() == 4
"""


@pytest.mark.parametrize("assert_mode", ["rewrite", "plain"])
def test_included_test_module_is_instrumented_under_either_assertion_mode(project, assert_mode):
    project.makepyfile(test_it=TEST_MODULE_CALLING_A_HELPER)
    result = project.runpytest_subprocess("--cassette-include", "test_it", f"--assert={assert_mode}")
    result.assert_outcomes(passed=1, failed=1)


@pytest.mark.parametrize("assert_mode", ["rewrite", "plain"])
def test_included_test_module_is_light_until_a_context_is_first_active(project, assert_mode):
    project.makepyfile(test_light="""
        import cassette_hook as ch
        from cassette_hook.importhook import lazy_mode

        def helper():
            return abs(-1)

        def held(f):  # (not f.__code__: read, it would be switched: docs/importhook.md)
            watch = lazy_mode.watcher()
            return f.__code__ if watch is None else watch.code_of(f)

        def test_light():
            idle = "__cassette_hook_enter__" in held(helper).co_names
            with ch.NullContext():
                helper()  # (switched at the first activation, or at its first call)
                active = "__cassette_hook_enter__" in held(helper).co_names
            assert (idle, active) == (False, True)
    """)
    result = project.runpytest_subprocess("--cassette-include", "test_light", f"--assert={assert_mode}")
    result.assert_outcomes(passed=1)


def test_included_test_module_keeps_pytests_assertion_explanations(project):
    project.makepyfile(test_it=TEST_MODULE_CALLING_A_HELPER)
    result = project.runpytest_subprocess("--cassette-include", "test_it")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["E       assert 3 == 4", "E        +  where 3 = helper()"])


def test_test_module_included_by_the_command_line_is_instrumented_under_assertion_rewriting(project):
    project.makepyfile(test_it=TEST_MODULE_CALLING_A_HELPER)
    result = project.run(sys.executable, "-m", "cassette_hook", "--include", "test_it", "-m", "pytest", "-p",
                         "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["E       assert 3 == 4"])


def test_cassette_context_fixture_scopes_a_mock_to_one_test(project):
    project.makepyfile(test_it="""
        import cassette_hook as ch
        import money
        import pytest

        class FixedRates(ch.Context):
            pass

        @ch.overdub.register
        def _(ctx: FixedRates, f: ch.Is[money.rate], currency):
            return ctx.metadata[currency]

        def test_mocked(cassette_context):
            cassette_context(FixedRates({"EUR": 2}))
            assert money.convert(10, "EUR") == 20

        def test_not_mocked_afterwards():
            with pytest.raises(LookupError):
                money.convert(10, "EUR")
            assert ch.current_context() is None
    """)
    project.runpytest_subprocess("--cassette-include", "money").assert_outcomes(passed=2)


MOCKED_RATE_TEST = """
    import cassette_hook as ch
    import money

    class FixedRates(ch.Context):
        pass

    @ch.overdub.register
    def _(ctx: FixedRates, f: ch.Is[money.rate], currency):
        return ctx.metadata[currency]

    def test_mocked(cassette_context):
        cassette_context(FixedRates({"EUR": 2}))
        assert money.convert(10, "EUR") == 20
"""


def test_cassette_context_fixture_without_include_says_what_to_add_when_the_test_fails(project):
    project.makepyfile(test_it=MOCKED_RATE_TEST)
    result = project.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cassette_hook: nothing is instrumented*",
                                 "*pytest ran without --cassette-include*",
                                 "Add --cassette-include PACKAGE*"])


def test_cassette_context_fixture_with_include_gives_no_such_hint(project):
    project.makepyfile(test_it=MOCKED_RATE_TEST.replace("== 20", "== 21"))
    result = project.runpytest_subprocess("--cassette-include", "money")
    result.assert_outcomes(failed=1)
    assert "nothing is instrumented" not in result.stdout.str()


def test_cassette_context_fixture_makes_a_context_from_a_class(project):
    project.makepyfile(test_it="""
        import money
        from counting import Counting

        def test_counted(cassette_context):
            ctx = cassette_context(Counting, [])
            try:
                money.convert(1, "EUR")
            except LookupError:
                pass
            assert ctx.metadata == ["rate", "LookupError"]
    """)
    project.runpytest_subprocess("--cassette-include", "money").assert_outcomes(passed=1)


def test_session_context_is_active_in_every_test_and_reports_at_the_end(project):
    project.makepyfile(test_it="""
        import cassette_hook as ch
        def test_one():
            assert type(ch.current_context()).__name__ == "Counting"
        def test_two():
            assert type(ch.current_context()).__name__ == "Counting"
    """)
    result = project.runpytest_subprocess(
        "--cassette-include", "money", "--cassette-context", "counting:Counting", "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["calls seen: *"])


def test_unknown_session_context_is_a_usage_error(project):
    project.makepyfile(test_it="def test_never(): pass")
    result = project.runpytest_subprocess("--cassette-context", "nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown context 'nope'*available*"])


@pytest.mark.parametrize("args, option", [
    (["--cassette-context", "profile", "--cassette-output", "missing/table.txt"], "--cassette-output"),
    (["--cassette-context", "profile,collapsed=missing/stacks.txt"], "--cassette-context"),
])
def test_unwritable_report_file_is_a_usage_error(project, args, option):
    project.makepyfile(test_it="def test_never(): pass")
    result = project.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}: ProfileContext: cannot write *: no such directory *missing*"])


def test_two_session_contexts_writing_their_reports_to_one_file_is_a_usage_error(project):
    # (docs/cli.md, "Contexts": each would write its report over the other's)
    project.makepyfile(test_it="def test_never(): pass")
    result = project.runpytest_subprocess("--cassette-context", "trace", "--cassette-context", "profile",
                                          "--cassette-output", "report.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--cassette-output: 2 contexts (TraceContext, ProfileContext) would write *"])


def test_suite_that_makes_warnings_errors_runs_under_the_command_line(project):
    # python -m cassette_hook imports cassette_hook before pytest loads it as a plugin;
    # pytest must not warn that it cannot rewrite it (toolz's suite makes that an error).
    project.makeini("[pytest]\nfilterwarnings = error\n")
    project.makepyfile(test_it="def test_fine(): pass")
    result = project.run(sys.executable, "-m", "cassette_hook", "--include", "money", "-m", "pytest", "-q")
    result.assert_outcomes(passed=1)


def test_debug_option_explains_each_import(project):
    project.makepyfile(test_it="import money\ndef test_it(): pass\n")
    result = project.runpytest_subprocess("--cassette-include", "money", "--cassette-debug", "import", "-s")
    result.assert_outcomes(passed=1)
    assert "cassette_hook: import: money: included by 'money'; rewriting" in result.stderr.lines


def test_include_pattern_that_matched_nothing_is_named_on_stderr(project):
    project.makepyfile(test_it="import money\ndef test_it(): pass\n")
    result = project.runpytest_subprocess("--cassette-include", "money", "--cassette-include", "mony")
    result.assert_outcomes(passed=1)
    assert result.stderr.lines == ["cassette_hook: --cassette-include 'mony' matched no imported module"]
