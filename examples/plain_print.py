"""A pass that makes every ``print`` call a ``nooverdub`` call: hooks never see it."""

import builtins
import sys

from bytecode import Instr

import cassette_hook as ch


def loads_print(y):
    return (isinstance(y, Instr) and y.name == "LOAD_GLOBAL"
            and (y.arg[-1] if isinstance(y.arg, tuple) else y.arg) == "print")


def plain_callee(g, load):
    """What replaces ``load`` (a ``LOAD_GLOBAL`` of a callee): the marker ``nooverdub(g)``,
    with the ``NULL`` that 3.11+'s ``LOAD_GLOBAL (True, name)`` pushes beside it."""
    marker = Instr("LOAD_CONST", ch.nooverdub(g), location=load.location)
    if sys.version_info < (3, 11) or not load.arg[0]:
        return [marker]
    null = Instr("PUSH_NULL", location=load.location)
    return [marker, null] if sys.version_info >= (3, 13) else [null, marker]


def plain_print(ctx_type, func, code):
    g = func.__globals__.get("print", builtins.print)  # the print this function would call
    code[:] = [out for y in code for out in (plain_callee(g, y) if loads_print(y) else [y])]
    return code


class Calls(ch.Context):
    def prehook(self, f, *args, **kwargs):
        self.metadata.append(getattr(f, "__name__", repr(f)))


def report(total):
    print("total:", total)
    return str(total).zfill(4)


seen = []
print(ch.overdub(Calls(seen), report, 42), seen)
seen = []
print(ch.overdub(Calls(seen, pass_=ch.Pass(plain_print)), report, 42), seen)
