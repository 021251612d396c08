"""Types of the optional C version of the profile's hooks (``_recording.c``);
``_calltree.py`` has the reference (``PyNodeFields``, ``PyRecording``)."""

from typing import Any

class Node:
    name: str
    children: dict[str, Any]
    keyed: dict[Any, Any]
    key_module: str | None
    calls: int
    total: int
    start: int
    def __init__(self, name: str) -> None: ...

class Recording:
    def prehook(self, f: Any, /, *args: Any, **kwargs: Any) -> None: ...
    def posthook(self, out: Any, f: Any, /, *args: Any, **kwargs: Any) -> None: ...
    def raisehook(self, exc: BaseException, f: Any, /, *args: Any, **kwargs: Any) -> None: ...
