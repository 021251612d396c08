"""The tagging examples of ``examples/``: forward-mode AD, taint tracking, graph capture."""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cassette_hook as ch

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ad = _load("forward_ad")
taint = _load("taint")
graph = _load("graph_capture")

xs = st.floats(min_value=-3.0, max_value=3.0, allow_nan=False)
positive = st.floats(min_value=0.1, max_value=5.0, allow_nan=False)


def _finite_difference(f: Any, x: float, h: float = 1e-6) -> float:
    return (f(x + h) - f(x - h)) / (2 * h)


# -- forward-mode AD -------------------------------------------------------------------

def horner(x: float) -> float:
    total = 0.0
    for c in [1.0, -2.0, 0.5, 3.0, -1.0]:
        total = total * x + c
    return total


class Oscillator:
    def __init__(self, omega: float) -> None:
        self.omega = omega

    def position(self, t: float) -> float:
        return math.cos(self.omega * t) + self.damping(t)

    def damping(self, t: float) -> float:
        return math.exp(-t * t / 10)


def _helper(x: float) -> float:
    return math.sqrt(1 + x * x)


def branchy(x: float) -> float:
    y = x
    for i in range(4):
        if y > 0.5:
            y = y * 0.9 - math.sin(y) / (i + 1)
        else:
            y = -y + _helper(y) ** 2
    return y + abs(x) + Oscillator(2.0).position(x)


@given(xs)
@settings(max_examples=40, deadline=None)
def test_ad_of_a_loop_matches_the_closed_form(x: float) -> None:
    exact = (((4 * 1.0) * x + 3 * -2.0) * x + 2 * 0.5) * x + 3.0
    assert ad.derivative(horner, x) == pytest.approx(exact, rel=1e-12, abs=1e-12)


@given(xs)
@settings(max_examples=40, deadline=None)
def test_ad_of_branches_helpers_and_methods_matches_finite_differences(x: float) -> None:
    assume(abs(x) > 1e-3)  # abs() is not differentiable at 0
    got = ad.derivative(branchy, x)
    try:
        numeric = _finite_difference(branchy, x)
    except ZeroDivisionError:
        return
    assume(abs(_finite_difference(branchy, x, 1e-5) - numeric) < 1e-4 * (1 + abs(numeric)))  # not at a branch switch
    assert got == pytest.approx(numeric, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize(("f", "dfdx"), [
    (lambda x: math.sin(x) * math.cos(x), lambda x: math.cos(2 * x)),
    (lambda x: math.exp(2 * x) - x, lambda x: 2 * math.exp(2 * x) - 1),
    (lambda x: math.log(x) / x, lambda x: (1 - math.log(x)) / x ** 2),
    (lambda x: math.sqrt(x) ** 3, lambda x: 1.5 * math.sqrt(x)),
    (lambda x: x ** x, lambda x: x ** x * (math.log(x) + 1)),
    (lambda x: -(1 / x), lambda x: 1 / x ** 2),
    (lambda x: math.log(x, 2), lambda x: 1 / (x * math.log(2))),
], ids=["sin*cos", "exp", "log/x", "sqrt^3", "x^x", "-1/x", "log2"])
@given(x=positive)
@settings(max_examples=25, deadline=None)
def test_ad_rules_match_closed_forms(f: Any, dfdx: Any, x: float) -> None:
    assert ad.derivative(f, x) == pytest.approx(dfdx(x), rel=1e-9)


@given(xs)
@settings(max_examples=20, deadline=None)
def test_ad_value_is_the_plain_result(x: float) -> None:
    assert ad.value_and_derivative(branchy, x)[0] == branchy(x)


def test_ad_through_augmented_assignment_sum_min_and_max() -> None:
    def f(x: float) -> float:
        y = x
        y *= x
        y += 1
        return sum([y, x, 2.0]) + max(x, 0.0) + min([x * 3, 100.0])

    assert ad.derivative(f, 2.0) == pytest.approx(2 * 2.0 + 1 + 1 + 3)



def test_ad_runs_operations_on_untagged_operands_plainly() -> None:
    def f(x: float) -> float:
        label = "step" + str(2)  # strings: no rule matches, no derivative to carry
        items = [1.0]
        items += [2.0]
        scale = math.cos(0.5) * len(label) - abs(-2.0)
        return scale * x + sum(items)

    assert ad.derivative(f, 2.0) == pytest.approx(math.cos(0.5) * 5 - 2.0)

def test_ad_of_a_constant_function_is_zero() -> None:
    assert ad.derivative(lambda x: 3.0, 1.0) == 0.0


def test_ad_refuses_a_math_function_it_has_no_rule_for() -> None:
    with pytest.raises(TypeError, match="no derivative rule for math.tan"):
        ad.derivative(math.tan, 0.5)


def test_ad_returns_plain_numbers() -> None:
    value, d = ad.value_and_derivative(horner, 1.0)
    assert type(value) is float and type(d) is float


# -- taint tracking --------------------------------------------------------------------

def _run(program: Any, *args: Any) -> Any:
    ctx = ch.enabletagging(taint.Taint(), program)
    return ch.overdub(ctx, program, ctx, *args)


def _raw(ctx: Any, text: str) -> Any:
    return taint.read_request(ctx, {"q": text})["q"]


@pytest.mark.parametrize("build", [
    lambda s: "SELECT " + s,
    lambda s: "SELECT '%s'" % s,
    lambda s: "SELECT '%s' AND %d" % (s, 1),
    lambda s: "SELECT {}".format(s),
    lambda s: "SELECT " + format(s, ">8"),
    lambda s: " ".join(["SELECT", s]),
    lambda s: "SELECT " + s[1:3],
    lambda s: "SELECT " + str(s),
    lambda s: ("SELECT " + s).upper(),
], ids=["+", "%", "% tuple", "str.format", "format()", "join", "slicing", "str()", "method"])
def test_taint_propagates_through_string_operations_to_the_sink(build: Any) -> None:
    def program(ctx: Any) -> Any:
        return taint.execute_sql(build(_raw(ctx, "x' OR 1=1")))

    with pytest.raises(taint.TaintError, match="request.q"):
        _run(program)


def test_a_sanitizer_clears_the_taint() -> None:
    def program(ctx: Any) -> Any:
        return taint.execute_sql("SELECT '" + taint.escape_sql(_raw(ctx, "x'")) + "'")

    _run(program)
    assert taint.EXECUTED[-1] == "SELECT 'x'''"


def test_untainted_data_reaches_the_sink() -> None:
    def program(ctx: Any) -> Any:
        return taint.execute_sql("SELECT " + str(42))

    _run(program)
    assert taint.EXECUTED[-1] == "SELECT 42"


def test_f_strings_are_not_seen_and_lose_the_taint() -> None:
    """The documented limit: FORMAT_VALUE/BUILD_STRING are not call sites."""
    def program(ctx: Any) -> Any:
        return taint.execute_sql(f"SELECT {_raw(ctx, 'x')}")

    _run(program)
    assert taint.EXECUTED[-1] == "SELECT x"


def test_percent_with_a_literal_tuple_of_percent_s_is_an_f_string_on_311_and_later() -> None:
    """CPython 3.11+ compiles ``"..%s.." % (a, b)`` (a literal template, a literal tuple,
    only %s/%r/%a) to the f-string instructions: the documented limit applies to it."""
    def program(ctx: Any) -> Any:
        return taint.execute_sql("SELECT '%s' AND %s" % (_raw(ctx, "x"), 1))

    if sys.version_info >= (3, 11):
        _run(program)
        assert taint.EXECUTED[-1] == "SELECT 'x' AND 1"
    else:
        with pytest.raises(taint.TaintError):
            _run(program)


@given(st.text(max_size=12), st.booleans())
@settings(max_examples=30, deadline=None)
def test_the_taint_tracked_program_builds_the_plain_programs_queries(text: str, escape: bool) -> None:
    ctx = ch.enabletagging(taint.Taint(), taint.handle)
    if not escape:
        with pytest.raises(taint.TaintError, match="request.name"):
            ch.overdub(ctx, taint.handle, ctx, {"name": text}, escape=False)
        return
    ch.overdub(ctx, taint.handle, ctx, {"name": text}, escape=True)
    under_taint = taint.EXECUTED[-1]
    taint.find_user(taint.escape_sql(text))
    assert under_taint == taint.EXECUTED[-1] and type(under_taint) is str


# -- computation graph ------------------------------------------------------------------

def _graph(dot: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    nodes = dict(re.findall(r'^  (n\d+) \[label="((?:[^"\\]|\\.)*)"', dot, re.MULTILINE))
    edges = re.findall(r"^  (n\d+) -> (n\d+);$", dot, re.MULTILINE)
    return nodes, edges


def test_graph_has_a_node_per_operation_and_an_edge_per_operand() -> None:
    value, dot = graph.capture(lambda x, y: x * y + math.sin(x), 2.0, 3.0)
    nodes, edges = _graph(dot)
    labels = {name: label for name, label in nodes.items()}
    named = [(labels[a], labels[b]) for a, b in edges]
    assert value == 2.0 * 3.0 + math.sin(2.0)
    assert sorted(named) == sorted([("x0 = 2.0", "*"), ("x1 = 3.0", "*"), ("x0 = 2.0", "sin"), ("*", "+"),
                                    ("sin", "+"), ("+", f"result = {value!r}")])


def test_graph_shows_constants_and_only_the_data_flow() -> None:
    def f(x: float) -> float:
        if x > 0:
            x = x * 2
        return x + (1 + 1)

    _, dot = graph.capture(f, 1.0)
    nodes, edges = _graph(dot)
    assert sorted(nodes.values()) == sorted(["x0 = 1.0", "*", "2", "+", "2", "result = 4.0"])
    assert len(edges) == 5


def test_graph_dot_is_well_formed() -> None:
    _, dot = graph.capture(lambda x: math.exp(-x) / (1 + x ** 2), 0.5)
    nodes, edges = _graph(dot)
    assert dot.startswith("digraph computation {") and dot.endswith("}")
    assert all(a in nodes and b in nodes for a, b in edges)
    assert len(dot.splitlines()) == 3 + len(nodes) + len(edges)


@given(st.floats(min_value=-5, max_value=5, allow_nan=False), st.floats(min_value=0.5, max_value=5))
@settings(max_examples=25, deadline=None)
def test_graph_capture_computes_the_plain_result(x: float, y: float) -> None:
    def f(a: float, b: float) -> float:
        h = a * b - math.cos(a)
        for _ in range(3):
            h = h / b + a
        return h

    assert graph.capture(f, x, y)[0] == f(x, y)
