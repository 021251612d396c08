"""The import hook's code cache: ``__pycache__/<name>.<tag>.cassette_hook[.<kind>].pyc``.

Rewriting a module costs about a millisecond per function, so its result is cached next
to CPython's own ``.pyc`` (never in it: CPython's file stays CPython's).  The file name
carries CPython's cache tag and optimization level (``importlib.util.cache_from_source``
also honours ``sys.pycache_prefix``); the header carries everything else the code depends
on -- the source's size and modification time, the cassette_hook version, the rewriting
options and the module name baked into the code -- as one line of text.  A module has up
to three files, one per kind of code the hook hands out: switched (no kind), light
(``.light``) and its functions switched (``.functions``; see ``_light``).  A file whose header does
not match, or that does not unmarshal to a code object, is ignored and rewritten.  Writes
go to a temporary file renamed into place, so concurrent importers never read half a file.
"""

from __future__ import annotations

import marshal
import os
import sys
import threading
from importlib.util import MAGIC_NUMBER, cache_from_source
from types import CodeType

from . import __version__
from .rewrite import _names

FORMAT = b"cassette_hook pyc 5\n"
SWITCHED, LIGHT, FUNCTIONS = "", ".light", ".functions"  # the kinds of file


def path_for(source_path: str, kind: str = SWITCHED) -> str | None:
    """Where the rewritten code of ``source_path`` is cached, or ``None`` if nowhere."""
    try:
        return cache_from_source(source_path).removesuffix(".pyc") + f".cassette_hook{kind}.pyc"
    except (NotImplementedError, ValueError):  # no cache tag, or an odd path
        return None


def key(source: os.stat_result, module: str, options: str, kind: str = SWITCHED) -> bytes:
    """The header a cache file of ``kind`` must carry to be used for this source and these
    options, and, for switched code, the hot path it is made for (``_names.variant``: light
    code is the same on both, and is read before the hot path is loaded)."""
    variant = "" if kind == LIGHT else f" {_names.variant()}"
    stamp = f"{source.st_size} {source.st_mtime_ns} {__version__} {options}{variant}{kind} {module}\n"
    return MAGIC_NUMBER + FORMAT + stamp.encode()


def read(path: str, expected: bytes) -> tuple[CodeType | tuple[CodeType, ...] | None, str]:
    """The cached code (or tuple of code) at ``path`` if its header is ``expected``, else
    ``None``; and what happened, in words, for ``--debug import``: ``hit``, ``miss``,
    ``stale``, ``corrupt``."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError:
        return None, "miss"
    if not data.startswith(expected):
        return None, "stale"
    try:
        code = marshal.loads(memoryview(data)[len(expected):])
    except (EOFError, ValueError, TypeError):  # truncated or corrupt
        return None, "corrupt"
    if isinstance(code, CodeType) or isinstance(code, tuple) and all(isinstance(c, CodeType) for c in code):
        return code, "hit"
    return None, "corrupt"


def write(path: str, header: bytes, code: CodeType | tuple[CodeType, ...], source_mode: int) -> str:
    """Cache ``code`` at ``path`` atomically; quietly do nothing where that is impossible
    (a read-only tree, ``sys.dont_write_bytecode``), as CPython does for its own files.
    Returns what happened, in words, for ``--debug import``.

    Written as CPython writes its own (``_write_atomic``), not with ``tempfile``, whose
    import (``shutil``, ``random``) would cost a cold import several milliseconds: to a
    temporary name of this process and thread, created exclusively (so two writers never
    share one), then renamed into place.  A file left there by a killed process of the
    same id makes this write give up, as any unwritable cache does."""
    if sys.dont_write_bytecode:
        return "not written (sys.dont_write_bytecode)"
    try:
        data = marshal.dumps(code)
    except ValueError as exc:  # a constant marshal cannot write
        return f"not written ({exc})"
    temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, (source_mode & 0o666) | 0o200)
    except OSError as exc:
        return f"not writable ({exc.strerror or exc})"
    try:
        with open(fd, "wb") as file:
            file.write(header)
            file.write(data)
        os.replace(temporary, path)
    except OSError as exc:  # disk full
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return f"not written ({exc})"
    return "written"
