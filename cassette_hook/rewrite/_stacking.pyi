"""Types of the optional C part of the stack walks (``_stacking.c``): the depth walk and the
pairing's two loops; references: ``_stack._stack_depths``, ``_stack._pairs``."""

from typing import Any, Callable

def configure(instr: type, label: type, set_lineno: type, try_begin: type, try_end: type, unset: object,
              steps: dict[object, tuple[bool, bool, int, int]],
              step: Callable[[Any, object], tuple[bool, bool, int, int]],
              depths_reference: Callable[[Any], list[int | None]],
              pairs_reference: Callable[..., dict[int, frozenset[int]]],
              paired_reference: Callable[..., dict[int, frozenset[int]]],
              role: Callable[[Any, dict[str, Any], Any, Any], Any], /) -> None: ...
def depths(items: Any, /) -> list[int | None]: ...
def pairs(items: Any, depths: Any, roles: dict[str, Any], producers: Any, consumers: Any,
          producer_depth: Callable[[Any, int], int | None], consumer_depth: Callable[[Any, int], int | None],
          /) -> dict[int, frozenset[int]]: ...
