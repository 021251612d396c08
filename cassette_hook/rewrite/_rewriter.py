"""The rewriting itself, on ``bytecode``: decode a code object, rewrite its sites, assemble.

Kept apart from the package's ``__init__`` so that importing cassette_hook (and running
code the import hook cached) never imports ``bytecode``: only rewriting does.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

from types import CodeType
from typing import TYPE_CHECKING, Sequence, cast

from bytecode import Bytecode, ConcreteBytecode, Instr, Label
from bytecode.instr import UNSET

from . import RESOURCE_ERRORS, GlobalName, Hooks, UnsupportedCode
from ._family import family
from ._instr import aim, arg_of, make, named, placed
from ._markers import ContextSlot, nooverdub
from ._memo import Memo
from ._names import COMPREHENSIONS
from ._stack import Item, stack_depths

if TYPE_CHECKING:
    from . import Nested

__all__ = ["assemble", "decode", "deepest_copy", "items_of", "rewritten", "set_items"]


def decode(code: CodeType) -> Bytecode:
    """``code`` as ``bytecode`` instructions, with the exception handlers' stack depths
    (``Family.decode``).

    Raises ``UnsupportedCode`` for code the ``bytecode`` package cannot read (what our own
    decoder, where the family has one, declines and ``bytecode`` fails on)."""
    try:
        return family.decode(code)
    except RESOURCE_ERRORS:
        raise
    except Exception as exc:
        raise UnsupportedCode(f"the bytecode package cannot read it ({type(exc).__name__}: {exc})") from exc


def items_of(bc: Bytecode) -> list[Item]:
    """``bc``'s items, read as the list it is.  ``Bytecode.__iter__`` is a generator that
    checks, item by item, that try blocks do not nest: reading every body through it was a
    few percent of a cold rewrite, and ``bytecode`` checks again when it assembles."""
    return list.copy(bc)


def set_items(bc: Bytecode, items: list[Item]) -> None:
    """``bc``'s items replaced by ``items``, as ``bc[:] = items`` without its check of each
    item's type: the rewriting only ever puts ``bytecode``'s own kinds of item there (the
    check was a few percent of a cold rewrite)."""
    list.__setitem__(bc, slice(None), items)


def rewritten(code: CodeType, hooks: Hooks, *, operators: bool, nested: Nested,
              decoded: Bytecode | None = None, enters: bool = False, compiled: bool = True) -> Bytecode:
    """``code`` decoded (or ``decoded``: its decoding, reused, or what a pass made of it,
    then not ``compiled``), with its sites rewritten, its code constants mapped by
    ``nested`` and the pass markers (``_markers``) replaced.  The loads the compiler
    borrowed stay borrowed where the rewriting allows it (``Family.borrowed_again``), in a
    body as ``compiled`` only: a pass may have put anything between a load and its use."""
    bc = decode(code) if decoded is None else decoded
    items = family.plain_forms(items_of(bc), borrowable=compiled)
    depths = stack_depths(items)
    if compiled:
        items = family.borrowed_again(items, depths)  # (the same stack effects: depths still hold)
    items = family.rewrite_calls(items, depths, hooks, enters)
    out = _rewrite_constants_and_operators(items, hooks, operators, nested)
    set_items(bc, out)
    # ``bytecode`` numbers locals by first use after the arguments it is given; giving it
    # all of them keeps co_varnames -- and so the order of ``locals()`` -- as compiled.
    bc.argnames = list(code.co_varnames)
    return bc


def deepest_copy(bc: Bytecode) -> int:
    """How far below the top of the stack the deepest ``COPY`` in ``bc`` reaches (0: none)."""
    return max((arg_of(item, int) for item in bc if isinstance(item, Instr) and item.name == "COPY"), default=0)


def assemble(bc: Bytecode, stacksize: int, name: str) -> CodeType:
    """``bc`` as a code object, with the stack size given rather than recomputed: by the
    family's own assembler where it has one and it takes ``bc`` (``_assembler``: the same
    code, made cheaper), else by ``bytecode``."""
    if family.assembler is not None:
        code = family.assembler.code(bc, stacksize)
        if code is not None:
            return code
    try:
        # Every rewrite is stack-balanced and needs one slot more at most, for a moment,
        # and keeps the exception handlers' depths: nothing for ``bytecode`` to recompute
        # (which would be most of the rewriting time).
        concrete = bc.to_concrete_bytecode(compute_exception_stack_depths=False)
        concrete.__class__ = _LinesUnwritten
        code = concrete.to_code(stacksize=stacksize, compute_exception_stack_depths=False, check_pre_and_post=False)
    except RESOURCE_ERRORS:
        raise
    except Exception as exc:  # the bytecode package's own checks: stack depth, jumps
        raise UnsupportedCode(f"rewritten {name} does not assemble: {exc}") from exc
    return code.replace(co_linetable=family.line_table(code, concrete))


class _LinesUnwritten(ConcreteBytecode):
    """Concrete bytecode whose ``to_code`` leaves the line table empty: ``assemble`` has the
    family write it (``Family.line_table``), as CPython reads it.  ``bytecode``'s own was
    then thrown away (3.10) or walked again to be repaired (3.11+), and encoding it was a
    seventh of a cold rewrite."""

    def _assemble_locations(self, first_lineno: int, linenos: object) -> bytes:  # 3.11+
        return b""

    def _assemble_linestable(self, first_lineno: int, linenos: object) -> bytes:  # 3.10
        return b""


_SPECIAL_CONSTANTS = frozenset({GlobalName, nooverdub, ContextSlot})
_CONSTANT_LOADS = frozenset({"LOAD_CONST", "RETURN_CONST"})  # RETURN_CONST: 3.12+


def _load_special(item: Instr, hooks: Hooks) -> list[Instr]:
    """A hook loaded by name, or a pass's marker replaced (see ``_markers``)."""
    arg, loc = item.arg, item.location
    if isinstance(arg, GlobalName):
        return [family.load_global(str(arg), loc)]
    if isinstance(arg, nooverdub):  # its calls were left plain by rewrite_calls: load the callable itself
        return [Instr(item.name, arg.func, location=loc)]
    load = family.call_constant(hooks.current_context, loc)  # a contextslot: the running context, here and now
    return load if item.name == "LOAD_CONST" else [*load, make("RETURN_VALUE", loc=loc)]


def _rewrite_constants_and_operators(items: list[Item], hooks: Hooks, operators: bool, nested: Nested) -> list[Item]:
    """``items`` with their operator sites (``operators``), their code constants mapped by
    ``nested``, and the pass markers and hooks loaded by name replaced, in one walk (the
    sites made here and by ``rewrite_calls`` load their hooks as they are kept:
    ``Family.load_hook``).

    The code constants are comprehensions and generator expressions, and the body of a
    ``class`` statement (the first code constant after ``LOAD_BUILD_CLASS``), run as part
    of this body; the others are the bodies of functions it defines."""
    out: list[Item] = []
    append = out.append
    names = family.operator_names if operators else frozenset()
    read = _read_groups.get(names)  # (the instructions this walk does anything with: most it only copies)
    if read is None:
        read = _read_groups[names] = dict.fromkeys(names | _READ, 0)
    class_body_next = False
    start = 0
    # (those instructions found at once, _instr.named: in C where it is built; the items
    # between them copied a slice at a time)
    for index in named(items, Instr, read, 1)[0]:
        out += items[start:index]
        start = index + 1
        item = cast(Instr, items[index])
        name = item._name
        if name in names:
            site = _operator_replacement(item, hooks)
            if site is not None:
                out += site
                continue
        elif name == "LOAD_BUILD_CLASS":
            class_body_next = True
        elif name in _CONSTANT_LOADS:
            arg = item.arg
            if name == "LOAD_CONST" and isinstance(arg, CodeType):
                replacement = nested(arg, arg.co_name in COMPREHENSIONS or class_body_next)
                if replacement is not arg:
                    item = make("LOAD_CONST", replacement, item.location)
                class_body_next = False
            elif type(arg) in _SPECIAL_CONSTANTS:
                out += _load_special(item, hooks)
                continue
        append(item)
    out += items[start:]
    return out


_READ = frozenset({"LOAD_BUILD_CLASS", *_CONSTANT_LOADS})
_read_groups: dict[frozenset[str], dict[str, int]] = {}  # (what the walk reads, by operators' names: named's groups)

# The operator sites' instructions, by their hooks' ``id`` (the hooks held while their
# sites are, so that the ``id`` is theirs) and the operator instruction's name and
# argument: ``family.operator_site``'s -- in switched code with the flag's load and the two
# jumps of ``_operator_site`` around them -- made once and copied at each site of that
# shape (``_instr.placed``), the jumps aimed at the site's own labels (``_instr.aim``), or
# ``None`` for an instruction that is no operator site.  A shape is kept only where the
# site is instructions alone, and not the operator instruction itself (``yield from``'s).
_OPERATOR_SHAPES_KEPT = 4096  # (a few dozen for the hooks a process has)
_operator_shapes: Memo[tuple[object, ...], list[Instr] | None] = Memo(_OPERATOR_SHAPES_KEPT)
_UNSEEN: list[Instr] = []  # (a shape not yet made)
_AIMED_LATER = Label()  # (where a kept shape's jumps go: each copy's are aimed at its own labels)


def _operator_replacement(item: Instr, hooks: Hooks) -> Sequence[Item] | None:
    """What replaces the operator ``item``: ``family.operator_site(item, hooks)``, in
    switched code behind its flag (:func:`_operator_site`), its instructions copied from
    those made for the first site of its shape.  The same instructions: what a site is
    made of depends on the hooks and the instruction's name and argument, and an
    operator's hook (``hooks.operator_site(op)``) is one object, or one name, for each
    operator.  (The flag's load and jumps, made one by one at each site, were three of a
    switched operator site's seven instructions, and three quarters of the rewriting's
    calls of ``make``; docs/performance.md, "The passes' work cheaper, again".)"""
    arg = item.arg
    key = (id(hooks), item.name) if arg is UNSET else (id(hooks), item.name, type(arg), arg)  # (UNSET: unhashable)
    try:
        shape = _operator_shapes.get(key, _UNSEEN)
    except TypeError:  # (an argument no dict takes)
        site = family.operator_site(item, hooks)
        return None if site is None else _operator_site(item, site, hooks)
    if shape is not _UNSEEN:
        if shape is None:  # (not an operator site)
            return None
        made = placed(shape, item.location)
        if hooks.operators_on is None:
            return made
        plain, joined = Label(), Label()
        aim(made[1], plain)
        aim(made[-1], joined)
        return [*made, plain, item, joined]
    site = family.operator_site(item, hooks)
    if site is None:
        _operator_shapes.remember(key, None, hooks)
        return None
    if all(isinstance(instr, Instr) and not isinstance(instr.arg, Label) and instr is not item for instr in site):
        _operator_shapes.remember(key, site if hooks.operators_on is None else [
            family.load_hook(hooks.operators_on, None), family.jump_if_false(_AIMED_LATER, None), *site,
            make("JUMP_FORWARD", _AIMED_LATER, None)], hooks)
    return _operator_site(item, site, hooks)


def _operator_site(item: Instr, replacement: list[Instr], hooks: Hooks) -> Sequence[Item]:
    """The operator ``item`` as its site, ``replacement``; in switched code, the site only
    while the flag is true, else the instruction as compiled."""
    if hooks.operators_on is None:
        return replacement
    loc, plain, joined = item.location, Label(), Label()
    # (``yield from``'s site is a hook on the operand, then the instruction itself,
    # which both ways then share; any other site replaces the instruction)
    site = replacement[:-1] if replacement[-1] is item else [*replacement, make("JUMP_FORWARD", joined, loc)]
    return [family.load_hook(hooks.operators_on, loc), family.jump_if_false(plain, loc), *site, plain, item, joined]
