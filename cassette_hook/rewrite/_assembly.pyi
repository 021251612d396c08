"""Types of the optional C version of the assembler's line table (``_assembly.c``);
``_nullslot.py`` has the reference (``_line_table``)."""

from typing import Any, Iterable

def line_table(first_line: int, runs: Iterable[tuple[Any, int]], /) -> bytes: ...
def set_compiled_position(cls: type[tuple[int | None, int | None, int | None, int | None]], /) -> None: ...
