"""Helpers for driving `advisor` as a user does: in this process (``run``), or as a real
process (``start``, for signals), on small replay tables so no probe runs.

The tables hold plausible run times (V100/K80 shaped like docs/method.md 2.4; 10 epochs).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_run import Outcome, error_lines, run  # noqa: F401  (the tests import them from here)
from replay_tables import entries, instance

from advisor.evaluation.replay import ReplayTable

SPACE = "workload: fcn\nbatch_sizes: [256, 512]\n"


def one_line_error(outcome: Outcome) -> str:
    """The single "Error: ..." line of a refused command (asserts there is exactly one)."""
    lines = error_lines(outcome.err)
    assert outcome.code == 2, outcome
    assert len(lines) == 1 and lines[0].startswith("Error: "), outcome.err
    assert "Traceback" not in outcome.out + outcome.err
    return lines[0]


def table(
    delay_s: float = 0.0, runtimes: dict[tuple[str, int], float] | None = None
) -> ReplayTable:
    """Three cloud machines x 2 batch sizes and this machine; ``delay_s`` per evaluation."""
    insts = (
        instance("ec2:p2.xlarge", 1, 0.90, 0.27, "K80", "us-east-1"),
        instance("ec2:p3.2xlarge", 1, 3.06, 0.92, "V100", "us-east-1"),
        instance("compute-engine:n1-standard-8+V100", 1, 2.86, 0.89, "V100", "us-central1"),
        instance("local:local", 0, 0.0, None, None),
    )
    times = runtimes or {
        ("ec2:p2.xlarge", 256): 3000.0,
        ("ec2:p2.xlarge", 512): 2800.0,
        ("ec2:p3.2xlarge", 256): 900.0,
        ("ec2:p3.2xlarge", 512): 700.0,
        ("compute-engine:n1-standard-8+V100", 256): 950.0,
        ("compute-engine:n1-standard-8+V100", 512): 760.0,
        ("local:local", 256): 20000.0,
        ("local:local", 512): 19000.0,
    }
    return ReplayTable(insts, entries(times), snapshot="test-2021-02", epochs=10, delay_s=delay_s)


@dataclass(frozen=True)
class Replay:
    """A saved replay table and a small space file: ``args`` for `advisor suggest`."""

    table: Path
    space: Path

    def args(self, *extra: str) -> tuple[str, ...]:
        return (
            "suggest", "--model", "fcn", "--space", str(self.space),
            "--backend", f"replay:{self.table}", *extra,
        )  # fmt: skip


def make_replay(folder: Path) -> Replay:
    """The replay table and the space file saved in ``folder``."""
    path = folder / "table.json"
    table().save(path)
    space = folder / "space.yaml"
    space.write_text(SPACE)
    return Replay(path, space)


@pytest.fixture
def replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Replay:
    monkeypatch.setenv("COLUMNS", "100")
    return make_replay(tmp_path)


def start(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`advisor ARGS` as its own process (its own session: a signal reaches it alone)."""
    return subprocess.Popen(
        [sys.executable, "-m", "advisor.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )


# A meta-path hook that makes the named packages look uninstalled in a child process (the
# cloud SDKs, TensorFlow): what a user without that extra meets.
BLOCKER = """
import sys
BLOCKED = {blocked!r}
class _Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Block())
"""
SDKS = ("boto3", "botocore", "sagemaker", "google.cloud", "google.auth", "google.api_core",
        "azure", "mlflow")  # fmt: skip


def without(folder: Path, packages: tuple[str, ...]) -> dict[str, str]:
    """Environment variables for a child process in which ``packages`` are not installed."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(BLOCKER.format(blocked=packages))
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": f"{folder}{os.pathsep}{path}" if path else str(folder)}
