"""Forward-mode AD on tagging (examples/forward_ad.py) against a hand-rolled dual-number
class (the floor) and autograd's ``grad``: time per derivative of scalar functions of a
few hundred operations each. Ratios come from one interleaved run (see harness.py).

    PYTHONPATH=. python benchmarks/bench_tagging_ad.py [--quick] [--rounds N]

Each function is written once against a math namespace ``m``: ``math`` for the tagged
run (the overloads see ``math.sin``), ``dual`` below for the hand-rolled dual numbers,
``autograd.numpy`` for autograd.  Every variant's derivative is checked against the
others before timing.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import platform
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Callable

import harness

ROOT = Path(__file__).resolve().parent.parent


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("forward_ad", ROOT / "examples" / "forward_ad.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the floor: dual numbers by hand --------------------------------------------------------

class Dual:
    __slots__ = ("v", "d")

    def __init__(self, v: float, d: float) -> None:
        self.v, self.d = v, d

    def __add__(self, o: Any) -> Dual:
        return Dual(self.v + o.v, self.d + o.d) if type(o) is Dual else Dual(self.v + o, self.d)

    __radd__ = __add__

    def __sub__(self, o: Any) -> Dual:
        return Dual(self.v - o.v, self.d - o.d) if type(o) is Dual else Dual(self.v - o, self.d)

    def __rsub__(self, o: Any) -> Dual:
        return Dual(o - self.v, -self.d)

    def __mul__(self, o: Any) -> Dual:
        if type(o) is Dual:
            return Dual(self.v * o.v, self.d * o.v + self.v * o.d)
        return Dual(self.v * o, self.d * o)

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> Dual:
        if type(o) is Dual:
            return Dual(self.v / o.v, (self.d * o.v - self.v * o.d) / (o.v * o.v))
        return Dual(self.v / o, self.d / o)

    def __rtruediv__(self, o: Any) -> Dual:
        return Dual(o / self.v, -o * self.d / (self.v * self.v))

    def __pow__(self, k: float) -> Dual:
        return Dual(self.v ** k, k * self.v ** (k - 1) * self.d)

    def __neg__(self) -> Dual:
        return Dual(-self.v, -self.d)

    def __gt__(self, o: Any) -> bool:
        return self.v > (o.v if type(o) is Dual else o)


def _lifted(f: Callable[[float], float], df: Callable[[float], float]) -> Callable[[Any], Any]:
    def g(x: Any) -> Any:
        return Dual(f(x.v), df(x.v) * x.d) if type(x) is Dual else f(x)

    return g


dual = SimpleNamespace(
    sin=_lifted(math.sin, math.cos), cos=_lifted(math.cos, lambda v: -math.sin(v)),
    exp=_lifted(math.exp, math.exp), log=_lifted(math.log, lambda v: 1.0 / v),
    sqrt=_lifted(math.sqrt, lambda v: 0.5 / math.sqrt(v)),
)


# -- the functions: a few hundred operations each -------------------------------------------

COEFFS = [((-1) ** k) * (1.0 + k / 7.0) for k in range(100)]


def horner(x: Any, m: Any = math) -> Any:
    """A degree-99 polynomial: 198 operations in a loop."""
    total = 0.0
    for c in COEFFS:
        total = total * x + c
    return total


def pendulum(x: Any, m: Any = math) -> Any:
    """50 explicit Euler steps of a forced pendulum: ~300 operations, sin/cos."""
    angle, speed, dt = x, 0.0, 0.01
    for step in range(50):
        accel = -9.81 * m.sin(angle) + 0.5 * m.cos(step * dt)
        speed = speed + dt * accel
        angle = angle + dt * speed
    return angle


class Layer:
    def __init__(self, w: float, b: float) -> None:
        self.w, self.b = w, b

    def forward(self, x: Any, m: Any) -> Any:
        z = self.w * x + self.b
        return _softplus(z, m) if z > 0 else m.exp(z) - 1.0


def _softplus(z: Any, m: Any) -> Any:
    return m.log(1.0 + m.exp(-z)) + z


def network(x: Any, m: Any = math) -> Any:
    """40 layers of methods, helpers and branches: ~250 operations, exp/log/sqrt."""
    for i in range(40):
        x = Layer(0.9 + 0.001 * i, 0.01 * (i % 3) - 0.01).forward(x, m)
    return m.sqrt(x * x + 1.0)


FUNCTIONS: dict[str, tuple[Callable[..., Any], float]] = {
    "horner": (horner, 0.7), "pendulum": (pendulum, 0.4), "network": (network, 0.3),
}


def variants(f: Callable[..., Any], x: float, ad: ModuleType, autograd: Any) -> dict[str, Callable[[], Any]]:
    out: dict[str, Callable[[], Any]] = {
        "dual (floor)": lambda: f(Dual(x, 1.0), dual).d,
        "tagging": lambda: ad.derivative(f, x),
    }
    if autograd is not None:
        grad = autograd.grad(lambda v: f(v, autograd.numpy))
        out["autograd"] = lambda: grad(x)
    return out


def _loop(x: Any) -> Any:
    y = x
    for _ in range(200):
        y = y * 1.0001
    return y


def breakdown(ad: ModuleType, rounds: int) -> None:
    """Where the time of one overloaded ``*`` goes: 200 of them in a loop, per variant."""
    import operator

    import cassette_hook as ch

    class Machinery(ch.Context):
        """An ``operator.mul`` overload that only multiplies: the hot path's share."""

    @ch.overdub.register
    def _(ctx: Machinery, f: ch.Is[operator.mul], a: Any, b: Any) -> Any:
        return a * b

    vs = {
        "plain float": lambda: _loop(1.0),
        "dual numbers": lambda: _loop(Dual(1.0, 1.0)),
        "overload, no tags": lambda: ch.overdub(ch.enabletagging(Machinery(), _loop), _loop, 1.0),
        "AD (tagging)": lambda: ad.derivative(_loop, 1.0),
    }
    res = harness.measure("mul", vs, baseline="plain float", rounds=rounds, min_sample_ns=20_000_000)
    print(harness.table(["200 multiplications", "µs", "per operation µs"],
                        [[v, f"{res.median(v) / 1e3:,.1f}", f"{res.median(v) / 200e3:.2f}"] for v in vs]))
    ch.overdub.unregister(_)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    rounds = args.rounds or (5 if args.quick else 15)
    ad = _load_example()
    try:
        import autograd
        import autograd.numpy
    except ImportError:
        autograd = None
        print("autograd is not installed (pip install -r benchmarks/requirements.txt): its column is left out")
    print(f"Python {platform.python_version()}, {rounds} rounds")
    rows = []
    for name, (f, x) in FUNCTIONS.items():
        vs = variants(f, x, ad, autograd)
        expected = vs["dual (floor)"]()
        for variant, run in vs.items():
            got = float(run())
            assert math.isclose(got, expected, rel_tol=1e-9), f"{name}: {variant} gives {got}, dual numbers {expected}"
        res = harness.measure(name, vs, baseline="dual (floor)", rounds=rounds, min_sample_ns=20_000_000)
        row = [name, f"{res.median('dual (floor)') / 1e3:,.1f}", f"{res.median('tagging') / 1e3:,.1f}",
               f"{res.ratio('tagging'):.2f}"]
        if autograd is not None:
            row += [f"{res.median('autograd') / 1e3:,.1f}", f"{res.median('autograd') / res.median('tagging'):.2f}"]
        row.append(f"{max(res.spread(v) for v in vs):.3f}")
        rows.append(row)
    headers = ["function", "dual µs", "tagging µs", "tagging/dual"]
    if autograd is not None:
        headers += ["autograd µs", "autograd/tagging"]
    print(harness.table(headers + ["IQR/med"], rows))
    print()
    breakdown(ad, rounds)


if __name__ == "__main__":
    sys.exit(main())
