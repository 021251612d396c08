"""Tagging: metadata that travels with values through code run under one context.

Cassette tags a value by wrapping it in a ``Tagged`` struct that carries the context's tag
and the metadata, and rewrites the IR so that primitives get untagged arguments.  Here a
tagged value is an instance of ``Tagged[C]``, a wrapper class made once per value class
``C``: its ``__class__`` is ``C`` (so ``isinstance(tagged, C)`` holds), its dunders are
``C``'s own, delegated to the value, and its classes mirror ``C``'s bases (``Tagged[bool]``
is a subclass of ``Tagged[int]``), so dispatch annotations can name ``ch.Tagged[float]``.

A wrapper belongs to one *tag*, the object ``enabletagging`` puts in a context's ``tag``
slot: only contexts holding that tag see it as tagged.  Where the wrapper goes is plain
Python: locals, containers, attributes, arguments.  Three places unwrap it:

- the default ``fallback`` -- a primitive (C code, or a function outside the context's
  scope) gets plain arguments, except the few builtins that store or pass values on
  (``list.append``, ``setattr`` ...: see ``_PASSES_ON``), so tags flow through containers;
- an operator that no overload handles computes on the plain values (its result is plain);
- the end of the context's dynamic extent (its outermost activation returns): the result
  of ``overdub`` is unwrapped, and wrappers made inside the extent that are still alive
  are replaced by their values wherever Python lets us find them (``_scrub``), so that a
  wrapper never outlives its context unasked.  ``overdub_tagged`` is the opt-out.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import collections
import functools
import gc
import math
import operator
import types
from types import FunctionType, MethodType
from typing import TYPE_CHECKING, Any, Callable, Iterator, NoReturn

from . import context_stack, dispatch, generics
from .runtime import special_methods, callees
from ._constant import Constant
from ._native import runtime as _runtime


class _NoMetaData(Constant):
    """Cassette's ``NoMetaData()``: what ``metadata`` gives for a value with none, and
    what ``metadatatype`` answers for a value type that may carry none."""


NoMetaData = _NoMetaData()


class Tag:
    """What ``enabletagging`` puts in a context's ``tag``: the identity tagged values
    carry, and the state of the context's dynamic extent.

    ``depth``: activations of contexts holding this tag not yet ended (``context_stack.push``
    and ``pop`` count them); ``live``: wrappers made inside the extent, of this
    ``generation``, not yet collected; ``keep``: ``overdub_tagged`` calls running.
    """

    __slots__ = ("f", "depth", "live", "generation", "keep")

    def __init__(self, f: Any) -> None:
        self.f = f
        self.depth = 0
        self.live = 0
        self.generation = 0
        self.keep = 0

    def __repr__(self) -> str:
        return f"<tag for {getattr(self.f, '__qualname__', None) or self.f!r}>"

    # What the runtime (``callees``) asks of a tagging context, through its tag: the
    # runtime sits below this module.

    def leave(self, out: Any) -> Any:
        """What an activation of this tag's context hands back as it ends (:func:`leave`)."""
        return _leave(self, out)

    def for_primitive(self, f: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments the primitive ``f`` gets under this tag's context (:func:`for_primitive`)."""
        return for_primitive(f, args, kwargs)


# -- the wrappers ------------------------------------------------------------------------


class _PureFields:
    """The fields of a wrapper (``_speedups.TaggedFields`` in C), and its ``__del__``:
    one live wrapper less for the end of the extent to find."""

    __slots__ = ("_ch_value", "_ch_tag", "_ch_meta", "_ch_generation")
    _ch_value: Any
    _ch_tag: Tag
    _ch_meta: Any
    _ch_generation: int | None  # the tag's generation it was made in; None: made outside the extent

    def __del__(self) -> None:
        try:
            tag = self._ch_tag
            if self._ch_generation == tag.generation:
                tag.live -= 1
        except AttributeError:  # a half-made wrapper, or modules cleared at exit
            pass


if TYPE_CHECKING:  # (a base class mypy can see)
    _Fields = _PureFields
else:
    _Fields = _runtime.accelerated("TaggedFields", _PureFields)


class Tagged(_Fields):
    """A value tagged with respect to one context: ``Tagged[C]`` for a value of class ``C``.

    Not made directly: ``ch.tag(value, ctx, metadata)``.  Its attributes are the value's:
    a field of the value (instance ``__dict__`` or ``__slots__``) reads as the field's own
    tagged value (a wrapper stored there, else the field's value tagged with no metadata);
    a Python method binds to the wrapper, so its body sees a tagged ``self``.
    """

    __slots__ = ()

    _ch_value_type: type = object

    def __class_getitem__(cls, value_type: type) -> type[Tagged]:
        """``Tagged[C]``: the class of tagged values of class ``C`` (for annotations)."""
        if not isinstance(value_type, type):
            raise TypeError(f"Tagged[...] takes a class, not {value_type!r}")
        return wrapper_class(value_type)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_ch_"):  # a slot not set: not a wrapper made by tag()
            raise AttributeError(name)
        value = self._ch_value
        kind = type(value)
        found = special_methods.lookup(kind, name)
        if type(found) is types.MemberDescriptorType or _in_instance_dict(value, name, found):
            return _field(self, getattr(value, name))
        if type(found) is FunctionType:  # a Python method: its body sees the tagged self
            return MethodType(found, self)
        if type(found) in _C_METHODS and _running_in(self._ch_tag):
            # The program's own code, in the context: the call site presents it as
            # (C.method, tagged receiver, ...), so overloads see the tag.
            return MethodType(found, self)
        return getattr(value, name)

    def __setattr__(self, name: str, item: Any) -> None:
        setattr(self._ch_value, name, item)  # a wrapper stored there stays one: tags flow

    def __delattr__(self, name: str) -> None:
        delattr(self._ch_value, name)

    def __repr__(self) -> str:
        if _running_in(self._ch_tag):  # the program, printing its values: plain
            return repr(self._ch_value)
        meta = "" if self._ch_meta is NoMetaData else f", metadata={self._ch_meta!r}"
        return f"Tagged({self._ch_value!r}{meta})"

    def __dir__(self) -> list[str]:
        return dir(self._ch_value)


_set_value, _set_tag, _set_meta, _set_generation = (  # what the slot descriptors (or C members) set
    vars(_Fields)[name].__set__ for name in ("_ch_value", "_ch_tag", "_ch_meta", "_ch_generation"))
_new = object.__new__
_C_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType)
WRAPPERS: set[type] = set()  # every Tagged[C]: ``type(x) in WRAPPERS`` is the cheap test
_classes: dict[type, type[Tagged]] = {}


def _in_instance_dict(value: Any, name: str, found: Any) -> bool:
    """Is ``value.name`` read from the instance's own ``__dict__`` (a field)?"""
    if hasattr(type(found), "__set__"):  # a data descriptor (property ...) wins over the dict
        return False
    try:
        own = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return False
    return type(own) is dict and name in own


def _field(owner: Tagged, item: Any) -> Any:
    """A field of a tagged object: its own wrapper, else its value tagged with no metadata."""
    tag = owner._ch_tag
    if type(item) in WRAPPERS and item._ch_tag is tag:
        return item
    return _make(item, tag, NoMetaData)


def _running_in(tag: Tag) -> bool:
    """Is the program running in a context holding ``tag`` (it is the innermost active)?

    Overloads and hooks run with their context popped: they see ``False``.
    """
    entry = context_stack.top()
    return entry is not None and entry.ctx.tag is tag


# The dunders a wrapper delegates, each when its value's class defines it.  Operands that
# are wrappers are unwrapped: code that is not overdubbed computes on plain values.

def _plain(x: Any) -> Any:
    while type(x) in WRAPPERS:
        x = x._ch_value
    return x


def _binary(op: Callable[[Any, Any], Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def forward(self: Tagged, other: Any) -> Any:
        return op(self._ch_value, _plain(other))

    def reflected(self: Tagged, other: Any) -> Any:
        return op(_plain(other), self._ch_value)

    return forward, reflected


def _unary(op: Callable[[Any], Any]) -> Callable[..., Any]:
    def method(self: Tagged) -> Any:
        return op(self._ch_value)

    return method


def _with_args(op: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: Tagged, *args: Any) -> Any:
        return op(self._ch_value, *map(_plain, args))

    return method


def _pow(self: Tagged, other: Any, mod: Any = None) -> Any:
    return pow(self._ch_value, _plain(other)) if mod is None else pow(self._ch_value, _plain(other), _plain(mod))


def _rpow(self: Tagged, other: Any, mod: Any = None) -> Any:
    return pow(_plain(other), self._ch_value) if mod is None else pow(_plain(other), self._ch_value, _plain(mod))


def _round(self: Tagged, *ndigits: Any) -> Any:
    return round(self._ch_value, *map(_plain, ndigits))


def _setitem(self: Tagged, key: Any, item: Any) -> None:
    self._ch_value[_plain(key)] = item  # the item as it is: a wrapper stored stays one


def _call(self: Tagged, *args: Any, **kwargs: Any) -> Any:
    return self._ch_value(*args, **kwargs)


def _exit(self: Tagged, *exc_info: Any) -> Any:
    return self._ch_value.__exit__(*exc_info)


_BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "matmul": operator.matmul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod, "divmod": divmod,
    "lshift": operator.lshift, "rshift": operator.rshift, "and": operator.and_, "or": operator.or_,
    "xor": operator.xor,
}
_DUNDERS: dict[str, Callable[..., Any]] = {}
for _dunder, _op in _BINARY.items():
    _DUNDERS[f"__{_dunder}__"], _DUNDERS[f"__r{_dunder}__"] = _binary(_op)
del _dunder, _op
_DUNDERS.update({
    "__pow__": _pow, "__rpow__": _rpow, "__round__": _round, "__setitem__": _setitem, "__call__": _call,
    "__exit__": _exit,
    **{f"__{name}__": _with_args(getattr(operator, name)) for name in ("lt", "le", "gt", "ge", "eq", "ne")},
    "__neg__": _unary(operator.neg), "__pos__": _unary(operator.pos), "__abs__": _unary(abs),
    "__invert__": _unary(operator.invert), "__int__": _unary(int), "__float__": _unary(float),
    "__complex__": _unary(complex), "__index__": _unary(operator.index), "__bool__": _unary(bool),
    "__trunc__": _unary(math.trunc), "__floor__": _unary(math.floor), "__ceil__": _unary(math.ceil),
    "__str__": _unary(str), "__bytes__": _unary(bytes), "__hash__": _unary(hash), "__len__": _unary(len),
    "__iter__": _unary(iter), "__reversed__": _unary(reversed), "__next__": _unary(next),
    "__enter__": _unary(lambda v: v.__enter__()), "__length_hint__": _unary(operator.length_hint),
    "__format__": _with_args(format), "__getitem__": _with_args(operator.getitem),
    "__delitem__": _with_args(operator.delitem), "__contains__": _with_args(operator.contains),
})


def wrapper_class(value_type: type) -> type[Tagged]:
    """``Tagged[value_type]``, made on first use; its bases mirror ``value_type``'s."""
    found = _classes.get(value_type)
    if found is not None:
        return found
    if value_type is object:
        bases: tuple[type, ...] = (Tagged,)
    else:
        bases = tuple(wrapper_class(base) for base in value_type.__bases__)
    namespace: dict[str, Any] = {"__slots__": (), "__class__": value_type, "_ch_value_type": value_type,
                                 "__module__": "cassette_hook", "__doc__": Tagged.__doc__}
    own = value_type.__dict__
    for name, method in _DUNDERS.items():
        if name in own:
            namespace[name] = None if own[name] is None else method
    if "__eq__" in namespace and "__hash__" not in namespace:  # a class statement would set it to None
        namespace["__hash__"] = None if getattr(value_type, "__hash__", None) is None else _DUNDERS["__hash__"]
    cls: type[Tagged] = type(f"Tagged[{value_type.__qualname__}]", bases, namespace)
    _classes[value_type] = cls
    WRAPPERS.add(cls)
    return cls


def _make(value: Any, tag: Tag, meta: Any) -> Tagged:
    cls = _classes.get(type(value)) or wrapper_class(type(value))
    wrapper = _new(cls)
    _set_value(wrapper, value)
    _set_tag(wrapper, tag)
    _set_meta(wrapper, meta)
    if tag.depth:  # made inside the extent: counted, so that its end can find it
        _set_generation(wrapper, tag.generation)
        tag.live += 1
    else:  # made by the caller outside: the caller's own
        _set_generation(wrapper, None)
    return wrapper


# -- the public functions ----------------------------------------------------------------


def enabletagging(ctx: context_stack.Context, f: Any) -> context_stack.Context:
    """A copy of ``ctx`` with tagging enabled, with a tag of its own, for running ``f``.

    The copy is an instance of a subclass of ``type(ctx)`` (made once per class), as in
    Cassette, where the tag is part of the context's type: overloads for ``type(ctx)``
    apply to it, ``hastagging(type(copy))`` is true, and its plan is never the fast one,
    since its primitives must get untagged arguments.
    """
    cls = _tagging_class(type(context_stack.checked(ctx, "enabletagging")))
    copy: context_stack.Context = object.__new__(cls)
    copy.__dict__.update(ctx.__dict__)
    copy.tag = Tag(f)
    return copy


class _TaggingContext(context_stack.Context):
    """Marks the classes ``enabletagging`` makes (``hastagging``).  Its ``with`` exit is
    ``Context.__exit__``, which ends the tag's extent after the pop
    (``context_stack.pop_at_exit``): a Python ``__exit__`` here could be interrupted
    before it popped (docs/internals.md, "Interrupts")."""

    tags_values = True  # read by ``plan.Plan``: never the fast plan


_TAGGING_CLASS = "__cassette_hook_tagging__"


def _tagging_class(cls: type[context_stack.Context]) -> type[context_stack.Context]:
    """The tagging subclass of ``cls``, made once and held by ``cls`` itself: a table
    keyed by ``cls`` would keep it alive, as the subclass refers to it (docs/api.md,
    "Lifetime of context classes")."""
    if issubclass(cls, _TaggingContext):
        return cls
    found: type[context_stack.Context] | None = cls.__dict__.get(_TAGGING_CLASS)
    if found is None:
        found = types.new_class(cls.__name__, (cls, _TaggingContext))
        found.__qualname__, found.__module__ = cls.__qualname__, cls.__module__
        type.__setattr__(cls, _TAGGING_CLASS, found)
    return found


def hastagging(ctx: context_stack.Context | type[context_stack.Context]) -> bool:
    """Is tagging enabled for this context (or for every instance of this context class)?"""
    if isinstance(ctx, type):
        if not issubclass(ctx, context_stack.Context):
            raise TypeError(context_stack.not_a_context(ctx, "hastagging"))
        return issubclass(ctx, _TaggingContext)
    return isinstance(context_stack.checked(ctx, "hastagging"), _TaggingContext)


def tag(value: Any, ctx: context_stack.Context, metadata: Any = NoMetaData) -> Any:
    """``value`` tagged with respect to ``ctx``, carrying ``metadata``.

    ``metadata`` must be an instance of what ``metadatatype(type(ctx), type(value))``
    allows (by default, no metadata at all).  Tagging a value already tagged for ``ctx``
    tags its plain value anew.
    """
    tag_ = ctx.tag if isinstance(ctx, _TaggingContext) else None
    if tag_ is None:
        _not_tagging(ctx)
    kind = type(value)
    if kind in WRAPPERS and value._ch_tag is tag_:
        value = value._ch_value
        kind = type(value)
    if metadata is not NoMetaData:
        allowed = _allowed.get((type(ctx), kind), NoMetaData) if _allowed_generation[0] == dispatch.generation \
            else NoMetaData
        if allowed is NoMetaData or not isinstance(metadata, allowed):  # type: ignore[arg-type]  # a class or tuple
            _check_metadata(type(ctx), value, metadata)
    return _make(value, tag_, metadata)


def _not_tagging(ctx: Any) -> NoReturn:
    from ._saferepr import context_repr

    raise TypeError(f"tag(): tagging is not enabled for {context_repr(context_stack.checked(ctx, 'tag'))}; "
                    "tag values for ch.enabletagging(ctx, f), the copy it returns")


# (context class, value class) -> what metadatatype allowed, while no method changed: tag()
# is on the path of every overloaded operation, so its check is one dict lookup.
_allowed: dict[tuple[type, type], Any] = {}
_allowed_generation = [-1]


def _forget_allowed_before_full_collections(phase: str, info: dict[str, int]) -> None:
    """Let a full collection free the context classes only ``_allowed`` holds (emptied in
    place: the C path reads the same dict)."""
    if phase == "start" and info["generation"] == 2:
        _allowed.clear()


gc.callbacks.append(_forget_allowed_before_full_collections)


def untag(x: Any, ctx: context_stack.Context) -> Any:
    """The plain value of ``x`` if it is tagged for ``ctx``, else ``x`` itself."""
    if type(x) in WRAPPERS and x._ch_tag is ctx.tag:
        return x._ch_value
    return x


def istagged(x: Any, ctx: context_stack.Context) -> bool:
    """Is ``x`` tagged for ``ctx`` (another context's tag does not count)?"""
    return type(x) in WRAPPERS and x._ch_tag is ctx.tag


def metadata(x: Any, ctx: context_stack.Context) -> Any:
    """The metadata ``x`` carries for ``ctx``, or ``NoMetaData``."""
    if type(x) in WRAPPERS and x._ch_tag is ctx.tag:
        return x._ch_meta
    return NoMetaData


def hasmetadata(x: Any, ctx: context_stack.Context) -> bool:
    """Does ``x`` carry metadata for ``ctx``?"""
    return type(x) in WRAPPERS and x._ch_tag is ctx.tag and x._ch_meta is not NoMetaData


def istaggedtype(t: type, ctx: context_stack.Context | type[context_stack.Context]) -> bool:
    """Is ``t`` the class of tagged values (``type(tag(x, ctx))``)?

    Wrapper classes are shared by all contexts (the tag is in the instance), so the
    answer does not depend on ``ctx``.
    """
    return isinstance(t, type) and issubclass(t, Tagged)


def untagtype(t: type, ctx: context_stack.Context | type[context_stack.Context]) -> type:
    """``type(untag(x, ctx))`` for ``x`` of class ``t``: ``untagtype(type(tag(x, ctx)), ctx) is type(x)``."""
    return t._ch_value_type if isinstance(t, type) and issubclass(t, Tagged) else t


def overdub_tagged(ctx: context_stack.Context, f: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``overdub(ctx, f, ...)``, returning the result as the context left it.

    ``overdub`` unwraps what its context's extent returns and replaces the wrappers that
    would survive it; this keeps them, for a caller that wants the metadata of the
    result (``metadata(out, ctx)``).  The wrappers are then the caller's: outside the
    context they behave as their values.
    """
    tag_ = ctx.tag if isinstance(ctx, _TaggingContext) else None
    if tag_ is None:
        from ._saferepr import context_repr

        raise TypeError(f"overdub_tagged(): tagging is not enabled for "
                        f"{context_repr(context_stack.checked(ctx, 'overdub_tagged'))}")
    tag_.keep += 1
    try:
        return generics.overdub(ctx, f, *args, **kwargs)
    finally:
        tag_.keep -= 1


# -- metadatatype --------------------------------------------------------------------------


def _no_metadata(ctx_type: Any, value_type: Any) -> Any:
    return NoMetaData


class MetadataType(dispatch.Generic):
    """``metadatatype(ctx_type, value_type)``: what metadata values of ``value_type`` may
    carry in contexts of ``ctx_type`` -- a class, a tuple or union of classes, ``object``
    for anything, or ``NoMetaData`` for none (the default).

    Its arguments are classes, so it dispatches on them (Julia's ``::Type{<:Ctx}``): a
    method annotated ``(ctx: Ctx, value: float)`` applies to ``Ctx`` and its subclasses
    and to ``float`` and its subclasses; ``Is[float]`` means ``float`` exactly.  The
    methods, their specificity and ambiguity are the dispatch engine's.
    """

    def __init__(self, name: str, default: Callable[..., Any] | None = None, doc: str | None = None) -> None:
        super().__init__(name, default, doc)
        self._generation = -1

    def _forget(self) -> None:
        """Also the answers by pairs of classes, which hold the context classes asked about."""
        super()._forget()
        self._cache: dict[tuple[Any, Any], Callable[..., Any]] = {}

    def __call__(self, ctx_type: Any, value_type: Any) -> Any:  # two classes, not arguments to dispatch on
        if self._generation != dispatch.generation:  # a method changed, here or elsewhere
            self._cache.clear()
            self._generation = dispatch.generation
        method = self._cache.get((ctx_type, value_type))
        if method is None:
            method = self._cache[ctx_type, value_type] = self._resolve_types(ctx_type, value_type)
        return method(ctx_type, value_type)

    def resolve(self, args: tuple[object, ...]) -> Callable[..., Any]:
        if len(args) != 2:
            raise TypeError("metadatatype() takes a context class and a value class")
        return self._resolve_types(*args)

    def _resolve_types(self, ctx_type: Any, value_type: Any) -> Callable[..., Any]:
        if not (isinstance(ctx_type, type) and issubclass(ctx_type, context_stack.Context)):
            raise TypeError(f"metadatatype() takes a context class first, not {ctx_type!r}: "
                            "metadatatype(type(ctx), type(value))")
        if not isinstance(value_type, type):
            raise TypeError(f"metadatatype() takes a value class second, not {value_type!r}")
        args = (ctx_type, value_type)
        self._settle()
        applicable = [m for m in self._methods_for(ctx_type)
                      if m.required <= 2 and (len(m.params) >= 2 or m.varargs is not None)
                      and all(_type_matches(m.pattern(i), t) for i, t in enumerate(args))]
        if not applicable:
            return self.default  # type: ignore[return-value]  # set: _no_metadata
        best = applicable[0]
        for m in applicable[1:]:
            if _more_specific(m, best):
                best = m
        for m in applicable:
            if m is not best and not _more_specific(best, m):
                raise dispatch.AmbiguityError(
                    f"metadatatype: ambiguous for ({ctx_type.__qualname__}, {value_type.__qualname__}): "
                    f"{dispatch._describe(best.func)} and {dispatch._describe(m.func)} both apply and "
                    "neither is more specific; define a method more specific than both")
        return best.func

    def _signature(self, func: Callable[..., Any], self_type: type | None) -> Any:
        method = super()._signature(func, self_type)
        where = f"metadatatype: cannot register {dispatch._describe(func)}"
        taken = len(method.params)
        if taken < 2 and method.varargs is None:  # (it would apply to no call: refused as malformed)
            raise TypeError(f"{where}: it takes {taken or 'no'} positional parameter{'s' * (taken != 1)}, but it is "
                            "called as metadatatype(ctx_type, value_type): give it two, (ctx, value)")
        if method.required > 2:
            raise TypeError(f"{where}: it needs {method.required} positional arguments, but it is called with two, "
                            "as metadatatype(ctx_type, value_type): give the parameters after the second defaults")
        for i in range(2):
            pattern = method.pattern(i)
            if isinstance(pattern, dispatch.Parametric) or any(
                    isinstance(m, dispatch.Parametric) for m in getattr(pattern, "members", ())):
                raise TypeError(f"metadatatype: cannot register {dispatch._describe(func)}: its parameter {i} is "
                                f"{pattern!r}, which looks at an instance's metadata; metadatatype is called "
                                "with classes")
        return method


def _type_matches(pattern: Any, t: type) -> bool:
    """Does the class ``t`` belong to the set of classes ``pattern`` names?"""
    if pattern is None:
        return False
    if pattern is dispatch.ANY:
        return True
    if isinstance(pattern, dispatch.Is):
        return any(o is t for o in pattern.objects)
    members = getattr(pattern, "members", None)
    if members is not None:
        return any(_type_matches(m, t) for m in members)
    return issubclass(t, pattern.cls)


def _type_le(p: Any, q: Any) -> bool:
    """Is every class ``p`` names also named by ``q``?  (``Pattern.__le__`` for patterns
    read as sets of classes: there ``Is[bool]`` names the class ``bool``, a subset of ``int``.)"""
    if q is dispatch.ANY:
        return True
    if p is dispatch.ANY:
        return False
    if hasattr(p, "members"):
        return all(_type_le(m, q) for m in p.members)
    if isinstance(p, dispatch.Is):
        return all(_type_matches(q, o) for o in p.objects if isinstance(o, type))
    if hasattr(q, "members"):
        return any(_type_le(p, m) for m in q.members)
    return not isinstance(q, dispatch.Is) and issubclass(p.cls, q.cls)


def _more_specific(a: Any, b: Any) -> bool:
    a_le_b = all(_type_le(a.pattern(i), b.pattern(i)) for i in range(2))
    return a_le_b and not all(_type_le(b.pattern(i), a.pattern(i)) for i in range(2))


metadatatype = MetadataType("metadatatype", _no_metadata, MetadataType.__doc__)


def _check_metadata(ctx_type: type, value: Any, meta: Any) -> None:
    allowed = metadatatype(ctx_type, type(value))
    if _allowed_generation[0] != dispatch.generation:
        _allowed.clear()
        _allowed_generation[0] = dispatch.generation
    _allowed[ctx_type, type(value)] = allowed
    if allowed is NoMetaData or not isinstance(meta, allowed):
        what = "no metadata" if allowed is NoMetaData else f"metadata of type {_name(allowed)}"
        from ._saferepr import short_repr

        raise TypeError(
            f"tag(): a value of type {type(value).__qualname__} may carry {what} in context "
            f"{ctx_type.__qualname__}, and {short_repr(meta)} ({type(meta).__qualname__}) was given; allow it with "
            f"@ch.metadatatype.register def _(ctx: {ctx_type.__qualname__}, value: "
            f"{type(value).__qualname__}): return {type(meta).__qualname__}")


def _name(allowed: Any) -> str:
    if isinstance(allowed, tuple):
        return " | ".join(map(_name, allowed))
    return getattr(allowed, "__qualname__", None) or repr(allowed)


# -- primitives get plain arguments ---------------------------------------------------------


def for_primitive(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments a tagging context's default ``fallback`` hands the primitive ``f``.

    Wrappers (of any context: a primitive is C code, or code the context does not see
    into) are unwrapped, one level deep; the ``str.join`` family gets its iterable's
    items unwrapped too (it accepts nothing but ``str``/``bytes``).  Builtins that store
    or pass on their arguments (``_PASSES_ON``) get them as they are, so that a tagged
    value appended to a list, or stored with ``setattr``, is still tagged when read back.
    """
    if id(f) in _SPECIAL:
        if id(f) in _PASSES_ON:
            return args, kwargs
        if f is operator.setitem and len(args) == 3:  # ``obj[key] = item``: the item is stored as it is
            return (_plain(args[0]), _plain(args[1]), args[2]), kwargs
        if id(f) in _JOINS and len(args) == 2:
            return (_plain(args[0]), [_plain(item) for item in _plain(args[1])]), kwargs
    for a in args:
        if type(a) in WRAPPERS:
            args = tuple(map(_plain, args))
            break
    if kwargs:
        for v in kwargs.values():
            if type(v) in WRAPPERS:
                kwargs = {k: _plain(v) for k, v in kwargs.items()}
                break
    return args, kwargs


def _passes_on() -> set[int]:
    kinds = (list, dict, set, collections.deque)
    names = ("append", "appendleft", "insert", "extend", "extendleft", "__setitem__", "setdefault", "update",
             "get", "pop", "add", "__init__")
    stored: list[Any] = [getattr(kind, name) for kind in kinds for name in names if hasattr(kind, name)]
    stored += [list, tuple, dict, set, frozenset, collections.deque, functools.partial,
               getattr, setattr, hasattr, delattr, object.__setattr__, types.GeneratorType.send,
               types.CoroutineType.send, types.AsyncGeneratorType.asend, types.SimpleNamespace]
    own = (tag, untag, istagged, metadata, hasmetadata, istaggedtype, untagtype, enabletagging, overdub_tagged,
           hastagging, generics.overdub, callees.recurse, generics.fallback, callees.canrecurse)
    return {id(f) for f in (*stored, *own)}


_JOINS = {id(str.join), id(bytes.join), id(bytearray.join)}
_PASSES_ON: set[int] = set()


# -- the end of the extent ------------------------------------------------------------------


def _leave(tag_: Tag | None, out: Any) -> Any:
    """What the extent of ``tag_`` hands back, once its context's outermost activation
    ended: ``out`` unwrapped, and no wrapper made inside the extent left anywhere we can
    reach."""
    if tag_ is None or tag_.depth or tag_.keep:
        if tag_ is not None and tag_.keep and not tag_.depth:
            _forget(tag_)  # the caller asked for them: its own from now on
        return out
    if type(out) in WRAPPERS and out._ch_tag is tag_:
        out = out._ch_value  # (the program may have stored it too: the search below still runs)
    if tag_.live > 0:
        out = _scrub(tag_, out)
    return out


def _forget(tag_: Tag) -> None:
    tag_.generation += 1
    tag_.live = 0


def _scrub(tag_: Tag, out: Any) -> Any:
    """Replace the surviving wrappers of ``tag_`` by their values in every list, dict, set,
    cell and object that holds them (tuples and frozensets are rebuilt, and replaced in
    turn).  Frames cannot be changed: a generator made in the extent keeps its locals."""
    replace: dict[int, Any] = {}
    olds: list[Any] = [o for o in gc.get_objects() if type(o) in WRAPPERS and o._ch_tag is tag_]
    for old in olds:
        replace[id(old)] = old._ch_value
    _forget(tag_)
    keep_alive = list(olds)  # ids stay valid while their objects live
    mine = _Mine()  # ends the argument tuples below: holders of these are ours, not the program's
    while olds:
        asked = (*olds, mine)
        olds.clear()
        for holder in gc.get_referrers(*asked):
            if holder is keep_alive or holder is replace or holder is olds or type(holder) is types.FrameType:
                continue
            if type(holder) is tuple and holder and holder[-1] is mine:
                continue
            new = _replaced(holder, replace)
            if new is not None and id(holder) not in replace:
                replace[id(holder)] = new
                keep_alive.append(holder)
                olds.append(holder)
    return replace.get(id(out), out)


class _Mine:
    __slots__ = ()


def _replaced(holder: Any, replace: dict[int, Any]) -> Any:
    """Replace, in ``holder``, what ``replace`` maps; a tuple or frozenset is returned rebuilt."""
    kind = type(holder)
    if kind is list or isinstance(holder, list):
        for i, item in enumerate(holder):
            if id(item) in replace:
                holder[i] = replace[id(item)]
    elif isinstance(holder, dict):
        for key, item in list(holder.items()):
            if id(key) in replace:
                del holder[key]
                key = replace[id(key)]
            holder[key] = replace.get(id(item), item)
    elif isinstance(holder, set):
        for item in [i for i in holder if id(i) in replace]:
            holder.discard(item)
            holder.add(replace[id(item)])
    elif kind is types.CellType:
        if id(holder.cell_contents) in replace:
            holder.cell_contents = replace[id(holder.cell_contents)]
    elif kind is tuple or kind is frozenset:
        return kind(replace.get(id(item), item) for item in holder)
    elif kind not in WRAPPERS and not isinstance(holder, (type, types.ModuleType, FunctionType)):
        _replace_fields(holder, replace)
    return None


def _replace_fields(obj: Any, replace: dict[int, Any]) -> None:
    """An object holding wrappers in its instance dict (3.12+ reports the object, not the
    dict) or its slots."""
    own = getattr(obj, "__dict__", None)
    if type(own) is dict:
        _replaced(own, replace)
    for klass in type(obj).__mro__:
        for name in klass.__dict__.get("__slots__", ()):
            try:
                item = object.__getattribute__(obj, name)
            except (AttributeError, TypeError):
                continue
            if id(item) in replace:
                try:
                    object.__setattr__(obj, name, replace[id(item)])
                except (AttributeError, TypeError):
                    pass


def wrappers_of(ctx: context_stack.Context) -> Iterator[Tagged]:
    """The wrappers of ``ctx``'s tag alive now (for tests and debugging)."""
    return (o for o in gc.get_objects() if type(o) in WRAPPERS and o._ch_tag is ctx.tag)


# The functions an overload runs per operation: the runtime's (in C, handed the rare cases).
_runtime.configure_tagging(
    tag_type=Tag, classes=_classes, wrapper_class=wrapper_class, wrappers=WRAPPERS,
    tagging_context=_TaggingContext, no_metadata=NoMetaData, allowed=_allowed,
    allowed_generation=_allowed_generation, dispatch=dispatch, check_metadata=_check_metadata,
    not_tagging=_not_tagging)
tag, untag, metadata = (_runtime.accelerated("tag", tag), _runtime.accelerated("untag", untag),
                        _runtime.accelerated("metadata", metadata))
istagged, hasmetadata = _runtime.accelerated("istagged", istagged), _runtime.accelerated("hasmetadata", hasmetadata)
_make = _runtime.accelerated("make", _make)

_PASSES_ON.update(_passes_on())
_SPECIAL = _PASSES_ON | _JOINS | {id(operator.setitem)}
