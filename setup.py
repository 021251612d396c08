"""The optional C accelerators: the hot path (``cassette_hook/_speedups/``, one extension from
several sources), the
profile's hooks (``cassette_hook/contexts/_recording.c``), on CPython 3.12+, the
function watcher of the lazy import hook (``cassette_hook/importhook/_watch.c``), the assembler's line
table and loop (``cassette_hook/rewrite/_assembly.c``), the decoder's loop
(``cassette_hook/rewrite/_decoding.c``), the stack walks' loops
(``cassette_hook/rewrite/_stacking.c``), and the helper that
makes SIGTERM reach a blocked process's Python handler (``cassette_hook/cli/_sigterm.c``).

Everything else is in ``pyproject.toml`` and ``setup.cfg``.  The extensions are optional: a
machine without a C compiler installs the package without them, and the modules they
speed up run their pure-Python versions (see docs/internals.md, "The C hot path").
"""

import glob
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SPEEDUPS = "cassette_hook._speedups"


class BuildExt(build_ext):
    """``_speedups`` is compiled with link-time optimization where the compiler is a Unix
    one (gcc, clang): its files, one per concept, call each other on the hot path (a call
    site's ``resolve`` reads a twin table in ``weakid.c``), calls that the compiler inlined
    when they were one file, and inlines again across files at link time."""

    def build_extension(self, ext: Extension) -> None:
        if ext.name == SPEEDUPS and self.compiler.compiler_type == "unix":
            ext.extra_compile_args = [*ext.extra_compile_args, "-flto"]
            ext.extra_link_args = [*ext.extra_link_args, "-flto"]
        super().build_extension(ext)


setup(cmdclass={"build_ext": BuildExt}, ext_modules=[
    Extension(SPEEDUPS, sorted(glob.glob("cassette_hook/_speedups/*.c")), optional=True,
              depends=sorted(glob.glob("cassette_hook/_speedups/*.h"))),
    Extension("cassette_hook.contexts._recording", ["cassette_hook/contexts/_recording.c"], optional=True),
    Extension("cassette_hook.importhook._watch", ["cassette_hook/importhook/_watch.c"], optional=True),
    Extension("cassette_hook.rewrite._assembly", ["cassette_hook/rewrite/_assembly.c"], optional=True,
              depends=["cassette_hook/rewrite/_slots.h"]),
    Extension("cassette_hook.rewrite._decoding", ["cassette_hook/rewrite/_decoding.c"], optional=True,
              depends=["cassette_hook/rewrite/_slots.h"]),
    Extension("cassette_hook.rewrite._stacking", ["cassette_hook/rewrite/_stacking.c"], optional=True,
              depends=["cassette_hook/rewrite/_slots.h"]),
    Extension("cassette_hook.cli._sigterm", ["cassette_hook/cli/_sigterm.c"], optional=True,
              libraries=["rt"] if sys.platform.startswith("linux") else []),  # (timer_create: in libc from glibc 2.34)
])
