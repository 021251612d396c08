"""The package's structure, as docs/internals.md describes it: the per-version rewriting
modules implement one declared interface."""

from __future__ import annotations

import importlib
import inspect
import sys

import pytest

from cassette_hook.rewrite import _family

VERSION_MODULES = ("_py310", "_py311", "_py312", "_py313")
INTERFACE = {name for name in dir(_family.Family) if not name.startswith("_")} | set(
    _family.Family.__annotations__)


@pytest.mark.parametrize("module", VERSION_MODULES)
def test_every_version_module_implements_the_whole_family_interface(module: str) -> None:
    family = importlib.import_module(f"cassette_hook.rewrite.{module}").FAMILY
    missing = {name for name in INTERFACE if not hasattr(family, name)}
    assert not missing
    for name in INTERFACE:
        declared = getattr(_family.Family, name, None)
        if callable(declared):
            implemented = inspect.signature(getattr(family, name))
            assert list(implemented.parameters) == list(inspect.signature(declared).parameters)[1:], name


def test_the_running_family_is_the_running_pythons() -> None:
    expected = f"_py3{min(sys.version_info[1], 13)}"
    assert type(_family.family).__module__ == f"cassette_hook.rewrite.{expected}"


def test_only_the_version_modules_ask_which_python_runs() -> None:
    """Bytecode details live behind the interface: the rest of the rewriting never
    branches on the version (the family's selection is the one place that does)."""
    import cassette_hook.passes
    import cassette_hook.rewrite._dual
    import cassette_hook.rewrite._rewriter

    for module in (cassette_hook.passes, cassette_hook.rewrite._dual, cassette_hook.rewrite._rewriter):
        assert "version_info" not in inspect.getsource(module), module.__name__
