"""Types of the optional C part of the assembler (``_assembly.c``): the line table and the loop;
references: ``_nullslot._line_table``, ``_assembler.Assembler._code``'s loop."""

from typing import Any, Callable, Iterable

def line_table(first_line: int, runs: Iterable[tuple[Any, int]], /) -> bytes: ...
def set_compiled_position(cls: type[tuple[int | None, int | None, int | None, int | None]], /) -> None: ...
def walk(tables: tuple[Any, ...], items: list[Any], state: tuple[Any, bool, bool], lists: tuple[Any, ...],
         numbering: tuple[Any, ...], one: Callable[[tuple[Any], tuple[Any, bool, bool]], tuple[Any, bool, bool]],
         /) -> tuple[Any, bool, bool]: ...
