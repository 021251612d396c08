"""Types of the optional C part of the decoder (``_decoding.c``): the loop over a code
object's units; reference: ``_decoder.Decoder._items``."""

from types import CodeType
from typing import Any

def items(tables: tuple[Any, ...], code: CodeType, locals: list[Any], cells: list[Any], entries: list[Any],
          /) -> list[Any] | None: ...
