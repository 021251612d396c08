"""The optional C accelerators: the hot path (``cassette_hook/_speedups/``, one extension from
several sources), the
profile's hooks (``cassette_hook/contexts/_recording.c``), on CPython 3.12+, the
function watcher of the lazy import hook (``cassette_hook/_watch.c``), and the helper that
makes SIGTERM reach a blocked process's Python handler (``cassette_hook/_sigterm.c``).

Everything else is in ``pyproject.toml`` and ``setup.cfg``.  The extensions are optional: a
machine without a C compiler installs the package without them, and the modules they
speed up run their pure-Python versions (see docs/internals.md, "The C hot path").
"""

import glob
import sys

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("cassette_hook._speedups", sorted(glob.glob("cassette_hook/_speedups/*.c")), optional=True,
              depends=sorted(glob.glob("cassette_hook/_speedups/*.h"))),
    Extension("cassette_hook.contexts._recording", ["cassette_hook/contexts/_recording.c"], optional=True),
    Extension("cassette_hook._watch", ["cassette_hook/_watch.c"], optional=True),
    Extension("cassette_hook._sigterm", ["cassette_hook/_sigterm.c"], optional=True,
              libraries=["rt"] if sys.platform.startswith("linux") else []),  # (timer_create: in libc from glibc 2.34)
])
