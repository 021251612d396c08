"""Test modules whose assertions pytest rewrites, instrumented as well.

pytest's ``AssertionRewritingHook`` sits on ``sys.meta_path`` and loads test modules
(and ``conftest.py`` files, and plugins marked for rewriting) itself: it compiles their
source through its own AST rewrite, caches that in a ``.pyc`` of its own, and runs it with
``exec(co, module.__dict__)``.  It has no ``get_code``, so the import hook cannot give
it switched code the way it does for other loaders: left alone, a test module named by
``--cassette-include`` would silently stay plain.

So the two rewritings are chained at the one point where pytest's result exists as a
code object: the name ``exec`` in pytest's rewrite module is shadowed by
:func:`exec_switched`, which gives the code of modules the installed import hook includes
what the hook gives any module (light while no context is active, if the hook is lazy;
else switched) before running it.  The code switched is pytest's rewritten code, so the
assertions keep their explanations; modules the hook does not include run exactly as
pytest made them.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__, program_namespace  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import builtins
import sys
from types import CodeType
from typing import Any

from . import finder

REWRITE_MODULE = "_pytest.assertion.rewrite"


def exec_switched(source: Any, globals: dict[str, Any], locals: Any = None, /) -> None:
    """``exec``, with the hook's code for a module the installed import hook includes."""
    patterns = finder.installed()
    name = globals.get("__name__")
    if (patterns is not None and isinstance(source, CodeType) and isinstance(name, str)
            and patterns.matches(name, globals.get("__file__"))):
        source = finder.code_for(source, name, "pytest's assertion rewriting made it")
    builtins.exec(source, program_namespace(globals), locals)  # (the builtins pytest's frame gives)


def compose() -> bool:
    """Chain the import hook's rewriting after pytest's; returns whether pytest rewrites
    assertions in this process (its rewrite module is imported)."""
    rewrite = sys.modules.get(REWRITE_MODULE)
    if rewrite is None:
        return False
    rewrite.exec = exec_switched  # type: ignore[attr-defined]  # a name the module does not define: shadowing a builtin
    return True


def undo() -> None:
    """Give pytest's rewrite module back the builtin ``exec``."""
    rewrite = sys.modules.get(REWRITE_MODULE)
    if rewrite is not None and vars(rewrite).get("exec") is exec_switched:
        del rewrite.exec
