"""Capture the computation graph of numeric code, on cassette_hook's tagging, as Graphviz DOT.

The inputs are tagged with the ids of their graph nodes; each arithmetic operation and
``math`` function on tagged numbers adds a node for itself, an edge from each operand's
node (constants get a node of their own), and tags its result with the new node's id.
Operations on constants only are computed as usual and leave no trace, and so does the
program's control flow: the graph is the data flow of the run that was traced.

Run ``python examples/graph_capture.py | dot -Tsvg > graph.svg``.
"""

import math
import operator

import cassette_hook as ch


class Graph(ch.Context):
    """The context's metadata is the :class:`Recorder`; a tagged number's, its node id."""


@ch.metadatatype.register
def _numbers_carry_node_ids(ctx: Graph, value: int | float) -> type:
    return int


class Recorder:
    def __init__(self):
        self.nodes = []  # (label, shape)
        self.edges = []  # (from node, to node)

    def node(self, label, shape="ellipse"):
        self.nodes.append((label, shape))
        return len(self.nodes) - 1

    def dot(self):
        lines = ["digraph computation {", "  rankdir=LR;"]
        lines += [f'  n{i} [label="{_escape(label)}", shape={shape}];' for i, (label, shape) in enumerate(self.nodes)]
        lines += [f"  n{a} -> n{b};" for a, b in self.edges]
        return "\n".join(lines + ["}"])


def _escape(label):
    return label.replace("\\", "\\\\").replace('"', '\\"')


def capture(f, *xs):
    """Run ``f(*xs)``; return its result and the DOT text of the graph that computed it."""
    recorder = Recorder()
    ctx = ch.enabletagging(Graph(recorder), f)
    inputs = [ch.tag(x, ctx, recorder.node(f"x{i} = {x!r}", "box")) for i, x in enumerate(xs)]
    y = ch.overdub_tagged(ctx, f, *inputs)
    node = ch.metadata(y, ctx)
    if node is not ch.NoMetaData:
        recorder.edges.append((node, recorder.node(f"result = {ch.untag(y, ctx)!r}", "box")))
    return ch.untag(y, ctx), recorder.dot()


_SYMBOLS = {
    operator.add: "+", operator.iadd: "+", operator.sub: "-", operator.isub: "-", operator.mul: "*",
    operator.imul: "*", operator.truediv: "/", operator.itruediv: "/", operator.floordiv: "//",
    operator.mod: "%", operator.pow: "**", operator.ipow: "**", operator.neg: "neg", abs: "abs", pow: "pow",
    **{fn: name for name, fn in vars(math).items() if callable(fn) and not name.startswith("_")},
}


@ch.overdub.register
def _record(ctx: Graph, f: ch.Is[tuple(_SYMBOLS)], *args):
    out = f(*(ch.untag(a, ctx) for a in args))
    operands = [ch.metadata(a, ctx) for a in args]
    if all(node is ch.NoMetaData for node in operands) or not isinstance(out, (int, float)):
        return out
    recorder = ctx.metadata
    node = recorder.node(_SYMBOLS[f])
    for operand, arg in zip(operands, args):
        if operand is ch.NoMetaData:
            operand = recorder.node(repr(arg), "plaintext")
        recorder.edges.append((operand, node))
    return ch.tag(out, ctx, node)


if __name__ == "__main__":
    def model(x, y):
        h = x * y + math.sin(x)
        for _ in range(2):
            h = h / 2 + y
        return math.exp(-h) if h > 0 else h

    value, dot = capture(model, 0.5, 1.5)
    print(dot)
