"""Forward-mode automatic differentiation in a page of user code, on cassette_hook's tagging.

The input is tagged with its derivative (1.0); every arithmetic operation and ``math``
function the program runs is overloaded in the ``Diff`` context to compute its result's
derivative from its operands' (the chain rule), and to tag the result with it.  The
program itself -- loops, branches, helper functions, methods -- is ordinary Python that
knows nothing about any of this.

    >>> derivative(lambda x: x * math.sin(x), 1.0)  # sin(1) + cos(1)
    1.3817732906760363

Run ``python examples/forward_ad.py`` for a few derivatives next to their closed forms.
"""

import math
import operator
import types

import cassette_hook as ch


class Diff(ch.Context):
    """A tagged number's metadata is its derivative with respect to the input."""


@ch.metadatatype.register
def _numbers_carry_derivatives(ctx: Diff, value: int | float) -> tuple[type, ...]:
    return (int, float)


def value_and_derivative(f, x):
    """``f(x)`` and ``f'(x)``, for a function ``f`` of one number."""
    ctx = ch.enabletagging(Diff(), f)
    y = ch.overdub_tagged(ctx, f, ch.tag(x, ctx, 1.0))
    return _parts(ctx, y)


def derivative(f, x):
    """``f'(x)``."""
    return value_and_derivative(f, x)[1]


def _parts(ctx, x):
    """An operand's plain value and its derivative (0.0 for a constant: it is not tagged)."""
    d = ch.metadata(x, ctx)
    return ch.untag(x, ctx), 0.0 if d is ch.NoMetaData else d


# -- the rules ----------------------------------------------------------------------------
# Each overload sees the call with its tagged operands, and returns the result tagged with
# its derivative.  Rules match only calls with a tagged operand: an operation on untagged
# operands alone (``0.5 * k``, a loop index, two strings) has no derivative to carry, and
# runs plainly, as dual numbers leave plain floats alone.

def _binary_rule(rule):
    """Register ``rule(ctx, f, a, b)`` for the calls where ``a``, ``b`` or both are tagged
    (one overload per case: dispatch reads each operand's annotation)."""
    for a, b in ((ch.Tagged, object), (object, ch.Tagged), (ch.Tagged, ch.Tagged)):
        method = types.FunctionType(rule.__code__, rule.__globals__, rule.__name__, rule.__defaults__)
        method.__annotations__ = {**rule.__annotations__, "a": a, "b": b}
        ch.overdub.register(method)
    return rule


@_binary_rule
def _add(ctx: Diff, f: ch.Is[operator.add, operator.iadd], a, b):
    (u, du), (v, dv) = _parts(ctx, a), _parts(ctx, b)
    return ch.tag(u + v, ctx, du + dv)


@_binary_rule
def _sub(ctx: Diff, f: ch.Is[operator.sub, operator.isub], a, b):
    (u, du), (v, dv) = _parts(ctx, a), _parts(ctx, b)
    return ch.tag(u - v, ctx, du - dv)


@_binary_rule
def _mul(ctx: Diff, f: ch.Is[operator.mul, operator.imul], a, b):
    (u, du), (v, dv) = _parts(ctx, a), _parts(ctx, b)
    return ch.tag(u * v, ctx, du * v + u * dv)


@_binary_rule
def _div(ctx: Diff, f: ch.Is[operator.truediv, operator.itruediv], a, b):
    (u, du), (v, dv) = _parts(ctx, a), _parts(ctx, b)
    return ch.tag(u / v, ctx, (du * v - u * dv) / (v * v))


@_binary_rule
def _pow(ctx: Diff, f: ch.Is[operator.pow, operator.ipow, pow], a, b):
    (u, du), (v, dv) = _parts(ctx, a), _parts(ctx, b)
    out = u ** v
    d = v * u ** (v - 1) * du if du else 0.0
    if dv:  # a variable exponent: d(u^v) = u^v (v' ln u + v u'/u)
        d += out * math.log(u) * dv
    return ch.tag(out, ctx, d)


@ch.overdub.register
def _neg(ctx: Diff, f: ch.Is[operator.neg], a: ch.Tagged):
    u, du = _parts(ctx, a)
    return ch.tag(-u, ctx, -du)


@ch.overdub.register
def _abs(ctx: Diff, f: ch.Is[abs], a: ch.Tagged):
    u, du = _parts(ctx, a)
    return ch.tag(abs(u), ctx, math.copysign(1.0, u) * du)


_OUTER = {  # f: f'
    math.sin: math.cos, math.cos: lambda u: -math.sin(u), math.exp: math.exp,
    math.sqrt: lambda u: 0.5 / math.sqrt(u), math.log: lambda u: 1.0 / u,
}


@ch.overdub.register
def _chain(ctx: Diff, f: ch.Is[math.sin, math.cos, math.exp, math.sqrt, math.log], a: ch.Tagged):
    u, du = _parts(ctx, a)
    return ch.tag(f(u), ctx, _OUTER[f](u) * du)


@ch.overdub.register
def _log_base(ctx: Diff, f: ch.Is[math.log], a, base):
    return _div(ctx, operator.truediv, _chain(ctx, math.log, a), _chain(ctx, math.log, base))


@ch.overdub.register
def _sum(ctx: Diff, f: ch.Is[sum], items, start=0):
    total = start
    for item in items:
        total = _add(ctx, operator.add, total, item)
    return total


@ch.overdub.register
def _min_max(ctx: Diff, f: ch.Is[min, max], first, *rest):
    candidates = (first, *rest) if rest else tuple(first)
    best = f(range(len(candidates)), key=lambda i: ch.untag(candidates[i], ctx))
    return candidates[best]  # the operand itself, with its derivative


_NO_RULE = [getattr(math, name) for name in (
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "log2", "log10",
    "log1p", "expm1", "pow", "hypot", "erf", "erfc", "gamma", "lgamma", "cbrt", "exp2", "fsum", "prod")
    if hasattr(math, name)]


@ch.fallback.register
def _no_rule(ctx: Diff, f: ch.Is[tuple(_NO_RULE)], *args):
    if any(ch.hasmetadata(a, ctx) for a in args):  # better an error than a derivative silently 0
        raise TypeError(f"forward_ad: no derivative rule for math.{f.__name__}: overload it for Diff")
    return f(*(ch.untag(a, ctx) for a in args))


if __name__ == "__main__":
    def poly(x):
        total = 0.0
        for k, c in enumerate([3.0, -2.0, 0.5]):
            total += c * x ** k
        return total

    class Spring:
        def __init__(self, k):
            self.k = k

        def energy(self, x):
            return 0.5 * self.k * x * x

    def piecewise(x):
        return math.exp(-x) if x > 0 else math.sqrt(1 + x * x)

    for name, f, x, exact in [
        ("3 - 2x + x^2/2", poly, 3.0, -2.0 + 3.0),
        ("x sin x", lambda x: x * math.sin(x), 1.0, math.sin(1.0) + math.cos(1.0)),
        ("spring energy", lambda x: Spring(4.0).energy(x), 1.5, 4.0 * 1.5),
        ("piecewise at 1", piecewise, 1.0, -math.exp(-1.0)),
        ("piecewise at -1", piecewise, -1.0, -1.0 / math.sqrt(2.0)),
    ]:
        print(f"d/dx {name:16} = {derivative(f, x):+.12f}   (closed form {exact:+.12f})")
