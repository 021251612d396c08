"""``--subprocesses``: carry the instrumentation into child Python processes.

Children started with ``subprocess`` or by ``multiprocessing``'s *spawn* and
*forkserver* methods are new interpreters: they find the ``CASSETTE_HOOK_*`` variables
in their environment and ``_site/sitecustomize.py`` first on their ``PYTHONPATH``, which
calls :func:`~cassette_hook.install_from_env`.  A *fork*ed child inherits the hook and
the parent's contexts -- it may be inside calls they are watching, so it keeps them, with
what they gathered before the fork -- and sends their reports to files of its own
(``ReportingContext.separate``), written when it ends, also when ``multiprocessing``
ends it with ``os._exit``, which skips ``atexit``.

Reports are kept apart: each child writes its own, to ``--output`` with ``.<pid>``
before the suffix (or to its own stderr), so no process overwrites another's.
"""

from __future__ import annotations

import os
from typing import Sequence

from . import _process

_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")


def propagate(include: Sequence[str], exclude: Sequence[str], specs: Sequence[str], output: str | None,
              debug: Sequence[str] = ()) -> None:
    """Set up this process's environment (inherited by its children) and its fork handler."""
    environ = os.environ
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
    os.register_at_fork(after_in_child=_forked)
    from multiprocessing import util

    util.register_after_fork(_forked, _at_multiprocessing_exit)


def _forked() -> None:
    """In a forked child: its reports go to files of its own."""
    _process.separate(_process.contexts())


def _at_multiprocessing_exit(_: object) -> None:
    """In a child ``multiprocessing`` forked: write the reports before it ends with
    ``os._exit``.  (Registered through ``register_after_fork`` because the process clears
    the finalizers it inherited just before running these.)"""
    from multiprocessing import util

    util.Finalize(None, _process.write_reports, exitpriority=-100)
