"""``--subprocesses``: carry the instrumentation into child Python processes.

Children started with ``subprocess`` or by ``multiprocessing``'s *spawn* and
*forkserver* methods are new interpreters: they find the ``CASSETTE_HOOK_*`` variables
in their environment and ``_site/sitecustomize.py`` first on their ``PYTHONPATH``, which
calls :func:`~cassette_hook.install_from_env`.  A *fork*ed child -- of this process, or
of a forkserver -- inherits the hook and the contexts, with what they gathered before
the fork, and writes reports of its own (see ``_process``).

Reports are kept apart: each child writes its own, to ``--output`` with ``.<pid>``
before the suffix (or to its own stderr), so no process overwrites another's.
"""

from __future__ import annotations

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)

import os
from typing import Sequence

from .. import _process

_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")


def propagate(include: Sequence[str], exclude: Sequence[str], specs: Sequence[str], output: str | None,
              debug: Sequence[str] = (), eager: bool = False) -> None:
    """Set up this process's environment, which its children inherit."""
    environ = os.environ
    environ[_process.EAGER] = "1" if eager else ""
    environ[_process.INCLUDE] = ",".join(include)
    environ[_process.EXCLUDE] = ",".join(exclude)
    environ[_process.CONTEXT] = ";".join(specs)
    environ[_process.DEBUG] = ",".join(debug)
    if output is None:
        environ.pop(_process.OUTPUT, None)
    else:
        environ[_process.OUTPUT] = os.path.abspath(output)
    environ[_process.SEPARATE] = "1"  # children rename their report files (``separate``)
    environ["PYTHONPATH"] = os.pathsep.join([_SITE, *filter(None, [environ.get("PYTHONPATH")])])
