"""The names switched code (``dual_code``) loads among the builtins, and how to recognise it.

Apart from ``dual_code`` because the runtime side (``switch``, ``plan``) needs them in every
process that imports cassette_hook, while ``dual_code`` itself -- and ``bytecode`` with it --
is needed only when something is rewritten.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import operator as _operator
from types import CodeType

from .. import _native
from . import GlobalName, Hooks
from ._operators import BINARY, COMPARE, UNARY

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Callable

    from ._operators import Operator

__all__ = ["ACTIVE", "COMPREHENSIONS", "ENTER", "HOOKS", "METHOD", "OPERATORS", "OPERATORS_ON", "TWIN", "is_part",
           "is_switched", "nothing_to_rewrite", "operator_name", "switch_module", "switched_hooks", "twin_is_itself",
           "variant"]

ACTIVE = "__cassette_hook_active__"
OPERATORS_ON = "__cassette_hook_operators__"  # true while a live context sees operators (``switch``)
ENTER = "__cassette_hook_enter__"
TWIN = "__cassette_hook_twin__"  # false among the builtins, true in the ones a twin's frames read (``plan``)
METHOD = GlobalName("__cassette_hook_method__")  # a method site's callee (C path only): ``_speedups.method_of``

OPERATORS: tuple[Operator, ...] = (*BINARY.values(), *UNARY.values(), *COMPARE.values(),
                                   _operator.getitem, _operator.setitem, _operator.delitem, _operator.contains, iter)


def operator_name(op: Operator) -> GlobalName:
    """The builtin name under which an operator site for ``op`` is found."""
    return GlobalName(f"__cassette_hook_op_{op.__name__}__")


def _hooks(method_site: Callable[[str], tuple[object, ...]] | None = None) -> Hooks:
    return Hooks(
        resolve=GlobalName("__cassette_hook_resolve__"),
        resolve_star=GlobalName("__cassette_hook_resolve_star__"),
        call=GlobalName("__cassette_hook_call__"),
        call_ex=GlobalName("__cassette_hook_call_ex__"),
        operator_site=operator_name,
        yield_from=GlobalName("__cassette_hook_yield_from__"),
        current_context=GlobalName("__cassette_hook_current_context__"),
        operators_on=GlobalName(OPERATORS_ON),
        method_site=method_site,
    )


HOOKS = _hooks()  # (the pure-Python path's: method loads stay attribute loads)
_HOOKS_WITH_METHOD_SITES = _hooks(method_site=lambda name: (METHOD, name))


def switched_hooks() -> Hooks:
    """The hooks switched code is made with in this process.  On the C path its method
    calls go through method sites, as a twin's do, calling ``_speedups.method_of(obj,
    "name")`` by name (a ``.pyc`` file holds no ``MethodSite``).  The pure-Python path has
    nothing that finds a method without a frame of its own, so it keeps the bound method."""
    return HOOKS if _native.runtime.method_site is None else _HOOKS_WITH_METHOD_SITES


def variant() -> str:
    """What switched code made here depends on besides its source and the options: the hot
    path it calls, ``"c"`` (method sites) or ``"pure"`` (none).  Part of the names of its
    cache files (``code_cache``), so that the two paths, run in turn, neither read nor overwrite
    each other's."""
    return "pure" if switched_hooks().method_site is None else "c"


# Code objects the compiler creates for comprehensions and generator expressions: they are
# part of the enclosing function's body (called at once, or iterated lazily), so they are
# rewritten with it rather than treated as separate functions.
COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})
_CO_NEWLOCALS = 0x2  # (class bodies lack it)


def is_part(code: CodeType) -> bool:
    """Does ``code`` run as part of the code that makes it (a comprehension, a class
    body), rather than as a function of its own, called later?"""
    return code.co_name in COMPREHENSIONS or not code.co_flags & _CO_NEWLOCALS


def is_annotate(code: CodeType) -> bool:
    """Is ``code`` an ``__annotate__`` function's (3.14's deferred annotations)?  It is never
    rewritten: annotationlib runs its code with fake globals (to give a name that is not
    defined as a ``ForwardRef`` or a string), where a switch or a hook would be one more
    name it does not know, and the annotations are no part of what the program calls."""
    return code.co_name == "__annotate__"


def is_switched(code: CodeType) -> bool:
    """Was this body made by ``dual_code.switched`` (with a rewritten body behind the switch)?"""
    return ENTER in code.co_names


def switch_module(code: CodeType) -> str:
    """The module a switched body's question names (the constant passed to ``ENTER``).

    Read from the raw bytecode, up to the question, which opens the body: ``dis`` would
    first find the labels and line starts of the whole body, in Python, and a twin is made
    for every switched function a program calls (sympy: 1,949 of them in one run, 0.5 s
    through ``dis`` against 4 ms so; docs/performance.md, "Real programs")."""
    from opcode import opmap

    load_global, load_const, extended = opmap["LOAD_GLOBAL"], opmap["LOAD_CONST"], opmap["EXTENDED_ARG"]
    shift = _load_global_shift(load_global)
    raw, names, consts = code.co_code, code.co_names, code.co_consts
    asking, arg = False, 0
    for i in range(0, len(raw), 2):  # (3.11+'s inline caches are CACHE, opcode 0: neither of the two)
        op, arg = raw[i], arg | raw[i + 1]
        if op == extended:
            arg <<= 8
            continue
        if op == load_global and names[arg >> shift] == ENTER:
            asking = True
        elif asking and op == load_const and isinstance(consts[arg], str):
            return str(consts[arg])
        arg = 0
    raise ValueError(f"{code.co_name} is not a switched code object")


def _load_global_shift(load_global: int) -> int:
    """How far ``LOAD_GLOBAL``'s argument is shifted past its name's index, as this
    interpreter compiles it (1 where its low bit says "push NULL" too, 0 where it does
    not), read from a probe rather than from the version: the call of a global, the
    probe's first name, sets that bit where there is one."""
    raw = (lambda: _probe()).__code__.co_code  # type: ignore[name-defined]  # noqa: F821  # (compiled, never run)
    return next(raw[i + 1] for i in range(0, len(raw), 2) if raw[i] == load_global)


# Instructions the rewriter never touches, in any version: names, constants, imports,
# attribute reads, and the displays that build lists, tuples, sets and dicts. The displays
# are what tables of constants (``pygments.lexers._mapping``, docutils' language modules)
# and packages' ``__init__`` (``__all__ = [...]``) are made of: without them such a module
# went to the rewriter at every import only to come out unchanged, with no cache file kept
# for it -- importing ``bytecode`` and rewriting, 30 ms a run for pygments' tables
# (docs/performance.md, "Real programs").
_SITE_FREE = frozenset({"CACHE", "EXTENDED_ARG", "NOP", "RESUME", "LOAD_CONST", "RETURN_VALUE", "RETURN_CONST",
                        "POP_TOP", "LOAD_NAME", "STORE_NAME", "LOAD_FAST", "STORE_FAST", "IMPORT_NAME",
                        "IMPORT_FROM", "LOAD_ATTR", "BUILD_LIST", "BUILD_TUPLE", "BUILD_SET", "BUILD_MAP",
                        "BUILD_CONST_KEY_MAP", "LIST_EXTEND", "SET_UPDATE", "DICT_UPDATE", "MAP_ADD",
                        "LOAD_SMALL_INT", "LOAD_FAST_BORROW",  # (3.14+)
                        "LOAD_COMMON_CONSTANT"})  # (3.15: None, True, False, and the like)


def nothing_to_rewrite(code: CodeType) -> bool:
    """Is ``code`` certain to come out of ``dual_code.switched`` as it went in: no function, class
    or comprehension in it, and not one instruction the rewriter changes?  (``-c pass``,
    a module of constants: then neither ``bytecode`` nor the rewriter is imported.)"""
    if any(isinstance(const, CodeType) for const in code.co_consts):
        return False  # (most modules: decided without importing ``opcode``)
    return _only(code, _SITE_FREE)


# What a twin's rewrite (``rewrite.rewrite_code``) also leaves as it is, besides the above:
# making functions and closures (a twin's nested functions stay as compiled: each gets a
# twin of its own when called), reading globals and cells, storing attributes, globals and
# cells, and 3.13's paired loads and stores of locals.  A global or method load that feeds
# a call comes with the call, which is not here.
_TWIN_SITE_FREE = _SITE_FREE | frozenset({
    "MAKE_FUNCTION", "SET_FUNCTION_ATTRIBUTE", "LOAD_CLOSURE", "MAKE_CELL", "COPY_FREE_VARS", "LOAD_DEREF",
    "STORE_DEREF", "LOAD_GLOBAL", "STORE_ATTR", "STORE_GLOBAL", "LOAD_FAST_CHECK", "LOAD_FAST_LOAD_FAST",
    "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW"})


def twin_is_itself(code: CodeType) -> bool:
    """Would a twin's rewrite leave ``code`` as it is (its constants perhaps reordered):
    not one instruction the rewriter changes, and no part (comprehension, class body) among
    its constants, which would be rewritten with it?  Such a function's twin runs its own
    code, as a switched function's does, without a rewrite: a whole-program context asks
    for the twin of every function the program calls, and two thirds of those rewritten at
    run time came out unchanged -- decorator factories, ``__init__`` that store attributes,
    properties that read one (sympy: 418 of 602 a run; docs/performance.md, "Real programs")."""
    if any(isinstance(const, CodeType) and is_part(const) for const in code.co_consts):
        return False
    return _only(code, _TWIN_SITE_FREE)


def _only(code: CodeType, names: frozenset[str]) -> bool:
    """Is every instruction of ``code``'s raw bytecode one of ``names``?"""
    from opcode import opname

    raw = code.co_code
    return all(opname[raw[i]] in names for i in range(0, len(raw), 2))
