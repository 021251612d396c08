"""The profile charges only what is the program's: no row of cassette_hook's own
functions, and the time of an import in a row of its own, ``<import module>``
(docs/contexts.md, "What the times include" and "Imports").  Every test runs on
whichever hot path the suite runs on (tox: ``py3XX`` and ``py3XX-pure``), the programs
the command line runs too (they inherit ``CASSETTE_HOOK_PURE_PYTHON``)."""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
import textwrap

import cassette_hook as ch
from cassette_hook.contexts import ProfileContext, _calltree
from test_importhook import tree, write  # noqa: F401  # (the fixture)


def profiled(f):
    ctx = ProfileContext(io.StringIO())
    ctx.runcall(f)
    return ctx


def node(ctx, *path):
    """The node at ``path`` (names from the root) of the profile's only thread."""
    (found,) = ctx._trees_now()
    found = found.root
    for name in path:
        found = found.children[name]
    return found


def own_rows(names):
    return [name for name in names if name.startswith("cassette_hook")]


def run_cli(tmp_path, *args):
    result = subprocess.run([sys.executable, "-m", "cassette_hook", *args], cwd=tmp_path, capture_output=True,
                            text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 0, result.stderr
    return result


# -- no row of ours ------------------------------------------------------------------


def test_no_row_names_cassette_hook_when_the_program_imports_through_the_hook(tree):  # noqa: F811
    write(tree, "hooked.py", "def f():\n    return 1\nf()\n")
    ch.install(include=["hooked"])

    def program():
        return importlib.import_module("hooked")  # (importlib's Python functions run rewritten)

    ctx = profiled(program)
    assert own_rows(ctx.stats()) == []
    assert "hooked.f" in ctx.stats()


def test_no_row_names_cassette_hook_when_the_program_calls_the_hooks_loader(tree):  # noqa: F811
    write(tree, "hooked.py", "X = 1\n")
    ch.install(include=["hooked"])
    import hooked

    def program():
        return hooked.__loader__.get_code("hooked")  # (as runpy and pkgutil do)

    ctx = profiled(program)
    assert own_rows(ctx.stats()) == []


def test_a_call_of_ours_is_replaced_by_its_callees_under_its_caller():
    trees = [_calltree.ThreadTree("main")]
    caller = trees[0].root.children["caller"] = _calltree.Node("caller")
    ours = caller.children[_calltree.OWN] = _calltree.Node(_calltree.OWN)
    direct = caller.children["callee"] = _calltree.Node("callee")
    through_ours = ours.children["callee"] = _calltree.Node("callee")
    caller.calls, caller.total = 1, 100
    ours.calls, ours.total = 1, 60
    direct.calls, direct.total = 2, 20
    through_ours.calls, through_ours.total = 3, 50

    (copy,) = _calltree.without_own(trees)

    (only,) = copy.root.children.values()
    assert (only.name, only.calls, only.total) == ("caller", 1, 100)
    assert list(only.children) == ["callee"]
    assert (only.children["callee"].calls, only.children["callee"].total) == (5, 70)
    assert _calltree.self_time(only) == 30  # ours had 10 ns of its own: its caller's now


def test_a_forked_childs_report_has_no_row_of_ours(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent("""\
        import multiprocessing

        def work():
            return sum(range(10))

        if __name__ == "__main__":
            child = multiprocessing.get_context("fork").Process(target=work)
            child.start()
            child.join()
        """))
    run_cli(tmp_path, "--output", "table.txt", "--context", "profile", "prog.py")
    tables = sorted(tmp_path.glob("table*.txt"))
    assert len(tables) == 2  # the parent's and the child's
    for table in tables:
        assert "cassette_hook." not in table.read_text(), table.read_text()


# -- imports -------------------------------------------------------------------------


def test_a_module_body_s_calls_are_the_calls_of_its_import(tree):  # noqa: F811
    write(tree, "heavy.py", "def work():\n    return sum(range(100))\n\nRESULTS = [work() for _ in range(3)]\n")
    ch.install(include=["heavy"])

    def importer():
        import heavy
        return heavy.RESULTS

    ctx = profiled(importer)
    test = f"{__name__}.test_a_module_body_s_calls_are_the_calls_of_its_import.<locals>.importer"
    assert list(node(ctx, test).children) == ["<import heavy>"]
    assert node(ctx, test, "<import heavy>").calls == 1
    assert node(ctx, test, "<import heavy>", "heavy.work").calls == 3


def test_a_profile_whose_rows_are_only_imports_that_made_no_call_observed_nothing():
    """A ``forkserver`` preloads the program's main module, and so imports its modules,
    and runs none of the program's calls: no report (docs/processes.md)."""
    ctx = ch.contexts.ProfileContext()
    thread = _calltree.ThreadTree("main")
    imported = thread.root.children["<import worker>"] = _calltree.Node("<import worker>")
    ctx._trees.append(thread)
    assert ctx.observed_nothing()
    imported.children["worker.setup"] = _calltree.Node("worker.setup")
    assert not ctx.observed_nothing()


def test_nested_imports_nest(tree):  # noqa: F811
    write(tree, "outer.py", "import inner\n")
    write(tree, "inner.py", "def work():\n    return 1\n\nwork()\n")
    ch.install(include=["outer", "inner"])

    def importer():
        import outer
        return outer

    ctx = profiled(importer)
    test = f"{__name__}.test_nested_imports_nest.<locals>.importer"
    assert node(ctx, test, "<import outer>", "<import inner>", "inner.work").calls == 1
    assert "inner.work" not in node(ctx, test, "<import outer>").children


def test_the_top_level_imports_of_a_script_are_rows_at_the_root(tmp_path):
    (tmp_path / "heavy.py").write_text("def work():\n    return 1\n\nwork()\n")
    (tmp_path / "prog.py").write_text("import heavy\n")
    run_cli(tmp_path, "--output", "table.txt", "--context", "profile,collapsed=stacks.txt", "prog.py")
    stacks = (tmp_path / "stacks.txt").read_text().splitlines()
    assert [line.rsplit(" ", 1)[0] for line in stacks] == ["<import_heavy>", "<import_heavy>;heavy.work"]


def test_a_module_run_with_dash_m_under_the_profile_runs_and_is_profiled(tmp_path):
    """The interpreter imports ``runpy`` for ``-m`` with no Python frame running: the
    wrapper that times imports has no importer's frame then, and must not fail."""
    (tmp_path / "mainmod.py").write_text("def work():\n    return 1\n\nprint(work())\n")
    run = run_cli(tmp_path, "--output", "table.txt", "--context", "profile", "-m", "mainmod")
    assert run.stdout == "1\n"
    assert "__main__.work" in (tmp_path / "table.txt").read_text()


def test_an_import_s_tracebacks_and_warnings_are_as_plain(tmp_path):
    """The wrapper that times imports sits among importlib's frames, which CPython takes
    out of tracebacks and ``warnings`` skips."""
    (tmp_path / "warns.py").write_text(
        "import warnings\nwarnings.warn('old', DeprecationWarning, stacklevel=2)\n")
    (tmp_path / "boom.py").write_text("def f():\n    raise ValueError('boom')\n\nf()\n")
    (tmp_path / "prog.py").write_text(textwrap.dedent("""\
        import sys, traceback

        def main():
            import warns
            try:
                import boom
            except ValueError:
                traceback.print_exc(file=sys.stdout)
            try:
                import missing_module
            except ImportError:
                traceback.print_exc(file=sys.stdout)

        main()
        """))
    plain = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True)
    profiled_run = run_cli(tmp_path, "--output", "table.txt", "--context", "profile", "prog.py")
    assert "DeprecationWarning: old" in plain.stderr
    assert (profiled_run.stdout, profiled_run.stderr) == (plain.stdout, plain.stderr)


def test_a_module_body_imported_under_a_profile_has_the_frames_below_it_it_has_plain(tmp_path):
    """Where the profile's C hooks are built, the wrapper that times imports is C and makes
    no frame; the pure-Python path's is one more importlib frame (docs/internals.md,
    "cassette_hook's frames are visible")."""
    (tmp_path / "walks.py").write_text(textwrap.dedent("""\
        import sys
        frame, below = sys._getframe().f_back, []
        while frame.f_code.co_name != "main":
            below.append((frame.f_code.co_filename, frame.f_code.co_name))
            frame = frame.f_back
        print(below)
        """))
    (tmp_path / "prog.py").write_text("def main():\n    import walks\n\nmain()\n")
    plain = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True, check=True)
    profiled_run = run_cli(tmp_path, "--output", "table.txt", "--context", "profile", "prog.py")
    plain_below, profiled_below = eval(plain.stdout), eval(profiled_run.stdout)
    wrapper = [] if _calltree.ImportTimer is not None else [("<frozen importlib._bootstrap>", "_find_and_load")]
    assert profiled_below == plain_below + wrapper
