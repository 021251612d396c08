"""Types of the optional C part of the decoder (``_decoding.c``): the loop over a code
object's units, and a plain half's runs; references: ``_decoder.Decoder._items``,
``_assembler.Verbatim``'s loop."""

from types import CodeType
from typing import Any

def items(tables: tuple[Any, ...], code: CodeType, locals: list[Any], cells: list[Any], entries: list[Any],
          /) -> list[Any] | None: ...
def runs(code: CodeType, start: int, stop: int, cls: type[tuple[Any, ...]], /) -> list[tuple[int, Any]]: ...
