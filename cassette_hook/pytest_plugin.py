"""The pytest plugin (entry point ``pytest11``): instrument the package under test, and
activate contexts for a session or a single test.

    pytest --cassette-include mypkg [--cassette-exclude mypkg.vendored] [--cassette-context trace]

The options do nothing unless given, so having cassette_hook installed costs a pytest
run nothing.  The ``cassette_context`` fixture activates a context for one test::

    def test_rates_are_mocked(cassette_context):
        cassette_context(FixedRates(metadata={"EUR": 1.0}))   # active until the test ends
        assert mypkg.convert(10, "EUR") == 10
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import sys
from typing import Any, Callable, Iterator

import pytest

from . import context_stack, _debug, _process, _specs
from .importhook import pytest_assertions, unmatched, finder

_session_contexts: list[context_stack.Context] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cassette_hook", "cassette_hook instrumentation")
    group.addoption("--cassette-include", action="append", default=[], metavar="PATTERN",
                    help="instrument modules matching PATTERN (a module name, a glob, or a directory) "
                         "as they are imported; repeatable")
    group.addoption("--cassette-exclude", action="append", default=[], metavar="PATTERN",
                    help="do not instrument modules matching PATTERN; repeatable")
    group.addoption("--cassette-context", action="append", default=[], metavar="SPEC",
                    help="activate a context (a name from python -m cassette_hook --list-contexts, or "
                         "module:attr, with ,key=value options) for the whole session; repeatable")
    group.addoption("--cassette-output", metavar="FILE", help="where session contexts write their reports")
    group.addoption("--cassette-debug", action="append", default=[], metavar="CATEGORY[,CATEGORY]",
                    help="say on stderr what cassette_hook decides, as python -m cassette_hook --debug "
                         "('import': each import, rewritten or not, why, and what the code cache did)")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Install the hook before conftest files import the package under test; chain it
    after pytest's assertion rewriting, which loads test modules itself."""
    try:
        _debug.enable(early_config.known_args_namespace.cassette_debug)
    except ValueError as exc:
        raise pytest.UsageError(f"--cassette-debug: {exc}") from None
    include = early_config.known_args_namespace.cassette_include
    if include:
        exclude = early_config.known_args_namespace.cassette_exclude
        hook_finder = finder.install(include, exclude)
        # A plugin may have imported part of the package already: give those modules the
        # same code in place.
        for name, module in list(sys.modules.items()):
            if module is not None and hook_finder.patterns.matches(name, getattr(module, "__file__", None)):
                finder.instrument(module)
    # (installed here, or by python -m cassette_hook / install_from_env)
    if finder.installed() is not None and pytest_assertions.compose():
        early_config.add_cleanup(pytest_assertions.undo)


def pytest_configure(config: pytest.Config) -> None:
    specs = config.getoption("cassette_context")
    if not specs:
        return
    try:
        contexts = _specs.make_all(specs, config.getoption("cassette_output"))
    except Exception as exc:
        raise pytest.UsageError(_specs.describe_error(exc, "--cassette-context", "--cassette-output")) from None
    context_stack.push_whole_program(contexts)  # every thread the tests start runs under them
    _session_contexts.extend(contexts)


def pytest_unconfigure(config: pytest.Config) -> None:
    context_stack.pop_whole_program(_session_contexts)
    while _session_contexts:
        _process.write_report(_session_contexts.pop())
    include = config.getoption("cassette_include")
    if include:
        unmatched.warn(include, "--cassette-include")
        finder.uninstall()


NOTHING_INSTRUMENTED = (
    "The cassette_context fixture activated a context, but nothing was instrumented: pytest ran without "
    "--cassette-include (and no import hook was installed otherwise), so the calls inside the code under "
    "test are not call sites and the context saw none of them.\n"
    "Add --cassette-include PACKAGE (the package under test, a module name or a directory; repeatable), "
    "on the command line or in the addopts of your pytest configuration.")
_without_hook = pytest.StashKey[bool]()


@pytest.fixture
def cassette_context(request: pytest.FixtureRequest) -> Iterator[Callable[..., context_stack.Context]]:
    """Activate contexts for the rest of this test: ``cassette_context(ctx)`` pushes
    ``ctx`` (a context, a context class to make with the other arguments, or a spec
    string as for ``--cassette-context``) and returns it; each is popped when the test ends.
    If nothing is instrumented, a failure of the test says so (:data:`NOTHING_INSTRUMENTED`)."""
    pushed: list[context_stack.Context] = []

    def activate(ctx: Any, *args: Any, **kwargs: Any) -> context_stack.Context:
        if isinstance(ctx, str):
            ctx = _specs.make(ctx)
        elif isinstance(ctx, type) and issubclass(ctx, context_stack.Context):
            ctx = ctx(*args, **kwargs)
        if finder.installed() is None:
            request.node.stash[_without_hook] = True
        context_stack.push(ctx)
        pushed.append(ctx)
        return pushed[-1]

    yield activate
    for ctx in reversed(pushed):
        context_stack.pop(ctx)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test that failed with a context of the fixture active and nothing instrumented
    probably failed for that: its report says so, in a section of its own."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.failed and item.stash.get(_without_hook, False):
        report.sections.append(("cassette_hook: nothing is instrumented", NOTHING_INSTRUMENTED))
