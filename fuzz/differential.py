"""Differential fuzzing: generated programs run plain, instrumented and under contexts.

    python fuzz/differential.py --count 2500 --seed 1 [--python /path/to/python] [--jobs 1]
        [--divergences out.jsonl] [--save programs.jsonl | --load programs.jsonl]

Programs come from ``fuzz/programs.py`` (hypothesmith's grammar programs and programs of a
small vocabulary that run), generated with a fixed hypothesis seed by the Python running
this script.  Each is checked by ``fuzz/worker.py`` in a worker process of ``--python``
(by default this one), ``PYTHONHASHSEED=0``, one program at a time: see that module for
the modes and what is compared.  A worker that does not answer within ``HARD_LIMIT``
seconds (a program stuck in C, or swallowing the alarm) is killed and replaced; the
program is then run plain alone, and counts as *slow* if that hangs too, else as a
divergence (``hung``).  Exit status 1 when anything diverged.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import IO, Any

from hypothesis import HealthCheck, Phase, given, seed, settings

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")
HARD_LIMIT = 90.0  # seconds for one program in all modes (each run has its own budget)


class _Enough(Exception):
    """Stops the generation once it has the programs it was asked for."""


def generate(count: int, seed_: int) -> list[str]:
    """``count`` distinct programs, the same for the same seed (and hypothesis version).

    Hypothesis would go on to ``max_examples`` (room for duplicates, which are few: 4 in
    the first 204 examples of seed 3); stopping at ``count`` makes generating about four
    times faster, and gives the same programs.
    """
    from programs import programs  # the strategies need hypothesmith; the worker does not

    found: dict[str, None] = {}

    @seed(seed_)
    @settings(max_examples=count * 4, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def collect(source: str) -> None:
        if len(found) >= count:
            raise _Enough()
        found.setdefault(source)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # hypothesmith's "'int' object is not callable"
        try:
            collect()
        except _Enough:
            pass
    return list(found)


class Worker:
    """A worker process answering one program at a time."""

    def __init__(self, python: str, cwd: str) -> None:
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONBREAKPOINT="0", PYTHONDONTWRITEBYTECODE="1")
        self.process = subprocess.Popen([python, WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, cwd=cwd, env=env, text=True)

    def ask(self, source: str, plain_only: bool = False) -> dict[str, Any] | None:
        """The worker's report, or None if it died or did not answer in time (then it is gone)."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(json.dumps({"source": source, "plain_only": plain_only}) + "\n")
            stdin.flush()
        except BrokenPipeError:
            self.close()
            return None
        ready, _, _ = select.select([stdout], [], [], HARD_LIMIT)
        line = stdout.readline() if ready else ""
        if not line:
            self.close()
            return None
        report = json.loads(line)
        if report.get("restart"):
            self.close()
        return report

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except BrokenPipeError:
                    pass


@dataclass
class Campaign:
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    divergences: list[dict[str, Any]] = field(default_factory=list)

    def add(self, source: str, report: dict[str, Any]) -> None:
        self.counts[report["status"]] += 1
        if report["status"] == "same":
            self.counts["same, plain run raised" if report.get("raised") else "same, plain run completed"] += 1
        if report["status"] in ("diverged", "hung", "crashed"):
            self.divergences.append({"source": source, **report})


def check_all(sources: list[str], python: str, jobs: int = 1, log: IO[str] | None = None) -> Campaign:
    """Check every program; one worker per job, each taking a share of the programs."""
    campaign = Campaign()
    shares = [sources[i::jobs] for i in range(jobs)]
    with tempfile.TemporaryDirectory(prefix="cassette-fuzz-") as cwd, \
            concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for results in pool.map(lambda share: _check_share(share, python, cwd, log), shares):
            for source, report in results:
                campaign.add(source, report)
    return campaign


def _check_share(sources: list[str], python: str, cwd: str, log: IO[str] | None) -> list[tuple[str, dict[str, Any]]]:
    results = []
    worker: Worker | None = None
    started = time.monotonic()
    for number, source in enumerate(sources, 1):
        if worker is None or not worker.alive:
            worker = Worker(python, cwd)
        report = worker.ask(source)
        if report is None:  # killed or crashed: is the plain program itself the reason?
            worker = Worker(python, cwd)
            plain = worker.ask(source, plain_only=True)
            report = {"status": "slow"} if plain is None or plain["status"] == "slow" else {"status": "hung"}
        results.append((source, report))
        if log is not None and number % 100 == 0:
            log.write(f"  {number}/{len(sources)} programs, {time.monotonic() - started:.0f} s\n")
            log.flush()
    if worker is not None:
        worker.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200, help="number of distinct programs")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed of the generation")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the worker processes")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes at a time")
    parser.add_argument("--divergences", help="write each divergence (program and outcomes) here, as JSON lines")
    parser.add_argument("--save", help="write the generated programs here (JSON lines) and stop")
    parser.add_argument("--load", help="check the programs of this file (from --save) instead of generating")
    args = parser.parse_args(argv)

    started = time.monotonic()
    if args.load:
        with open(args.load) as saved:
            sources = [json.loads(line) for line in saved][:args.count]
    else:
        sources = generate(args.count, args.seed)
        print(f"generated {len(sources)} programs in {time.monotonic() - started:.0f} s", file=sys.stderr)
    if args.save:
        with open(args.save, "w") as out:
            out.writelines(json.dumps(source) + "\n" for source in sources)
        return 0
    campaign = check_all(sources, args.python, args.jobs, log=sys.stderr)
    origin = f"from {args.load}" if args.load else f"seed {args.seed}"
    print(f"{args.python}: {len(sources)} programs {origin}, {time.monotonic() - started:.0f} s")
    for status, number in sorted(campaign.counts.items()):
        print(f"  {status}: {number}")
    if args.divergences:
        with open(args.divergences, "w") as out:
            for divergence in campaign.divergences:
                out.write(json.dumps(divergence) + "\n")
    for divergence in campaign.divergences:
        print("\n--- diverged:", divergence["status"])
        print(divergence["source"])
        for detail in divergence.get("divergences", []):
            print(json.dumps(detail, indent=1)[:3000])
    return 1 if campaign.divergences else 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
