"""Multiple dispatch with Julia's rules, for cassette_hook's contextual generics.

Cassette's hooks (``overdub``, ``prehook``, ...) are overloaded by the *types* of all
their arguments, so they need multiple dispatch: the most specific applicable method
wins, and a tie is an error rather than a silent pick. Those generics sit on the hot
path of every instrumented call, so resolution is cached by the types of the arguments
(a tree of dicts, see ``_walk``); the few argument types for which identity
(``Is[...]``) or an attribute (``Parametric``) can change the answer get a second,
narrower cache (``_Refiner``).

Dispatch looks at ``type(arg)``, as Julia looks at ``typeof``: a class annotation ``C``
matches when ``issubclass(type(arg), C)``. That is ``isinstance`` except for objects that
fake ``__class__``; it is what makes a type-keyed cache exact.

This module imports nothing else from cassette_hook but the optional C accelerator
(``_speedups.Dispatcher`` and ``Refiner`` walk the caches without a Python frame), so it
can be used on its own.
"""

from __future__ import annotations

from ._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import functools
import gc
import itertools
import sys
import types
import typing
import weakref
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from ._locks import rlock
from ._native import runtime as _runtime
from ._own import is_own_frame
from ._weakid import anchor, unanchor

__all__ = ["AmbiguityError", "Generic", "Is", "NoMethodError", "Parametric", "Pattern", "generation"]

generation: int = 0
"""Bumped by every register/unregister on any Generic: callers that cache plans built
from dispatch results compare against it to know when to rebuild them."""


class AmbiguityError(TypeError):
    """No applicable method is more specific than all the others (Julia's MethodError: ambiguous)."""


class _Unresolved(TypeError):
    """An annotation names what is not defined yet (3.14's deferred annotations): the
    method waits, registered, until dispatch first needs it (``Generic._settle``)."""


class NoMethodError(TypeError):
    """No method applies to the arguments and the generic has no default."""


# --- the pattern algebra ---------------------------------------------------------------


class Pattern:
    """The set of values one positional argument may take.

    A pattern answers: does a value belong (``matches``); is this set a subset of
    another (``<=``, which orders methods by specificity); could it hold an instance of
    an exact type (``could_match_type``, for ``Generic.has_methods_for``); and what,
    besides ``type(value)``, decides membership (``_add_needs``), which keeps the
    type-keyed cache exact. The kinds are closed (Any, class, Is, union, Parametric):
    the cache's exactness argument is made for these.
    """

    __slots__ = ()

    def matches(self, value: object) -> bool:
        raise NotImplementedError

    def could_match_type(self, t: type) -> bool:
        raise NotImplementedError

    def _le_simple(self, other: Pattern) -> bool:
        """``self <= other`` where ``other`` is a class or a Parametric."""
        return False

    def _add_needs(self, spec: _KeySpec) -> None:
        """Record in ``spec`` what beyond ``type(value)`` decides ``matches``; by default nothing."""

    def named_objects(self) -> tuple[object, ...]:
        """The objects this pattern names by identity (``Is[...]``, also within a union)."""
        return ()

    def can_hold(self, cls: type) -> bool:
        """Is every value this pattern names possibly an instance of ``cls``?  False when
        some part of it never matches one: a generic whose first argument is always a
        ``cls`` refuses such a method, which could never apply, or only by mistake."""
        raise NotImplementedError

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Pattern):
            return NotImplemented
        if other is ANY:
            return True
        if self is ANY:
            return False
        if isinstance(self, _Union):  # a union is as specific as its least specific member
            return all(m <= other for m in self.members)
        if isinstance(self, Is):
            return all(other.matches(o) for o in self.objects)
        if isinstance(other, _Union):
            return any(self <= m for m in other.members)
        return not isinstance(other, Is) and self._le_simple(other)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Pattern):
            return NotImplemented
        return self <= other and not other <= self


class _AnyPattern(Pattern):
    __slots__ = ()

    def matches(self, value: object) -> bool:
        return True

    def could_match_type(self, t: type) -> bool:
        return True

    def can_hold(self, cls: type) -> bool:
        return True

    def __repr__(self) -> str:
        return "Any"


ANY = _AnyPattern()


class _Class(Pattern):
    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def matches(self, value: object) -> bool:
        return issubclass(type(value), self.cls)

    def could_match_type(self, t: type) -> bool:
        return issubclass(t, self.cls)

    def can_hold(self, cls: type) -> bool:
        return issubclass(self.cls, cls) or issubclass(cls, self.cls)

    def _le_simple(self, other: Pattern) -> bool:
        return isinstance(other, _Class) and issubclass(self.cls, other.cls)

    def __repr__(self) -> str:
        return self.cls.__qualname__


class Is(Pattern):
    """``Is[a, b, ...]``: the argument *is* one of these objects (Julia's singleton types).

    Identity, not equality, so the objects may be unhashable; ``Is[(1, 2)]`` means
    ``Is[1, 2]`` (Python passes both as a tuple): write ``Is((1, 2))`` for the tuple itself.
    """

    __slots__ = ("objects", "ids")

    def __init__(self, *objects: object) -> None:
        if not objects:
            raise TypeError("Is[...] needs at least one object")
        self.objects = objects
        self.ids = frozenset(map(id, objects))  # exact: the objects are kept alive by self

    def __class_getitem__(cls, objects: object) -> Is:
        return cls(*objects) if isinstance(objects, tuple) else cls(objects)

    def matches(self, value: object) -> bool:
        return id(value) in self.ids

    def could_match_type(self, t: type) -> bool:
        return any(type(o) is t for o in self.objects)

    def can_hold(self, cls: type) -> bool:
        return all(isinstance(o, cls) for o in self.objects)

    def named_objects(self) -> tuple[object, ...]:
        return self.objects

    def _add_needs(self, spec: _KeySpec) -> None:
        spec.ids |= self.ids
        spec.id_types.update(map(type, self.objects))

    def __repr__(self) -> str:
        return f"Is[{', '.join(map(repr, self.objects))}]"


class _Union(Pattern):
    __slots__ = ("members",)

    def __init__(self, members: tuple[Pattern, ...]) -> None:
        self.members = members

    def matches(self, value: object) -> bool:
        return any(m.matches(value) for m in self.members)

    def could_match_type(self, t: type) -> bool:
        return any(m.could_match_type(t) for m in self.members)

    def can_hold(self, cls: type) -> bool:
        return all(m.can_hold(cls) for m in self.members)

    def named_objects(self) -> tuple[object, ...]:
        return tuple(o for m in self.members for o in m.named_objects())

    def _add_needs(self, spec: _KeySpec) -> None:
        for m in self.members:
            m._add_needs(spec)

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.members))


def _union(members: Iterable[Pattern]) -> Pattern:
    """Flatten nested unions; a union containing Any is Any."""
    flat: list[Pattern] = []
    for m in members:
        flat.extend(m.members if isinstance(m, _Union) else (m,))
    if any(m is ANY for m in flat):
        return ANY
    return flat[0] if len(flat) == 1 else _Union(tuple(flat))


_MISSING = object()  # what getattr gives for an absent attribute


class Parametric(Pattern):
    """Parametric(cls, attr, inner): an instance of ``cls`` whose ``attr`` matches ``inner``.

    Cassette's ``Ctx{M}`` is ``Parametric(Ctx, "metadata", M)``. A missing attribute never
    matches. It is strictly more specific than ``cls``; and
    ``Parametric(C1, a, P1) <= Parametric(C2, a, P2)`` iff ``C1 <= C2`` and ``P1 <= P2``.
    """

    __slots__ = ("cls", "attr", "inner")

    def __init__(self, cls: type, attr: str, inner: object) -> None:
        if not isinstance(cls, type) or not isinstance(attr, str):
            raise TypeError(f"Parametric(cls, attr, inner) needs a class and a str, got {cls!r}, {attr!r}")
        try:
            self.inner = _to_pattern(inner, None)
        except TypeError as e:
            raise TypeError(f"Parametric({cls.__qualname__}, {attr!r}, ...): inner {inner!r} {e}") from None
        self.cls, self.attr = cls, attr

    def matches(self, value: object) -> bool:
        if not issubclass(type(value), self.cls):
            return False
        inner = getattr(value, self.attr, _MISSING)
        return inner is not _MISSING and self.inner.matches(inner)

    def could_match_type(self, t: type) -> bool:
        return issubclass(t, self.cls)

    def can_hold(self, cls: type) -> bool:
        return issubclass(self.cls, cls) or issubclass(cls, self.cls)

    def _le_simple(self, other: Pattern) -> bool:
        if isinstance(other, _Class):
            return issubclass(self.cls, other.cls)
        return (isinstance(other, Parametric) and self.attr == other.attr
                and issubclass(self.cls, other.cls) and self.inner <= other.inner)

    def _add_needs(self, spec: _KeySpec) -> None:
        classes, sub = spec.attrs.get(self.attr, ((), None))
        sub = sub or _KeySpec()
        self.inner._add_needs(sub)
        spec.attrs[self.attr] = ((*classes, self.cls), sub)

    def __repr__(self) -> str:
        return f"Parametric({self.cls.__qualname__}, {self.attr!r}, {self.inner!r})"


_NOT_AN_ANNOTATION = "which is not a class, Is[...], a union, Any or Optional"


def _annotation_namespace(globals_: dict[str, Any]) -> dict[str, Any]:
    """Where string annotations resolve: the function's globals, and -- when it is being
    registered from a function of the same module -- that function's local names, so
    ``from __future__ import annotations`` works for locally defined classes too."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None and is_own_frame(frame):
        frame = frame.f_back
    if frame is None or frame.f_globals is not globals_:
        return globals_
    return {**globals_, **frame.f_locals}


# 3.14 evaluates annotations when they are asked for (PEP 649/749): an overload may name a
# class defined after it, read as a ForwardRef until it is.
_DEFERRED_ANNOTATIONS = sys.version_info >= (3, 14)


def parameters_of(func: Callable[..., Any]) -> Any:
    """``func``'s parameters, their annotations evaluated as far as the names they use are
    defined (3.14+: a name that is not yet is an ``annotationlib.ForwardRef``; before
    3.14, annotations were evaluated when the function was made).  Raises what
    ``inspect.signature`` raises."""
    import inspect

    if _DEFERRED_ANNOTATIONS:
        import annotationlib  # type: ignore[import-not-found,unused-ignore]  # (3.14+)

        return inspect.signature(  # type: ignore[call-arg,unused-ignore]  # (3.14's parameter)
            func, annotation_format=annotationlib.Format.FORWARDREF).parameters.values()
    return inspect.signature(func).parameters.values()


def _to_pattern(ann: object, namespace: dict[str, Any] | None) -> Pattern:
    """Translate one annotation; strings (and ForwardRefs) are evaluated in ``namespace``.

    Raises TypeError with the end of a sentence ("which is ...") for the caller to prefix.
    """
    if isinstance(ann, typing.ForwardRef) and _DEFERRED_ANNOTATIONS:
        # what annotationlib's FORWARDREF format gives for a name not defined when the
        # annotations were read: evaluated now, with the function's closure and globals
        try:
            ann = ann.evaluate(globals=namespace)  # type: ignore[attr-defined,unused-ignore]  # (3.14+)
        except NameError as e:
            raise _Unresolved(f"which does not resolve (NameError: {e})") from None
    if isinstance(ann, typing.ForwardRef):
        ann = ann.__forward_arg__
    if isinstance(ann, str):
        if namespace is None:
            raise TypeError("which is a string, and there is no namespace to resolve it in")
        try:
            ann = eval(ann, namespace)  # noqa: S307 -- the function's own annotation text
        except Exception as e:
            raise TypeError(f"which does not resolve ({type(e).__name__}: {e})") from None
    if isinstance(ann, Pattern):
        return ann
    import inspect  # (here, where methods are registered: ``import cassette_hook`` goes without it)

    if ann is inspect.Parameter.empty or ann is Any or ann is object:
        return ANY
    if ann is None:
        return _Class(type(None))
    if isinstance(ann, types.UnionType) or typing.get_origin(ann) is typing.Union:
        return _union(_to_pattern(a, namespace) for a in typing.get_args(ann))
    # list[int] claims to be a type on 3.10; subscripted generics cannot be checked.
    if isinstance(ann, type) and not isinstance(ann, types.GenericAlias):
        if issubclass(ann, Pattern):
            raise TypeError("which is a pattern class, not a pattern: write Is[obj], Parametric(...)")
        return _Class(ann)
    raise TypeError(_NOT_AN_ANNOTATION)


# --- methods, signatures and specificity -----------------------------------------------


class _Method:
    """A registered function and the patterns its positional parameters impose.

    Positions ``< len(params)`` use ``params``; further ones use ``varargs`` (None when
    the function takes no ``*args``). It applies to arities ``required ..
    len(params)``, or ``required ..`` with varargs.

    ``owner``: the class the first parameter names (``C`` or ``Parametric(C, ...)``), if
    the method lives only as long as that class (see :meth:`Generic.register`).
    """

    __slots__ = ("func", "params", "required", "varargs", "registered", "owner", "key", "__weakref__")

    def __init__(self, func: Callable[..., Any], params: tuple[Pattern, ...],
                 required: int, varargs: Pattern | None) -> None:
        self.func, self.params, self.required, self.varargs = func, params, required, varargs
        self.registered = func  # what the user registered; ``func`` is what calls run
        self.owner: type | None = None
        self.key = -1  # its key in Generic._entries, once registered

    def running(self, func: Callable[..., Any]) -> _Method:
        """This method, with calls running ``func`` in place of the registered function."""
        self.func = func
        return self

    def pattern(self, i: int) -> Pattern | None:
        return self.params[i] if i < len(self.params) else self.varargs

    def applies(self, args: tuple[object, ...]) -> bool:
        n = len(args)
        if n < self.required or (n > len(self.params) and self.varargs is None):
            return False
        return all(self.pattern(i).matches(a) for i, a in enumerate(args))  # type: ignore[union-attr]  # arity checked: no None

    def le_at(self, other: _Method, n: int) -> bool:
        """Position by position over a call of arity ``n`` (both apply to it), self <= other."""
        return all(self.pattern(i) <= other.pattern(i) for i in range(n))  # type: ignore[operator]  # both apply at arity n: no None

    def covered_by(self, other: _Method) -> bool:
        """Every argument tuple self accepts, other accepts too (signature subtyping).

        This breaks ties between methods equally specific at the call's arity: fixed
        arity beats varargs, ``f(x)`` beats ``f(x, y=0)``, ``*a: int`` beats ``*a``.
        """
        if other.required > self.required:
            return False
        if other.varargs is None and (self.varargs is not None or len(self.params) > len(other.params)):
            return False
        reach = len(self.params) if self.varargs is None else max(len(self.params), len(other.params)) + 1
        return all(self.pattern(i) <= other.pattern(i) for i in range(reach))  # type: ignore[operator]  # reach is within both: no None


def _more_specific(a: _Method, b: _Method, n: int) -> bool:
    if not a.le_at(b, n):
        return False
    if not b.le_at(a, n):
        return True
    return a.covered_by(b) and not b.covered_by(a)


def _describe(func: object) -> str:
    """``qualname (file:line)``, for error messages that must lead to the source."""
    name = getattr(func, "__qualname__", None) or repr(func)
    import inspect

    try:
        code = getattr(inspect.unwrap(func), "__code__", None)  # type: ignore[arg-type]  # any object unwraps
    except ValueError:  # a __wrapped__ cycle
        code = None
    return f"{name} ({code.co_filename}:{code.co_firstlineno})" if code else name


def _type_names(args: tuple[object, ...]) -> str:
    return "(" + ", ".join(type(a).__qualname__ for a in args) + ")"


class _KeySpec:
    """What, besides ``type(value)``, decides which patterns at one argument position match.

    ``ids``: objects some ``Is`` pattern names (``id_types`` their types); ``attrs``:
    for each attribute some ``Parametric`` looks at, the classes whose instances are
    looked at and the spec of the attribute's value.
    """

    __slots__ = ("ids", "id_types", "attrs")

    def __init__(self) -> None:
        self.ids: frozenset[int] = frozenset()
        self.id_types: set[type] = set()
        self.attrs: dict[str, tuple[tuple[type, ...], _KeySpec]] = {}

    def copy(self) -> _KeySpec:
        """A copy that ``_add_needs`` may extend without changing this one (which a refiner
        made before may still be keying with)."""
        new = _KeySpec()
        new.ids, new.id_types = self.ids, set(self.id_types)
        new.attrs = {name: (classes, sub.copy()) for name, (classes, sub) in self.attrs.items()}
        return new

    def relevant(self, t: type) -> bool:
        """Can the type alone fail to decide matching for an argument of exact type ``t``?"""
        return t in self.id_types or any(issubclass(t, classes) for classes, _ in self.attrs.values())

    def key(self, value: object) -> Hashable:
        """A summary of ``value`` that, with ``type(value)``, decides every pattern of this spec."""
        ident = id(value) if id(value) in self.ids else None
        if not self.attrs:
            return ident
        t = type(value)
        parts: list[Hashable] = [ident]
        for name, (classes, sub) in self.attrs.items():
            attr = getattr(value, name, _MISSING) if issubclass(t, classes) else _MISSING
            parts.append(None if attr is _MISSING else (type(attr), sub.key(attr)))
        return tuple(parts)


def _walk(roots: list[Any], args: tuple[object, ...]) -> Any:
    """The type cache is a tree: ``roots[len(args)][type(args[0])][type(args[1])]...``
    ends in a method or a _Refiner (``roots[0]`` holds the entry for no arguments, or None).
    Raises LookupError on a miss."""
    node = roots[len(args)]
    for a in args:
        node = node[type(a)]
    return node


class _Refiner(functools.partial):  # type: ignore[type-arg]  # results vary by call
    """Type-cache entry for argument types where an ``Is`` or ``Parametric`` can matter.

    It stands where a method would, so calls whose types decide alone pay nothing for
    it. It keys its own cache on one position that needs more than the type; ``fill``
    makes the entry for a new key: the method, or (when later positions need more too)
    the refiner for the next one. (A partial for the same reason as Generic: calls go
    straight into the ``refine`` closure.) ``_speedups.Refiner`` is the same in C.
    """

    resolve: Callable[[tuple[object, ...]], Callable[..., Any]]  # the method these arguments get

    def __new__(cls, i: int, ids: object, key_of: Callable[[object], Hashable],
                fill: Callable[[tuple[object, ...]], Any]) -> _Refiner:
        """``ids`` (the ids an ``Is``-only spec matches, or None) is for C's refiner, which
        keys on them without calling ``key_of``; here ``key_of`` does it all."""
        cache: dict[Hashable, Any] = {}

        def resolve(args: tuple[object, ...]) -> Any:
            key = key_of(args[i])
            entry: Any = cache.get(key)
            if entry is None:
                entry = cache[key] = fill(args)
            return entry.resolve(args) if type(entry) is _Refiner else entry

        def refine(*args: object, **kwargs: object) -> Any:
            method = cache.get(key_of(args[i]))  # a method, or the next _Refiner
            if method is None:
                method = resolve(args)
            return method(*args, **kwargs)

        self = super().__new__(cls, refine)
        self.resolve = resolve
        return self


def _refiner(generic: Generic, positions: tuple[tuple[int, _KeySpec], ...]) -> Any:
    """The refiner for these positions (each one that needs more than the type), in C
    when it is built: a spec of ``Is`` patterns only is keyed there without Python."""
    (i, spec), rest = positions[0], positions[1:]

    def fill(args: tuple[object, ...]) -> Any:
        return _refiner(generic, rest) if rest else generic._resolve_uncached(args)

    return _chosen_refiner(i, None if spec.attrs else spec.ids, spec.key, fill)


_chosen_refiner = _runtime.accelerated("Refiner", _Refiner)
_REFINERS = frozenset({_Refiner, _chosen_refiner})


# --- generic functions -----------------------------------------------------------------


# Why a ``functools.partial``: calls then go through C (vectorcall) straight into the
# ``dispatch`` closure. A Python ``__call__`` would add a bound method and a repack of
# the arguments to every call, which is most of the cost of a cached dispatch.
class Generic(functools.partial):  # type: ignore[type-arg]  # results vary by method
    """A function with methods chosen by the types of all its positional arguments.

    The ``default`` is the fallback when no method applies: lowest priority, never
    ambiguous. Keyword arguments are passed through but never dispatched on.
    Registration is thread-safe; calls racing a registration see the old or new table.
    """

    _roots: list[Any]  # the type cache, see _walk

    def __new__(cls, name: str, default: Callable[..., Any] | None = None, doc: str | None = None) -> Generic:
        roots: list[Any] = [None]
        if _runtime.Dispatcher is not None:  # the same walk in C: no Python frame per call
            dispatcher = _runtime.Dispatcher(roots)
            self = super().__new__(cls, dispatcher)
            dispatcher.miss = self._miss
            self._roots = roots
            if cls.resolve is Generic.resolve:  # (a subclass may resolve otherwise: metadatatype)
                self.resolve = dispatcher.resolve  # type: ignore[method-assign]  # the same, in C
            return self

        def dispatch(*args: object, **kwargs: object) -> Any:
            # _walk(roots, args), unrolled for the arities hooks see most: walking the
            # tree by hand is cheaper than building and hashing a tuple of types.
            n = len(args)
            try:
                if n == 3:
                    a, b, c = args
                    method = roots[3][type(a)][type(b)][type(c)]
                elif n == 4:
                    a, b, c, d = args
                    method = roots[4][type(a)][type(b)][type(c)][type(d)]
                elif n == 2:
                    a, b = args
                    method = roots[2][type(a)][type(b)]
                else:
                    method = _walk(roots, args)
            except LookupError:
                method = None  # miss outside the handler, so errors do not chain onto a LookupError
            if method is None:
                method = self._miss(args)
            return method(*args, **kwargs)

        self = super().__new__(cls, dispatch)
        self._roots = roots
        return self

    def __init__(self, name: str, default: Callable[..., Any] | None = None, doc: str | None = None) -> None:
        self.name = self.__name__ = self.__qualname__ = name
        self.default = default
        self.__doc__ = doc
        # The methods, in the order registered: a method itself, or a weak reference to a
        # method its owner class holds (``register``).  Everything below is derived from it,
        # on demand, and forgotten by ``_forget``.
        self._entries: dict[int, _Method | weakref.ref[_Method]] = {}
        # Methods registered before a name their annotations use was defined (3.14+), with
        # their self_type: made methods when dispatch first needs them (_settle).
        self._pending: tuple[tuple[Callable[..., Any], type | None], ...] = ()
        self._lock = rlock()  # reentrant: matching may run user code (getattr, ABC hooks)
        self._forget()
        _every_generic.add(self)

    def __get__(self, obj: object, objtype: type | None = None) -> Generic:
        """Stay a plain attribute on classes (partial warns about method use from 3.13)."""
        return self

    def _forget(self) -> None:
        """Drop everything derived from the method table: the type cache, the answers of
        ``has_methods_for``, the per-position key specs, the table's tuple of methods and
        its index by owner.

        It runs after every change of the table, and at the start of every full garbage
        collection (``_forget_before_full_collections``): all of these hold classes (the
        types of arguments dispatched on, the methods owned by classes), which a class
        nobody else references must not be kept alive by.  It is O(1) in the number of
        methods (the rest is remade as calls need it), so that classes that die together
        cost no more than one each, and atomic enough to run inside a collection that
        interrupted ``_miss``: the cache keeps its length, and a ``_miss`` that was filling
        it fills a level no longer in it, or a new one with a correct entry.
        """
        roots = self._roots
        roots[:] = [None, *({} for _ in range(len(roots) - 1))]
        self._first: dict[type, bool] = {}
        self._specs: list[_KeySpec] | None = None
        self._table: tuple[_Method, ...] | None = None
        self._by_owner: tuple[tuple[_Method, ...], dict[type, list[_Method]]] | None = None

    @property
    def _methods(self) -> tuple[_Method, ...]:
        """The live methods, in the order registered (made again after ``_forget``)."""
        table = self._table
        if table is None:
            found = (_live(entry) for entry in list(self._entries.values()))
            table = self._table = tuple(m for m in found if m is not None)
        return table

    def _methods_for(self, first_type: type) -> Iterable[_Method]:
        """The methods that may apply when the first argument is of exact type ``first_type``
        (a superset): those owned by a class of its MRO, and those of no owner.  So the
        work of a miss does not grow with the classes of other contexts, such as the
        throwaway classes that wait for the next full collection to be freed."""
        free_methods, by_owner = self._index()
        return (*free_methods, *(m for c in first_type.__mro__ for m in by_owner.get(c, ())))

    def _index(self) -> tuple[tuple[_Method, ...], dict[type, list[_Method]]]:
        """The methods of no owner, and the others by owner (see ``_methods_for``)."""
        index = self._by_owner
        if index is None:
            free: list[_Method] = []
            by_owner: dict[type, list[_Method]] = {}
            for m in self._methods:
                if _indexed_by_owner(m):
                    by_owner.setdefault(m.owner, []).append(m)  # type: ignore[arg-type]  # (it has one)
                else:
                    free.append(m)
            index = self._by_owner = (tuple(free), by_owner)
        return index

    def _key_specs(self) -> list[_KeySpec]:
        """What besides the type decides matching, per position (the last one: all later)."""
        specs = self._specs
        if specs is None:
            methods = self._methods
            width = max((len(m.params) for m in methods), default=0) + 1
            specs = [_KeySpec() for _ in range(width)]
            for m in methods:
                _add_needs(m, specs)
            self._specs = specs
        return specs

    def resolve(self, args: tuple[object, ...]) -> Callable[..., Any]:
        """The method a call with these positional arguments runs (the default if none applies)."""
        try:
            entry: Any = _walk(self._roots, args)
        except LookupError:
            entry = None
        if entry is None:
            entry = self._miss(args)
        method: Callable[..., Any] = entry.resolve(args) if type(entry) in _REFINERS else entry
        return method

    def _miss(self, args: tuple[object, ...]) -> Callable[..., Any]:
        """Fill the type cache: with the method when types decide, else with a _Refiner."""
        self._settle()
        with self._lock:
            types_ = tuple(map(type, args))
            specs = self._key_specs()
            last = len(specs) - 1
            positions = tuple((i, spec) for i, t in enumerate(types_)
                              if (spec := specs[min(i, last)]).relevant(t))
            entry = _refiner(self, positions) if positions else self._resolve_uncached(args)
            roots = self._roots
            roots.extend({} for _ in range(len(roots), len(args) + 1))
            if args:
                node = roots[len(args)]
                for t in types_[:-1]:
                    node = node.setdefault(t, {})
                node[types_[-1]] = entry
            else:
                roots[0] = entry
            return entry

    def _resolve_uncached(self, args: tuple[object, ...]) -> Callable[..., Any]:
        methods = self._methods_for(type(args[0])) if args else self._methods
        applicable = [m for m in methods if m.applies(args)]
        if not applicable:
            if self.default is None:
                raise NoMethodError(f"{self.name}: no method matches argument types {_type_names(args)}")
            return self.default
        n = len(args)
        best = applicable[0]
        for m in applicable[1:]:
            if _more_specific(m, best, n):
                best = m
        for m in applicable:  # best must beat every other candidate, or there is no best
            if m is not best and not _more_specific(best, m, n):
                raise AmbiguityError(
                    f"{self.name}: ambiguous call with argument types {_type_names(args)}: "
                    f"{_describe(best.func)} and {_describe(m.func)} both apply and neither is "
                    f"more specific; define a method more specific than both")
        return best.func

    def register(self, func: Callable[..., Any] | None = None, /, *,
                 self_type: type | None = None) -> Any:
        """Add a method (decorator or plain call); returns ``func`` unchanged.

        An equal signature replaces the old method, as redefining a Julia method does.
        ``self_type`` types the first positional parameter, whatever its annotation:
        that is how a ``prehook(self, f, *args)`` defined on a context class registers.

        A method whose first parameter names one class ``C`` (``C`` or
        ``Parametric(C, ...)``) applies only to calls whose first argument is an instance
        of ``C``: once ``C`` is gone, to none.  So ``C`` holds the method and the generic
        only refers to it: the method lives as long as ``C``, and does not keep ``C``
        alive (a class made per request, test or call is collected with its methods).
        """
        if func is None:
            return lambda f: self.register(f, self_type=self_type)
        try:
            method = self._signature(func, self_type)
        except _Unresolved:
            with self._lock:
                self._pending = (*self._pending, (func, self_type))
                self._changed()
            return func
        with self._lock:
            self._add(method)
        return func

    def _add(self, method: _Method) -> None:
        """Register a method made from its signature (the caller holds the lock)."""
        first = method.pattern(0)
        # (a first parameter with a default lets calls of no argument ignore its class)
        owner = first.cls if type(first) in (_Class, Parametric) and method.required else None  # type: ignore[union-attr]  # both have cls
        # Only a method of the same owner, or of none, can have an equal signature.
        # (Nothing here walks every method: while the collector runs, a walk's locals
        # would keep alive the classes waiting to be freed.)
        if owner is None:
            others: Iterable[_Method] = self._methods
        else:
            free_methods, by_owner = self._index()
            others = (*free_methods, *by_owner.get(owner, ()))
        replaced = [m for m in others if m.covered_by(method) and method.covered_by(m)]
        for m in replaced:
            self._remove(m)
        method.key = key = next(_serials)
        if owner is not None and anchor(owner, method):
            method.owner = owner
            self._entries[key] = weakref.ref(method, functools.partial(_owner_gone, weakref.ref(self), key))
        else:
            self._entries[key] = method
        table, index, specs = self._table, self._by_owner, self._specs
        self._changed()
        if not replaced:  # only added: what was derived grows by it, rather than being remade
            if table is not None:
                self._table = (*table, method)
            if index is not None:
                self._by_owner = _indexed(index, method)
            if specs is not None and len(method.params) < len(specs):
                specs = [spec.copy() for spec in specs]  # (refiners made before may be keying with them)
                _add_needs(method, specs)
                self._specs = specs

    def _settle(self) -> None:
        """Make methods of the pending ones, now that dispatch needs them: a name their
        annotations use has had the time to be defined (a class after the overloads that
        take it).  One still not defined is an error that names the method, raised by
        every dispatch until the name is defined or the method unregistered."""
        if not self._pending:
            return
        with self._lock:
            pending = self._pending
            for index, (func, self_type) in enumerate(pending):
                try:
                    method = self._signature(func, self_type)
                except TypeError as e:
                    self._pending = pending[index:]
                    if index:
                        self._changed()
                    raise TypeError(f"{e}: the name is not defined by the time a call is dispatched") from None
                self._add(method)
            self._pending = ()
            self._changed()

    def unregister(self, func: Callable[..., Any]) -> None:
        """Remove every method registered with ``func``."""
        with self._lock:
            gone = list(m for m in self._methods if m.registered == func)  # (not a comprehension: see _locks)
            waiting = tuple(p for p in self._pending if p[0] != func)
            if not gone and len(waiting) == len(self._pending):
                raise ValueError(f"{self.name}: cannot unregister {_describe(func)}: it is not registered")
            for m in gone:
                self._remove(m)
            self._pending = waiting
            self._changed()

    def _remove(self, method: _Method) -> None:
        del self._entries[method.key]
        if method.owner is not None:
            unanchor(method.owner, method)

    def _changed(self) -> None:
        global generation
        self._forget()
        generation += 1

    def _signature(self, func: Callable[..., Any], self_type: type | None) -> _Method:
        """Build the method's patterns from its annotations, rejecting anything else now."""
        where = f"{self.name}: cannot register {_describe(func)}"
        if not callable(func):
            raise TypeError(f"{where}: it is not callable")
        import inspect

        try:
            parameters = parameters_of(func)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{where}: its signature cannot be read ({e})") from None
        namespace = _annotation_namespace(getattr(inspect.unwrap(func), "__globals__", {}))
        params: list[Pattern] = []
        required, varargs = 0, None
        for p in parameters:
            if p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD):
                continue
            ann = self_type if self_type is not None and not params and p.kind != p.VAR_POSITIONAL else p.annotation
            try:
                pattern = _to_pattern(ann, namespace)
            except TypeError as e:  # (an _Unresolved stays one)
                raise type(e)(f"{where}: parameter {p.name!r} has annotation {ann!r}, {e}") from None
            if p.kind == p.VAR_POSITIONAL:
                varargs = pattern
                break  # only keyword-only parameters can follow
            params.append(pattern)
            if p.default is p.empty:
                required += 1
        if self_type is not None and not params:
            raise TypeError(f"{where}: self_type given, but it has no positional parameter to type")
        return _Method(func, tuple(params), required, varargs)

    def sole_method(self, first_type: type, min_args: int = 1) -> Callable[..., Any] | None:
        """The method every call runs whose first argument's exact type is ``first_type``
        and which has at least ``min_args`` arguments -- when that does not depend on the
        other arguments: one applicable method, taking anything after the first.

        The hot path calls that method directly and skips dispatch.
        """
        self._settle()
        with self._lock:
            candidates = list(m for m in self._methods_for(first_type)  # (not a comprehension: see _locks)
                              if m.params and m.params[0].could_match_type(first_type))
        if len(candidates) != 1:
            return None
        method = candidates[0]
        first, rest = method.params[0], method.params[1:]
        takes_anything = method.varargs is ANY and method.required <= min_args and all(p is ANY for p in rest)
        decided_by_type = first is ANY or (type(first) is _Class and issubclass(first_type, first.cls))
        return method.func if takes_anything and decided_by_type else None

    def second_arguments_named(self, first_type: type) -> frozenset[int] | None:
        """The ids of the objects that the methods able to take a first argument of exact
        type ``first_type`` name as their second with ``Is[...]`` -- when that is all they
        take there: a call whose second argument is none of these gets the default.  None
        when such a method takes a class, Any or a Parametric second.

        The hot path calls a callee the overloads of a context do not name (their second
        argument is the callee) without asking dispatch.
        """
        named = self.objects_named(first_type, 1)
        return None if named is None else frozenset(named)

    def objects_named(self, first_type: type, position: int) -> dict[int, object] | None:
        """The objects (by id) that the methods able to take a first argument of exact type
        ``first_type`` name at ``position`` with ``Is[...]``, when that is all they take
        there; None when such a method takes a class, Any or a Parametric there.  (A hook's
        callee is its second argument, a posthook's or raisehook's its third.)"""
        self._settle()
        with self._lock:
            methods = self._methods_for(first_type)
        return _objects_named(methods, first_type, position)

    def callees_named(self, first_type: type, position: int) -> tuple[dict[int, object], tuple[type, ...]] | None:
        """``objects_named``, with classes too: the objects (by id) that the methods able
        to take a first argument of exact type ``first_type`` name at ``position`` with
        ``Is[...]``, and the classes they take there (``f: SomeType``: any instance), when
        that is all they take there; None when such a method takes Any or a Parametric
        there."""
        self._settle()
        with self._lock:
            methods = self._methods_for(first_type)
        return _callees_named(methods, first_type, position)

    def callee_guard(self, first_type: type, position: int, obj: object) -> Guard | bool | None:
        """What the methods make of calls whose first argument's exact type is
        ``first_type`` and whose argument at ``position`` is ``obj``, whatever the others:
        None when no method may apply to such a call (the default runs); True when each
        that may apply is decided by the first argument's type and takes anything after
        ``position``, so every such call gets one method; a :class:`Guard` when one method
        only may apply, whose other parameters are classes or Any, so that whether it does
        is a check of the call's length and its later arguments' types; else False.

        The hot path then resolves the overload of a callee that a context's overloads
        name once, not at every call (``runtime.callsites.overload_by_callee``).
        """
        self._settle()
        with self._lock:
            methods = self._methods_for(first_type)
        return _callee_guard(methods, first_type, position, obj)

    def has_methods_for(self, first_type: type) -> bool:
        """Could a non-default method apply when the first argument's exact type is ``first_type``?

        Exact for classes and Any, conservative (True) for Parametric: the hot path
        uses it to skip hooks a context type never overloads.
        """
        answer = self._first.get(first_type)
        if answer is None:
            self._settle()
            with self._lock:  # (the loop in a function of its own: see _locks)
                answer = self._first[first_type] = self._could_apply(first_type)
        return answer

    def _could_apply(self, first_type: type) -> bool:
        return any(p is not None and p.could_match_type(first_type)
                   for p in (m.pattern(0) for m in self._methods_for(first_type)))

    def methods(self) -> list[Callable[..., Any]]:
        """The registered methods, not the default."""
        self._settle()
        return [m.registered for m in self._methods]

    def running_methods(self) -> list[Callable[..., Any]]:
        """What calls of the registered methods run: each method, or the copy of it that
        registration made (``generics`` makes the leading parameters positional-only)."""
        self._settle()
        return [m.func for m in self._methods]

    def __repr__(self) -> str:
        return f"<Generic {self.name} with {len(self._methods)} method(s)>"


def _objects_named(methods: Iterable[_Method], first_type: type, position: int) -> dict[int, object] | None:
    """``Generic.objects_named`` over ``methods`` (a loop of its own: see ``_locks``)."""
    named: dict[int, object] = {}
    for m in methods:
        first, at = m.pattern(0), m.pattern(position)
        if first is None or at is None or not first.could_match_type(first_type):
            continue
        members = at.members if isinstance(at, _Union) else (at,)
        if not all(isinstance(p, Is) for p in members):
            return None
        named.update((id(o), o) for o in at.named_objects())
    return named


class Guard(tuple):  # type: ignore[type-arg]  # (func, required, nparams, varargs, classes): read by C
    """The one method calls with a given first type and object at a given position may
    run (``Generic.callee_guard``), and what decides whether it does: a call of ``n``
    positional arguments with ``required <= n`` (and ``n <= nparams`` unless ``varargs``)
    whose argument at each later position is an instance of the class at that position
    in ``classes`` (one per parameter after ``position``, then the ``*args``' one; None:
    any).  A tuple, which the C hot path reads by index."""

    __slots__ = ()

    def __new__(cls, func: Callable[..., Any], required: int, nparams: int, varargs: bool,
                classes: tuple[type | None, ...]) -> Guard:
        return super().__new__(cls, (func, required, nparams, varargs, classes))

    def admits(self, args: tuple[object, ...], position: int) -> bool:
        """Does the method apply to ``args``, whose first ``position + 1`` it takes?"""
        _, required, nparams, varargs, classes = self
        n = len(args)
        if n < required or n > nparams and not varargs:
            return False
        last = len(classes) - 1
        for i in range(position + 1, n):  # (a loop, not all() over generators: a matched call's cost on the pure path)
            cls = classes[i - position - 1 if i - position - 1 < last else last]
            if cls is not None and not issubclass(type(args[i]), cls):
                return False
        return True


def _callee_guard(methods: Iterable[_Method], first_type: type, position: int, obj: object) -> Guard | bool | None:
    """``Generic.callee_guard`` over ``methods`` (a loop of its own: see ``_locks``)."""
    candidates: list[_Method] = []
    for m in methods:
        first, at = m.pattern(0), m.pattern(position)
        if first is None or at is None or not first.could_match_type(first_type):
            continue  # (applies to no such call)
        if any(isinstance(p, Parametric) for p in (at.members if isinstance(at, _Union) else (at,))):
            return False  # (matches by an attribute, which may change)
        if not at.matches(obj):
            continue
        if not (first is ANY or type(first) is _Class and issubclass(first_type, first.cls)):
            return False
        candidates.append(m)
    if not candidates:
        return None
    if all(m.required <= position + 1 and m.varargs is ANY and all(p is ANY for p in m.params[position + 1:])
           for m in candidates):
        return True
    if len(candidates) > 1:
        return False
    m = candidates[0]
    later = (*m.params[position + 1:], m.varargs if m.varargs is not None else ANY)
    if not all(p is ANY or type(p) is _Class for p in later):
        return False
    classes = tuple(None if p is ANY else p.cls for p in later)  # type: ignore[attr-defined]  # a _Class
    return Guard(m.func, m.required, len(m.params), m.varargs is not None, classes)


def _callees_named(methods: Iterable[_Method], first_type: type,
                   position: int) -> tuple[dict[int, object], tuple[type, ...]] | None:
    """``Generic.callees_named`` over ``methods`` (a loop of its own: see ``_locks``)."""
    named: dict[int, object] = {}
    classes: list[type] = []
    for m in methods:
        first, at = m.pattern(0), m.pattern(position)
        if first is None or at is None or not first.could_match_type(first_type):
            continue
        for p in at.members if isinstance(at, _Union) else (at,):
            if isinstance(p, Is):
                named.update((id(o), o) for o in p.named_objects())
            elif type(p) is _Class:
                classes.append(p.cls)
            else:
                return None
    return named, tuple(dict.fromkeys(classes))


_serials = itertools.count()  # keys of Generic._entries, in the order registered
_TYPE_SUBCLASSCHECK = type.__dict__["__subclasscheck__"]


def _live(entry: _Method | weakref.ref[_Method]) -> _Method | None:
    """The method of an entry of ``Generic._entries``, or None: it died with its owner."""
    return entry if isinstance(entry, _Method) else entry()


def _indexed(index: tuple[tuple[_Method, ...], dict[type, list[_Method]]],
             method: _Method) -> tuple[tuple[_Method, ...], dict[type, list[_Method]]]:
    """``index`` (see ``Generic._index``) with ``method`` added: to its owner's list, or,
    with no owner or one whose metaclass has its own ``__subclasscheck__`` (ABCMeta's, which
    may claim classes whose MRO does not hold it), to those of no owner."""
    free, by_owner = index
    if not _indexed_by_owner(method):
        return (*free, method), by_owner
    by_owner.setdefault(method.owner, []).append(method)  # type: ignore[arg-type]  # (it has one)
    return index


def _indexed_by_owner(method: _Method) -> bool:
    return method.owner is not None and type(method.owner).__subclasscheck__ is _TYPE_SUBCLASSCHECK


def _add_needs(method: _Method, specs: list[_KeySpec]) -> None:
    """Add what ``method``'s patterns need beyond types to the per-position specs."""
    for i, spec in enumerate(specs):
        p = method.pattern(i)
        if p is not None:
            p._add_needs(spec)
_every_generic: weakref.WeakSet[Generic] = weakref.WeakSet()


def _owner_gone(generic_ref: weakref.ref[Generic], key: int, _method: object) -> None:
    """A method's owner class was collected, and the method with it: forget it.

    Nothing else changes for the calls still possible: the method applied only to
    instances of a class that no longer exists.  ``_forget`` is O(1), so a collection that
    frees many classes at once stays linear in their number.
    """
    generic = generic_ref()
    if generic is not None and generic._entries.pop(key, None) is not None:
        generic._changed()


def _forget_before_full_collections(phase: str, info: dict[str, int]) -> None:
    """Let a full collection free the classes that only the generics' caches hold (the
    type cache holds the type of every argument dispatched on): they are remade as calls
    need them, from the method table, which holds no class that owns its method."""
    if phase == "start" and info["generation"] == 2:
        for generic in list(_every_generic):
            generic._forget()


gc.callbacks.append(_forget_before_full_collections)
