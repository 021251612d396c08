"""The one interface through which the rest of cassette_hook meets a CPython version's bytecode.

Each version module (``_py310`` ... ``_py314``) exports ``FAMILY``, an object with every
member of :class:`Family`; :data:`family` is the running interpreter's.  The rewriter
(``_rewriter``), the import hook's mode switch (``dual_code``) and the checks of a pass's
result (``passes``) use only these members, so none of them asks which CPython runs.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import sys
from types import CodeType
from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:
    from bytecode import Bytecode, ConcreteBytecode, Instr, Label

    from . import Hooks
    from ._assembler import Assembler
    from ._instr import Location
    from ._stack import Item


class Family(Protocol):
    """How one CPython version's bytecode is rewritten, built and checked."""

    for_iter_exit: tuple[str, ...]
    """What an exhausted ``FOR_ITER`` skips at its target (3.12+), or nothing to check."""
    loads_trust_binding: bool
    """``LOAD_FAST`` reads a variable without checking that it is bound (3.12+): a load a
    pass may have moved before the assignment must become ``LOAD_FAST_CHECK``."""
    assembler: Assembler | None
    """Our own assembler for the version (3.12+), which makes what ``bytecode`` makes
    in under half its time, or None: ``bytecode`` assembles everything."""

    # -- what the rewriting reads ---------------------------------------------------------

    def decode(self, code: CodeType) -> Bytecode:
        """``code`` as ``bytecode`` instructions, with the exception handlers' stack depths
        as compiled; where ``bytecode`` misreads an instruction of the version (3.14's
        ``BUILD_INTERPOLATION``), that instruction as the version's module fixes it."""

    def plain_forms(self, items: list[Item], *, borrowable: bool = False) -> list[Item]:
        """``items`` (a decoded body) in the forms the rewriting and the passes read: the
        instructions of a version that only speed the body up or inline a call (3.14's
        borrowed loads, ``LOAD_SMALL_INT``, an inlined ``all(genexp)``) as the plain ones
        they stand for, behaving the same.  With ``borrowable`` (a body as compiled, which
        no pass has seen), each load the compiler wrote borrowed is marked, for
        :meth:`borrowed_again`."""

    def borrowed_again(self, items: list[Item], depths: Sequence[int | None]) -> list[Item]:
        """``items`` from ``plain_forms(..., borrowable=True)`` (``depths``: their stack
        depths) with the loads the compiler wrote borrowed borrowed again (3.14+), but for
        those that may push a call's callee: the rewriting adds no store to a variable,
        so a borrowed value is still consumed before its variable changes, as compiled;
        a callee is handed to the call site's hook, which reads its reference count
        (see docs/internals.md, "CPython 3.14").  Every other version: ``items``."""

    # -- call sites and operator sites --------------------------------------------------

    def rewrite_calls(self, items: list[Item], depths: Sequence[int | None], hooks: Hooks,
                      enters: bool) -> list[Item]:
        """``items`` with their call sites going through ``hooks``; the calls the compiler
        makes on its own, and those of a pass's ``nooverdub`` marker, as they are.
        ``enters``: a call with positional arguments only goes through ``hooks.enter``,
        given the callee and its arguments (3.11+; see ``callsites.enter``)."""

    def operator_site(self, instr: Instr, hooks: Hooks) -> list[Instr] | None:
        """``instr`` as a call of ``hooks.operator_site(op)``, or None: not an operator."""

    operator_names: frozenset[str]
    """The names of the instructions :meth:`operator_site` may make a site of; it is not
    asked about the others (asked of every instruction, it cost a twentieth of a cold
    import's rewriting, for the few instructions it rewrites)."""

    # -- the instructions others assemble -----------------------------------------------

    def load_global(self, name: str, loc: Location) -> Instr:
        """Load a global (or builtin) to use as a value."""

    def load_hook(self, hook: object, loc: Location) -> Instr:
        """Load a hook: a ``GlobalName`` as the global it names (``load_global``), anything
        else as a constant.  (Every site loads its hooks through this, already in the form
        the code keeps, rather than as constants that a last walk over the body replaced.)"""

    def load_global_callee(self, name: str, loc: Location) -> Instr:
        """Load a global to call, with the slot a call needs beside it."""

    def call(self, nargs: int, loc: Location) -> list[Instr]:
        """Call the callee loaded by ``load_global_callee`` with ``nargs`` positional arguments."""

    def call_constant(self, obj: object, loc: Location) -> list[Instr]:
        """Call ``obj`` with no arguments, leaving its result on the stack."""

    def jump_if_true(self, target: Label, loc: Location) -> Instr:
        """Pop the top of the stack; jump forward to ``target`` if it is true."""

    def jump_if_false(self, target: Label, loc: Location) -> Instr:
        """Pop the top of the stack; jump forward to ``target`` if it is false."""

    def line_table(self, code: CodeType, concrete: ConcreteBytecode) -> bytes:
        """``code``'s ``co_linetable`` as CPython would write it for ``concrete``'s
        instructions (``code`` was assembled from them by ``bytecode``)."""

    # -- what a pass's result is checked against ----------------------------------------

    def null_slots(self, instr: Instr) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Where ``instr`` may meet or leave a ``NULL``: the stack positions (1 = top) of
        its inputs that may be one, and of its outputs that may be one, counted as
        ``bytecode``'s stack effects count them.  Anything else that meets a ``NULL``
        crashes the interpreter."""

    def start_depth(self, code: CodeType) -> int:
        """How many values ``code``'s frame starts with on its stack."""


def _running() -> Family:
    if sys.version_info >= (3, 15):
        from ._py315 import FAMILY
    elif sys.version_info >= (3, 14):
        from ._py314 import FAMILY
    elif sys.version_info >= (3, 13):
        from ._py313 import FAMILY
    elif sys.version_info >= (3, 12):
        from ._py312 import FAMILY
    elif sys.version_info >= (3, 11):
        from ._py311 import FAMILY
    else:
        from ._py310 import FAMILY
    return FAMILY


family: Family = _running()
