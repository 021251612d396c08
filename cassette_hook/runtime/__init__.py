"""The runtime: what a rewritten call site runs (Cassette's ``overdub``).  Internal.

A hooked call walks down these modules (docs/internals.md, "Architecture"):

- ``callsites``: the hot path, the functions rewritten call sites call;
- ``plan``: what a context class runs with (which hooks it overloads) and the twins of
  functions, the rewritten copies that calls recurse into;
- ``callees``: what runs for one callee under a plan (hooks, overloads, its body);
- ``operators``: ``a + b`` recursed into when its operands define the dunder in Python;
- ``primitives``: C code called as the plain program would call it;
- ``special_methods``: special methods as the interpreter finds and binds them;
- ``standins``: what C calls of the program's classes (``__iter__`` from a ``for``),
  reached while a context is active;
- ``hotpath``: the entry points that modules below the runtime call.

The C accelerator (``cassette_hook/_speedups/``, one C file per module here) implements
the hot parts of these modules; ``_native`` chooses, once, between it and the Python
versions, both implementing the interface ``interface`` declares.
"""

from .._builtins import BUILTINS as __builtins__  # type: ignore[no-redef]  # noqa: F401 (_builtins.py)
