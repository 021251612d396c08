#!/usr/bin/env python3
"""Real-world check: other projects' test suites, plain and instrumented.

For each peer project (pinned below) this script

1. downloads its sdist from the registry with ``pip download --no-deps --no-binary :all:``
   into a cache directory (reused when present, checked against the pinned sha256),
2. unpacks it and installs the project from the unpacked sdist into the running
   environment (non-editable; the test dependencies come from ``peers/requirements.txt``),
3. runs the project's test suite five times, each in a fresh working directory and
   its own subprocess::

       plain       python -m pytest ARGS
       nocontext   python -m cassette_hook --include P... -m pytest ARGS
       null        python -m cassette_hook --include P... --context null -m pytest ARGS
       counting    python -m cassette_hook --include P...
                       --context peers_counting:CountingContext -m pytest ARGS
       late        python -m cassette_hook --include P... -m pytest -p peers_late ARGS

   (``counting`` is a user-written context whose ``prehook`` counts calls: see
   ``peers/contexts/peers_counting.py``; ``late`` makes it active only once collection is
   done, so that the modules imported light are switched then: see
   ``peers/contexts/peers_late.py``),

4. reads each run's counts from its ``--junitxml`` report (passed, failed, errors,
   skipped, xfailed; xpassed comes from pytest's summary line, because a JUnit report
   records an xpass as a pass) and prints a table.

It exits non-zero if any project's runs differ (in the counts, or in which test had
which outcome), if any run produced no results, or if the counting context saw no calls. Each run's output is kept in a
log file; on a mismatch the script prints the tests that differ and the logs' tails.

Run it through tox (``python -m tox run -e peers``): it installs packages into the
environment it runs in, so outside a virtual environment it refuses to install (see
``--no-install``). Standard library only; CPython 3.10-3.15 (3.14 and 3.15 in the Debian
sid root: ``.ci/in-sid-root 3.14 --peers ARGS``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
DEFAULT_CACHE = HERE / ".cache"
# The counting context's module; on PYTHONPATH in every run (see clean_env).
CONTEXTS_DIR = HERE / "contexts"
COUNTING_CONTEXT = "peers_counting:CountingContext"
# What the counting context writes at exit (peers/contexts/peers_counting.py).
_COUNTING_REPORT = re.compile(r"peers counting context: (\d+) prehook calls")

MODES = ("plain", "nocontext", "null", "counting", "late")
COUNTED = ("counting", "late")  # the runs whose context reports the calls it saw
COUNT_KEYS = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed")
# pytest >= 9 runs unittest's subTest()s as subtests and counts them in its summary line
# only ("3 passed, 120 subtests passed"): those counts are compared too.
SUBTEST_KEYS = ("subtests passed", "subtests failed", "subtests skipped", "subtests xfailed")

# Options every run gets. No cache plugin: a run must not see what an earlier run left.
COMMON_PYTEST_ARGS = ["-q", "-p", "no:cacheprovider"]


# --------------------------------------------------------------------------- projects
# Each project's setup gets (sdist tree, fresh working directory, installed package
# directories by import name) and returns (cwd, pytest arguments) for a run. Whatever
# it returns is used identically by all the runs.


def _setup_more_itertools(src: Path, work: Path, installed: dict[str, Path]):
    # The suite is tests/ (unittest TestCases, which pytest collects) plus the doctests
    # of more_itertools.more and more_itertools.recipes, which the test modules add
    # through unittest's load_tests protocol. pytest does not call load_tests, so the
    # doctests are collected with --doctest-modules from the installed modules.
    # The tests are copied out of the sdist so that `import more_itertools` finds the
    # installed package, not the sdist's copy next to tests/. An empty pytest.ini, named
    # with -c, and --rootdir make the working directory the rootdir and keep pytest from
    # searching the directories above for a configuration: the arguments include the
    # installed package, and their common ancestor can be this repository (a tox env in
    # .tox/), whose setup.cfg would otherwise become the configuration and the rootdir.
    # --doctest-modules also collects the docstring of the class IterOnlyRange in
    # tests/test_more.py, which describes the class with >>> lines that are not meant to
    # run (it raises TypeError by design) and that upstream's DocTestSuite never runs:
    # that item is not part of the suite, so it is deselected.
    shutil.copytree(src / "tests", work / "tests")
    (work / "pytest.ini").write_text("[pytest]\n")
    pkg = installed["more_itertools"]
    return work, [
        "-c", str(work / "pytest.ini"), "--rootdir", str(work), "tests",
        "--doctest-modules", str(pkg / "more.py"), str(pkg / "recipes.py"),
        "--deselect", "tests/test_more.py::tests.test_more.IterOnlyRange",
    ]


def _setup_toolz(src: Path, work: Path, installed: dict[str, Path]):
    # The tests ship inside the package (toolz/tests, toolz/sandbox/tests) and are
    # installed with it: run them from the installed package, with the sdist's pytest
    # configuration (filterwarnings = error, xfail_strict, ...). The rootdir is
    # site-packages so that test ids read toolz/tests/test_*.py as upstream.
    pkg = installed["toolz"]
    return work, ["-c", str(src / "pyproject.toml"), "--rootdir", str(pkg.parent), str(pkg)]


def _setup_attrs(src: Path, work: Path, installed: dict[str, Path]):
    # attrs' own configuration (pyproject.toml) uses --import-mode=importlib with a src/
    # layout, so tests/ imports the installed attr and attrs; run in a copy of the sdist.
    # Hypothesis gets a fixed seed so that all the runs draw the same examples, and
    # each run starts without a .hypothesis/ example database (fresh copy).
    tree = work / src.name
    shutil.copytree(src, tree)
    return tree, ["tests", "--hypothesis-seed=0"]


def _sdist_tree(src: Path, work: Path, sources: tuple[str, ...]) -> Path:
    """A copy of the sdist in ``work`` without the project's own sources (``sources``:
    paths in the sdist), so that whatever the suite imports is the installed package,
    even where its configuration or sys.path[0] would put the sdist's copy first. The
    rest stays: some tests read the sdist's files (LICENSE, pyproject.toml, bin/)."""
    tree = work / src.name
    shutil.copytree(src, tree)
    for rel in sources:
        path = tree / rel
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    return tree


def _own_ini(tree: Path, text: str = "") -> str:
    """Write a pytest configuration of the check's own into ``tree`` and return its path,
    for projects whose configuration needs plugins the check does not install (coverage)
    or that have none: given with -c, it also keeps pytest from taking a tox.ini or
    setup.cfg it finds for the configuration."""
    ini = tree / "peers-pytest.ini"
    ini.write_text("[pytest]\n" + text)
    return str(ini)


def _setup_six(src: Path, work: Path, installed: dict[str, Path]):
    # One module (six.py) and one test module at the top of the sdist; setup.cfg is the
    # configuration (minversion only).
    tree = _sdist_tree(src, work, ("six.py",))
    return tree, ["-c", "setup.cfg", "--rootdir", str(tree), "test_six.py"]


def _setup_python_dateutil(src: Path, work: Path, installed: dict[str, Path]):
    # setup.cfg is the configuration (filterwarnings = error, xfail_strict); tox runs
    # tests/ and docs/ (its *_solution.py exercises). Some tests carry pytest-cov's
    # mark no_cover, which filterwarnings = error turns into a collection error without
    # pytest-cov (only measures coverage): that warning, and only it, is ignored.
    tree = _sdist_tree(src, work, ("src/dateutil",))
    return tree, [
        "-c", "setup.cfg", "--rootdir", str(tree), "-W", "ignore::pytest.PytestUnknownMarkWarning",
        "tests", "docs",
    ]


def _setup_cachetools(src: Path, work: Path, installed: dict[str, Path]):
    # No pytest configuration upstream (tox runs `pytest` with pytest-cov options).
    tree = _sdist_tree(src, work, ("src/cachetools",))
    return tree, ["-c", _own_ini(tree), "--rootdir", str(tree), "tests"]


def _setup_idna(src: Path, work: Path, installed: dict[str, Path]):
    # No pytest configuration upstream; the tests read their data files (the Unicode
    # IDNA test vectors) from tests/.
    tree = _sdist_tree(src, work, ("idna",))
    return tree, ["-c", _own_ini(tree), "--rootdir", str(tree), "tests"]


def _setup_parse(src: Path, work: Path, installed: dict[str, Path]):
    # Upstream's addopts are pytest-cov's options plus --doctest-modules and
    # --doctest-glob=README.rst over the sdist: the same without coverage, with the
    # doctests of the installed package.
    tree = _sdist_tree(src, work, ("parse",))
    return tree, [
        "-c", _own_ini(tree), "--rootdir", str(tree), "--doctest-modules",
        "--doctest-glob=README.rst", "tests", "README.rst", str(installed["parse"]),
    ]


def _setup_schema(src: Path, work: Path, installed: dict[str, Path]):
    # A package and one test module at the top of the sdist; a test reads LICENSE-MIT
    # from the working directory.
    tree = _sdist_tree(src, work, ("schema",))
    return tree, ["-c", _own_ini(tree), "--rootdir", str(tree), "test_schema.py"]


def _setup_boltons(src: Path, work: Path, installed: dict[str, Path]):
    # tox: pytest --doctest-modules <installed boltons> tests, with pyproject.toml's
    # doctest flags. tests/conftest.py only defines pytest_ignore_collect(path, config)
    # to skip test modules named *_pyN for another major Python; pytest 9 no longer
    # has the `path` argument and rejects the plugin. On Python 3 it ignores nothing
    # (the one such module is *_py3), so --noconftest collects the same tests.
    tree = _sdist_tree(src, work, ("boltons",))
    return tree, [
        "-c", "pyproject.toml", "--rootdir", str(tree), "--noconftest", "--doctest-modules",
        str(installed["boltons"]), "tests",
    ]


def _setup_pallets(package: str):
    """click and Jinja: src/ layout; pyproject.toml is the configuration
    (filterwarnings = error; click deselects its stress tests with -m 'not stress')."""

    def setup(src: Path, work: Path, installed: dict[str, Path]):
        tree = _sdist_tree(src, work, (f"src/{package}",))
        return tree, ["-c", "pyproject.toml", "--rootdir", str(tree), "tests"]

    return setup


def _setup_tomlkit(src: Path, work: Path, installed: dict[str, Path]):
    # No pytest configuration upstream; the toml-test and toml-spec-tests data are in tests/.
    tree = _sdist_tree(src, work, ("tomlkit",))
    return tree, ["-c", _own_ini(tree), "--rootdir", str(tree), "tests"]


def _setup_wcwidth(src: Path, work: Path, installed: dict[str, Path]):
    # Upstream's [pytest] (tox.ini): tests/ and the doctests of the package
    # (--doctest-modules, but not wcwidth/wcwidth.py), filterwarnings = error, plus
    # pytest-cov's options, left out here. Some tests read setup.py, pyproject.toml and bin/.
    tree = _sdist_tree(src, work, ("wcwidth",))
    pkg = installed["wcwidth"]
    return tree, [
        "-c", _own_ini(tree, "filterwarnings =\n    error\n"), "--rootdir", str(tree),
        "--doctest-modules", "tests", str(pkg), f"--ignore={pkg / 'wcwidth.py'}",
    ]


@dataclass(frozen=True)
class Project:
    name: str  # distribution name on the registry
    version: str
    sha256: str  # of the sdist
    packages: tuple[str, ...]  # import names: --include prefixes, and what gets located
    setup: Callable[[Path, Path, dict[str, Path]], tuple[Path, list[str]]] = field(repr=False)
    # Test ids deselected in all the runs, each with the reason it cannot run here.
    deselect: tuple[tuple[str, str], ...] = ()
    # Known differences: (mode, test id, the open cassette_hook bug that causes it). Such
    # a test must have another outcome in that mode than in plain -- the check fails
    # when it no longer has (fixed: remove the entry) -- and every other test the same.
    known: tuple[tuple[str, str, str], ...] = ()

    @property
    def sdist_name(self) -> str:
        return f"{re.sub(r'[-_.]+', '_', self.name).lower()}-{self.version}.tar.gz"


# The pins: the newest releases (at the time of pinning) that support CPython 3.10-3.13.
# more-itertools 11.2 requires Python >= 3.11, so it is pinned at 11.1.0 (and
# python-dateutil 4 likewise, so 3.0.0).
PROJECTS = (
    Project(
        "more-itertools", "11.1.0",
        "48e8f4d9e7e5878571ecf6f2b4e57634f93cd474cc8cfbd2376f2d11b396e30d",
        ("more_itertools",), _setup_more_itertools,
    ),
    Project(
        "toolz", "1.2.0",
        "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
        ("toolz", "tlz"), _setup_toolz,
    ),
    Project(
        "attrs", "26.1.0",
        "d03ceb89cb322a8fd706d4fb91940737b6642aa36998fe130a9bc96c985eff32",
        ("attr", "attrs"), _setup_attrs,
    ),
    Project(
        "click", "8.5.1",
        "9bbfada76703fd1d784b83eea012e3e8c6a001a876543ef104fa56aaaeb072b4",
        ("click",), _setup_pallets("click"),
    ),
    Project(
        "python-dateutil", "3.0.0",
        "7ebcb3c29a92f3ceafe79a7a48a5c45677e9e004bbeec5742ac0bbb00560b7a2",
        ("dateutil",), _setup_python_dateutil,
        deselect=(
            ("tests/test_tz.py::test_gettz_link[tzpath-Europe/Monaco-Europe/Paris]",
             "compares this machine's /usr/share/zoneinfo (Monaco is no longer a link to Paris)"),
            ("tests/test_tzfile.py::test_gettz_local_abbreviation_without_time_zone_data",
             "expects gettz('UTC') to be tzlocal when /usr/share/zoneinfo is absent; it is present here"),
            ("tests/test_tzpath_data.py::test_dst_matches_tzdata_zi[tzpath]",
             "compares this machine's /usr/share/zoneinfo with the tzdata package's release"),
        ),
    ),
    Project(
        "idna", "3.20",
        "a7db850025b95ded1eae8a46181a1a6c56c92c96f0e2b005d9ff8dc0210cab44",
        ("idna",), _setup_idna,
    ),
    Project(
        "jinja2", "3.1.6",
        "0137fb05990d35f1275a587e9aee6d56da821fc83491a0fb838183be43f66d6d",
        ("jinja2",), _setup_pallets("jinja2"),
    ),
    Project(
        "tomlkit", "0.15.2",
        "83e32755ba1d20d9340bd069ee97e9f6232ba2346b63ffcba425de01f7e327a6",
        ("tomlkit",), _setup_tomlkit,
    ),
    Project(
        "boltons", "26.2.0",
        "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
        ("boltons",), _setup_boltons,
    ),
    Project(
        "wcwidth", "0.9.4",
        "fd8d57d3cdfe570e3265c8fab1885c24e34ef40889c0759c0c304a19e9835954",
        ("wcwidth",), _setup_wcwidth,
    ),
    Project(
        "six", "1.17.0",
        "ff70335d468e7eb6ec65b95b99d3a2836546063f63acc5171de367e834932a81",
        ("six",), _setup_six,
    ),
    Project(
        "cachetools", "7.3.2",
        "43e5db663b58c4337a9959069d93f54dd2e065fdd0438a504cd1100fbeb48beb",
        ("cachetools",), _setup_cachetools,
    ),
    Project(
        "parse", "1.22.4",
        "706d458feed5a81b02768d3156e8070baf6cee7d150a3a3c0cd43101a875c3b5",
        ("parse",), _setup_parse,
    ),
    Project(
        "schema", "0.7.8",
        "e86cc08edd6fe6e2522648f4e47e3a31920a76e82cce8937535422e310862ab5",
        ("schema",), _setup_schema,
    ),
)


# --------------------------------------------------------------------------- helpers


def log(msg: str = "") -> None:
    print(msg, flush=True)


def run_checked(cmd: list[str], **kw) -> None:
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_sdist(project: Project, cache: Path) -> Path:
    sdists = cache / "sdist"
    path = sdists / project.sdist_name
    if not path.exists():
        sdists.mkdir(parents=True, exist_ok=True)
        run_checked([
            sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            "--disable-pip-version-check", "-d", str(sdists),
            f"{project.name}=={project.version}",
        ])
        if not path.exists():
            raise SystemExit(f"pip download did not produce {path}")
    digest = sha256_of(path)
    if digest != project.sha256:
        raise SystemExit(
            f"{path}: sha256 {digest} does not match the pinned {project.sha256};"
            " delete the file to download it again"
        )
    return path


def unpack(sdist: Path, dest_root: Path) -> Path:
    with tarfile.open(sdist) as tar:
        tops = {m.name.split("/", 1)[0] for m in tar.getmembers()}
        if len(tops) != 1:
            raise SystemExit(f"{sdist}: expected one top-level directory, got {sorted(tops)}")
        dest = dest_root / tops.pop()
        if dest.exists():
            shutil.rmtree(dest)
        dest_root.mkdir(parents=True, exist_ok=True)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest_root, filter="data")
        else:  # CPython 3.10.x before 3.10.12
            tar.extractall(dest_root)
    return dest


def locate_installed(project: Project, cwd: Path) -> dict[str, Path]:
    """Where the environment's python imports the project's packages from: a package's
    directory, a single module's file (and check that it is the pinned version,
    installed, not a source tree)."""
    code = (
        "import importlib.util, importlib.metadata, json, sys\n"
        f"names = {list(project.packages)!r}\n"
        "specs = {n: importlib.util.find_spec(n) for n in names}\n"
        "locs = {n: s.submodule_search_locations[0] if s.submodule_search_locations else s.origin\n"
        "        for n, s in specs.items()}\n"
        f"print(json.dumps([importlib.metadata.version({project.name!r}), locs]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout
    version, locs = json.loads(out.strip().splitlines()[-1])
    if version != project.version:
        raise SystemExit(f"{project.name}: installed version is {version}, not {project.version}")
    found = {n: Path(p).resolve() for n, p in locs.items()}
    for n, p in found.items():
        if cwd.resolve() in p.parents or not any(
            part in ("site-packages", "dist-packages") for part in p.parts
        ):
            raise SystemExit(f"{project.name}: {n} is imported from {p}, not an installed copy")
    return found


def check_instrumented(project: Project, cwd: Path) -> str:
    """Does ``python -m cassette_hook --include ...`` instrument the project's packages?
    (Otherwise the instrumented runs would compare nothing.) Empty if so, else why not.
    It checks that each package was loaded by one of cassette_hook's loaders."""
    code = (
        "import importlib\n"
        f"names = {list(project.packages)!r}\n"
        "loaders = {n: type(importlib.import_module(n).__spec__.loader) for n in names}\n"
        "bad = [f'{n} ({l.__module__}.{l.__qualname__})' for n, l in loaders.items()\n"
        "       if not l.__module__.startswith('cassette_hook')]\n"
        "print('not instrumented: ' + ', '.join(bad) if bad else 'ok')\n"
    )
    cmd = [sys.executable, "-m", "cassette_hook", *include_args(project), "-c", code]
    proc = subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines and lines[-1] == "ok":
        return ""
    return (lines[-1] if proc.returncode == 0 and lines else
            f"`{' '.join(cmd[:-1])} -c ...` exited with {proc.returncode}: {proc.stderr.strip()[-500:]}")


def include_args(project: Project) -> list[str]:
    args = []
    for prefix in project.packages:
        args += ["--include", prefix]
    return args


def install(project: Project, src: Path) -> None:
    run_checked([
        sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q",
        "--no-deps", "--force-reinstall", str(src),
    ])


# --------------------------------------------------------------------------- results


@dataclass
class Result:
    mode: str
    returncode: int | None
    seconds: float
    log: Path
    # CPU seconds (user + system) of the run's processes: on a shared machine the wall
    # time says as much about the neighbours as about the run.
    cpu_seconds: float = 0.0
    counts: dict[str, int] | None = None  # None: no results
    warnings: int = 0  # shown, not compared
    outcomes: Counter | None = None  # (test id, outcome) -> n
    prehook_calls: int | None = None  # counting run: the calls its context saw
    problem: str = ""


_SUMMARY_LINE = re.compile(r"^=*\s*(\d+ [a-z]+.*) in [\d.]+s( \([\d:]+\))?\s*=*\s*$")
_SUMMARY_ITEM = re.compile(r"(\d+) ((?:subtests )?[a-z]+)")


def terminal_counts(log_path: Path) -> dict[str, int] | None:
    """The counts from pytest's closing summary line ("3 passed, 1 skipped in 0.1s")."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines[-50:]):
        m = _SUMMARY_LINE.match(line.strip())
        if m:
            counts = {}
            for n, word in _SUMMARY_ITEM.findall(m.group(1)):
                word = {"error": "errors", "warning": "warnings"}.get(word, word)
                counts[word] = counts.get(word, 0) + int(n)
            return counts
    return None


def junit_outcomes(xml_path: Path) -> Counter:
    """(test id, outcome) for every outcome the JUnit report records. A test whose call
    failed and whose teardown errored has two, as pytest counts it."""
    outcomes: Counter = Counter()
    root = ET.parse(xml_path).getroot()
    for case in root.iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        recorded = False
        for child in case:
            if child.tag == "failure":
                outcomes[test_id, "failed"] += 1
            elif child.tag == "error":
                outcomes[test_id, "errors"] += 1
            elif child.tag == "skipped":
                kind = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
                outcomes[test_id, kind] += 1
            else:
                continue
            recorded = True
        if not recorded:
            outcomes[test_id, "passed"] += 1  # or xpassed: the report does not tell
    return outcomes


def read_results(result: Result, xml_path: Path) -> None:
    if result.returncode not in (0, 1):
        result.problem = f"pytest exited with {result.returncode}"
        return
    if not xml_path.exists():
        result.problem = "no JUnit report"
        return
    try:
        outcomes = junit_outcomes(xml_path)
    except ET.ParseError as exc:
        result.problem = f"unreadable JUnit report: {exc}"
        return
    if not outcomes:
        result.problem = "the JUnit report has no tests"
        return
    counts = dict.fromkeys(COUNT_KEYS, 0)
    for (_, outcome), n in outcomes.items():
        counts[outcome] += n
    term = terminal_counts(result.log)
    if term is None:
        result.problem = "no pytest summary line in the log"
        return
    counts["xpassed"] = term.get("xpassed", 0)
    counts["passed"] -= counts["xpassed"]
    mismatch = [k for k in COUNT_KEYS if term.get(k, 0) != counts[k]]
    if mismatch:
        result.problem = (
            "JUnit report and summary line disagree on "
            + ", ".join(f"{k} ({counts[k]} vs {term.get(k, 0)})" for k in mismatch)
        )
    for key in SUBTEST_KEYS:
        if key in term:
            counts[key] = term[key]
    result.warnings = term.get("warnings", 0)
    result.counts = counts
    result.outcomes = outcomes


def tail(path: Path, n: int = 40) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"    (cannot read {path}: {exc})"
    return "\n".join("    " + line for line in lines[-n:])


# --------------------------------------------------------------------------- runs


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASSETTE_HOOK_")}
    # Same hash seed in every run: set iteration order is then the same in all.
    env["PYTHONHASHSEED"] = "0"
    env.pop("PYTEST_ADDOPTS", None)
    # Only the counting context's directory (it holds nothing else), in every run, so
    # that all runs have the same sys.path.
    env["PYTHONPATH"] = str(CONTEXTS_DIR)
    return env


def counting_report(log_path: Path) -> int | None:
    """The number of calls the counting context reports at exit, None if it did not."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return None
    found = _COUNTING_REPORT.findall(text)
    return int(found[-1]) if found else None


def _children_cpu() -> float:
    """CPU seconds used so far by the child processes that have been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_suite(
    project: Project, mode: str, src: Path, installed: dict[str, Path], cache: Path,
    extra: list[str], timeout: float,
) -> Result:
    slug = f"{project.name}-{project.version}"
    work = cache / "work" / slug / mode
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    cwd, args = project.setup(src, work, installed)
    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{slug}-{mode}.log"
    xml_path = logs / f"{slug}-{mode}.xml"
    xml_path.unlink(missing_ok=True)

    cmd = [sys.executable]
    if mode != "plain":
        cmd += ["-m", "cassette_hook", *include_args(project)]
        if mode == "null":
            cmd += ["--context", "null"]
        elif mode == "counting":
            cmd += ["--context", COUNTING_CONTEXT]
    cmd += ["-m", "pytest", *COMMON_PYTEST_ARGS, f"--junitxml={xml_path}"]
    if mode == "late":
        cmd += ["-p", "peers_late"]
    for test_id, _reason in project.deselect:
        cmd += ["--deselect", test_id]
    cmd += [*args, *extra]

    log(f"[{slug} {mode}] {' '.join(cmd)}  (cwd {cwd})")
    start = time.monotonic()
    cpu_before = _children_cpu()
    with open(log_path, "w") as out:
        out.write(f"$ cd {cwd}\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=clean_env(), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        returncode = None
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:  # timed out, or we are interrupted or terminated: end the run's tree too
            if returncode is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
    seconds = time.monotonic() - start
    result = Result(mode, returncode, seconds, log_path, _children_cpu() - cpu_before)
    if returncode is None:
        result.problem = f"timed out after {timeout:.0f}s"
    else:
        read_results(result, xml_path)
    if mode in COUNTED and returncode is not None:
        result.prehook_calls = counting_report(log_path)
        if not result.prehook_calls and not result.problem:
            result.problem = (f"the counting context saw no calls ({result.prehook_calls})"
                              if result.prehook_calls == 0 else "no report from the counting context")
    shown = result.counts if result.counts else result.problem
    log(f"[{slug} {mode}] {seconds:.1f}s ({result.cpu_seconds:.1f}s CPU) exit {returncode}: {shown}")
    return result


def compare(project: Project, results: list[Result]) -> list[str]:
    """What is wrong with one project's runs (empty: all produced the same results)."""
    problems = []
    for r in results:
        if r.counts is None:
            problems.append(f"{r.mode}: no results ({r.problem})")
        elif r.problem:
            problems.append(f"{r.mode}: {r.problem}")
    good = [r for r in results if r.counts is not None]
    if good:
        ref = good[0]
        for r in good[1:]:
            known = {test for mode, test, _bug in project.known if mode == r.mode and ref.mode == "plain"}
            compared = SUBTEST_KEYS if known else (*COUNT_KEYS, *SUBTEST_KEYS)  # known: tests compared below
            if any(r.counts.get(k, 0) != ref.counts.get(k, 0) for k in compared):
                problems.append(f"{r.mode}: counts differ from {ref.mode}")
            diff = sorted((r.outcomes - ref.outcomes) + (ref.outcomes - r.outcomes))
            differing = {t for t, _ in diff}
            for test in sorted(known - differing):
                problems.append(f"{r.mode}: the known difference of {test} no longer occurs: "
                                "remove it from the project's `known`")
            if differing - known:
                tests = sorted(differing - known)
                lines = []
                for t in tests[:30]:
                    a = sorted(o for (tt, o) in ref.outcomes.elements() if tt == t)
                    b = sorted(o for (tt, o) in r.outcomes.elements() if tt == t)
                    lines.append(f"      {t}: {ref.mode} {a or '-'}, {r.mode} {b or '-'}")
                if len(tests) > 30:
                    lines.append(f"      ... and {len(tests) - 30} more")
                problems.append(
                    f"{r.mode}: {len(tests)} test(s) with other outcomes than in {ref.mode}:\n"
                    + "\n".join(lines)
                )
    return problems


def print_table(rows: list[tuple[Project, list[Result]]]) -> None:
    """Counts per run, wall and CPU time. "subtests" is the passed subtests; failed or
    skipped subtests, if any, and the calls the counting context saw follow the times."""
    columns = (*COUNT_KEYS, "subtests", "warnings")
    head = f"{'project':22} {'run':10}" + "".join(f"{k:>9}" for k in columns) + f"{'time':>9}{'cpu':>9}"
    log(head)
    log("-" * len(head))
    for project, results in rows:
        for r in results:
            label = f"{project.name} {project.version}" if r is results[0] else ""
            if r.counts is None:
                log(f"{label:22} {r.mode:10}  no results: {r.problem}  ({r.seconds:.1f}s, {r.cpu_seconds:.1f}s CPU)")
                continue
            values = [r.counts[k] for k in COUNT_KEYS]
            values += [r.counts.get("subtests passed", 0), r.warnings]
            cells = "".join(f"{v:>9}" for v in values)
            others = ", ".join(
                f"{r.counts[k]} {k}" for k in SUBTEST_KEYS[1:] if r.counts.get(k)
            )
            if r.prehook_calls is not None:
                others = ", ".join(filter(None, (others, f"{r.prehook_calls} prehook calls")))
            log(f"{label:22} {r.mode:10}{cells}{r.seconds:>8.1f}s{r.cpu_seconds:>8.1f}s"
                + (f"  {others}" if others else ""))


# --------------------------------------------------------------------------- main


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    # The test runs are in sessions of their own (so that a timeout can end everything a
    # run started); SIGTERM (tox, CI) unwinds through run_suite, which ends them.
    signal.signal(signal.SIGTERM, _terminated)
    names = [p.name for p in PROJECTS]
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Arguments after -- go to every pytest run.",
    )
    parser.add_argument("--project", action="append", choices=names,
                        help="run only this project (repeatable; default: all)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated subset of {','.join(MODES)} (default: all)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help="downloads, unpacked sdists, working directories and logs"
                             " (default: peers/.cache)")
    parser.add_argument("--no-install", action="store_true",
                        help="use what the environment has; install nothing")
    parser.add_argument("--timeout", type=float, default=3600,
                        help="seconds one test run may take (default: 3600)")
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    opts = parser.parse_args(argv)
    modes = [m.strip() for m in opts.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        parser.error(f"--modes takes a comma-separated subset of {','.join(MODES)}")
    projects = [p for p in PROJECTS if not opts.project or p.name in opts.project]
    cache = opts.cache.resolve()
    cache.mkdir(parents=True, exist_ok=True)

    if not opts.no_install and sys.prefix == sys.base_prefix:
        log("run_peers.py installs packages into the environment it runs in; this python"
            f" ({sys.executable}) is not in a virtual environment. Use"
            " `python -m tox run -e peers`, a virtual environment, or --no-install.")
        return 2

    log(f"python {sys.version.split()[0]} ({sys.executable})")
    total_start = time.monotonic()
    if not opts.no_install:
        run_checked([sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
                     "-q", "-r", str(REQUIREMENTS)])

    rows = []
    failed = False
    timings = []
    for project in projects:
        p_start = time.monotonic()
        log(f"\n=== {project.name} {project.version}")
        sdist = fetch_sdist(project, cache)
        src = unpack(sdist, cache / "src")
        if not opts.no_install:
            install(project, src)
        neutral = cache / "work"
        neutral.mkdir(parents=True, exist_ok=True)
        installed = locate_installed(project, neutral)
        for n, p in installed.items():
            log(f"{n}: {p}")
        preflight = ""
        if any(m != "plain" for m in modes):
            preflight = check_instrumented(project, neutral)
            log(f"instrumented by python -m cassette_hook: {preflight or 'yes'}")
        results = [
            run_suite(project, mode, src, installed, cache, extra, opts.timeout)
            for mode in modes
        ]
        rows.append((project, results))
        timings.append((project, time.monotonic() - p_start))
        problems = compare(project, results)
        if preflight:
            problems.insert(0, f"the packages are not instrumented: {preflight}")
        if problems:
            failed = True
            log(f"\n{project.name}: MISMATCH")
            for problem in problems:
                log("  " + problem)
            for r in results:
                log(f"\n  tail of {r.log}:")
                log(tail(r.log))

    log("")
    print_table(rows)
    log("")
    for project, seconds in timings:
        log(f"{project.name}: {seconds:.1f}s in all (download, install, {len(modes)} runs)")
    log(f"total: {time.monotonic() - total_start:.1f}s ({_children_cpu():.1f}s CPU, installs included)")
    if failed:
        log("\nFAIL: the runs of some project differ or produced no results (see above)")
        return 1
    log(f"\nOK: identical results in the {len(modes)} runs of every project")
    return 0


if __name__ == "__main__":
    sys.exit(main())
