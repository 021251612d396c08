"""Programs of the shapes CPython 3.12-3.15 compile specially, for the differential fuzzer.

The generated programs (``fuzz/programs.py``) are written for every Python, so they rarely
hold what a newer compiler treats specially: ``all``/``any``/``tuple``/``list``/``set`` of
a generator expression compiled inline (3.14, 3.15), shadowed or not; template strings and
``except A, B:`` (3.14); explicit lazy imports (3.15); comprehensions inlined into their
function (3.12+) shadowing a free variable; class bodies with type parameters
(``__classdict__``); deferred annotations; ``with``/``async with``; generators driven by
``send``/``throw``/``close``; ``match``; ``except*``; deep nesting; and functions so large
that their jumps need ``EXTENDED_ARG``.  :data:`SHAPES` names each program; one a Python
cannot compile counts as *syntax* there.  ``tests/test_fuzz_sample.py`` checks them all on
every Python ("Shapes" in docs/fuzzing.md).

    python fuzz/shapes.py > shapes.jsonl    # then: fuzz/differential.py --load shapes.jsonl
"""

from __future__ import annotations

import json

SHAPES: dict[str, str] = {}


def _add(name: str, source: str) -> None:
    SHAPES[name] = source


# --- all/any/tuple/list/set(genexp), inlined by 3.14/3.15, with the name shadowed or not ---
_CONSUMES_A_GENERATOR = """
def f(xs, k=0{param}):
    {local}
    y = 3
    r = []
    r.append({name}(x > 1 for x in xs))
    r.append({name}(x + y for x in xs if x != k))
    r.append({name}((x, z) for x in xs for z in range(2)))
    r.append({name}(x for x in xs if (w := x)))
    def inner():
        return {name}(y * x for x in xs)
    r.append(inner())
    return r, [str(v) for v in r]
print(f([1, 2, 3]))
print(f([]))
try:
    print(f([1, None, 3]))
except TypeError as e:
    print('TypeError', e)
def bad():
    yield 1
    raise ValueError('mid')
try:
    print({name}(x for x in bad()))
except ValueError as e:
    print('ValueError', e)
"""
_MINE = "def {name}(g):\n    print('mine', type(g).__name__)\n    return ['mine', *g]\n"
for _name in ("all", "any", "tuple", "list", "set", "sum", "sorted", "frozenset"):
    _add(f"{_name}_of_a_generator", _CONSUMES_A_GENERATOR.format(name=_name, param="", local=""))
    _add(f"{_name}_of_a_generator_shadowed_by_a_global",
         _MINE.format(name=_name) + _CONSUMES_A_GENERATOR.format(name=_name, param="", local=""))
    _add(f"{_name}_of_a_generator_shadowed_by_a_local",
         _CONSUMES_A_GENERATOR.format(name=_name, param="", local=f"{_name} = lambda g: ('local', [*g])"))
    _add(f"{_name}_of_a_generator_shadowed_by_a_parameter",
         _CONSUMES_A_GENERATOR.format(name=_name, param=f", {_name}={_name}", local=""))

# --- t-strings (3.14) ----------------------------------------------------------------
_add("template_strings", '''
from string.templatelib import Template, Interpolation
a, w, b = 42, 6, "x"
def f(v):
    return v * 2
t = t"{a!r:>{w}} and {b} {f(a)=} {[x for x in range(3)]} {(lambda: a)()}"
print(type(t).__name__, t.strings)
print([(i.value, i.expression, i.conversion, i.format_spec) for i in t.interpolations])
print(t.values)
def render(t):
    out = []
    for part in t:
        if isinstance(part, Interpolation):
            out.append(format(part.value, part.format_spec))
        else:
            out.append(part)
    return "".join(out)
print(render(t))
def g(n):
    return [t"{i}:{n}" for i in range(n)]
print([x.values for x in g(3)])
tt = t"a" t"{a}" t"b"
print(tt.strings, tt.values)
print((t"{a}" + t"{b}").values)
''')
_add("template_strings_in_closures_and_classes", '''
def make(x, y):
    def inner():
        return t"{x}{y!s}{x + y:{'>5'}}"
    return inner
tpl = make(1, 2)()
print(tpl.strings, tpl.values, [i.format_spec for i in tpl.interpolations])
class C:
    z = 5
    tpl = t"{z}"
print(C.tpl.values)
try:
    t"{undefined_name}"
except NameError as e:
    print("NameError", e)
''')

# --- except A, B: and except* (3.14 syntax; except* 3.11+) ------------------------------
_add("except_without_parentheses", '''
def f(kind):
    try:
        if kind == 0:
            raise ValueError("v")
        if kind == 1:
            raise TypeError("t")
        if kind == 2:
            raise KeyError("k")
        return "none"
    except ValueError, TypeError:
        return "vt"
    except KeyError:
        return "k"
    finally:
        print("finally", kind)
print([f(i) for i in range(4)])
def g(kind):
    try:
        try:
            raise ExceptionGroup("g", [ValueError(kind), TypeError(kind)] if kind else [KeyError(0)])
        except* ValueError, TypeError:
            print("vt*", kind)
    except* KeyError as e:
        print("k*", e.exceptions)
g(0); g(1)
''')
_add("except_star_handlers", '''
def g(n):
    log = []
    try:
        raise ExceptionGroup("many", [ValueError(i) for i in range(n)] + [TypeError("t")])
    except* ValueError as e:
        log.append(("v", len(e.exceptions)))
        if n > 2:
            raise RuntimeError("from handler")
    except* TypeError as e:
        log.append(("t", len(e.exceptions)))
    return log
for n in range(1, 5):
    try:
        print(g(n))
    except BaseException as e:
        print(type(e).__name__, e, [type(x).__name__ for x in getattr(e, "exceptions", [])])
def h():
    try:
        raise ValueError(1)
    except* ValueError:
        raise
try:
    h()
except ExceptionGroup as e:
    print("reraise", e.exceptions)
''')

# --- return/break/continue in finally (SyntaxWarning in 3.14) --------------------------
_add("return_and_continue_in_finally", '''
def f(x):
    try:
        return 1 / x
    finally:
        if x == 0:
            return "swallowed"
print(f(1), f(0))
def g():
    out = []
    for i in range(4):
        try:
            if i == 2:
                raise ValueError(i)
            out.append(i)
        finally:
            if i == 1:
                continue
            if i == 2:
                break
    return out
print(g())
''')

# --- lazy imports (3.15) ---------------------------------------------------------------
_add("lazy_imports", '''
lazy import json
lazy from collections import OrderedDict, Counter
lazy import os.path as osp
import sys
print(type(globals()["json"]).__name__)
def use():
    return json.dumps(OrderedDict(a=1)), Counter("aab").most_common(1), osp.basename("/a/b")
print(use())
print(type(globals()["json"]).__name__)
lazy import no_such_module_xyz
def fail():
    return no_such_module_xyz.x
try:
    fail()
except ImportError as e:
    print(type(e).__name__, e)
''')
_add("lazy_imports_used_in_methods", '''
lazy from textwrap import dedent, indent
lazy import keyword
class K:
    def m(self):
        return indent(dedent("  a\\n  b"), "> ")
print([K().m(), keyword.iskeyword("for")])
print(sorted(k for k, v in globals().items() if type(v).__name__ == "LazyImportType"))
''')

# --- comprehensions shadowing free variables, PEP 709 ----------------------------------
_add("comprehensions_shadowing_free_variables", '''
def f():
    x = "outer"
    fs = [lambda: x for x in range(3)]
    g = [x for x in range(3)]
    h = (lambda: x)()
    return [f() for f in fs], g, x, h
print(f())
def g(xs):
    y = 10
    r = [[y := y + x for x in xs] for _ in range(2)]
    return r, y
print(g([1, 2]))
def h():
    x = 1
    def inner():
        return [x for _ in range(2)], [x for x in range(2)], x
    return inner()
print(h())
def k():
    xs = [1, 2]
    return [xs for xs in xs], xs
print(k())
def cells():
    funcs = []
    for i in range(3):
        funcs.append([lambda: i * j for j in range(2)])
    return [[f() for f in fl] for fl in funcs]
print(cells())
def unbound():
    try:
        return [y for x in range(2)]
    except NameError as e:
        return str(e)
    y = 0
print(unbound())
def shadow_arg(x):
    a = [x for x in x]
    return a, x
print(shadow_arg([3, 4]))
''')
_add("comprehensions_in_a_class_body", '''
class C:
    y = 3
    xs = [1, 2]
    a = [x for x in xs]
    try:
        b = [x * y for x in xs]
    except NameError as e:
        b = str(e)
    c = {x: x for x in range(2)}
    d = [[z for z in range(x)] for x in range(3)]
    def m(self):
        return [__class__ for _ in range(1)], [self for _ in "ab"]
print(C.a, C.b, C.c, C.d, C().m())
''')

# --- class bodies: __classdict__, PEP 695, deferred annotations ----------------------
_add("class_type_parameters", '''
class Box[T]:
    type Alias = list[T]
    kind: T
    def get[U](self, x: U) -> tuple[T, U]:
        return (self.v, x)
    def __init__(self, v: T):
        self.v = v
    class Inner:
        w: "Box"
print(Box(1).get("x"), Box.__type_params__, Box.Alias.__value__)
print(Box.get.__type_params__)
print(sorted(Box.__annotations__) if hasattr(Box, "__annotations__") else None)
def outer():
    z = 4
    class D[S]:
        q = z
        def m(self) -> S:
            return z + self.q
    return D().m()
print(outer())
type Pair[A] = tuple[A, A]
print(Pair.__value__, Pair[int])
''')
_add("deferred_annotations", '''
class A:
    x: int = 1
    y: "undefined_later"
    def f(self, a: int, b: "K2" = None) -> "A":
        return a
print(A.__annotations__)
print(A.f.__annotations__)
try:
    import annotationlib
    print(annotationlib.get_annotations(A, format=annotationlib.Format.FORWARDREF))
except ImportError:
    print("no annotationlib")
def g(x: undefined_thing) -> None:
    pass
try:
    print(g.__annotations__)
except NameError as e:
    print("NameError", e)
''')

# --- with / async with, generators, coroutines driven by hand ------------------------
_add("with_and_async_with", '''
class M:
    def __init__(self, n, swallow=False):
        self.n, self.swallow = n, swallow
    def __enter__(self):
        print("enter", self.n)
        return self.n
    def __exit__(self, t, v, tb):
        print("exit", self.n, t and t.__name__)
        return self.swallow
    async def __aenter__(self):
        print("aenter", self.n)
        return self.n * 10
    async def __aexit__(self, t, v, tb):
        print("aexit", self.n, t and t.__name__)
        return self.swallow
def f(k):
    with M(1) as a, M(2, swallow=True) as b:
        with M(3):
            if k:
                raise ValueError(k)
        return a + b
print(f(0), f(1))
async def agen(n):
    for i in range(n):
        yield i
async def co(k):
    out = []
    async with M(4) as a, M(5, True):
        async for x in agen(3):
            out.append(x + a)
        out.append([y async for y in agen(2)])
        if k:
            raise KeyError(k)
    return out
def drive(c):
    try:
        c.send(None)
    except StopIteration as e:
        return e.value
print(drive(co(0)), drive(co(1)))
class NoEnter:
    pass
try:
    with NoEnter():
        pass
except TypeError as e:
    print("TypeError", e)
async def bad():
    async with NoEnter():
        pass
try:
    drive(bad())
except TypeError as e:
    print("TypeError", e)
''')
_add("generators_sent_thrown_closed", '''
def gen():
    try:
        x = yield 1
        print("got", x)
        y = yield from sub()
        print("sub returned", y)
        yield y
    except GeneratorExit:
        print("closing")
        raise
    finally:
        print("gen finally")
def sub():
    try:
        v = yield "s1"
        yield v
    except KeyError as e:
        print("sub caught", e)
        yield "after"
    return "ret"
g = gen()
print(next(g), g.send("A"), g.send("B"), g.throw(KeyError("k")), next(g))
g.close()
g2 = gen(); next(g2); g2.close()
g3 = gen(); next(g3)
try:
    g3.throw(ValueError("v"))
except ValueError as e:
    print("propagated", e)
def ranges():
    yield from range(3)
    yield from iter([7, 8])
    yield from (x * x for x in range(3))
    return (yield)
print(list(ranges()))
it = iter([1, 2, 3])
print([x for x in it if x > 1], list(zip(it, it)))
def fib():
    a, b = 0, 1
    while True:
        yield a
        a, b = b, a + b
import itertools
print(list(itertools.islice(fib(), 10)))
''')

# --- match --------------------------------------------------------------------------
_add("match_patterns", '''
class Pt:
    __match_args__ = ("x", "y")
    def __init__(self, x, y):
        self.x, self.y = x, y
def m(v):
    match v:
        case 0 | 1 as n:
            return ("small", n)
        case [Pt(x=0, y=yy), *rest] if (s := len(rest)) > 0:
            return ("ptlist", yy, s)
        case Pt(a, b) if a == b:
            return ("diag", a)
        case Pt(a, b):
            return ("pt", a, b)
        case {"k": [1, *mid, 2], **kw}:
            return ("map", mid, kw)
        case str() as s if s.startswith("x"):
            return ("x-str", s)
        case (1, 2) | [3, 4]:
            return "seq"
        case float(f) | int(f):
            return ("num", f)
        case None | True | False:
            return ("const", v)
        case _:
            return "other"
for v in [0, 1, [Pt(0, 9), 1, 2], [Pt(0, 1)], Pt(2, 2), Pt(1, 2), {"k": [1, 5, 6, 2], "z": 0},
          "xa", "ya", (1, 2), [3, 4], 2.5, 7, None, True, object]:
    print(m(v))
''')

# --- LOAD_FAST_BORROW and friends: swaps, dels, locals, reassignments across calls ----
_add("locals_swapped_deleted_reassigned", '''
def f(a, b):
    a, b = b, a
    c = a
    del a
    try:
        a
    except UnboundLocalError as e:
        print("unbound", e)
    a = c
    a, b, c = c, a, b
    return a, b, c, sorted(locals().items())
print(f(1, 2))
class O:
    def __init__(self):
        self.n = 0
    def m(self, other):
        self.n += 1
        return other
def g():
    x = O()
    y = O()
    r = x.m(x := y)
    return r is y, x is y, x.n, y.n
print(g())
def h(n):
    total = 0
    for i in range(n):
        for j in range(i):
            total += i * j - (i ^ j)
    s = "".join(str(total) for _ in range(2))
    return total, s
print(h(6))
def k():
    x = [1]
    y = x
    x += [2]
    x = x + [3]
    return x, y
print(k())
def frame_locals():
    import sys
    v = 1
    f = sys._getframe()
    f.f_locals["v"] = 2
    return v, f.f_locals["v"], f.f_lineno
print(frame_locals())
''')

# --- deep nesting ------------------------------------------------------------------
def _nested(depth: int) -> str:
    lines = []
    for i in range(depth):
        ind = "    " * i
        lines.append(f"{ind}def f{i}(a{i}={i}):")
        lines.append(f"{ind}    v{i} = a{i} + 1")
    ind = "    " * depth
    lines.append(f"{ind}return " + " + ".join(f"v{i}" for i in range(depth)))
    for i in reversed(range(depth - 1)):
        ind = "    " * (i + 1)
        lines.append(f"{ind}return f{i + 1}()")
    lines.append("print(f0())")
    return "\n".join(lines) + "\n"
_add("functions_nested_18_deep", _nested(18))

def _nested_blocks(depth: int) -> str:
    lines = ["def f(k):", "    log = []"]
    for i in range(depth):
        ind = "    " * (i + 1)
        kind = ("try:", f"with M({i}):", "for _ in range(1):", "if k >= 0:")[i % 4]
        lines.append(ind + kind)
    ind = "    " * (depth + 1)
    lines.append(ind + "log.append(1 / k)")
    for i in reversed(range(depth)):
        ind = "    " * (i + 1)
        if i % 4 == 0:
            lines.append(ind + "except ZeroDivisionError as e:")
            lines.append(ind + f"    log.append(('zde', {i}))")
            lines.append(ind + f"    if {i} > 4: raise")
    lines.append("    return log")
    pre = ("class M:\n    def __init__(self, n): self.n = n\n    def __enter__(self): return self\n"
           "    def __exit__(self, *a):\n        print('exit', self.n, a[0] and a[0].__name__)\n")
    return pre + "\n".join(lines) + "\nprint(f(1))\nprint(f(0))\n"
_add("blocks_nested_12_deep", _nested_blocks(12))
_add("blocks_nested_19_deep", _nested_blocks(19))

# --- huge functions: EXTENDED_ARG jumps ---------------------------------------------
def _huge(n: int, loop: bool = True) -> str:
    lines = ["def big(x):", "    total = 0"]
    if loop:
        lines.append("    for i in range(3):")
        ind = "        "
    else:
        ind = "    "
    lines.append(ind + "if x > 0:")
    for i in range(n):
        lines.append(ind + f"    total += (x * {i} + i) % 7 if x != {i} else -1")
    lines.append(ind + "else:")
    lines.append(ind + "    total = -x")
    if loop:
        lines.append(ind + "if total > 10 ** 9:")
        lines.append(ind + "    break")
    lines.append("    try:")
    lines.append("        return total, [y for y in range(3) if y != x]")
    lines.append("    finally:")
    lines.append("        print('fin', x)")
    return "\n".join(lines) + "\nprint(big(1), big(0), big(5))\n"
_add("function_with_jumps_past_255", _huge(400))
_add("function_with_jumps_past_65535", _huge(2500, loop=False))
# many constants and names (EXTENDED_ARG on LOAD_CONST / LOAD_NAME / LOAD_FAST)
_add("many_constants_and_names", "def many():\n" + "".join(f"    v{i} = {i}.5\n" for i in range(300)) +
         "    return " + " + ".join(f"v{i}" for i in range(300)) + "\nprint(many())\n" +
         "".join(f"g{i} = '{i}'\n" for i in range(300)) + "print(g299, len([g0, g150, g299]))\n")

# --- closures, nonlocal, cells shared with comprehensions and generators ------------
_add("closures_cells_super", '''
def counter():
    n = 0
    def inc(k=1):
        nonlocal n
        n += k
        return n
    def gen():
        while n < 5:
            yield inc()
    return inc, gen
inc, gen = counter()
print(inc(), list(gen()), inc(3))
def cell_arg(x):
    def g():
        return x
    x = x + 1
    return g(), [g() for _ in range(2)], all(g() == x for _ in range(2)), tuple(x for _ in range(2))
print(cell_arg(1))
def delete_cell():
    x = 1
    def g():
        return x
    del x
    try:
        return g()
    except NameError as e:
        return str(e)
print(delete_cell())
class P:
    def m(self):
        return super().__repr__()[:3], __class__.__name__
    def n(self):
        return [super(P, self).__hash__() == hash(self) for _ in range(1)]
print(P().m(), P().n())
''')

# --- boolean/operators, constants 3.15 loads via LOAD_COMMON_CONSTANT -------------------
_add("constants_and_operators", '''
def consts():
    return (None, True, False, (), "", -1, 0, 255, 256, -5, 1.0, list, set, b"", frozenset())
print(consts())
def ops(a, b):
    return (a + b, a - b, a * b, a // b, a % b, a ** 2, -a, ~a, not a, a < b <= 3,
            a is not b, a in [b], a if b else -a, a and b or 7, [a][0], [1, 2, 3][a:b],
            {"k": a}["k"], (a, b)[-1])
print(ops(1, 2), ops(0, 3))
class V:
    def __init__(self, v): self.v = v
    def __add__(self, o): return V(self.v + getattr(o, "v", o))
    def __iadd__(self, o): self.v *= 10; return self
    def __getitem__(self, i): return self.v * i
    def __setitem__(self, i, x): print("set", i, x)
    def __repr__(self): return f"V({self.v})"
    def __bool__(self): return self.v > 0
x = V(1)
x += V(2)
y = x + 3
x[1:2] = 5
print(x, y, x[2], bool(V(0)), V(0) or "alt", [v for v in (V(1), V(0)) if v])
''')

# --- asyncio real event loop --------------------------------------------------------
_add("asyncio_gather_taskgroup", '''
import asyncio
async def worker(n, q):
    await asyncio.sleep(0)
    await q.put(n * n)
    return n
async def main():
    q = asyncio.Queue()
    res = await asyncio.gather(*(worker(i, q) for i in range(4)))
    items = sorted([q.get_nowait() for _ in range(q.qsize())])
    async with asyncio.timeout(5):
        await asyncio.sleep(0)
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(worker(9, q))
            tg.create_task(fail())
    except* ValueError as eg:
        print("tg", [str(e) for e in eg.exceptions])
    return res, items, all(r >= 0 for r in res)
async def fail():
    raise ValueError("task failed")
print(asyncio.run(main()))
''')

# --- code switched by the import hook, run in and out of a context, and cells ---------------
_add("generators_resumed_across_a_context", '''
import cassette_hook as ch
class C(ch.Context):
    def prehook(self, f, *a, **k):
        pass
def gen(n):
    acc = []
    for i in range(n):
        acc.append(i)
        got = yield [a * 2 for a in acc]
        if got:
            acc.append(got)
    return acc
g1 = None
with C():
    g1 = gen(4)
    print(next(g1), g1.send(7))
print(g1.send(None), list(g1))
g2 = gen(3)
print(next(g2))
with C():
    print(g2.send(5), list(g2))
def outer():
    x = 1
    def inner():
        nonlocal x
        x += 1
        return [x for _ in range(2)], all(x > i for i in range(3)), tuple(x + i for i in range(2))
    return inner
inn = outer()
with C():
    print(inn())
print(inn())
with C():
    print(inn(), ch.overdub(C(), inn))
''')
_add("comprehension_cells_and_locals", '''
import sys
def f():
    x = [1]
    y = [2]
    def peek():
        return x, y
    z = [v for v in x + y if v]
    w = [locals() for v in range(1)]
    x, y = y, x
    return peek(), z, sorted(w[0]), x, y
print(f())
class A:
    def m(self):
        return [super().__class__ for _ in range(1)], [__class__ for _ in range(2)]
print(A().m())
def g(a, b):
    a = b = a + b
    c, d = a, b
    a, b = d, c
    e = a
    e += b
    return a, b, c, d, e
print(g(1, 2), g("x", "y"))
def unbound_in_comp():
    out = []
    try:
        out.append([q for q in range(2) if r])
    except NameError as e:
        out.append(type(e).__name__)
    r = 1
    out.append([q for q in range(2) if r])
    return out
print(unbound_in_comp())
def deleted_then_comp():
    v = 1
    del v
    try:
        return [v for _ in range(1)]
    except NameError as e:
        return str(e)
print(deleted_then_comp())
def exc_in_comp():
    try:
        return [1 / x for x in (1, 0)]
    except ZeroDivisionError as e:
        return e.__traceback__.tb_lineno, type(e).__name__
print(exc_in_comp())
def comp_cell():
    fs = [lambda: y for y in range(3)]
    y = "after"
    return [f() for f in fs], y, (lambda: y)()
print(comp_cell())
def comp_iter_var_is_cell():
    x = 0
    def r():
        return x
    l = [x for x in range(3)]
    return l, x, r()
print(comp_iter_var_is_cell())
''')
_add("loops_match_async_comprehensions_chained_exceptions", '''
def f(items):
    total = 0
    seen = set()
    for i, item in enumerate(items):
        if item in seen:
            continue
        seen.add(item)
        match item:
            case int(n) if n > 2:
                total += n
            case str(s):
                total += len(s)
            case _:
                total -= 1
    else:
        total *= 2
    while total > 100:
        total //= 3
        if total % 7 == 0:
            break
    else:
        total += 0.5
    return total, sorted(seen, key=str)
print(f([1, 5, "ab", 5, None, 3.0, 9]), f(list(range(40))))
async def co():
    return [x async for x in ag()] + [await w() for _ in range(2)]
async def ag():
    for i in range(2):
        yield i
async def w():
    return "w"
c = co()
try:
    c.send(None)
except StopIteration as e:
    print(e.value)
def gen_in_finally():
    try:
        yield 1
    finally:
        yield 2
g = gen_in_finally()
print(next(g))
try:
    g.close()
except RuntimeError as e:
    print("RuntimeError", e)
def chained():
    try:
        try:
            raise ValueError("a")
        except ValueError as e:
            raise TypeError("b") from e
    except TypeError as e:
        return repr(e.__cause__), repr(e.__context__), e.__suppress_context__
print(chained())
''')


if __name__ == "__main__":
    for _source in SHAPES.values():
        print(json.dumps(_source))
