"""A tour of cassette_hook's main job: run unmodified code inside contexts.

Run it with ``python examples/demo.py``.
"""

import math
from dataclasses import dataclass, field

import cassette_hook as ch


# --- some ordinary code that knows nothing about cassette_hook --------------------------

class Account:
    def __init__(self, owner: str, balance: float = 0.0) -> None:
        self.owner = owner
        self.balance = balance

    def deposit(self, amount: float) -> None:
        self.balance += amount


def interest(balance: float, rate: float, years: int) -> float:
    return balance * math.exp(rate * years)


def simulate(owner: str) -> float:
    account = Account(owner)
    for amount in (100.0, 250.0):
        account.deposit(amount)
    return round(interest(account.balance, 0.05, 10), 2)


# --- 1. observe: a call tree, printed by a prehook and a posthook -------------------------

class TraceCtx(ch.Context):
    operators = False  # calls only; operators such as ``a + b`` would be calls too

    def prehook(self, f, *args, **kwargs):
        print("  " * self.metadata["depth"] + f"{getattr(f, '__qualname__', f)}{args}")
        self.metadata["depth"] += 1

    def posthook(self, out, f, *args, **kwargs):
        self.metadata["depth"] -= 1


# --- 2. measure: count calls by function, with dispatch on the metadata type --------------

@dataclass
class Counts:
    by_name: dict = field(default_factory=dict)


CountCtx = ch.context("CountCtx")


@ch.prehook.register
def _(ctx: CountCtx[Counts], f, *args):
    name = getattr(f, "__name__", repr(f))
    ctx.metadata.by_name[name] = ctx.metadata.by_name.get(name, 0) + 1


# --- 3. replace: a contextual overload that only exists inside this context ---------------

class NoInterest(ch.Context):
    pass


@ch.overdub.register
def _(ctx: NoInterest, f: ch.Is[math.exp], x: float):
    return 1.0


if __name__ == "__main__":
    print("plain:", simulate("ada"))
    print("traced:")
    print("->", ch.overdub(TraceCtx(metadata={"depth": 1}), simulate, "ada"))
    counts = Counts()
    ch.overdub(CountCtx(metadata=counts), simulate, "ada")
    print("calls counted:", counts.by_name)
    print("without interest:", ch.overdub(NoInterest(), simulate, "ada"))
