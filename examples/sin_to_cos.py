"""Cassette's sin -> cos pass: every load of ``sin`` becomes a load of ``cos``."""

import math

from bytecode import Instr

import cassette_hook as ch

NAME_LOADS = {"LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD"}


def loads_sin(y):
    """``sin`` (a global) or ``math.sin`` (an attribute): the name is the argument, or its
    last element (3.11+ adds a flag: ``LOAD_GLOBAL (True, 'sin')``)."""
    return isinstance(y, Instr) and y.name in NAME_LOADS and "sin" in (y.arg if isinstance(y.arg, tuple) else (y.arg,))


def sin_to_cos(ctx_type, func, code):
    # Each matching instruction is replaced by the same instruction with ``cos`` for
    # ``sin``: replace_match again, one level down (an instruction's argument is its
    # sub-element).
    ch.replace_match(lambda instr: ch.replace_match(lambda name: "cos", lambda x: x == "sin", instr),
                     loads_sin, code)
    return code


SinToCos = ch.context("SinToCos")


def wave(x):
    return math.sin(x) + sum(math.sin(k * x) for k in range(1, 3))


ctx = SinToCos(pass_=ch.Pass(sin_to_cos))
print(wave(0.0), ch.overdub(ctx, wave, 0.0))
print(ch.overdub(ctx, wave, 0.5) == math.cos(0.5) + math.cos(0.5) + math.cos(1.0))
