"""Helpers for the reliability tests: real `advisor suggest` processes on the replay back end."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.replay import ReplayTable

HERE = Path(__file__).parent
SPACE = "workload: fcn\nbatch_sizes: [256, 512]\n"


def _small_table() -> ReplayTable:
    spec = importlib.util.spec_from_file_location(
        "study_tables", HERE.parent / "study" / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.small_table()  # type: ignore[no-any-return]


def save_table(path: Path, delay_s: float) -> Path:
    """The study tests' small table (12 machine x batch configs with spot), each evaluation
    taking ``delay_s`` as a probe would, saved for --backend replay:PATH."""
    replace(_small_table(), delay_s=delay_s).save(path)
    return path


@pytest.fixture
def slow_table(tmp_path: Path) -> Path:
    """The small table at 0.4 s per evaluation."""
    return save_table(tmp_path / "table.json", 0.4)


@pytest.fixture
def space_file(tmp_path: Path) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(SPACE)
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
