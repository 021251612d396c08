"""The command line, ``python -m cassette_hook``.  Internal.

- ``main``: the options, and running the program here or in a fresh interpreter;
- ``reexec``: the fresh interpreter: ``exec`` of ``python`` with the run described in the
  environment, picked up by ``_site/sitecustomize.py`` at start-up;
- ``subprocesses``: ``--subprocesses``, the same for child Python processes;
- ``_sigterm`` (C): SIGTERM delivered to a blocked process's Python handler.

The contexts a run names come from ``cassette_hook._specs`` and stay active for the whole
process through ``cassette_hook._process``, which the pytest plugin and
``install_from_env`` share.
"""

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)
