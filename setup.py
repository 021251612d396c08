"""The optional C accelerator of the hot path (``cassette_hook/_speedups.c``).

Everything else is in ``pyproject.toml`` and ``setup.cfg``.  The extension is optional: a
machine without a C compiler installs the package without it, and ``callsite.py`` runs its
pure-Python hot path (see docs/internals.md, "The C hot path").
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("cassette_hook._speedups", ["cassette_hook/_speedups.c"], optional=True)])
