"""The import hook: instrumenting modules as they are imported.  Internal.

- ``finder``: the meta-path finder and its loader, and ``install``, ``uninstall`` and
  ``instrument`` (which the package exports);
- ``dual_code``: each function body compiled twice, plain and rewritten, behind a mode
  switch (the rewriting side);
- ``switch``: the switch's runtime side, which turns the switched code on while a context
  is active;
- ``lazy_mode``: light code at import, switched code only once a context is active;
- ``code_cache``: the rewritten code's ``.pyc`` files;
- ``pytest_assertions``: test modules that pytest's assertion rewriter rewrites too;
- ``unmatched``: the warning for include patterns that matched nothing;
- ``_watch`` (C, 3.12+): the function watcher the lazy mode uses.

Nothing is imported here: each module's importers name it, so that importing one does
not import the others (docs/internals.md, "Architecture").
"""

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)
