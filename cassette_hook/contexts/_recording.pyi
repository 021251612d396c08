"""Types of the optional C version of the profile's hooks (``_recording.c``);
``_calltree.py`` has the reference (``PyNodeFields``, ``PyRecording``)."""

from typing import Any, Callable

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

class ImportTimer:
    __wrapped__: Callable[..., Any]
    __cassette_hook_wraps__: Callable[..., Any]
    def __init__(self, find_and_load: Callable[..., Any], started: Callable[[Any, Any], Any],
                 ended: Callable[[Any], object], /) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
