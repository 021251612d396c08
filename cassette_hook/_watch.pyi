"""Types of the optional function watcher (``_watch.c``, CPython 3.12+; ``_light`` uses it)."""

from types import CodeType

def switch_at_creation(light: CodeType, switched: CodeType, /) -> None: ...
