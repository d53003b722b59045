"""Several `advisor worker --join` processes on one study in a real PostgreSQL: no probe
runs twice, no trial is lost or left RUNNING, a SIGKILLed worker's trial is retried once,
and a PostgreSQL restart mid-study is ridden out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent


def _req(tmp: Path, name: str) -> Path:
    path = tmp / f"{name}.json"
    path.write_text(
        json.dumps({"model": "fcn", "budget_usd": 50, "study_name": name, "sampler": "random"})
    )
    return path


def _worker(
    backend: str,
    req: Path,
    storage: str,
    trials: int,
    index: int,
    sleep: float = 0.0,
    log: Path | None = None,
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ADVISOR_TEST_PROBE_SLEEP": str(sleep)}
    cmd = [
        sys.executable,
        str(HERE / "slow_advisor.py"),
        "worker",
        "--join",
        str(req),
        "--storage",
        storage,
        "--trials",
        str(trials),
        "--index",
        str(index),
        "--heartbeat",
        "1",
        "--grace",
        "3",
        "--backend",
        backend,
    ]
    out = log.open("wb") if log else subprocess.PIPE
    return subprocess.Popen(
        cmd, stdout=out, stderr=subprocess.STDOUT if log else subprocess.PIPE, env=env
    )


def _init(storage: str) -> None:
    """Create the schemas once (as `advisor serve` or `advisor token create` would)."""
    from advisor.service import db
    from advisor.service.trials import rdb_storage

    db.engine_for(storage)
    rdb_storage(storage)


def _trials(storage: str, name: str) -> list[Any]:
    import optuna

    from advisor.storage.checks import storage_driver_url

    try:
        study = optuna.load_study(study_name=name, storage=storage_driver_url(storage))
    except KeyError:  # the workers have not created it yet
        return []
    return study.get_trials(deepcopy=False)


def _claims(storage: str, name: str) -> list[Any]:
    from sqlalchemy import select

    from advisor.service import db

    with db.engine_for(storage).connect() as conn:
        return list(conn.execute(select(db.probe_claims).where(db.probe_claims.c.study == name)))


def _stats(proc: subprocess.Popen[bytes]) -> dict[str, int]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, (out or b"").decode()[-2000:] + (err or b"").decode()[-2000:]
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


@pytest.mark.slow
def test_three_workers_share_one_study_without_duplicates(
    tmp_path: Path, pg_url: str, replay: str
) -> None:
    _init(pg_url)
    req = _req(tmp_path, "team-fcn")
    procs = [_worker(replay, req, pg_url, 8, i) for i in range(3)]
    stats = [_stats(p) for p in procs]
    trials = _trials(pg_url, "team-fcn")
    states = [t.state.name for t in trials]
    assert len(trials) == 24 and "RUNNING" not in states and "WAITING" not in states
    assert sorted(t.number for t in trials) == list(range(24))
    claims = _claims(pg_url, "team-fcn")
    # Every probe ran once: one claim per key (the primary key), each run by exactly one worker.
    assert sum(s["probes_run"] for s in stats) == len(claims)
    assert all(c.result is not None for c in claims)
    assert sum(s["probes_reused"] for s in stats) == 24 - len(claims)


@pytest.mark.slow
def test_sigkill_mid_probe_loses_no_finished_trial_and_is_retried(
    tmp_path: Path, pg_url: str, replay: str
) -> None:
    _init(pg_url)
    req = _req(tmp_path, "kill-fcn")
    victim = _worker(replay, req, pg_url, 50, 0, sleep=0.4, log=tmp_path / "victim.log")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill it mid-probe: a claim without its result yet
        done = [t for t in _trials(pg_url, "kill-fcn") if t.state.is_finished()]
        if len(done) >= 3 and any(c.result is None for c in _claims(pg_url, "kill-fcn")):
            break
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    # Read after the kill (a reused probe finishes its trial at once: no window to race).
    running = [t.number for t in _trials(pg_url, "kill-fcn") if t.state.name == "RUNNING"]
    finished_before = {
        t.number: t.values for t in _trials(pg_url, "kill-fcn") if t.state.is_finished()
    }
    assert running and len(finished_before) >= 3
    time.sleep(4)  # past the grace period: the killed trial's heartbeat is stale
    rescuer = _worker(replay, req, pg_url, 8, 1, sleep=0.05)
    _stats(rescuer)
    after = {t.number: t for t in _trials(pg_url, "kill-fcn")}
    for number, values in finished_before.items():  # no finished trial lost or changed
        assert after[number].state.is_finished() and after[number].values == values
    assert all(t.state.name != "RUNNING" for t in after.values())
    killed = after[running[0]]
    assert killed.state.name == "FAIL"
    retries = [t for t in after.values() if t.system_attrs.get("failed_trial") == killed.number]
    assert len(retries) == 1 and retries[0].state.is_finished()
    assert retries[0].params == killed.params
    # The probe the victim claimed but never finished was taken over: every claim has a result.
    assert all(c.result is not None for c in _claims(pg_url, "kill-fcn"))


@pytest.mark.slow
def test_postgres_restart_mid_study_is_ridden_out(
    tmp_path: Path, postgres: Any, pg_url: str, replay: str
) -> None:
    _init(pg_url)
    req = _req(tmp_path, "restart-fcn")
    procs = [_worker(replay, req, pg_url, 8, i, sleep=0.2) for i in range(2)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_trials(pg_url, "restart-fcn")) < 4:
        time.sleep(0.1)
    before = {t.number: t.values for t in _trials(pg_url, "restart-fcn") if t.state.is_finished()}
    postgres.stop("fast")
    time.sleep(2)
    postgres.start()
    stats = [_stats(p) for p in procs]
    after = {t.number: t for t in _trials(pg_url, "restart-fcn")}
    for number, values in before.items():
        assert after[number].values == values
    assert sum(s["trials"] for s in stats) == 16
    time.sleep(4)  # let any trial caught by the restart go stale, then a worker cleans up
    _stats(_worker(replay, req, pg_url, 1, 2))
    assert all(t.state.name != "RUNNING" for t in _trials(pg_url, "restart-fcn"))


@pytest.mark.slow
def test_dashboard_reads_the_same_postgresql_storage(
    tmp_path: Path, pg_url: str, replay: str, make_server: Any
) -> None:
    pytest.importorskip("optuna_dashboard")
    import socket

    import httpx

    _init(pg_url)
    _stats(_worker(replay, _req(tmp_path, "dash-fcn"), pg_url, 3, 0))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "dashboard.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "advisor.cli.main",
            "dashboard",
            "--storage",
            pg_url,
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/api/studies", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.3)
        names = [s["study_name"] for s in r.json()["study_summaries"]]
        assert names == ["dash-fcn"]
    finally:
        proc.terminate()
        proc.wait(10)
