"""The import hook's code cache: ``__pycache__/<name>.<tag>.cassette_hook[.pure][.<kind>].pyc``.

Rewriting a module costs about a millisecond per function, so its result is cached next
to CPython's own ``.pyc`` (never in it: CPython's file stays CPython's).  The file name
carries CPython's cache tag and optimization level (``importlib.util.cache_from_source``
also honours ``sys.pycache_prefix``) and, for switched code, the hot path it was made for
(``.pure`` without the C accelerators: ``_names.variant``), so that the two paths, run in
turn, each keep their own file rather than rewriting one.  A module has up to four
files, one per kind of code the hook hands out: switched (no kind), light (``.light``,
shared by both paths), its functions switched (``.functions``: one entry per function, None
for one not switched yet, as a function switched alone at its first call leaves the others;
see ``lazy_mode``), and its
body switched with its functions as compiled, beside the compiled code, one marshal of
both (``.body``: imported while a context is active, its functions switched at the first
call of one; ``lazy_mode.arm_module``).

What a file's code is made from is the code CPython's own import gives for the source,
so a file is valid exactly while CPython would still give that code (docs/importhook.md,
"The code cache"): its header records the ``.pyc`` of CPython's that code came from --
its 16-byte header, a digest of its bytes and that file's identity on disk (inode, size,
modification time in nanoseconds) -- with the cassette_hook version, the rewriting options
and the module name, as one line of text.  A file is used when CPython's ``.pyc`` is still
that one (or holds the same bytes) and CPython would still trust it for the source now:
:func:`trusted` makes the decisions ``SourceLoader.get_code`` makes (timestamp or hash,
checked or unchecked, and ``--check-hash-based-pycs``).  Keying on the source's own size and modification time
instead was staler than CPython: a ``.pyc`` trusted to the second (a timestamp ``.pyc``
after an edit within the same second) or not at all (a checked-hash one) was cached under
a key that claimed more, and outlived the ``.pyc`` it was made from.

A file whose header does not match, or that does not unmarshal to a code object, is
ignored and rewritten.  Writes go to a temporary file renamed into place, so concurrent
importers never read half a file.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import _imp
import io
import marshal
import os
import sys
import threading
from importlib.util import MAGIC_NUMBER, cache_from_source
from types import CodeType

from .. import __version__, _debug
from ..rewrite import _names

FORMAT = b"cassette_hook pyc 6\n"
SWITCHED, LIGHT, FUNCTIONS, BODY = "", ".light", ".functions", ".body"  # the kinds of file
_RAW_MAGIC_NUMBER = int.from_bytes(MAGIC_NUMBER, "little")  # the key of CPython's source hashes (PEP 552)
_HEADER = 16  # the length of a .pyc's header: magic, flags, and a timestamp and size or a source hash


def cpython_path(source_path: str) -> str | None:
    """Where CPython keeps the ``.pyc`` of ``source_path``, or ``None`` if nowhere."""
    try:
        return cache_from_source(source_path)
    except (NotImplementedError, ValueError):  # no cache tag, or an odd path
        return None


def path_for(source_path: str, kind: str = SWITCHED) -> str | None:
    """Where the code of ``kind`` made from ``source_path`` is cached, or ``None`` if nowhere."""
    cpython = cpython_path(source_path)
    return None if cpython is None else beside(cpython, kind)


def beside(cpython: str, kind: str = SWITCHED) -> str:
    """Where the code of ``kind`` made from the source of CPython's ``.pyc`` at ``cpython`` is cached."""
    return cpython.removesuffix(".pyc") + suffix(kind) + ".pyc"


def suffix(kind: str) -> str:
    """What the name of a file of ``kind`` adds to CPython's: switched code names the hot
    path it calls (``_names.variant``), light code is the same on both, and is read before
    the hot path is loaded."""
    if kind == LIGHT:
        return f".cassette_hook{kind}"
    variant = _names.variant()
    return f".cassette_hook{'' if variant == 'c' else '.' + variant}{kind}"


class Basis:
    """The ``.pyc`` of CPython's whose code a cache file's code was made from: its ``stat``
    (the identity of the file: CPython replaces a ``.pyc`` by renaming a new file onto it),
    its ``header`` (what CPython checks against the source) and a ``digest`` of all of it
    (what the code is: the same bytes, the same code)."""

    __slots__ = ("stat", "header", "digest")

    def __init__(self, stat: os.stat_result, header: bytes, digest: bytes) -> None:
        self.stat, self.header, self.digest = stat, header, digest

    @classmethod
    def of(cls, stat: os.stat_result, data: bytes) -> Basis:
        """The basis of the ``.pyc`` that ``stat`` describes, whose bytes are ``data``."""
        return cls(stat, bytes(data[:_HEADER]), _digest(data))


def _digest(data: bytes) -> bytes:
    return _imp.source_hash(_RAW_MAGIC_NUMBER, data)  # (CPython's own hash of sources: 64 bits, fast)


def _identity(pyc: os.stat_result) -> str:
    return f"{pyc.st_ino} {pyc.st_size} {pyc.st_mtime_ns}"


def _fixed(module: str, options: str, kind: str) -> bytes:
    """A header up to the record of CPython's ``.pyc``."""
    return MAGIC_NUMBER + FORMAT + f"{__version__} {options} {suffix(kind)} {module} ".encode()


def key(basis: Basis, module: str, options: str, kind: str = SWITCHED) -> bytes:
    """The header of a file of ``kind`` whose code was made from ``basis``'s code for these
    options and this module.  A file of switched functions is made from the code in memory
    of a module imported light (``lazy_mode``), which its ``.pyc``'s contents identify; the
    others also record where that ``.pyc`` was, to be found valid with a ``stat`` of it."""
    record = f"{basis.header.hex()} {basis.digest.hex()}"
    if kind != FUNCTIONS:
        record += f" {_identity(basis.stat)}"
    return _fixed(module, options, kind) + record.encode() + b"\n"


def read(path: str, expected: bytes) -> tuple[CodeType | tuple[CodeType | None, ...] | None, str]:
    """The cached code (or tuple of code, a ``.functions`` file's with None for each function
    not switched yet) at ``path`` if its header is ``expected``, else
    ``None``; and what happened, in words, for ``--debug import``: ``hit``, ``miss``,
    ``stale``, ``corrupt``."""
    data = _contents(path)
    if data is None:
        return None, "miss"
    if not data.startswith(expected):
        return None, "stale"
    return _code(memoryview(data)[len(expected):])


def read_mirroring(path: str, cpython: str, source_path: str, module: str, options: str,
                   kind: str) -> tuple[CodeType | tuple[CodeType | None, ...] | None, str, Basis | None]:
    """As :func:`read`, for code made from what CPython's import gives for ``source_path``
    now: valid while CPython's ``.pyc`` (at ``cpython``) is the one it was made from and
    CPython trusts it for the source (:func:`trusted`).  Also the basis of the code found.

    A ``.pyc`` that is another file than the one recorded but holds the same bytes (made by
    another process importing at the same time, or copied with the tree) is as good: the
    file is then stamped with its identity, so that the next import needs only a ``stat``,
    not a read of CPython's ``.pyc``."""
    data = _contents(path)
    if data is None:
        return None, "miss", None
    fixed = _fixed(module, options, kind)
    end = data.find(b"\n", len(fixed))
    if not data.startswith(fixed) or end < 0:
        return None, "stale", None
    try:
        header_hex, digest_hex, *identity = data[len(fixed):end].decode("ascii").split(" ")
        header, digest = bytes.fromhex(header_hex), bytes.fromhex(digest_hex)
    except ValueError:  # (UnicodeDecodeError too)
        return None, "corrupt", None
    if len(header) != _HEADER or len(identity) != 3:
        return None, "corrupt", None
    try:
        pyc = os.stat(cpython)
    except OSError:  # (removed, as a package manager or ``compileall`` does: CPython compiles the source)
        return None, "stale", None
    moved = " ".join(identity) != _identity(pyc)
    if moved:
        there = _with_stat(cpython)
        if there is None or there[1][:_HEADER] != header or _digest(there[1]) != digest:
            return None, "stale", None
        pyc = there[0]
    if not trusted(header, source_path):
        return None, "stale", None
    code, found = _code(memoryview(data)[end + 1:])
    basis = Basis(pyc, header, digest)
    if code is not None and moved and not sys.dont_write_bytecode:
        _write(path, key(basis, module, options, kind) + data[end + 1:], pyc.st_mode)
    return code, found, basis


def trusted(header: bytes, source_path: str) -> bool:
    """Would CPython run the code of a ``.pyc`` with this ``header`` for ``source_path`` as
    it is now?  The decisions of ``importlib``'s ``SourceLoader.get_code`` (PEP 552): a
    timestamp ``.pyc`` holds while the source's size and modification time in whole seconds
    are the ones it records; a hash-based one is checked against the hash of the source
    when it says so (checked) or ``--check-hash-based-pycs always`` says so, never with
    ``--check-hash-based-pycs never``, and otherwise (unchecked) holds whatever the source."""
    try:
        source = os.stat(source_path)  # (CPython reads no .pyc for a source it cannot stat)
    except OSError:
        return False
    if header[:4] != MAGIC_NUMBER:
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags & ~0b11:
        return False  # (flags CPython does not know)
    if not flags & 0b1:  # a timestamp .pyc
        return (int.from_bytes(header[8:12], "little") == int(source.st_mtime) & 0xFFFFFFFF
                and int.from_bytes(header[12:16], "little") == source.st_size & 0xFFFFFFFF)
    check = _imp.check_hash_based_pycs
    if check == "never" or not (flags & 0b10 or check == "always"):
        return True
    try:
        with io.open_code(source_path) as file:  # (as CPython reads a source)
            data = file.read()
    except OSError:
        return False
    return _imp.source_hash(_RAW_MAGIC_NUMBER, data) == header[8:16]


def written(cpython: str, data: bytes) -> Basis | None:
    """The basis of code CPython has just compiled and written to ``cpython`` as ``data``,
    if the file there holds that (another process may have replaced it meanwhile, with a
    compilation of another source)."""
    there = _with_stat(cpython)
    return Basis.of(*there) if there is not None and there[1] == data else None


def _with_stat(path: str) -> tuple[os.stat_result, bytes] | None:
    """The ``fstat`` of the file at ``path`` and its contents, read through one descriptor."""
    try:
        with open(path, "rb") as file:
            return os.fstat(file.fileno()), file.read()
    except OSError:
        return None


def _contents(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None


def _code(data: memoryview) -> tuple[CodeType | tuple[CodeType | None, ...] | None, str]:
    try:
        code = marshal.loads(data)
    except (EOFError, ValueError, TypeError):  # truncated or corrupt
        return None, "corrupt"
    if isinstance(code, CodeType) or isinstance(code, tuple) and all(
            isinstance(c, CodeType) or c is None for c in code):  # (None: a function not switched yet)
        return code, "hit"
    return None, "corrupt"


def write(path: str, code: CodeType | tuple[CodeType | None, ...], basis: Basis | None, module: str, options: str,
          kind: str = SWITCHED) -> str:
    """Cache ``code``, made from ``basis``'s code, at ``path``; quietly do nothing where that
    is impossible (a read-only tree, ``sys.dont_write_bytecode``), as CPython does for its
    own files, or where there is no basis (CPython kept no ``.pyc`` for the source, so there
    is nothing to know the code is still CPython's by).  Returns what happened, in words,
    for ``--debug import``; where the cause would hold at every run, the cold start's
    notice hears it too (``_debug.Progress.not_cached``)."""
    if sys.dont_write_bytecode:
        _debug.progress.not_cached("sys.dont_write_bytecode is set: PYTHONDONTWRITEBYTECODE or -B",
                                   "unset it to have it cached beside CPython's .pyc files")
        return "not written (sys.dont_write_bytecode)"
    if basis is None:
        _debug.progress.not_cached("CPython keeps no .pyc of its own for the sources",
                                   f"let CPython write its .pyc files ({_WRITABLE})")
        return "not written (CPython wrote no .pyc of its own for it to mirror)"
    try:
        data = marshal.dumps(code)
    except ValueError as exc:  # a constant marshal cannot write
        return f"not written ({exc})"
    written = _write(path, key(basis, module, options, kind) + data, basis.stat.st_mode)
    if written.startswith("not writable"):
        _debug.progress.not_cached(f"{path!r} is {written}", f"cache it elsewhere ({_WRITABLE})")
    return written


_WRITABLE = "PYTHONPYCACHEPREFIX set to a writable directory puts both caches there"


def _write(path: str, data: bytes, mode: int) -> str:
    """Write ``data`` to ``path`` atomically, with the permissions of CPython's ``.pyc``
    (``mode``), as CPython writes its own (``_write_atomic``), not with ``tempfile``, whose
    import (``shutil``, ``random``) would cost a cold import several milliseconds: to a
    temporary name of this process and thread, created exclusively (so two writers never
    share one), then renamed into place.  A file left there by a killed process of the
    same id makes this write give up, as any unwritable cache does."""
    temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    flags, permissions = os.O_CREAT | os.O_EXCL | os.O_WRONLY, (mode & 0o666) | 0o200
    try:
        try:
            fd = os.open(temporary, flags, permissions)
        except FileNotFoundError:  # (its directory is made only where missing: most are
            # CPython's ``__pycache__``, just written, and a ``makedirs`` of one that exists
            # costs a failed ``mkdir`` and an exception: 1% of networkx's first run)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(temporary, flags, permissions)
    except OSError as exc:
        return f"not writable ({exc.strerror or exc})"
    try:
        with open(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except OSError as exc:  # disk full
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return f"not written ({exc})"
    return "written"
