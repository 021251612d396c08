"""Rewriting for CPython 3.11+: resolve the callee, then let the user's frame call it.

Since 3.11 every call site reserves a slot next to the callee (``PUSH_NULL``,
``LOAD_GLOBAL`` with its low bit, method loads), and ``CALL n`` calls ``callee(*args)``
when that slot holds ``NULL``.  The rewriter keeps that shape and, at the call, swaps
the callee up to the top of the stack, replaces it by ``hooks.resolve(callee)`` and swaps
it back::

    [NULL, f, a1 .. an]  --SWAP n+1-->  [NULL, an, a1 .., f]
                         --resolve--->  [NULL, an, a1 .., r]  --SWAP n+1-->  [NULL, r, a1 .. an]

The original ``CALL`` then calls ``r`` from the user's own frame.  When the context only
needs the callee's body overdubbed, ``r`` is the callee's twin: no extra frame, and
CPython inlines the Python-to-Python call.  A method load becomes a plain attribute load
with a ``NULL`` pushed beside it, so the callee is always one object; or, where
``hooks.method_site`` is given, a call of a method site that resolves the callee at the
load and pushes the pair a method call takes, and its call then resolves nothing
(``_method_site``).  ``SWAP`` never moves the ``NULL`` slot, which no instruction other
than a call may touch.

Versions differ in the order of the pair (3.13 puts the ``NULL`` above the callee), in
``PRECALL`` (3.11), ``KW_NAMES`` (3.11, 3.12) versus ``CALL_KW`` (3.13), and in a few
operator opcodes; each version module subclasses :class:`NullSlotFamily` with just those.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import dis
import functools
import itertools
import operator
from opcode import opmap, opname
from types import CodeType
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence, cast


from bytecode import BinaryOp, Bytecode, Compare, ConcreteBytecode, Instr, Label

from .._native import optional
from . import GlobalName
from ._instr import CompiledPosition, Location, arg_of, flagged_name, follows_bytecode, make, named, placed
from ._memo import Memo
from ._operators import UNARY, binary_op, compare_op
from ._markers import nooverdub
from ._stack import Item, pair_by_depth

if TYPE_CHECKING:
    from . import Hooks
    from ._assembler import Assembler
    from ._decoder import Decoder

MAX_ENTERED = 15  # the most positional arguments an entering call site copies (a call with more resolves)


def own_assembler(compare: Callable[[Compare], int], *, local_cells: bool,
                  instr_types: Iterable[type[Instr]] = ()) -> Assembler | None:
    """A family's own assembler (3.12+; ``instr_types``: the family's own classes of
    ``Instr``), or None where the installed ``bytecode`` is not a release it follows."""
    if not follows_bytecode():
        return None
    from ._assembler import Assembler  # (here: it imports names older releases do not have)

    return Assembler(_inline_caches(), compare, line_table, cache_opcode=opmap["CACHE"], local_cells=local_cells,
                     instr_types=instr_types, walk=None if _assembly is None else _assembly.walk,
                     read_runs=None if _decoding is None else _decoding.runs)


def own_decoder(compare: Callable[[int], Compare], *, local_cells: bool,
                kept: Mapping[str, type[Instr]] | None = None) -> Decoder | None:
    """A family's own decoder (3.12+; ``compare``: a ``COMPARE_OP`` argument's comparison, as
    ``bytecode`` decodes it; ``kept``: the instructions, by name, whose argument the family
    keeps as CPython encodes it, and the class it decodes them to), or None where the
    installed ``bytecode`` is not a release it follows."""
    if not follows_bytecode():
        return None
    from ._decoder import Decoder  # (here: it imports names older releases do not have)

    return Decoder(_inline_caches(), compare, cache_opcode=opmap["CACHE"], local_cells=local_cells,
                   # (a name the running Python lacks: the family is another version's, imported
                   # to be looked at, as tests/test_structure.py does, never to rewrite)
                   kept={opmap[name]: cls for name, cls in (kept or {}).items() if name in opmap},
                   scan=None if _decoding is None else _decoding.items)


def _inline_caches() -> list[int]:
    """Inline cache entries after each opcode, for every opcode."""
    # (a list by opcode on 3.12, a dict by name since: 3.15's a frozendict, no dict)
    entries = dis._inline_cache_entries  # type: ignore[attr-defined]
    caches = [entries.get(name, 0) for name in opname] if hasattr(entries, "keys") else list(entries)
    return caches + [0] * (len(opname) - len(caches))  # (3.15's list ends at the last opcode with caches)


class NullSlotFamily:
    """The 3.11+ rewriting scheme; subclasses fill in the version details."""

    null_after_callee = False  # 3.13 pushes [callee, NULL]; 3.11 and 3.12 push [NULL, callee]
    for_iter_exit: tuple[str, ...] = ()
    loads_trust_binding = False
    assembler: Assembler | None = None
    decoder: Decoder | None = None  # our own decoder for the version (3.12+), else bytecode's
    # The instructions :meth:`consumer_depth` and :meth:`producer_depth` answer for, and
    # :meth:`is_method_load` may be true of: ``pair_by_depth`` asks them of no other.
    consumer_names = frozenset({"CALL", "CALL_KW", "CALL_FUNCTION_EX"})
    method_load_names = frozenset({"LOAD_ATTR", "LOAD_SUPER_ATTR"})
    producer_names = frozenset({"PUSH_NULL", "LOAD_GLOBAL", "LOAD_SUPER_ATTR", *method_load_names})
    operator_names = frozenset({"BINARY_OP", "BINARY_SUBSCR", *UNARY, "GET_ITER", "GET_YIELD_FROM_ITER", "COMPARE_OP",
                                "CONTAINS_OP", "STORE_SUBSCR", "DELETE_SUBSCR"})  # (what :meth:`operator_site` reads)

    def __init__(self) -> None:
        # The instructions of each shape of site the call sites' pass makes, made once by
        # the methods below and copied at each site of that shape (``_instr.placed``), by
        # shape: its kind, the ``id`` of its hook (the hook held while the shape is
        # remembered, so that the ``id`` is the hook's) and its numbers.
        self._shapes: Memo[tuple[object, ...], list[Instr]] = Memo(_SHAPES_KEPT)

    # -- version details -------------------------------------------------------------

    def decode(self, code: CodeType) -> Bytecode:
        if self.decoder is not None:  # (the same Bytecode, made cheaper: _decoder)
            decoded = self.decoder.bytecode(code)
            if decoded is not None:
                return decoded
        return self.decode_by_bytecode(code)

    def decode_by_bytecode(self, code: CodeType) -> Bytecode:
        """``code`` as ``bytecode`` decodes it: ``decode``'s route where the family has no
        decoder of its own or it declines ``code``, and what ``tests/test_decoding.py``
        compares our decoder with."""
        return Bytecode.from_code(code, conserve_exception_block_stackdepth=True)

    def plain_forms(self, items: list[Item], *, borrowable: bool = False) -> list[Item]:
        return items  # (3.11-3.13 compile nothing the rewriting reads otherwise)

    def borrowed_again(self, items: list[Item], depths: Sequence[int | None]) -> list[Item]:
        return items  # (3.11-3.13 borrow nothing)

    def call(self, nargs: int, loc: Location) -> list[Instr]:
        """The instructions of a plain positional ``CALL nargs``."""
        return [make("CALL", nargs, loc)]

    def jump_if_true(self, target: Label, loc: Location) -> Instr:
        return make("POP_JUMP_IF_TRUE", target, loc)

    def jump_if_false(self, target: Label, loc: Location) -> Instr:
        return make("POP_JUMP_IF_FALSE", target, loc)

    def line_table(self, code: CodeType, concrete: ConcreteBytecode) -> bytes:
        # (concrete instructions only: no SetLineno after assembly)
        return line_table(code.co_firstlineno, [(instr.location, instr.size >> 1) for instr in concrete])

    def start_depth(self, code: CodeType) -> int:
        return 0  # (a generator's first RESUME pushes nothing since 3.11)

    def is_method_load(self, instr: Instr) -> bool:
        return instr.name in ("LOAD_ATTR", "LOAD_SUPER_ATTR") and flagged_name(instr)[0]

    def attribute_name(self, instr: Instr) -> str:
        """The name a method load (not ``LOAD_SUPER_ATTR``) loads."""
        return flagged_name(instr)[-1]

    def plain_load(self, instr: Instr) -> Instr:
        """The method load ``instr`` as a load of the bound attribute."""
        return make(instr.name, (False, *flagged_name(instr)[1:]), instr.location)

    def consumer_depth(self, instr: Instr, depth: int) -> int | None:
        """Depth of the lower slot of the callee pair that a call-family instr consumes."""
        if instr.name == "CALL":
            return depth - arg_of(instr, int) - 2
        if instr.name == "CALL_KW":
            return depth - arg_of(instr, int) - 3
        if instr.name == "CALL_FUNCTION_EX":
            return depth - 3 - (arg_of(instr, int) & 1)
        return None

    def callee_position(self, instr: Instr) -> int:
        """How far below the top of the stack (1 = top) the callee is at ``instr``."""
        arg, name = arg_of(instr, int), instr.name
        above = arg if name == "CALL" else arg + 1 if name == "CALL_KW" else 1 + (arg & 1)  # (else CALL_FUNCTION_EX)
        return above + (2 if self.null_after_callee else 1)

    def load_global(self, name: str, loc: Location) -> Instr:
        return make("LOAD_GLOBAL", (False, name), loc)

    def load_hook(self, hook: object, loc: Location) -> Instr:
        return self.load_global(str(hook), loc) if type(hook) is GlobalName else make("LOAD_CONST", hook, loc)

    def load_global_callee(self, name: str, loc: Location) -> Instr:
        """Load a global to call, with its ``NULL`` slot."""
        return make("LOAD_GLOBAL", (True, name), loc)

    def null_slots(self, instr: Instr) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Where ``instr`` may meet or leave a ``NULL``: the stack positions (1 = top) of
        its inputs that may be one, and of its outputs that may be one, counted as
        ``bytecode``'s stack effects count them.  Anything else that meets a ``NULL``
        crashes the interpreter (checked in passes' results)."""
        name = instr.name
        pair = 1 if self.null_after_callee else 2  # the NULL's place in a callee pair
        if name in ("PUSH_NULL", "LOAD_FAST_AND_CLEAR"):
            return (), (1,)
        if name in ("LOAD_GLOBAL", "LOAD_SUPER_ATTR") and flagged_name(instr)[0] or self.is_method_load(instr):
            return (), (pair,)
        if name in ("STORE_FAST", "STORE_FAST_STORE_FAST"):  # restoring a comprehension's variable
            return (1, 2) if name == "STORE_FAST_STORE_FAST" else (1,), ()
        lower = self.consumer_depth(instr, 0)
        if lower is None:
            return (), ()
        return (-lower - 1 if self.null_after_callee else -lower,), ()

    # -- the scheme ------------------------------------------------------------------

    def producer_depth(self, instr: Instr, depth: int) -> int | None:
        """Depth of the lower slot of the callee pair that ``instr`` starts, if any."""
        name = instr.name
        if name == "PUSH_NULL":
            return depth - 1 if self.null_after_callee else depth
        if name == "LOAD_GLOBAL" and flagged_name(instr)[0]:
            return depth
        if name == "LOAD_SUPER_ATTR" and flagged_name(instr)[0]:
            return depth - 3
        if self.is_method_load(instr):
            return depth - 1
        return None

    def call_constant(self, obj: object, loc: Location) -> list[Instr]:
        """Call ``obj`` with no arguments, leaving its result on the stack."""
        pair = [make("LOAD_CONST", obj, loc), make("PUSH_NULL", loc=loc)]
        return [*(pair if self.null_after_callee else reversed(pair)), *self.call(0, loc)]

    def rewrite_calls(self, items: list[Item], depths: Sequence[int | None], hooks: Hooks,
                      enters: bool) -> list[Item]:
        # One walk over the items finds all this pass reads of them besides the pairing: the
        # method loads, the calls and definitions, and whether a pass loaded a ``nooverdub``
        # marker (a walk each, asking each item its type and name, was most of the pass).
        # (an instruction told by its type first, its name and argument read under bytecode's
        # properties; and a body without a call is not paired: nothing there to pair)
        # (the items found by name at once, _instr.named: in C where it is built)
        consumers = self.consumer_names
        calls_and_definitions, loads, constants = named(items, Instr, self._scanned_names, 3)
        instrs = cast(Sequence[Instr], items)  # (what is read below at the places found: instructions)
        is_method_load = self.is_method_load
        method_loads = {index for index in loads if is_method_load(instrs[index])}
        called = any(instrs[index]._name in consumers for index in calls_and_definitions)
        marked = any(type(instrs[index]._arg) is nooverdub for index in constants)
        paired = pair_by_depth(items, depths, self.producer_depth, self.consumer_depth, self.producer_names,
                               consumers) if called else {}
        if marked:
            for plain_call in self._plain_calls(items, depths):
                paired.pop(plain_call, None)
        method_site = hooks.method_site
        sites = ({} if method_site is None or enters  # the method loads to make method sites, and their sites
                 else {load: method_site(self.attribute_name(instrs[load]))
                       for load in self._method_site_loads(items, paired, method_loads)})
        resolving: dict[int, list[Instr]] = {}  # place -> what replaces the callee there
        defined: set[int] = set()  # ends of what a decorator applies to: functions, classes, decorations
        for index in calls_and_definitions:
            item = instrs[index]
            if item.name in _DEFINING:
                defined.add(index)
                continue
            producers = paired.get(index)
            if producers is not None and producers <= sites.keys():
                continue  # (its method sites resolve the callee)
            if producers is not None:
                if any(self._builds_class(items, p) for p in producers):
                    defined.add(self._call_end(items, index))
                else:
                    point = self._resolution_point(items, index)
                    position = self.callee_position(item)
                    # (point == index: no KW_NAMES, the names of keyword arguments, before the call)
                    nargs = arg_of(item, int)
                    if enters and item.name in ("CALL", "PRECALL") and point == index and nargs <= MAX_ENTERED:
                        resolving[point] = self._enter_callee(hooks.enter, position, nargs, item.location)
                    else:
                        resolve = hooks.resolve_star if item.name == "CALL_FUNCTION_EX" else hooks.resolve
                        resolving[point] = self._resolve_callee(resolve, position, item.location)
            elif self._is_decoration(items, index, defined):
                # A decoration ``deco(obj)`` is ``[deco, obj]``: its callee is the lower slot.
                defined.add(self._call_end(items, index))
                resolving[self._resolution_point(items, index)] = self._resolve_callee(hooks.resolve, 2, item.location)
        # The items between the places that change are copied as they are, a slice at a time.
        out: list[Item] = []
        start = 0
        for index in sorted(resolving.keys() | method_loads):
            out += items[start:index]
            if index in resolving:
                out += resolving[index]
            if index in sites:
                out += self._method_site(sites[index], instrs[index].location)
            elif index in method_loads:
                out += self._load_with_null(instrs[index])
            else:
                out.append(items[index])
            start = index + 1
        out += items[start:]
        return out

    @functools.cached_property
    def _scanned_names(self) -> dict[str, int]:
        """What :meth:`rewrite_calls` finds by name (``_instr.named``), as it tells them
        apart: the calls and definitions (0), else the method loads (1), else the constants'
        loads (2)."""
        return {"LOAD_CONST": 2, **dict.fromkeys(self.method_load_names, 1),
                **dict.fromkeys(self.consumer_names | _DEFINING, 0)}

    def _method_site_loads(self, items: Sequence[Item], paired: dict[int, frozenset[int]],
                           method_loads: set[int]) -> set[int]:
        """The method loads ``obj.name`` to make method sites (of ``method_loads``, the
        places of the method loads): those not on a global (see ``_on_a_global``) that feed
        only calls fed only by such loads, and not a star call (which resolves its own way)."""
        instrs = cast(Sequence[Instr], items)  # (calls and what pairs with them: instructions)
        calls = {call for call, producers in paired.items()
                 if instrs[call].name != "CALL_FUNCTION_EX"
                 and all(p in method_loads and instrs[p].name != "LOAD_SUPER_ATTR" and not self._on_a_global(items, p)
                         for p in producers)}
        feeds: dict[int, set[int]] = {}
        for call, producers in paired.items():
            for producer in producers:
                feeds.setdefault(producer, set()).add(call)
        while True:  # (a load that also feeds another call stays a plain load, and so do the others of that call)
            sited = {p for call in calls for p in paired[call] if feeds[p] <= calls}
            kept = {call for call in calls if paired[call] <= sited}
            if kept == calls:
                return sited
            calls = kept

    def _on_a_global(self, items: Sequence[Item], load: int) -> bool:
        """Is the method load at ``load`` made on a global or an attribute of one
        (``math.sqrt(x)``, ``os.path.join(a, b)``, ``Point.origin()``)?  That finds a module's
        function or a class's ``classmethod`` more often than a method: nothing a method
        site could leave unbound, and a plain attribute load finds it faster (a module's
        attribute load is specialized; the site's look-up is not)."""
        index = load - 1
        while index >= 0 and isinstance(item := items[index], Instr) and item.name == "LOAD_ATTR" \
                and not self.is_method_load(item):
            index -= 1
        receiver = items[index] if index >= 0 else None
        return isinstance(receiver, Instr) and receiver.name in ("LOAD_GLOBAL", "LOAD_NAME")

    def _method_site(self, site: tuple[object, ...], loc: Location) -> list[Item]:
        """A method load ``obj.name`` as ``site(obj, *rest)``, for ``(site, *rest)`` =
        ``hooks.method_site(name)``, ``site`` called with ``obj`` as its self (see
        ``_speedups.MethodSite``): it returns what to call with ``obj`` first, which with
        ``obj`` makes the pair a method load pushes, or what to call without ``obj`` in a
        1-tuple, which becomes the pair of a plain call, ``NULL`` beside the callee."""
        method, joined = Label(), Label()
        callee, *rest = site
        key = ("method", id(callee), len(rest))
        shape = self._shapes.get(key)
        if shape is None:  # (the site's instructions but the loads of ``rest`` and the jumps, in order)
            shape = self._shapes.remember(key, [
                make("COPY", 1),  # [obj, obj]
                self.load_hook(callee, None),
                make("SWAP", 2),  # [obj, site, obj]
                *self.call(len(rest), None),  # [obj, run]
                make("MATCH_SEQUENCE"),  # (a 1-tuple?)
                make("UNPACK_SEQUENCE", 1),
                make("SWAP", 2),
                make("POP_TOP"),  # [run]
                *self._null_beside(None),
                make("SWAP", 2),  # [run, obj]: run(obj, ...)
            ], callee)
        made = placed(shape, loc)
        jump = len(shape) - len(self._null_beside_shape()) - 4  # (where the first jump goes in ``made``)
        return [
            *made[:3],
            *(self.load_hook(argument, loc) for argument in rest),
            *made[3:jump],
            self.jump_if_false(method, loc),
            *made[jump:-1],
            make("JUMP_FORWARD", joined, loc),
            method,
            made[-1],
            joined,
        ]

    def _plain_calls(self, items: Sequence[Item], depths: Sequence[int | None]) -> set[int]:
        """The calls whose callee is a ``nooverdub`` marker a pass loaded: they stay plain
        (asked of a body with a marker only)."""

        def marker(instr: Instr, depth: int) -> int | None:
            return depth if _is_marker(instr) else None

        def callee(instr: Instr, depth: int) -> int | None:
            lower = self.consumer_depth(instr, depth)
            return None if lower is None else lower + (0 if self.null_after_callee else 1)

        return set(pair_by_depth(items, depths, marker, callee, _CONSTANT_LOADS, self.consumer_names))

    def _resolution_point(self, items: Sequence[object], consumer: int) -> int:
        """Where the resolve sequence goes: before the call and its ``KW_NAMES``/``PRECALL``."""
        point = consumer
        while point > 0 and getattr(items[point - 1], "name", None) in ("KW_NAMES", "PRECALL"):
            point -= 1
        return point

    def _is_decoration(self, items: Sequence[object], index: int, defined: set[int]) -> bool:
        """A ``CALL 0`` with no NULL slot right after a definition applies a decorator."""
        item = items[index]
        previous = index - 1
        while previous >= 0 and not isinstance(items[previous], Instr):
            previous -= 1
        return isinstance(item, Instr) and item.arg == 0 and item.name in ("CALL", "PRECALL") and previous in defined

    def _call_end(self, items: Sequence[object], index: int) -> int:
        """The index of the instruction that finishes the call consumed at ``index``."""
        return index + 1 if getattr(items[index], "name", None) == "PRECALL" else index

    def _builds_class(self, items: Sequence[object], index: int) -> bool:
        """Is this ``PUSH_NULL`` the one of a ``class`` statement's ``__build_class__`` call?"""
        neighbour = index - 1 if self.null_after_callee else index + 1
        item = items[neighbour] if 0 <= neighbour < len(items) else None
        return isinstance(item, Instr) and item.name == "LOAD_BUILD_CLASS"

    def _resolve_callee(self, resolve: object, position: int, loc: Location) -> list[Instr]:
        """Replace the stack item at ``position`` (1 = top) by ``resolve(item)``."""
        key = ("resolve", id(resolve), position)
        shape = self._shapes.get(key)
        if shape is None:  # (a SWAP, when the callee is not on top, then the call of ``resolve``)
            swap = [make("SWAP", position)] if position > 1 else []
            shape = self._shapes.remember(key, [*swap, self.load_hook(resolve, None), make("SWAP", 2),
                                                *self.call(0, None)], resolve)
        made = placed(shape, loc)
        return [*made, made[0]] if position > 1 else made  # (the same SWAP after the call)

    def _enter_callee(self, enter: object, position: int, nargs: int, loc: Location) -> list[Instr]:
        """Replace the callee at ``position`` (1 = top) of a call with ``nargs`` positional
        arguments, the top ``nargs`` items, by ``enter(callee, *arguments)``: the callee and
        the arguments are copied above the call's slots, ``enter`` called with them through
        the same slot trick as ``resolve`` (``enter`` in the lower slot, the callee's copy
        as its self), and its result swapped into the callee's place."""
        key = ("enter", id(enter), position, nargs)
        shape = self._shapes.get(key)
        if shape is None:
            copies = [make("COPY", position + 1)]  # the callee, then each argument in turn,
            copies += [make("COPY", nargs + 2) for _ in range(nargs)]  # each as deep as the last
            shape = self._shapes.remember(key, [self.load_hook(enter, None), *copies, *self.call(nargs, None),
                                                make("SWAP", position + 1), make("POP_TOP")], enter)
        return placed(shape, loc)

    def _load_with_null(self, instr: Instr) -> list[Instr]:
        """A method load as ``[NULL, bound]`` (``[bound, NULL]`` on 3.13)."""
        return [self.plain_load(instr), *placed(self._null_beside_shape(), instr.location)]

    def _null_beside_shape(self) -> list[Instr]:
        """:meth:`_null_beside`'s instructions, made once."""
        shape = self._shapes.get(("null",))
        if shape is None:
            shape = self._shapes.remember(("null",), self._null_beside(None))
        return shape

    def _null_beside(self, loc: Location) -> list[Instr]:
        """The callee on top of the stack made a callee pair with its ``NULL``."""
        if self.null_after_callee:
            return [make("PUSH_NULL", loc=loc)]
        return [make("PUSH_NULL", loc=loc), make("SWAP", 2, loc)]

    # -- operators -------------------------------------------------------------------

    def operator_site(self, instr: Instr, hooks: Hooks) -> list[Instr] | None:
        name, loc = instr.name, instr.location
        if name == "BINARY_OP":
            op = binary_op(arg_of(instr, BinaryOp))
            return None if op is None else self._binary(hooks.operator_site(op), loc)
        if name == "BINARY_SUBSCR":
            return self._binary(hooks.operator_site(operator.getitem), loc)
        if name in UNARY:
            return self._unary(hooks.operator_site(UNARY[name]), loc)
        if name == "GET_ITER":  # ``for x in obj`` starts with ``iter(obj)``
            return self._unary(hooks.operator_site(iter), loc)
        if name == "GET_YIELD_FROM_ITER":  # ``yield from obj``: ``iter(obj)`` unless a generator
            return [*self._unary(hooks.yield_from, loc), instr]
        if name == "COMPARE_OP":
            op, cast = compare_op(arg_of(instr, Compare))
            out = self._binary(hooks.operator_site(op), loc)
            return out + [make("TO_BOOL", loc=loc)] if cast else out
        if name == "CONTAINS_OP":  # ``a in b`` is ``operator.contains(b, a)``
            site = self.load_hook(hooks.operator_site(operator.contains), loc)
            out = [site, make("SWAP", 3, loc), *self.call(1, loc)]
            return out + self.negate(loc) if instr.arg else out
        if name == "STORE_SUBSCR":  # [v, a, i] -> setitem(a, i, v)
            return self._store(hooks.operator_site(operator.setitem), loc)
        if name == "DELETE_SUBSCR":
            return self._binary(hooks.operator_site(operator.delitem), loc) + [make("POP_TOP", loc=loc)]
        return None

    def negate(self, loc: Location) -> list[Instr]:
        return [make("UNARY_NOT", loc=loc)]

    def _binary(self, site: object, loc: Location) -> list[Instr]:
        """[a, b] -> site(a, b): the site below both operands, called with ``a`` as self."""
        return [
            self.load_hook(site, loc),
            make("SWAP", 3, loc),
            make("SWAP", 2, loc),
            *self.call(1, loc),
        ]

    def _unary(self, site: object, loc: Location) -> list[Instr]:
        return [self.load_hook(site, loc), make("SWAP", 2, loc), *self.call(0, loc)]

    def _store(self, site: object, loc: Location) -> list[Instr]:
        """[v, a, i] -> site(a, i, v), result dropped."""
        return [
            self.load_hook(site, loc),
            make("SWAP", 4, loc),
            *self.call(2, loc),
            make("POP_TOP", loc=loc),
        ]


_SHAPES_KEPT = 4096  # (the most shapes of site a family remembers)
_DEFINING = frozenset({"MAKE_FUNCTION", "SET_FUNCTION_ATTRIBUTE"})  # (what a decorator may apply to, made)
_CONSTANT_LOADS = frozenset({"LOAD_CONST"})  # (what may load a ``nooverdub`` marker)


def _is_marker(item: object) -> bool:
    return isinstance(item, Instr) and item.name == "LOAD_CONST" and type(item.arg) is nooverdub


def _varint(value: int) -> bytes:
    """``value`` in six-bit chunks, low first (``Objects/locations.md``)."""
    out = bytearray()
    while value > 0x3F:
        out.append(0x40 | (value & 0x3F))
        value >>= 6
    out.append(value)
    return bytes(out)


_VARINTS = tuple(_varint(value) for value in range(0x1000))  # (every number of one or two chunks)


def _unsigned(value: int) -> bytes:
    return _VARINTS[value] if value < 0x1000 else _varint(value)


def _signed(value: int) -> bytes:
    return _unsigned((-value << 1) | 1 if value < 0 else value << 1)


_SIGNED_VARINTS = tuple(_signed(value) for value in range(-0x800, 0x800))  # (by value + 0x800: one or two chunks)


class _NoPosition:
    """The position of ``_END``: no line, so it never joins the run before it."""
    lineno = end_lineno = col_offset = end_col_offset = None


_END = ((_NoPosition(), 0),)
_Position = tuple[int | None, int | None, int | None, int | None]  # line, end line, column, end column


def _line_table(first_line: int, runs: Iterable[tuple[Location | CompiledPosition, int]]) -> bytes:
    """The 3.11+ ``co_linetable`` of instructions assembled from first to last, given as
    ``runs``: each one's position and code units (its ``EXTENDED_ARG``\\s included, a
    ``CACHE`` entry one of its own), as ``bytecode`` (0.19) writes it, with one fix.

    Written here rather than by ``bytecode``'s ``to_code`` (which ``_rewriter.assemble``
    asks to leave it empty): the package's encoder, a method call and a dataclass
    comparison per instruction and a bytearray per number, was a seventh of a cold
    rewrite (docs/internals.md, "Where a cold import's time goes").  The same entries in
    the same forms: runs of instructions with equal positions, an entry per eight code
    units; the short form for a column below 72 on the line of the entry before, the
    one-line form for the next two lines, else the long form.  The fix: ``bytecode``
    writes the one-line form (a header byte, then the start and end column as one byte
    each) for columns up to 255, but every byte of an entry after the first must be below
    128: CPython finds where an entry starts by that high bit when it walks the table
    backwards, which it does to look up a line number (tracebacks, ``co_lines``), and a
    column byte of 128 or more was taken for an entry of its own, giving the instructions
    after it the line of an earlier one.  Such a column takes the long form here.

    One loop, the entries written inline and the numbers' forms looked up rather than
    computed: a call per run and per number was most of the table's cost (a third of it
    saved; docs/performance.md, "Our passes cheaper").  A last pseudo-instruction
    (``_END``, never equal to a run) writes the last run's entries.
    """
    out = bytearray()
    line = first_line  # what the next entry's line is a delta from
    run: _Position | None = None
    units = 0
    seen: object = out  # the last instruction's location object (none yet)
    joins = False  # does an instruction at the run's position join the run (it has a line)?
    varints, signed = _VARINTS, _SIGNED_VARINTS
    for loc, size in itertools.chain(runs, _END):
        if loc is seen and joins:  # (one object: CACHE entries, the instructions of a site)
            units += size
            continue
        seen = loc
        if loc is None:  # (an instruction without a position continues the run before it)
            here = run if run is not None else (first_line, None, None, None)
        elif type(loc) is CompiledPosition:  # (a compiled position: the four already, read as a tuple)
            here = loc
        else:
            here = (loc.lineno, loc.end_lineno, loc.col_offset, loc.end_col_offset)
        if here == run and joins:
            units += size
            continue
        if run is not None:  # the run's entries, eight code units to one
            start, end, column, end_column = run
            while True:
                header = 0x87 if units >= 8 else 0x7F + units
                if start is None:  # no position at all
                    out.append(header | 15 << 3)
                elif column is None:  # a line, no columns
                    if end is not None and end != start:
                        raise ValueError(f"An instruction cannot have no column offset and span multiple lines "
                                         f"(lineno: {start}, end lineno: {end}")
                    out.append(header | 13 << 3)
                    delta = start - line
                    out += signed[delta + 0x800] if -0x800 <= delta < 0x800 else _signed(delta)
                    line = start
                elif end_column is None or end is None:
                    raise ValueError(f"a position with a column has an end line and column, not {run}")
                elif end == start:
                    delta = start - line
                    if delta == 0 and column < 72 and end_column - column <= 15:  # the short form
                        out.append(header | (column >> 3) << 3)
                        out.append(((column & 7) << 4) + end_column - column)
                    elif 1 <= delta <= 2 and column < 0x80 and end_column < 0x80:  # the one-line form
                        out.append(header | (10 + delta) << 3)
                        out.append(column)
                        out.append(end_column)
                        line = start
                    else:  # the long form, on one line
                        out.append(header | 14 << 3)
                        out += signed[delta + 0x800] if -0x800 <= delta < 0x800 else _signed(delta)
                        out.append(0)
                        out += varints[column + 1] if column < 0xFFF else _unsigned(column + 1)
                        out += varints[end_column + 1] if end_column < 0xFFF else _unsigned(end_column + 1)
                        line = start
                else:  # the long form
                    out.append(header | 14 << 3)
                    delta = start - line
                    out += signed[delta + 0x800] if -0x800 <= delta < 0x800 else _signed(delta)
                    out += varints[end - start] if end - start < 0x1000 else _unsigned(end - start)
                    out += varints[column + 1] if column < 0xFFF else _unsigned(column + 1)
                    out += varints[end_column + 1] if end_column < 0xFFF else _unsigned(end_column + 1)
                    line = start
                units -= 8
                if units <= 0:
                    break
        run, units, joins = here, size, here[0] is not None
    return bytes(out)


_assembly = optional(".rewrite._assembly")
_decoding = optional(".rewrite._decoding")  # (the decoder's loop in C: own_decoder hands it the decoder)
if _assembly is not None:
    _assembly.set_compiled_position(CompiledPosition)
line_table: Callable[[int, Iterable[tuple[Location | CompiledPosition, int]]], bytes] = (
    _line_table if _assembly is None else _assembly.line_table)
"""The line table's encoder this process uses: ``_assembly.c``'s where it is built (the same
bytes; docs/internals.md, "An assembler of our own"), else :func:`_line_table`, the
reference."""
