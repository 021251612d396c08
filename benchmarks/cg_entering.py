"""Instructions per matched call, by callgrind, for ``bench_sparse.entering_route``'s
variants, and the entering route's estimate read from them (docs/performance.md, "The
entering route for an overload's `recurse`, measured and modelled").

Two steps.  Run each variant's loop under callgrind twice, with 1 and 3 loops after a
first one (the difference is 2 loops of 20,000 calls, without start-up and warm-up)::

    PYTHONPATH=pkg:. valgrind --tool=callgrind --callgrind-out-file=OUT/VARIANT.K \\
        python cg_entering.py run VARIANT K          # K = 1 and 3, for each VARIANT

then read them (``callgrind_annotate`` on the PATH)::

    python cg_entering.py read OUT

Variants (``VARIANTS``): plain, count, identity, entered, model, tail, all, any.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

CALLS = 2 * 20_000  # the loops counted: (K=3) - (K=1)

# Stand-ins of the models: builtins whose own work is taken out of the count.
STAND_INS = ("dict_get", "_Py_dict_lookup", "cfunction_vectorcall_NOARGS", "py_list_clear", "list_clear_impl",
             "list_clear", "PyObject_GenericHash", "PyObject_Hash", "_Py_HashPointer")
# The real steps' own work, read from the profile of ``entered`` (the overload's recurse
# entered by hand, with the real unpop and repop), shared out as docs/performance.md says.
SITE_STEP = ("resolve", "resolve_active", "resolve_in", "direct_run", "popped_begin", "run_popped")
RECURSE_STEP = ("unpop", "unpop_for", "is_tagging", "body_of")
SHARED = (("current_twin", 2), ("PyContextVar_Get", 3))  # (function, among how many steps)
VARIANTS = ("plain", "count", "identity", "entered", "model", "tail", "all", "any")


def variants() -> dict[str, Callable[[], Any]]:
    """What each variant runs (the package imported only here: ``read`` needs none)."""
    import bench_sparse as b
    import common
    from common import ch

    return {"plain": b._loop, "count": lambda: ch.overdub(common.Count(metadata=[0]), b._loop),
            "identity": lambda: ch.overdub(b.Identity(), b._loop),
            "entered": lambda: ch.overdub(b.IdentityEntered(), b._loop),
            "model": b._model_loop, "tail": b._model_tail_loop,
            "all": lambda: ch.overdub(b.RecurseAll(), b._loop), "any": b._model_any_loop}


def run(variant: str, k: int) -> None:
    loop = variants()[variant]
    for _ in range(1 + k):
        loop()


def functions(path: Path) -> collections.Counter[str]:
    """Instructions by function (inlined parts and recursion levels merged), as
    ``callgrind_annotate`` gives them."""
    out = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", str(path)],
                         capture_output=True, text=True, check=True).stdout
    counts: collections.Counter[str] = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)$", line)
        if m and "PROGRAM TOTALS" not in line:
            name = m.group(2).split(":")[-1].split(" [")[0].rstrip("'0123456789")
            counts[name.replace(".lto_priv.", "").replace(".isra.", "")] += int(m.group(1).replace(",", ""))
    return counts


def read(folder: Path) -> None:
    per = {}
    for v in VARIANTS:
        one, three = functions(folder / f"{v}.1"), functions(folder / f"{v}.3")
        per[v] = {f: (three[f] - one[f]) / CALLS for f in set(one) | set(three)}

    def over(v: str, *names: str) -> float:
        """Instructions a call over plain: of the whole run, or of the functions named."""
        fs = names or tuple(set(per[v]) | set(per["plain"]))
        return sum(per[v].get(f, 0) - per["plain"].get(f, 0) for f in fs)

    def step(names: tuple[str, ...]) -> float:
        return over("entered", *names) + sum(over("entered", f) / n for f, n in SHARED)

    site, recurse = step(SITE_STEP), step(RECURSE_STEP)
    repop, end, finding = over("entered", "repop"), over("entered", "run_popped"), over("entered", "call_overdubbed")
    count = over("count")
    print("instructions a call over plain:", {v: round(over(v)) for v in per if v != "plain"})
    print(f"steps: site {site:.0f}, recurse {recurse:.0f}, repop {repop:.0f}, the overload's end {end:.0f};"
          f" call_overdubbed {finding:.0f}")
    whole = over("model") - over("model", *STAND_INS) + site + recurse + repop + end
    print(f"whole route: {whole:.0f} to {whole + finding:.0f}"
          f" ({whole / count:.2f} to {(whole + finding) / count:.2f} of the counting prehook)")
    for v, what in (("tail", "tail call"), ("any", "tail call with *args, **kwargs")):
        est = over(v) - over(v, *STAND_INS) + site + recurse + end
        print(f"{what}: skeleton {over(v):.0f} (stand-ins {over(v, *STAND_INS):.0f}) -> {est:.0f}"
              f" ({est / count:.2f} of the counting prehook)")
    print(f"RecurseAll today: {over('all'):.0f} ({over('all') / count:.2f} of the counting prehook);"
          f" its tail-call route {(over('any') - over('any', *STAND_INS) + site + recurse + end) / over('all'):.2f}"
          " of that")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "run":
        run(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 3 and sys.argv[1] == "read":
        read(Path(sys.argv[2]))
    else:
        raise SystemExit(__doc__)
