"""What is cassette_hook's own code: one rule, by module name and by file.

cassette_hook never rewrites, recurses into or instruments its own code: rewritten code
calls into it, which must not call back into rewritten code of its own.  And where it
stands in for the program (a frame-sensitive builtin evaluated against the caller's
frame, the command line printing an uncaught exception, an annotation resolved in the
registering function's namespace) it skips its own frames to find the program's.  Both
ask this module: a module is ours if it is the package or in it (``cassette_hook_x`` is
not), a frame or code object is ours if its file is in the package's directory (which
counts ``python -m cassette_hook``'s ``__main__``, whose module name is not ours).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # (typing's would import typing at every start: see the package's __getattr__)
if TYPE_CHECKING:
    from types import FrameType

PACKAGE = __name__.partition(".")[0]
RUNS_ON = ("bytecode", "importlib_metadata", "zipp", "lazy_importer")
"""The packages cassette_hook's own code calls while a context is active (to rewrite, to
read entry points): never instrumented, as its own code is not."""
_DIRECTORY = os.path.dirname(os.path.abspath(__file__)) + os.sep


def is_own_module(name: str) -> bool:
    """Is the module named ``name`` cassette_hook or one of its modules?"""
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def is_own_file(filename: str) -> bool:
    """Is ``filename`` (a code object's ``co_filename``) one of cassette_hook's files?"""
    return filename.startswith(_DIRECTORY)


def is_own_frame(frame: FrameType) -> bool:
    """Does ``frame`` run cassette_hook's own code?"""
    return frame.f_code.co_filename.startswith(_DIRECTORY)
