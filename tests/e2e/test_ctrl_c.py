"""Ctrl-C (a real SIGINT) to `advisor suggest` at several moments: no traceback, a consistent
study (every trial finished, no claim left on a configuration not evaluated), the report of what finished, and a re-run
that resumes. The probe child of a real local probe is stopped too."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from repo_paths import HELPERS

from advisor.records import TrialRecord
from advisor.study.claims import CLAIM_PREFIX

from .conftest import count_trials, start, suggest_cmd

# "Aborted." and exit 130 -- not death by SIGINT (-2), which CPython 3.11 chose after an
# interrupt raised inside exec()'d code unless advisor.cli.main.run leaves by os._exit.
INTERRUPTED = (130,)


def _studies(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return int(con.execute("SELECT COUNT(*) FROM studies").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def _wait(predicate: object, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the moment to interrupt never came"
        time.sleep(0.05)


def _ended(pid: int, limit_s: float) -> bool:
    """``pid`` is gone or dead (a zombie: a child that died with its parent waits for init to
    reap it, which under load may take a moment, or, in a container whose init does not
    reap, for ever), within ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _check_consistent(db: Path) -> str | None:
    """Every trial finished with a readable record, no claim left on a configuration without
    a written trial, every process marked ended; the study name."""
    storage = f"sqlite:///{db}"
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
    if not names:
        return None
    (name,) = names
    study = optuna.load_study(study_name=name, storage=storage)
    for t in study.trials:
        assert t.state.is_finished(), t
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert TrialRecord.from_trial(t) is not None
    rdb = optuna.storages.RDBStorage(storage)
    attrs = rdb.get_study_system_attrs(rdb.get_study_id_from_name(name))
    done = {
        f"{r.machine}|{r.batch_size}"
        for r in (TrialRecord.from_trial(t) for t in study.trials)
        if r is not None
    }
    live = {
        k.removeprefix(CLAIM_PREFIX) for k, v in attrs.items() if k.startswith(CLAIM_PREFIX) and v
    }
    assert live <= done, live - done
    assert all(v["ended"] for k, v in attrs.items() if k.startswith("peer:"))
    return name


# (what must have happened before the SIGINT, extra delay): start-up, the study just
# created (screening / first evaluation), during the 2nd and the 4th evaluation, and
# just as the 3rd is being written.
MOMENTS = [
    ("start", 0.3),
    ("study", 0.0),
    ("trials>=1", 0.15),
    ("trials>=3", 0.3),
    ("trials>=2", 0.39),
]


@pytest.mark.slow
@pytest.mark.parametrize(("moment", "delay"), MOMENTS)
def test_ctrl_c_at_several_moments(
    slow_table: Path, space_file: Path, tmp_path: Path, moment: str, delay: float
) -> None:
    db = tmp_path / "s.db"
    cmd = suggest_cmd(slow_table, space_file, db)
    proc = start(cmd)
    try:
        if moment == "study":
            _wait(lambda: _studies(db) >= 1)
        elif moment.startswith("trials>="):
            k = int(moment.removeprefix("trials>="))
            _wait(lambda: count_trials(db) >= k)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "Traceback" not in err and "Cannot tell" not in err, err
    assert proc.returncode in INTERRUPTED, (proc.returncode, err)  # issue #28: 130 either way
    if out.strip():  # something had finished: the report of it
        report = json.loads(out)
        assert report["stop_reason"].startswith("interrupted"), report["stop_reason"]
        assert report["trials"]["complete"] >= 1
    else:  # nothing had finished
        assert "Aborted." in err, err
    name = _check_consistent(db)
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["resumed"] == (name is not None)
    assert report["stop_reason"] == "converged"
    _check_consistent(db)


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task")
    return [int(c) for task in tasks.iterdir() for c in (task / "children").read_text().split()]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_ctrl_c_during_a_local_probe_stops_the_child(tmp_path: Path) -> None:
    models = HELPERS
    space = tmp_path / "space.yaml"
    space.write_text("workload: user_models:build_slow\nbatch_sizes: [8]\n")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "advisor.cli.main", "suggest",
            "--model", "user_models:build_slow", "--n-train", "64", "--space", str(space),
            "--storage", f"sqlite:///{tmp_path / 's.db'}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(models)},
        start_new_session=True,
    )  # fmt: skip
    try:
        _wait(lambda: bool(_children(proc.pid)), limit_s=120)
        (child,) = _children(proc.pid)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "Traceback" not in err, err
    assert proc.returncode in INTERRUPTED and "Aborted." in err
    assert _ended(child, limit_s=10.0)  # killed, not left running
