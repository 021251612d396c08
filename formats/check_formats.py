"""Check the files cassette_hook writes for other tools against those tools' formats, and
look at them in a real browser (docs/contexts.md, "Timeline" and "Reports").

Run by the optional tox environment ``formats`` (not part of CI: it downloads speedscope
from the npm registry and needs Debian's ``chromium``)::

    python -m tox run -e formats

1. Runs ``sample.py`` under ``python -m cassette_hook`` with a profile that writes
   speedscope JSON and a trace that writes a timeline (the Chrome Trace Event format).
2. Validates the speedscope file against the schema speedscope publishes in its npm
   package (``dist/release/file-format-schema.json``), with ``jsonschema``.
3. Validates the timeline against ``trace_event_schema.json``: the fields the Trace Event
   format's documentation requires of the events cassette_hook writes (complete events,
   ``"ph": "X"``, and the ``process_name``/``thread_name`` metadata events), and checks
   that each thread's complete events nest.
4. Opens each file in speedscope's own page (the npm package's ``index.html``) in headless
   Chromium, driven by playwright-core (``screenshot.js``), and saves a screenshot of it
   to look at (``--screenshots DIR``; the docs show copies, ``docs/_static/``).

Exits 1 with what failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import jsonschema

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
SPEEDSCOPE = "speedscope@1.25.0"  # (its schema and page; pinned so that the check is repeatable)
PLAYWRIGHT = "playwright-core@1.65.1"


def speedscope_package() -> Path:
    """speedscope's npm package, unpacked (``npm pack`` downloads it from the registry once)."""
    unpacked = CACHE / SPEEDSCOPE.replace("@", "-") / "package"
    if not unpacked.exists():
        CACHE.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory() as scratch:
            subprocess.run(["npm", "pack", SPEEDSCOPE, "--silent"], cwd=scratch, check=True, stdout=subprocess.DEVNULL)
            (tarball,) = Path(scratch).glob("*.tgz")
            with tarfile.open(tarball) as archive:
                archive.extractall(unpacked.parent, filter="data")
    return unpacked


def run_sample(out: Path) -> tuple[Path, Path]:
    """The speedscope file of ``sample.py`` run under a profile, and the timeline of it run
    under a trace (two runs: one run under both would profile the trace's hooks)."""
    profile, timeline = out / "profile.speedscope.json", out / "trace.timeline.json"
    runs = ((f"profile,speedscope={profile}", "profile.txt"), (f"trace,timeline={timeline}", "trace.txt"))
    for context, report in runs:
        subprocess.run([sys.executable, "-m", "cassette_hook", "--output", str(out / report), "--context", context,
                        str(HERE / "sample.py")], check=True, stdout=subprocess.DEVNULL)
    return profile, timeline


def validate(document: Any, schema_file: Path, what: str) -> list[str]:
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    return [f"{what}: {'/'.join(map(str, error.absolute_path))}: {error.message}"
            for error in validator.iter_errors(document)]


def unnested(timeline: dict[str, Any]) -> list[str]:
    """Complete events of one thread that overlap without one containing the other: a
    timeline viewer would draw them wrongly (the format does not say how to draw them)."""
    problems = []
    by_thread: dict[tuple[int, int], list[tuple[float, float, str]]] = {}
    for event in timeline["traceEvents"]:
        if event["ph"] == "X":
            by_thread.setdefault((event["pid"], event["tid"]), []).append(
                (event["ts"], event["ts"] + event["dur"], event["name"]))
    for thread, events in by_thread.items():
        open_ends: list[tuple[float, str]] = []
        for start, end, name in sorted(events, key=lambda e: (e[0], -e[1])):
            while open_ends and open_ends[-1][0] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1][0] + 1e-3:  # (microseconds, rounded to nanoseconds)
                problems.append(f"timeline: thread {thread}: {name} at {start} overlaps {open_ends[-1][1]}")
            open_ends.append((end, name))
    return problems


def playwright() -> Path:
    """A ``node_modules`` with playwright-core, which drives the browser (``npm install``
    from the registry once)."""
    prefix = CACHE / "node"
    if not (prefix / "node_modules" / "playwright-core").exists():
        subprocess.run(["npm", "install", "--silent", "--prefix", str(prefix), PLAYWRIGHT], check=True)
    return prefix / "node_modules"


def screenshot(package: Path, file: Path, picture: Path) -> str | None:
    """Open ``file`` in speedscope's page in headless Chromium; ``None`` or what failed."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return "no chromium: install Debian's (apt-get install chromium) to render the files"
    page = (package / "dist" / "release" / "index.html").as_uri()
    done = subprocess.run(["node", str(HERE / "screenshot.js"), page, str(file), str(picture)],
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, "NODE_PATH": str(playwright()), "CHROMIUM": chromium})
    if done.returncode != 0:
        return f"speedscope in chromium did not open {file.name}: {done.stderr[-2000:]}"
    shown = json.loads(done.stdout)
    if shown["errors"]:
        return f"speedscope raised opening {file.name}: {shown['errors']}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--screenshots", type=Path, default=CACHE / "screenshots",
                        help="where to save the pictures of the files in speedscope (default: %(default)s)")
    options = parser.parse_args(argv)
    package = speedscope_package()
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        profile, timeline = run_sample(Path(scratch))
        profile_data = json.loads(profile.read_text(encoding="utf-8"))
        timeline_data = json.loads(timeline.read_text(encoding="utf-8"))
        problems += validate(profile_data, package / "dist" / "release" / "file-format-schema.json", "speedscope")
        problems += validate(timeline_data, HERE / "trace_event_schema.json", "timeline")
        problems += unnested(timeline_data)
        options.screenshots.mkdir(parents=True, exist_ok=True)
        for name, file in (("profile-in-speedscope.png", profile), ("timeline-in-speedscope.png", timeline)):
            failed = screenshot(package, file, options.screenshots / name)
            if failed is not None:
                problems.append(failed)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print(f"the speedscope file and the timeline are valid; screenshots in {options.screenshots}{os.sep}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
