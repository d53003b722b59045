"""Issue #28: storage faults are one line that says what to do, never a traceback: a damaged
study file, a read-only one, a read-only ADVISOR_HOME.

Read-only is real: as root (permission bits do not bind root), the command runs without the
capability to override them (``setpriv --bounding-set -dac_override``), as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..cli.conftest import Replay, make_replay

ROOT_WITHOUT_OVERRIDE = ("setpriv", "--bounding-set=-dac_override,-dac_read_search")


@pytest.fixture
def replay(tmp_path: Path) -> Replay:
    return make_replay(tmp_path)


def _advisor(
    args: tuple[str, ...], home: Path, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`advisor ARGS` as its own process (its SQLite connections closed when it ends)."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "advisor.cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "ADVISOR_HOME": str(home)},
        timeout=300,
    )


def _as_a_user(args: tuple[str, ...], home: Path) -> subprocess.CompletedProcess[str]:
    """`advisor ARGS` bound by file permissions (root: without the override capability)."""
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv cannot be bound by file permissions")
        prefix = ROOT_WITHOUT_OVERRIDE
    return _advisor(args, home, prefix)


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def test_a_damaged_study_file_is_one_line_saying_to_move_it_away(
    replay: Replay, _advisor_home: Path
) -> None:
    first = _advisor(replay.args("--budget", "5000"), _advisor_home)
    assert first.returncode == 0, first.stderr
    db = _advisor_home / "studies.db"
    data = bytearray(db.read_bytes())
    for i in range(len(data) // 2, len(data), 53):  # pages past the header garbled
        data[i] = 0xEE
    db.write_bytes(bytes(data))
    line = _one_line(_advisor(replay.args("--budget", "5000"), _advisor_home))
    assert "is damaged (SQLite: database disk image is malformed)" in line
    assert f"mv {db} {db}.damaged" in line  # before: "check that the database is reachable"


def test_a_read_only_study_file_is_one_line(replay: Replay, _advisor_home: Path) -> None:
    assert _advisor(replay.args("--budget", "5000"), _advisor_home).returncode == 0
    db = _advisor_home / "studies.db"
    db.chmod(0o444)
    try:
        result = _as_a_user(replay.args("--budget", "500"), _advisor_home)
    finally:
        db.chmod(0o644)
    line = _one_line(result)  # before: a 100-line traceback (StorageInternalError)
    assert f"The study file {db} cannot be written" in line and f"chmod u+w {db}" in line


def test_a_read_only_advisor_home_is_one_line(replay: Replay, tmp_path: Path) -> None:
    home = tmp_path / "read-only-home"
    home.mkdir()
    home.chmod(0o555)
    try:
        result = _as_a_user(replay.args("--budget", "500"), home)
    finally:
        home.chmod(0o755)
    line = _one_line(result)  # before: PermissionError on studies.db.lock, a traceback
    assert f"ADVISOR_HOME {home} is not writable" in line and f"chmod u+w {home}" in line
