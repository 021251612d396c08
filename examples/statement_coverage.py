"""Statement-level coverage of one function: a pass inserts a counter before each statement."""

import sys

from bytecode import Instr

import cassette_hook as ch


def call(f, *args):
    """The instructions of the statement ``f(*args)`` (constants), its result dropped."""
    loads = [Instr("LOAD_CONST", arg) for arg in args]
    if sys.version_info < (3, 11):
        return [Instr("LOAD_CONST", f), *loads, Instr("CALL_FUNCTION", len(args)), Instr("POP_TOP")]
    callee = [Instr("LOAD_CONST", f), Instr("PUSH_NULL")]  # 3.13 order; 3.11 and 3.12 put the NULL first
    if sys.version_info < (3, 13):
        callee.reverse()
    precall = [Instr("PRECALL", len(args))] if sys.version_info < (3, 12) else []
    return [*callee, *loads, *precall, Instr("CALL", len(args)), Instr("POP_TOP")]


def coverage_of(target):
    """A pass that counts, in ``hits``, how often each statement of ``target`` starts."""
    hits = {}

    def hit(line):
        hits[line] += 1

    def transform(ctx_type, func, code):
        if func is not target:
            return code

        def counted(stmt, i):
            line = stmt[0].lineno
            hits.setdefault(line, 0)
            # nooverdub: the counter's own call is not a call of the program
            return [call(ch.nooverdub(hit), line), stmt]

        ch.insert_statements(code, lambda stmt, i: 2, counted)
        return code

    return ch.Pass(transform), hits


def classify(numbers):
    small = big = 0
    for n in numbers:
        if n < 10:
            small += 1
        else:
            big += 1
    if not numbers:
        return "empty"
    return f"{small} small, {big} big"


class Coverage(ch.Context):
    pass


pass_, hits = coverage_of(classify)
print(ch.overdub(Coverage(pass_=pass_), classify, [1, 2, 30]))
first = classify.__code__.co_firstlineno
for line, count in sorted(hits.items()):
    print(f"line {line - first}: {count}")
