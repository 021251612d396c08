"""Strategies of whole Python programs for the differential fuzzer.

Two sources, mixed by :func:`programs`:

- :func:`grammar_programs`: hypothesmith's ``from_grammar()``, any syntactically valid
  module.  These are mostly tiny and fail at once at run time (``NameError``), but the
  import hook rewrites every code object of a module before it runs, so they test the
  rewriter on unusual shapes of bytecode.
- :func:`semantic_programs`: programs built from a small vocabulary that *runs*: a prelude
  defines the names every expression may use (``a``-``d``, functions ``f``, ``g``, a
  generator ``gen``, classes ``K`` and ``L(K)`` with Python dunders, a context manager
  ``Mgr``), and the statements after it -- calls with stars and keywords, methods,
  ``super()``, operators, comprehensions, lambdas, closures, generators, ``try``, ``with``,
  ``match``, bounded loops, ``print`` -- mostly run to the end, so results, exceptions
  and output are meaningful.  Loops are bounded and ``**`` has a constant exponent, so a
  program either ends quickly or fails quickly (``RecursionError``, ``MemoryError``).

hypothesmith's libcst-based ``from_node()`` is not used: with hypothesmith 0.3.3 it takes
about 0.2 s per program, and most of what it makes is ``pass``, an empty class or an
empty function (34 distinct programs in 200).
"""

from __future__ import annotations

import functools
import textwrap

import hypothesmith
from hypothesis import strategies as st

VARIABLES = ("a", "b", "c", "d")
BINARY_OPERATORS = ("+", "-", "*", "//", "%", "&", "|", "^", "<", "<=", "==", "!=", ">", "in", "not in",
                    "and", "or", "is", "is not")
EXCEPTIONS = ("Exception", "TypeError", "ValueError", "ZeroDivisionError", "IndexError", "KeyError",
              "AttributeError", "NameError", "RecursionError", "ArithmeticError", "LookupError")
LEAVES = ("a", "b", "c", "d", "0", "1", "2", "-3", "7", "'ab'", "''", "None", "True", "[1, 2, 3]",
          "(1, 'x')", "{'k': 1}", "K(2)", "L(1)", "range(3)", "[]", "2.5")


def _indent(text: str) -> str:
    return textwrap.indent(text, "    ")


def _block(lines: list[str]) -> str:
    return _indent("\n".join(lines) if lines else "pass")


def _form(template: str, *parts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``template.format(*drawn parts)``."""
    return st.tuples(*parts).map(lambda drawn: template.format(*drawn))


@functools.cache
def expressions(depth: int) -> st.SearchStrategy[str]:
    """Expressions over the prelude's names, nested at most ``depth`` deep."""
    leaves = st.sampled_from(LEAVES)
    if depth <= 0:
        return leaves
    x = expressions(depth - 1)
    op = st.sampled_from(BINARY_OPERATORS)
    exc = st.sampled_from(EXCEPTIONS)
    return st.one_of(
        leaves,
        _form("({} {} {})", x, op, x),
        _form("({} {} {})", x, op, x),
        _form("(-{})", x), _form("(not {})", x), _form("(~{})", x), _form("({} ** 2)", x),
        _form("({} if {} else {})", x, x, x),
        # calls of the program's functions: positional, keywords, stars
        _form("f({})", x), _form("g({}, {})", x, x), _form("g({}, k={})", x, x),
        _form("g(*[{}, {}])", x, x), _form("g({}, **{{'k': {}}})", x, x), _form("f(*{})", x),
        _form("list(gen({}))", x), _form("h({})", x),
        # builtins, higher-order builtins with Python callbacks
        st.sampled_from(("len", "abs", "str", "repr", "sorted", "list", "tuple", "bool", "int", "sum", "max",
                         "min", "any", "all", "set", "reversed", "iter", "next", "hash", "type")).flatmap(
            lambda name: _form(name + "({})", x)),
        _form("min({}, {})", x, x), _form("divmod({}, {})", x, x), _form("isinstance({}, (int, K))", x),
        _form("list(map(f, {}))", x), _form("list(filter(f, {}))", x), _form("sorted({}, key=f)", x),
        _form("list(zip({}, {}))", x, x), _form("list(enumerate({}))", x), _form("getattr({}, 'v', 0)", x),
        # methods: Python, builtin, super(), dunders behind operators
        _form("K({}).m({})", x, x), _form("L({}).m({})", x, x), _form("K({}).v", x),
        _form("K.make({})", x), _form("K.twice({})", x), _form("str({}).upper()", x),
        _form("'-'.join(map(str, {}))", x), _form("[{}, {}].index({})", x, x, x),
        _form("{{'k': {}}}.get({}, 0)", x, x), _form("(K({}) + {})", x, x), _form("({} + K({}))", x, x),
        _form("(K({}) == {})", x, x), _form("(K({}) < {})", x, x), _form("len(K({}))", x),
        _form("K({})[{}]", x, x), _form("list(K({}))", x), _form("({} in K({}))", x, x),
        # subscripts and containers
        _form("{}[{}]", x, x), _form("{}[1:]", x), _form("{}[::-1]", x), _form("[{}, {}]", x, x),
        _form("({},)", x), _form("{{{}: {}}}", x, x), _form("{{{}}}", x), _form("[*{}, {}]", x, x),
        _form("{{**{}}}", x),
        # comprehensions, generator expressions, lambdas, the walrus, f-strings
        _form("[{} for a in {}]", x, x), _form("[{} for b in range(3) if {}]", x, x),
        _form("{{c: {} for c in range(2)}}", x), _form("sum({} for d in range(3))", x),
        _form("[(a, b) for a in range(2) for b in {}]", x),
        _form("(lambda a, b=1: {})({})", x, x), _form("(d := {})", x),
        _form('f"{{ {} }}-{{ {}!r}}"', leaves, leaves),
        _form("(raise_({}) if {} else 0)", exc, x),
        # builtins 3.14/3.15 compile as inline loops when given a generator expression
        # (all, any, tuple; 3.15 list, set): under a context they must stay calls
        # (the iterable a leaf: a walrus there is a syntax error)
        st.sampled_from(("all", "any", "tuple", "list", "set")).flatmap(
            lambda name: _form(name + "({} for a in {})", x, leaves)
            | _form(name + "({} for b in {} if {})", x, leaves, x)),
        # a comprehension whose variable shadows a free variable (inlined from 3.12 on)
        _form("[(lambda: a)() for a in {}]", leaves), _form("[a for a in [a, {}]]", leaves),
    )


def _suite(depth: int) -> st.SearchStrategy[list[str]]:
    return st.lists(statements(depth), min_size=1, max_size=3)


@functools.cache
def statements(depth: int) -> st.SearchStrategy[str]:
    """One statement (possibly compound, with nested suites ``depth`` deep)."""
    e = expressions(2)
    v = st.sampled_from(VARIABLES)
    simple = st.one_of(
        _form("{} = {}", v, e), _form("{} += {}", v, e), _form("{}, {} = {}, {}", v, v, e, e),
        _form("{}[{}] = {}", v, e, e), _form("del {}[{}]", v, e), _form("print({})", e),
        _form("print({}, {}, sep='|')", e, e), _form("assert {}, {}", e, e), _form("{}.append({})", v, e),
        _form("raise {}({})", st.sampled_from(EXCEPTIONS), e), _form("{} = K({}); {}.v = {}", v, e, v, e),
        _form("{}", e),
    )
    if depth <= 0:
        return simple
    suite = _suite(depth - 1).map(_block)
    exc = st.sampled_from(EXCEPTIONS)
    return st.one_of(
        simple, simple,
        _form("if {}:\n{}\nelse:\n{}", e, suite, suite),
        _form("for {} in {}:\n{}\n    if {}:\n        break\nelse:\n{}", v, e, suite, e, suite),
        _form("for {} in range({}):\n{}\n    if {}:\n        continue", v, st.integers(0, 4).map(str), suite, e),
        _form("try:\n{}\nexcept {} as err:\n    print('caught', type(err).__name__)\n{}\nfinally:\n{}",
              suite, exc, suite, suite),
        _form("try:\n{}\nexcept ({}, {}):\n{}\nelse:\n{}", suite, exc, exc, suite, suite),
        _form("with Mgr({}) as {}:\n{}", e, v, suite),
        _form("with Mgr({}) as {}, Mgr({}):\n{}", e, v, e, suite),
        _form("try:\n{}\nexcept* {} as err:\n    print('caught*', [type(x).__name__ for x in err.exceptions])",
              suite, exc),
        _form("match {}:\n    case [x, y]:\n{}\n    case {{'k': x}}:\n{}\n    case K(v=x) if x:\n{}\n"
              "    case int() | str() as x:\n{}\n    case _:\n{}",
              e, suite.map(_indent), suite.map(_indent), suite.map(_indent), suite.map(_indent),
              suite.map(_indent)),
        _form("def inner(a=a):\n{}\n    return {}\n{} = inner({})", suite, e, v, e),
        _form("def counter():\n    n = 0\n    def step():\n        nonlocal n\n        n += {}\n        return n\n"
              "    return step\nstep = counter()\n{} = [step(), step()]", e, v),
        _form("for {} in gen({}):\n{}", v, e, suite),
        _form("for {} in K({}):\n{}", v, e, suite),
    )


def _guarded(statement_and_guard: tuple[str, bool]) -> str:
    """A top-level statement, or the same in a ``try`` that prints the exception and goes
    on (so that one failing statement does not end the program)."""
    statement, guard = statement_and_guard
    if not guard:
        return statement
    return f"try:\n{_indent(statement)}\nexcept Exception as error:\n    print(type(error).__name__, error)"


def _function(header: str, depth: int) -> st.SearchStrategy[str]:
    return _form(header + "\n{}\n    return {}", _suite(depth).map(_block), expressions(2))


@st.composite
def semantic_programs(draw: st.DrawFn) -> str:
    """A prelude binding every name expressions use, then a few statements."""
    def part(strategy: st.SearchStrategy[str]) -> str:
        return draw(strategy)

    e = expressions(1)
    prelude = [
        "def raise_(exc):\n    raise exc('raised')",
        part(_function("def f(a, b=1, *rest, k=2, **kw):", 1)),
        part(_function("def g(a, b=0, k=3):", 1)),
        "def h(a):\n    return f(a) if a else g(a, a)",
        part(_form("def gen(a):\n    yield {}\n    yield from [a, {}]\n    return {}", e, e, e)),
        part(_form(
            "class K:\n    v = {}\n    def __init__(self, v=0):\n        self.v = v\n"
            "    def m(self, b):\n{}\n        return {}\n"
            "    @classmethod\n    def make(cls, v):\n        return cls(v)\n"
            "    @staticmethod\n    def twice(x):\n        return [x, x]\n"
            "    def __add__(self, other):\n        return {}\n    def __radd__(self, other):\n        return {}\n"
            "    def __eq__(self, other):\n        return {}\n    def __lt__(self, other):\n        return {}\n"
            "    def __len__(self):\n        return {}\n    def __getitem__(self, i):\n        return {}\n"
            "    def __iter__(self):\n        yield self.v\n        yield from range(2)\n"
            "    def __contains__(self, x):\n        return {}\n"
            "    def __repr__(self):\n        return f'K({{self.v!r}})'\n"
            "    __hash__ = object.__hash__",
            st.sampled_from(LEAVES[4:11]), _suite(1).map(_block).map(_indent), e, e, e, e, e,
            e.map(lambda s: f"abs(int(bool({s})))"), e, e)),
        part(_form("class L(K):\n    def m(self, b):\n        return super().m(b) if {} else {}", e, e)),
        part(_form("class Mgr:\n    def __init__(self, v):\n        self.v = v\n    def __enter__(self):\n"
                   "        print('enter', self.v)\n        return {}\n"
                   "    def __exit__(self, kind, value, tb):\n        print('exit', kind and kind.__name__)\n"
                   "        return {}", e, st.sampled_from(("False", "True", "self.v")))),
    ]
    bindings = [part(_form(f"{name} = {{}}", expressions(1))) for name in VARIABLES]
    body = part(st.lists(st.tuples(statements(2), st.booleans()).map(_guarded), min_size=1, max_size=6))
    return "\n".join(prelude + bindings + body) + "\n"


def grammar_programs() -> st.SearchStrategy[str]:
    """hypothesmith's syntactically valid modules (any construct of the grammar)."""
    return hypothesmith.from_grammar()


def programs() -> st.SearchStrategy[str]:
    """The fuzzer's mix: three semantic programs for each grammar one."""
    return st.one_of(semantic_programs(), semantic_programs(), semantic_programs(), grammar_programs())
