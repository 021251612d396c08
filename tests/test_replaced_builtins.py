"""A builtin the program replaces in ``builtins`` is the program's business only.

cassette_hook's own code calls the builtins as they were when it was imported
(docs/internals.md, "The engine's builtins"): a program's ``builtins.tuple = my_tuple``
is called as often under the null, a counting and the profile context as plain, with the
same result, and code the program runs (its functions' twins, what it ``exec``s, the
functions it makes) keeps reading the program's builtins.  The fuzzer found the opposite (docs/fuzzing.md, "The fourth
campaign"): the engine called the program's replacements too, and under a context whose
hooks see every call, recursed into them until ``RecursionError``.
"""

from __future__ import annotations

import ast
import builtins
import pathlib
import sys
from types import FunctionType
from typing import Any, Callable

import pytest

import cassette_hook as ch
from cassette_hook._builtins import BUILTINS
from cassette_hook._own import is_own_file

PACKAGE = pathlib.Path(ch.__file__).parent


class Counting(ch.Context):
    def prehook(self, f, /, *args, **kwargs):
        self.metadata.append(f)


CONTEXTS: dict[str, Callable[[], ch.Context]] = {
    "null": ch.NullContext,
    "counting": lambda: Counting(metadata=[]),
    "profile": ch.ProfileContext,
}


def program() -> Any:
    """Calls of each builtin replaced below, of generators and of what they make (as the
    fuzzer's programs): what the plain run and a context's are compared by."""
    squares = tuple(i * i for i in range(6))
    odd = list(x for x in squares if x % 2)
    kinds = [isinstance(x, int) for x in odd] + [isinstance(squares, (frozenset, str))]
    first = next(x for x in odd if x > 1)
    return len(squares), len(odd), squares, odd, kinds, getattr(first, "real")  # noqa: B009 (a call of the builtin replaced)


def warm_up() -> Any:
    return tuple(len(x) for x in [[1], [2, 3]])


@pytest.fixture(autouse=True)
def _rewriting_imported() -> None:
    """Something rewritten before: ``bytecode`` is imported (its import runs standard-library
    code, ``typing``'s and ``enum``'s, which looks up the program's builtins: docs/internals.md,
    "The engine's builtins"); ``program`` is first rewritten under the replacement."""
    ch.overdub(Counting(metadata=[]), warm_up)


def replacing(name: str, calls: list[str]) -> Callable[..., Any]:
    """A Python function that stands for the builtin ``name`` and notes each call."""
    real = getattr(builtins, name)

    def replacement(*args: Any) -> Any:
        calls.append(name)
        return real(*args)

    replacement.__name__ = replacement.__qualname__ = f"counting_{name}"
    return replacement


def run(name: str, under: Callable[[], ch.Context] | None) -> tuple[Any, list[str], ch.Context | None]:
    """``program()`` with ``builtins.<name>`` replaced, plainly or overdubbed under a new
    context made by ``under`` (the program's twin made then, with the replacement in
    place): its result, the replacement's calls, the context."""
    calls: list[str] = []
    real = getattr(builtins, name)
    setattr(builtins, name, replacing(name, calls))
    try:
        ctx = None if under is None else under()
        fresh = FunctionType(program.__code__.replace(), globals())  # (a code never rewritten: its twin made now)
        result = fresh() if ctx is None else ch.overdub(ctx, fresh)
    finally:
        setattr(builtins, name, real)
    return result, calls, ctx


REPLACED = ["tuple", "list", "isinstance", "len", "next", "getattr"]
# Before 3.12 the engine rewrites through ``bytecode``'s ``ConcreteBytecode``, whose flags
# are an ``enum.IntFlag``: ``enum``'s Python code (``Flag.__and__``, ``_missing_``), the
# standard library's, calls the program's ``isinstance`` (docs/internals.md, "The engine's
# builtins": a known gap).
KNOWN_GAPS = {"isinstance"} if sys.version_info < (3, 12) else set()
REPLACED_NOW = [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason="enum's code calls it: a known gap"))
                if name in KNOWN_GAPS else name for name in REPLACED]


@pytest.mark.parametrize("context", list(CONTEXTS))
@pytest.mark.parametrize("name", REPLACED_NOW)
def test_a_builtin_the_program_replaced_is_called_as_often_under_a_context_as_plain(name: str, context: str) -> None:
    plain, plain_calls, _ = run(name, None)
    assert plain_calls  # (the program does call it)

    overdubbed, calls, _ = run(name, CONTEXTS[context])

    assert overdubbed == plain
    assert calls == plain_calls


def test_code_the_program_execs_under_a_context_reads_the_builtins_it_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    # (as gettext.install's ``_``: the namespace exec gives builtins is the program's frame's)
    def execs() -> Any:
        namespace: dict[str, Any] = {}
        exec("found = cassette_hook_test_added", namespace)
        return namespace["found"], namespace["__builtins__"] is vars(builtins)

    monkeypatch.setattr(builtins, "cassette_hook_test_added", "added", raising=False)
    plain = execs()

    assert ch.overdub(Counting(metadata=[]), execs) == plain == ("added", True)


def test_a_function_the_program_makes_with_globals_of_no_builtins_reads_the_programs_under_a_context(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # (``FunctionType`` takes the calling frame's builtins then: the program's, not the engine's)
    def makes() -> Any:
        made = FunctionType(compile("cassette_hook_test_added", "<made>", "eval"), {})
        return made(), made.__builtins__ is vars(builtins)

    monkeypatch.setattr(builtins, "cassette_hook_test_added", "added", raising=False)
    plain = makes()

    assert ch.overdub(Counting(metadata=[]), makes) == plain == ("added", True)


def _binds_the_builtins_of_its_import(path: pathlib.Path) -> bool:
    """Does the module at ``path`` bind ``__builtins__`` to ``BUILTINS`` before it defines
    a function or a class?"""
    depth = len(path.relative_to(PACKAGE).parts)
    for statement in ast.parse(path.read_text()).body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return False
        if (isinstance(statement, ast.ImportFrom) and statement.module == "_builtins" and statement.level == depth
                and any(a.name == "BUILTINS" and a.asname == "__builtins__" for a in statement.names)):
            return True
    return False


def test_every_module_of_the_package_binds_the_builtins_of_its_import() -> None:
    # (its functions are made with them; not ``__main__``, run in the program's ``__main__``
    # and defining nothing, nor the start-up file of ``cli/_site``, not in the package)
    modules = [path for path in sorted(PACKAGE.rglob("*.py"))
               if "_site" not in path.parts and path.name != "__main__.py" and path.name != "_builtins.py"]

    assert len(modules) > 50
    assert [str(path.relative_to(PACKAGE)) for path in modules if not _binds_the_builtins_of_its_import(path)] == []


def test_the_functions_of_the_package_call_the_builtins_of_its_import_whatever_loaded_it() -> None:
    # (here pytest's import hook loaded the package's modules: the line works whatever the loader)
    functions = [value for name, module in list(sys.modules.items()) if name.startswith("cassette_hook.")
                 for owner in [module, *(v for v in vars(module).values() if isinstance(v, type))]
                 for value in vars(owner).values()
                 if isinstance(value, FunctionType) and is_own_file(value.__code__.co_filename)]

    assert len(functions) > 500
    assert [f.__qualname__ for f in functions if f.__builtins__ is not BUILTINS] == []
