"""A tiny expression language: AST node classes, a visitor-style evaluator, closures as values.

Evaluates a recursive Fibonacci and a summing loop written in that language.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

NAME = "interp"


class Node:
    def accept(self, visitor: Evaluator, env: Env) -> Any:
        return getattr(visitor, "visit_" + type(self).__name__)(self, env)


@dataclass
class Num(Node):
    value: int


@dataclass
class Var(Node):
    name: str


@dataclass
class BinOp(Node):
    op: str
    left: Node
    right: Node


@dataclass
class If(Node):
    cond: Node
    then: Node
    orelse: Node


@dataclass
class Fun(Node):
    params: list[str]
    body: Node


@dataclass
class Call(Node):
    fn: Node
    args: list[Node]


@dataclass
class LetRec(Node):
    name: str
    value: Node
    body: Node


class Env:
    def __init__(self, names: dict[str, Any], parent: Env | None = None) -> None:
        self.names = names
        self.parent = parent

    def lookup(self, name: str) -> Any:
        env: Env | None = self
        while env is not None:
            if name in env.names:
                return env.names[name]
            env = env.parent
        raise NameError(name)

    def child(self, names: dict[str, Any]) -> Env:
        return Env(names, self)


class Closure:
    def __init__(self, fun: Fun, env: Env) -> None:
        self.fun, self.env = fun, env

    def __call__(self, evaluator: Evaluator, args: list[Any]) -> Any:
        return evaluator.eval(self.fun.body, self.env.child(dict(zip(self.fun.params, args))))


OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "<": lambda a, b: a < b,
}


class Evaluator:
    def eval(self, node: Node, env: Env) -> Any:
        return node.accept(self, env)

    def visit_Num(self, node: Num, env: Env) -> Any:
        return node.value

    def visit_Var(self, node: Var, env: Env) -> Any:
        return env.lookup(node.name)

    def visit_BinOp(self, node: BinOp, env: Env) -> Any:
        return OPS[node.op](self.eval(node.left, env), self.eval(node.right, env))

    def visit_If(self, node: If, env: Env) -> Any:
        return self.eval(node.then if self.eval(node.cond, env) else node.orelse, env)

    def visit_Fun(self, node: Fun, env: Env) -> Any:
        return Closure(node, env)

    def visit_Call(self, node: Call, env: Env) -> Any:
        fn = self.eval(node.fn, env)
        return fn(self, [self.eval(arg, env) for arg in node.args])

    def visit_LetRec(self, node: LetRec, env: Env) -> Any:
        inner = env.child({})
        inner.names[node.name] = self.eval(node.value, inner)
        return self.eval(node.body, inner)


def program(n: int) -> Node:
    """letrec fib = fun k -> if k < 2 then k else fib(k-1) + fib(k-2) in fib(n)"""
    k, fib = Var("k"), Var("fib")
    body = If(BinOp("<", k, Num(2)), k,
              BinOp("+", Call(fib, [BinOp("-", k, Num(1))]), Call(fib, [BinOp("-", k, Num(2))])))
    return LetRec("fib", Fun(["k"], body), Call(fib, [Num(n)]))


def run() -> int:
    return Evaluator().eval(program(13), Env({}))
