"""Bytecode rewriting: turn a code object's call sites into calls through cassette_hook.

A rewritten call site ``f(a, k=b)`` calls ``hooks.resolve(f)(a, k=b)`` on CPython 3.11+
(``hooks.resolve_star`` for a star call ``f(*a, **k)``),
``hooks.call(f, a, k=b)`` on 3.10 (which has no slot to resolve into; a star call runs
``hooks.call_ex(f, a, k)`` there).  With ``operators`` on, ``x + y`` runs
``hooks.operator_site(operator.add)(x, y)`` (and likewise for every overloadable operator).
A method call ``obj.m(a)`` in a twin may instead resolve ``m`` at its load, through
``site(obj, *rest)`` where ``hooks.method_site("m")`` is ``(site, *rest)`` (3.11+, on the C
path; see ``_nullslot``).
Everything else -- line numbers, positions, exception tables, closures -- is untouched, so
tracebacks point at the same lines.  What differs between CPython versions lives in one
module per version (``_py310`` ... ``_py314``), each implementing the interface that
``_family`` declares and picks the running one of; ``_rewriter`` drives it.  This
module holds what the rest of cassette_hook needs without rewriting anything, so that
importing it does not import ``bytecode``.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import warnings
from types import CodeType

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from typing import Callable

    Nested = Callable[[CodeType, bool], CodeType]  # (code constant, runs as part of this body?) -> replacement

__all__ = ["HEADROOM", "RESOURCE_ERRORS", "GlobalName", "Hooks", "UnsupportedCode", "rewrite_code", "rewrite_part"]

# Failures of the moment, not of the code: rewriting (``bytecode`` recurses) ran out of
# stack or memory.  They propagate through the rewriter, never to be taken for
# unsupported code.
RESOURCE_ERRORS = (RecursionError, MemoryError)
# Frames rewriting may take beyond the recursion limit (see
# ``_budget.recursion_budget.headroom``): ``bytecode`` recurses about 20 frames deep for
# a function, 25 for a module, and 4 more for each level of functions nested in it.
HEADROOM = 250


class Hooks:
    """What rewritten sites load as constants and call.  (A plain class: a dataclass or a
    named tuple would cost a millisecond of every ``import cassette_hook``.)"""

    __slots__ = ("resolve", "resolve_star", "call", "call_ex", "operator_site", "yield_from", "current_context",
                 "enter", "method_site", "operators_on")

    def __init__(self, *, resolve: object, resolve_star: object, call: object, call_ex: object,
                 operator_site: Callable[[Callable[..., object]], object], yield_from: object,
                 current_context: object, enter: object = None,
                 method_site: Callable[[str], tuple[object, ...]] | None = None,
                 operators_on: GlobalName | None = None) -> None:
        self.resolve = resolve
        self.resolve_star = resolve_star
        self.call = call
        self.call_ex = call_ex
        self.operator_site = operator_site
        self.yield_from = yield_from  # run on the operand of ``yield from`` before the instruction itself
        self.current_context = current_context  # what a pass's ``contextslot`` calls
        self.enter = enter  # what an entering site calls (``rewrite_code``'s ``enters``): twins' only
        # name -> what a method load feeding a plain call calls, with the object as its
        # self: ``(site, *rest)`` for ``site(obj, *rest)`` (3.11+, twins that do not enter,
        # switched code on the C path; None: the load is made a plain attribute load, its
        # call resolved)
        self.method_site = method_site
        # A flag among the builtins that an operator site first reads, running the plain
        # instruction when it is false (switched code, whose one rewritten body serves
        # contexts that see operators and contexts that do not); None: no such branch
        self.operators_on = operators_on


class GlobalName(str):
    """A hook loaded by name (``LOAD_GLOBAL``) rather than as a constant.

    Code written to a ``.pyc`` file can only hold constants ``marshal`` knows, so the
    import hook's code finds its hooks among the builtins under these names.
    """


class UnsupportedCode(Exception):
    """The code object uses a shape the rewriter does not understand."""


def rewrite_code(code: CodeType, hooks: Hooks, *, operators: bool, enters: bool = False) -> CodeType:
    """Return a copy of ``code`` whose call (and operator) sites go through ``hooks``;
    with ``enters``, those with positional arguments only through ``hooks.enter``.

    Raises ``UnsupportedCode`` when the code has a shape the rewriter does not handle.
    """
    from ._rewriter import assemble, deepest_copy, rewritten  # (``bytecode`` with them: when something is rewritten)

    bc = rewritten(code, hooks, operators=operators, nested=_twin_nested(hooks, operators, enters), enters=enters)
    # A resolved site needs two slots more for a moment; an entering one copies its callee
    # and arguments above them, as deep as its deepest COPY reaches.
    extra = max(2, deepest_copy(bc)) if enters else 2
    return assemble(bc, code.co_stacksize + extra, code.co_name)


def _twin_nested(hooks: Hooks, operators: bool, enters: bool) -> Nested:
    """A twin's nested functions stay as compiled (they get twins of their own when
    called); the parts of its body are rewritten with it."""

    def nested(code: CodeType, part: bool) -> CodeType:
        return (rewrite_part(code, lambda: rewrite_code(code, hooks, operators=operators, enters=enters)) if part
                else code)

    return nested


def rewrite_part(code: CodeType, rewrite: Callable[[], CodeType]) -> CodeType:
    """A nested part that cannot be rewritten runs as compiled; the rest of the body is
    still rewritten."""
    try:
        return rewrite()
    except RESOURCE_ERRORS:
        raise
    except Exception as exc:
        where = f"{code.co_filename}:{code.co_firstlineno}"
        warnings.warn(
            f"cassette_hook: cannot rewrite {code.co_qualname if hasattr(code, 'co_qualname') else code.co_name} "
            f"({where}): {exc}; it runs unrewritten (its calls are not overdubbed)",
            RuntimeWarning,
            stacklevel=2,
        )
        return code
