"""The documentation's examples are tests.

Convention (see also ``docs/index.md``, "About the examples"):

* In ``docs/*.md`` and ``README.md``, a fenced ```` ```python ```` block followed by a fenced
  ```` ```text ```` block (blank lines may separate them) is an **example**: the Python
  block is a complete program and the text block is exactly what it prints.
* Every ```` ```python ```` block must be an example.  Fragments that are not complete
  programs (signatures, pseudo-code) are fenced as ```` ```py ```` instead and are not run.

Each example runs in a fresh namespace (``__name__ == "__main__"``, compiled with the
file name ``example.py``, as if saved and run as a script) with stdout captured, and its
output must equal the text block after normalizing memory addresses (``0x7f..`` ->
``0x...``) and trailing whitespace.  It must not write to stderr.  Overloads an example
registers on the contextual generics are removed after it, so examples cannot leak into
each other or into the rest of the suite.

Test ids are ``<page>:<n>``, the n-th example of the page counting from 1; the
failure message gives the line of the example in the page.

``test_api_page_covers_all`` checks that ``docs/api.md`` documents every name in
``cassette_hook.__all__``; ``docs/internals.md`` names every module of the package once,
with its role; and the repository's files cite its own pages, not a design file kept
outside it.

To write a new example, leave its ```` ```text ```` block empty and run
``python tests/test_docs.py --update [page.md ...]`` from the repository root: it runs the
examples and writes their real output into the pages.  Read the diff before keeping it.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

if __name__ == "__main__":  # run as a script (--update): use this work tree's package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cassette_hook as ch

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^\s`]*)[^\n]*$")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


@dataclass
class Example:
    page: str
    number: int
    line: int  # 1-based line of the opening ```python fence
    source: str
    expected: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.number}"


@dataclass
class _Block:
    lang: str
    line: int
    text: str
    end: int  # index of the closing fence line


def _closes(line: str, fence: str) -> bool:
    """Does ``line`` close a block opened by ``fence`` (same character, at least as long)?"""
    stripped = line.strip()
    return len(stripped) >= len(fence) and stripped == fence[0] * len(stripped)


def _blocks(text: str) -> list[_Block]:
    """Top-level fenced blocks of a Markdown page, in order."""
    lines = text.splitlines()
    blocks: list[_Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not _closes(lines[j], fence):
            j += 1
        if j >= len(lines):
            raise ValueError(f"unclosed code fence at line {i + 1}")
        blocks.append(_Block(lang, i + 1, "\n".join(lines[i + 1 : j]) + "\n", j))
        i = j + 1
    return blocks


def extract(path: Path) -> list[Example]:
    """The examples of one page; raise if a ```python block has no output block."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    blocks = _blocks(text)
    examples: list[Example] = []
    for k, block in enumerate(blocks):
        if block.lang != "python":
            continue
        nxt = blocks[k + 1] if k + 1 < len(blocks) else None
        between = lines[block.end + 1 : nxt.line - 1] if nxt is not None else ["x"]
        if nxt is None or nxt.lang != "text" or any(s.strip() for s in between):
            raise ValueError(
                f"{path.name}:{block.line}: a ```python block must be followed by a ```text "
                "block with its output (fence fragments that do not run as ```py)")
        examples.append(Example(path.name, len(examples) + 1, block.line, block.text, nxt.text))
    return examples


def pages() -> list[Path]:
    """The pages whose examples run: the docs, and the README."""
    return [*sorted(DOCS.glob("*.md")), README]


def all_examples() -> list[Example]:
    found: list[Example] = []
    for path in pages():
        found.extend(extract(path))
    return found


def normalize(output: str) -> str:
    output = _ADDRESS.sub("0x...", output)
    return "\n".join(line.rstrip() for line in output.strip("\n").splitlines())


def _generics() -> list[ch.Generic]:
    return [obj for name in ch.__all__ if isinstance(obj := getattr(ch, name), ch.Generic)]


def run(example: Example) -> tuple[str, str]:
    """Run an example as a script would run; return (stdout, stderr)."""
    code = compile(example.source, "example.py", "exec", dont_inherit=True)  # no __future__ flags of ours
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    before = {g: list(g.methods()) for g in _generics()}
    limit = sys.getrecursionlimit()
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(code, namespace)
    finally:
        for generic, methods in before.items():
            for method in generic.methods():
                if method not in methods:
                    generic.unregister(method)
    assert ch.current_context() is None, "the example left a context active"
    assert sys.getrecursionlimit() == limit, "the example left the recursion limit changed"
    return out.getvalue(), err.getvalue()


EXAMPLES = all_examples()


def test_there_are_examples() -> None:
    pages = {e.page for e in EXAMPLES}
    assert {"tutorial.md", "README.md"} <= pages, pages
    assert len(EXAMPLES) >= 20


def test_every_python_block_of_the_readme_is_an_example_with_its_output() -> None:
    blocks = [b for b in _blocks(README.read_text(encoding="utf-8")) if b.lang == "python"]
    assert len(blocks) == len(extract(README)) >= 1


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example(example: Example) -> None:
    stdout, stderr = run(example)
    where = f"{'' if example.page == README.name else 'docs/'}{example.page} line {example.line}"
    assert stderr == "", f"{where}: the example wrote to stderr:\n{stderr}"
    assert normalize(stdout) == normalize(example.expected), (
        f"{where}: the output differs from the page\n--- page\n{example.expected}\n--- actual\n{stdout}")


def test_api_page_covers_all() -> None:
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\.\. auto\w+:: cassette_hook\.(\w+)", text, re.MULTILINE))
    missing = sorted(set(ch.__all__) - documented)
    assert not missing, f"docs/api.md does not document {missing}"


# -- what the pages name -----------------------------------------------------------------
#
# docs/internals.md ("The modules") names every module of the package, Python or C, once,
# with its role: one table row each, "| `runtime/callees.py` | ... |", the path relative to
# cassette_hook/.  The sources are read from the checkout, which holds the C files too.

PACKAGE_SOURCES = ROOT / "cassette_hook"
_MODULE_ROW = re.compile(r"^\| `([^`]+\.(?:py|c))` \|", re.MULTILINE)


def package_modules() -> list[str]:
    """Every Python module and C source of the package, relative to its directory."""
    return sorted(path.relative_to(PACKAGE_SOURCES).as_posix()
                  for pattern in ("*.py", "*.c") for path in PACKAGE_SOURCES.rglob(pattern))


def modules_not_named_once(page: str, modules: list[str]) -> list[str]:
    """The modules that do not have exactly one row of their own in ``page``'s tables."""
    rows = _MODULE_ROW.findall(page)
    return [f"{module} ({rows.count(module)} rows)" for module in modules if rows.count(module) != 1]


def test_the_package_has_python_and_c_modules_in_subpackages() -> None:
    modules = package_modules()
    assert {"__init__.py", "context_stack.py", "runtime/callees.py", "contexts/_recording.c"} <= set(modules)


def test_internals_names_every_module_of_the_package_once() -> None:
    page = (DOCS / "internals.md").read_text(encoding="utf-8")
    missing = modules_not_named_once(page, package_modules())
    assert not missing, f"docs/internals.md, \"The modules\", has no row (or more than one) for {missing}"


def test_a_module_without_its_row_or_with_two_is_reported() -> None:
    page = "| `a.py` | one |\n| `b/c.py` | two |\n| `b/c.py` | again |\nsee `d.py`\n"
    assert modules_not_named_once(page, ["a.py", "b/c.py", "d.py"]) == ["b/c.py (2 rows)", "d.py (0 rows)"]


# The repository cites its own pages (docs/api.md, docs/internals.md ...), never a design
# file that is not in it.  (The name is spelled in two halves so that this file does not
# cite it either.)

OUTSIDE_FILE = "DESIGN" + ".md"
_TEXT = {".py", ".md", ".c", ".h", ".txt", ".toml", ".cfg", ".ini", ".sh", ".yml", ".yaml", ".rst", ".json"}
_NOT_OURS = {"build", "dist", "_build", "results", "__pycache__"}  # (what .gitignore ignores)


def repository_files(root: Path) -> list[Path]:
    """The text files of the checkout: not its tool caches, builds or results."""
    found = []
    for path in root.iterdir():
        if path.is_dir():
            hidden = path.name.startswith(".") and path.name != ".ci"
            if not (hidden or path.name in _NOT_OURS or path.name.endswith(".egg-info")):
                found.extend(repository_files(path))
        elif path.suffix in _TEXT:
            found.append(path)
    return found


def files_citing(name: str, root: Path) -> list[str]:
    return sorted(path.relative_to(root).as_posix() for path in repository_files(root)
                  if name in path.read_text(encoding="utf-8", errors="replace"))


def test_no_file_of_the_repository_cites_a_design_file_outside_it() -> None:
    assert files_citing(OUTSIDE_FILE, ROOT) == []


def test_a_file_citing_the_outside_design_file_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(f"as {OUTSIDE_FILE} says\n")
    (tmp_path / ".tox").mkdir()
    (tmp_path / ".tox" / "copy.md").write_text(f"as {OUTSIDE_FILE} says\n")
    (tmp_path / "other.py").write_text("x = 1\n")
    assert files_citing(OUTSIDE_FILE, tmp_path) == ["docs/page.md"]


def update(names: list[str]) -> None:
    """Rewrite the output blocks of these pages (all pages if none; ``README.md`` is the
    README) with the real output."""
    for path in [README if name == README.name else DOCS / name for name in names] or pages():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        blocks = _blocks(text)
        edits = []
        for example in extract(path):
            stdout, stderr = run(example)
            if stderr:
                print(f"{example.id} (line {example.line}) wrote to stderr:\n{stderr}", file=sys.stderr)
            output = next(b for b in blocks if b.line > example.line and b.lang == "text")
            edits.append((output.line, output.end, stdout.rstrip("\n").splitlines()))
        for start, end, new in reversed(edits):
            lines[start:end] = new  # between the opening fence (1-based line) and the closing one
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{path.name}: {len(edits)} example(s) updated")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--update"]:
        sys.exit("usage: python tests/test_docs.py --update [page.md ...]")
    update(sys.argv[2:])
