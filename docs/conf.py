"""Sphinx configuration for the cassette_hook documentation.

Build with ``tox -e docs`` or ``sphinx-build -W -b html docs docs/_build/html``.
"""

from __future__ import annotations

import os
import sys

# Document the package from this work tree, installed or not.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import cassette_hook  # noqa: E402

project = "cassette_hook"
author = "the cassette_hook authors"
copyright = "the cassette_hook authors"  # noqa: A001 -- the Sphinx setting's name
release = cassette_hook.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Markdown: heading anchors let pages link to each other's sections.
myst_heading_anchors = 3

# API reference.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "alabaster"
html_title = f"cassette_hook {release}"
html_theme_options = {
    "description": "Cassette.jl-style execution contexts for unmodified Python code",
    "fixed_sidebar": True,
}


def _literal_stars(app, what, name, obj, options, lines):  # noqa: ANN001 -- Sphinx's event signature
    """The generics' one-line docstrings show call shapes such as ``f(*args)``: keep the
    stars literal instead of letting reStructuredText read them as emphasis."""
    if isinstance(obj, cassette_hook.Generic):
        lines[:] = [line.replace("*", r"\*") for line in lines]


def setup(app):  # noqa: ANN001, ANN201 -- Sphinx's extension entry point
    app.connect("autodoc-process-docstring", _literal_stars)
