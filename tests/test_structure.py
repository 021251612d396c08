"""The package's structure, as docs/internals.md describes it: its modules form layers,
each importing only from below; the per-version rewriting modules implement one declared
interface; one rule says what code is cassette_hook's; and the C accelerator's functions
name the Python functions they mirror."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pathlib
import re
import sys

import pytest

import cassette_hook
import cassette_hook as ch
import cassette_hook.runtime.plan
from cassette_hook import _native, _own
from cassette_hook.rewrite import _family
from cassette_hook.runtime import interface

# -- layers ------------------------------------------------------------------------------

PACKAGE = pathlib.Path(cassette_hook.__file__).parent


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Every import of a package module by another: at module level or in a function, but
    not for annotations (``if TYPE_CHECKING:``), nor of a module's own package, which
    Python imports before the module anyway."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py") if "_site" not in path.parts}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text())
        annotations_only = {id(node) for block in ast.walk(tree)
                            if isinstance(block, ast.If) and getattr(block.test, "id", None) == "TYPE_CHECKING"
                            for node in ast.walk(block)}
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        imported: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in annotations_only:
                continue
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package, or one of its parents
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                imported.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base
                                for alias in node.names)
        graph[module] = {name for name in imported
                         if name in paths and name != module and not module.startswith(name + ".")}
    return graph


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of imports in ``graph``, if there is one."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        for imported in sorted(graph[module]):
            cycle = visit(imported, [*path, module])
            if cycle:
                return cycle
        done.add(module)
        return None

    return next(filter(None, (visit(module, []) for module in sorted(graph))), None)


def test_the_import_graph_finds_a_cycle_where_there_is_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _a_cycle(graph) == ["a", "b", "c", "a"]
    assert _a_cycle({"a": {"b"}, "b": set()}) is None


def test_the_import_graph_sees_imports_inside_functions() -> None:
    graph = _import_graph()
    assert "cassette_hook.runtime.callsites" in graph["cassette_hook"]  # (the runtime, loaded on first use)
    # (with ``bytecode``, when needed)
    assert "cassette_hook.importhook.dual_code" in graph["cassette_hook.importhook.finder"]


def test_every_module_imports_only_from_layers_below_it() -> None:
    """No import cycle, at module level or in a function: the modules form layers."""
    assert _a_cycle(_import_graph()) is None


# -- one interface per CPython version --------------------------------------------------

VERSION_MODULES = ("_py310", "_py311", "_py312", "_py313", "_py314", "_py315")
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
    expected = f"_py3{min(sys.version_info[1], 15)}"
    assert type(_family.family).__module__ == f"cassette_hook.rewrite.{expected}"


def test_only_the_version_modules_ask_which_python_runs() -> None:
    """Bytecode details live behind the interface: the rest of the rewriting never
    branches on the version (the family's selection is the one place that does)."""
    import cassette_hook.passes
    import cassette_hook.importhook.dual_code
    import cassette_hook.rewrite._rewriter

    for module in (cassette_hook.passes, cassette_hook.importhook.dual_code, cassette_hook.rewrite._rewriter):
        assert "version_info" not in inspect.getsource(module), module.__name__


# -- one interface for the runtime, two implementations -------------------------------

RUNTIME_INTERFACE = {name for name in dir(interface.Runtime) if not name.startswith("_")} | set(
    interface.Runtime.__annotations__)


def _c_module() -> object:
    """``_speedups``, imported here whichever implementation this run chose (every test
    environment builds it; the -pure ones only do not use it)."""
    return importlib.import_module("cassette_hook._speedups")


def _implementations() -> list[object]:
    """Both implementations, made here whichever this run chose."""
    return [_native.Python("made by the test"), _native.C(_c_module(), "made by the test")]


@pytest.mark.parametrize("implementation", _implementations(), ids=lambda made: made.name)
def test_every_runtime_implementation_provides_the_whole_interface(implementation: object) -> None:
    missing = {name for name in RUNTIME_INTERFACE if not hasattr(implementation, name)}
    assert not missing
    for name in RUNTIME_INTERFACE:
        declared = getattr(interface.Runtime, name, None)
        if callable(declared):
            try:
                implemented = inspect.signature(getattr(implementation, name))
            except ValueError:  # a C function without a text signature: its name is what Python sees
                continue
            assert list(implemented.parameters) == list(inspect.signature(declared).parameters)[1:], name


def test_the_c_accelerator_has_every_accelerated_name() -> None:
    module = _c_module()
    assert {name for name in _native.ACCELERATED if not hasattr(module, name)} == set()


def _accelerated_names_asked() -> set[str]:
    """The names the package's modules hand to ``accelerated``, with their Python versions."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "accelerated"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                names.add(node.args[0].value)
    return names


def test_every_accelerated_name_has_a_python_version_handed_in_by_its_module() -> None:
    assert _accelerated_names_asked() == _native.ACCELERATED


def test_the_c_implementation_refuses_a_name_not_declared_accelerated() -> None:
    implementation = _native.C(_c_module(), "made by the test")
    with pytest.raises(AssertionError, match="'bind' is not declared in _native.ACCELERATED"):
        implementation.accelerated("bind", None)


def test_only_the_chooser_asks_whether_c_is_loaded() -> None:
    """The modules ask the chosen implementation (``_native.runtime``), never for the C
    module itself: ``_native`` is the one place that loads it and chooses."""
    asking = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                    if path.name != "_native.py" and re.search(r"_native\.speedups|\bspeedups is (not )?None",
                                                                 path.read_text()))
    assert asking == []


def test_the_runtime_in_use_is_the_one_the_environment_asks_for() -> None:
    pure = os.environ.get("CASSETTE_HOOK_PURE_PYTHON") or _native.optional("._speedups") is None
    assert _native.runtime.name == ("Python" if pure else "C")


# -- one rule for cassette_hook's own code ---------------------------------------------

def test_own_modules_are_the_package_and_its_modules_only() -> None:
    assert _own.is_own_module("cassette_hook")
    assert _own.is_own_module("cassette_hook.contexts.trace")
    assert not _own.is_own_module("cassette_hook_plugins")
    assert not _own.is_own_module("my.cassette_hook")


def test_own_files_are_those_in_the_package_directory_only() -> None:
    package = os.path.dirname(cassette_hook.__file__)
    assert _own.is_own_file(cassette_hook.runtime.plan.__file__)
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


# -- the C accelerator names its Python counterparts ------------------------------------
#
# cassette_hook/_speedups/ is one extension built from one file per concept, each mirroring
# one Python module (docs/internals.md, "The C hot path").  Every function the extension
# exports -- its method table's, and its types' methods -- says above its definition
# which Python function it mirrors, "/* Mirrors module.name. */", or why it has none,
# "/* C only: ... */".  The sources are read from the checkout (the tests directory's
# sibling), not from the installed package, which does not ship them.

C_SOURCES = pathlib.Path(__file__).resolve().parent.parent / "cassette_hook" / "_speedups"
METHOD_TABLE = re.compile(r"^(?:static )?PyMethodDef (\w+)(?:\[\])? = (\{.*?)\};", re.M | re.S)
METHOD_ENTRY = re.compile(r'\{"(\w+)",\s*(?:\(PyCFunction\))?(?:\(void \(\*\)\(void\)\))?(\w+),')


def _c_sources() -> dict[str, str]:
    sources = {path.name: path.read_text() for path in sorted(C_SOURCES.glob("*.c"))}
    assert "module.c" in sources, f"the accelerator's sources are not in {C_SOURCES}"
    return sources


def _exported_c_functions(sources: dict[str, str]) -> dict[str, str]:
    """C function -> the name Python sees it by, for every entry of every PyMethodDef."""
    exported = {}
    for text in sources.values():
        for _table, body in METHOD_TABLE.findall(text):
            for python_name, c_name in METHOD_ENTRY.findall(body):
                exported[c_name] = python_name
    return exported


def _counterpart_note(sources: dict[str, str], function: str) -> str | None:
    """The "Mirrors module.name." or "C only: why." line above function's definition."""
    definition = re.compile(r"^/\* (Mirrors [\w.]+\.|C only: [^\n]+?) \*/\n(?:static )?[A-Za-z_][\w ]*\**\n"
                            + re.escape(function) + r"\(", re.M)
    for text in sources.values():
        found = definition.search(text)
        if found:
            return found.group(1)
    return None


def _missing_counterpart(dotted: str) -> str | None:
    """What is missing of cassette_hook.<dotted> (a module, then attributes), or None."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module("cassette_hook." + ".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            if not hasattr(obj, attribute):
                return f"{attribute} in {dotted}"
            obj = getattr(obj, attribute)
        return None
    return f"the module of {dotted}"


def _counterpart_problems(sources: dict[str, str]) -> list[str]:
    problems = []
    for function, python_name in sorted(_exported_c_functions(sources).items()):
        note = _counterpart_note(sources, function)
        if note is None:
            problems.append(f"{function} ({python_name}): no 'Mirrors module.name.' or 'C only: ...' line")
        elif note.startswith("Mirrors "):
            missing = _missing_counterpart(note.removeprefix("Mirrors ").removesuffix("."))
            if missing is not None:
                problems.append(f"{function} ({python_name}): {note} names no function: no {missing}")
    return problems


def test_the_accelerators_sources_are_one_file_per_concept_in_the_checkout() -> None:
    names = set(_c_sources())
    assert {"module.c", "callsite.c", "bodies.c", "operators.c", "primitives.c", "dispatch.c", "tagging.c",
            "context.c", "switch.c"} <= names
    assert {"state.h", "compat.h", "internal.h"} <= {path.name for path in C_SOURCES.glob("*.h")}


def test_only_compat_h_asks_which_cpython_version_it_is_built_for() -> None:
    # (compat.h's own rule: the concept files name a feature, never a version)
    asking = [name for name, text in _c_sources().items() if "PY_VERSION_HEX" in text]
    asking += [path.name for path in sorted(C_SOURCES.glob("*.h"))
               if path.name != "compat.h" and "PY_VERSION_HEX" in path.read_text()]
    assert asking == []


def test_the_method_tables_are_found() -> None:
    exported = _exported_c_functions(_c_sources())
    assert exported["call"] == "call" and exported["present_c"] == "present"
    assert exported["dispatcher_resolve"] == "resolve" and exported["context_exit"] == "__exit__"
    assert len(exported) >= 40


def test_every_exported_c_function_names_an_existing_python_counterpart_or_says_it_has_none() -> None:
    assert _counterpart_problems(_c_sources()) == []


def test_a_misnamed_or_missing_counterpart_is_reported() -> None:
    sources = {
        "module.c": ('static PyMethodDef methods[] = {\n    {"a", a, METH_O, ""},\n'
                     '    {"b", (PyCFunction)b, METH_O, ""},\n    {"c", c, METH_O, ""},\n    {NULL},\n};\n'),
        "a.c": "/* Mirrors callsite.method_site. */\nPyObject *\na(PyObject *m, PyObject *x)\n{\n}\n",
        "b.c": "/* Mirrors generics._construction. */\nstatic PyObject *\nb(PyObject *m, PyObject *x)\n{\n}\n",
        "c.c": "/* Calls things. */\nPyObject *\nc(PyObject *m, PyObject *x)\n{\n}\n",
    }
    problems = _counterpart_problems(sources)
    assert len(problems) == 3
    assert "callsite.method_site" in problems[0] and "generics._construction" in problems[1]
    assert "no 'Mirrors" in problems[2]
    sources["a.c"] = sources["a.c"].replace("callsite.method_site", "runtime.callsites.call")
    sources["b.c"] = sources["b.c"].replace("generics._construction", "runtime.callees._construction")
    sources["c.c"] = sources["c.c"].replace("Calls things.", "C only: calls things.")
    assert _counterpart_problems(sources) == []
