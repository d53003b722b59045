"""Reliability test helpers: the CLI run in-process with its invariant (exit 0, or exit 2 with
one line), and real `advisor suggest` processes on the replay back end.

``run`` calls ``advisor.cli.main.main`` (the console script's entry point) with stdout and
stderr captured; any exception other than ``SystemExit`` escapes, so a traceback fails the
test that caused it. With ``ADVISOR_FUZZ_LOG=FILE`` every checked invocation is logged (one
JSON line: arguments and exit code): the figures in docs/reliability.md come from that log.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from cli_run import Outcome, error_lines, run
from replay_tables import entries, instance, small_table

from advisor.evaluation.replay import ReplayTable


def check(outcome: Outcome, args: tuple[str, ...] | list[str] = ()) -> None:
    """The invariant: exit 0, or exit 2 with exactly one line on stderr starting "Error:", and
    no traceback anywhere."""
    where = f"advisor {' '.join(map(repr, args))}"
    text = outcome.out + outcome.err
    assert "Traceback" not in text, f"{where}: traceback\n{text}"
    assert outcome.code in (0, 2), f"{where}: exit {outcome.code}\n{text}"
    if outcome.code == 2:
        lines = error_lines(outcome.err)
        assert len(lines) == 1 and lines[0].startswith("Error: "), f"{where}: {outcome.err!r}"
    log(list(args), outcome.code)


def log(args: list[str], code: int) -> None:
    """With ADVISOR_FUZZ_LOG=FILE, append one JSON line (the figures in docs/reliability.md)."""
    if os.environ.get("ADVISOR_FUZZ_LOG"):
        with open(os.environ["ADVISOR_FUZZ_LOG"], "a") as out:
            out.write(json.dumps({"args": args, "code": code}) + "\n")


def replay_table(path: Path) -> Path:
    """A 2-machine x 2-batch replay table (plausible V100/K80 run times, 10 epochs) saved as
    JSON, so that a valid `advisor suggest` finishes in well under a second."""
    insts = (
        replace(
            instance("ec2:p2.xlarge", 1, 0.90, 0.27, "K80"), vcpus=4, accelerator_memory_gib=12.0
        ),
        instance("ec2:p3.2xlarge", 1, 3.06, 0.92, "V100"),
    )
    runtimes = {
        ("ec2:p2.xlarge", 256): 3000.0,
        ("ec2:p2.xlarge", 512): 2800.0,
        ("ec2:p3.2xlarge", 256): 900.0,
        ("ec2:p3.2xlarge", 512): 700.0,
    }
    ReplayTable(insts, entries(runtimes), snapshot="test-2021-02", epochs=10).save(path)
    return path


@dataclass(frozen=True)
class Cli:
    """What the reliability tests need: run, check, and a replay back end's files."""

    table: Path
    space: Path

    @staticmethod
    def run(*args: str) -> Outcome:
        return run(*args)

    @staticmethod
    def check(outcome: Outcome, args: tuple[str, ...] | list[str] = ()) -> None:
        check(outcome, args)

    @staticmethod
    def log(args: list[str], code: int) -> None:
        log(args, code)

    def run_checked(self, *args: str) -> Outcome:
        """``advisor ARGS``, checked; ``suggest`` scores with the replay back end (no probe runs)."""
        if args and args[0] == "suggest" and "--backend" not in args:
            args = (*args, "--backend", f"replay:{self.table}")
        outcome = run(*args)
        check(outcome, args)
        return outcome


SPACE = (
    "workload: fcn\nbatch_sizes: [256, 512]\nhyperparameters:\n"
    "  lr: {type: float, low: 0.01, high: 0.3, log: true}\n"
)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The replay back end (no probe runs) and a small valid space file."""
    table = replay_table(tmp_path / "table.json")
    monkeypatch.setenv("COLUMNS", "200")
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    return Cli(table, space)


# -- real `advisor suggest` processes (concurrency, Ctrl-C) ---------------------------------

SMALL_SPACE = "workload: fcn\nbatch_sizes: [256, 512]\n"


def save_table(path: Path, delay_s: float) -> Path:
    """The study tests' small table (12 machine x batch configs with spot), each evaluation
    taking ``delay_s`` as a probe would, saved for --backend replay:PATH."""
    replace(small_table(), delay_s=delay_s).save(path)
    return path


@pytest.fixture
def slow_table(tmp_path: Path) -> Path:
    """The small table at 0.4 s per evaluation."""
    return save_table(tmp_path / "table.json", 0.4)


@pytest.fixture
def space_file(tmp_path: Path) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(SMALL_SPACE)
    return path


def suggest_cmd(table: Path, space: Path, db: Path, *extra: str) -> list[str]:
    """`advisor suggest` as a user runs it (Pareto: the search needs several trials)."""
    return [
        sys.executable, "-m", "advisor.cli.main", "suggest", "--model", "fcn",
        "--objective", "pareto", "--probe-budget", "100", "--space", str(space),
        "--storage", f"sqlite:///{db}", "--backend", f"replay:{table}", "--json", *extra,
    ]  # fmt: skip


def start(cmd: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        start_new_session=True,  # a SIGINT sent to it reaches it alone
    )


def count_trials(db: Path) -> int:
    """Trials in the SQLite study file (0 before it exists), read without Optuna."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return int(con.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
    except sqlite3.OperationalError:  # tables not created yet
        return 0
