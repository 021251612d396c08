"""The package's structure, as docs/internals.md describes it: the per-version rewriting
modules implement one declared interface, and one rule says what code is cassette_hook's."""

from __future__ import annotations

import importlib
import inspect
import os
import sys

import pytest

import cassette_hook
import cassette_hook as ch
import cassette_hook.plan
from cassette_hook import _own
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


# -- one rule for cassette_hook's own code ---------------------------------------------

def test_own_modules_are_the_package_and_its_modules_only() -> None:
    assert _own.is_own_module("cassette_hook")
    assert _own.is_own_module("cassette_hook.contexts.trace")
    assert not _own.is_own_module("cassette_hook_plugins")
    assert not _own.is_own_module("my.cassette_hook")


def test_own_files_are_those_in_the_package_directory_only() -> None:
    package = os.path.dirname(cassette_hook.__file__)
    assert _own.is_own_file(cassette_hook.plan.__file__)
    assert _own.is_own_file(os.path.join(package, "contexts", "trace.py"))
    assert not _own.is_own_file(package + "_plugins" + os.sep + "mod.py")


def test_a_hook_registered_from_a_module_named_like_the_package_sees_its_local_classes() -> None:
    """Resolving string annotations skips cassette_hook's frames to find the registering
    function's locals; a user module whose name merely starts like ours is not skipped."""
    source = (
        "from __future__ import annotations\n"
        "import cassette_hook as ch\n"
        "def register():\n"
        "    class Local: pass\n"
        "    class Ctx(ch.Context):\n"
        "        def prehook(self, f, x: Local): self.metadata.append(x)\n"
        "    return Ctx, Local\n"
    )
    namespace: dict[str, object] = {"__name__": "cassette_hook_plugins"}
    exec(compile(source, "cassette_hook_plugins.py", "exec"), namespace)
    ctx_type, local = namespace["register"]()  # type: ignore[operator]
    seen: list[object] = []
    value = local()
    ch.overdub(ctx_type(metadata=seen), lambda: id(value))
    assert seen == [value]
