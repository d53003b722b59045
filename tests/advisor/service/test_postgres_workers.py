"""Several `advisor worker --join` processes on one study in a real PostgreSQL, each running
the trial loop of `advisor suggest` with the database-enforced claims store: no configuration
evaluated by two workers at once, each probe charged once, no trial left RUNNING, a SIGKILLed
worker's claim taken over, and a PostgreSQL restart mid-study ridden out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest

HERE = Path(__file__).parent


def _req(tmp: Path, name: str) -> Path:
    path = tmp / f"{name}.json"
    body = {"model": "fcn", "budget_usd": 50, "study_name": name, "sampler": "random"}
    path.write_text(json.dumps({**body, "screen": False}))
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
    cmd = [sys.executable, str(HERE / "slow_advisor.py"), "worker", "--join", str(req)]
    cmd += ["--storage", storage, "--trials", str(trials), "--index", str(index)]
    cmd += ["--grace", "3", "--backend", backend]
    out = log.open("wb") if log else subprocess.PIPE
    return subprocess.Popen(
        cmd, stdout=out, stderr=subprocess.STDOUT if log else subprocess.PIPE, env=env
    )


def _init(storage: str) -> None:
    """Create the schemas once (as `advisor serve` or `advisor token create` would)."""
    from advisor.service import api

    api.prepare_storage(storage)


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


def _charged_twice(trials: list[Any]) -> int:
    """Probes charged more than once: (machine without :spot, batch) with two charges."""
    charged = Counter(
        (t.params["machine"].removesuffix(":spot"), t.params["batch_size"])
        for t in trials
        if t.user_attrs.get("probe_cost", {}).get("charged_usd", 0) > 0
    )
    return sum(n - 1 for n in charged.values())


@pytest.mark.slow
def test_three_workers_share_one_study_without_duplicates(
    tmp_path: Path, pg_url: str, replay: str
) -> None:
    _init(pg_url)
    req = _req(tmp_path, "team-fcn")
    procs = [_worker(replay, req, pg_url, 2, i, sleep=0.3) for i in range(3)]
    stats = [_stats(p) for p in procs]
    trials = _trials(pg_url, "team-fcn")
    assert len(trials) == 6 and all(t.state.is_finished() for t in trials)  # none RUNNING
    assert sum(s["trials"] for s in stats) == 6 and all(s["trials"] == 2 for s in stats)
    assert len({json.dumps(t.params, sort_keys=True) for t in trials}) == 6
    assert _charged_twice(trials) == 0
    assert _claims(pg_url, "team-fcn") == []  # each worker dropped its claims at the end


@pytest.mark.slow
def test_sigkill_mid_probe_loses_no_finished_trial_and_its_claim_is_taken_over(
    tmp_path: Path, pg_url: str, replay: str
) -> None:
    _init(pg_url)
    req = _req(tmp_path, "kill-fcn")
    # asked for more trials than it can finish before it is caught (with 8 it sometimes
    # finished them all while a busy machine ran the test's first loop)
    victim = _worker(replay, req, pg_url, 40, 0, sleep=0.4, log=tmp_path / "victim.log")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # three trials finished first
        if sum(t.state.is_finished() for t in _trials(pg_url, "kill-fcn")) >= 3:
            break
        time.sleep(0.05)
    while time.monotonic() < deadline and victim.poll() is None:  # kill it mid-probe
        # frozen while the claims are read, so it cannot drop its claim between the read and
        # the kill (on a loaded machine it did, between two probes); only the claims are read
        # in this loop (a quick query), so it catches the victim inside a probe
        victim.send_signal(signal.SIGSTOP)
        if _claims(pg_url, "kill-fcn"):
            break
        victim.send_signal(signal.SIGCONT)
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    held = [c.probe_key for c in _claims(pg_url, "kill-fcn")]
    finished_before = {t.number: t.values for t in _trials(pg_url, "kill-fcn")}
    assert held and len(finished_before) >= 3
    time.sleep(3.5)  # past --grace: the victim's claim is abandoned
    asked = max(12 - len(finished_before), 2)
    rescuer = _worker(replay, req, pg_url, asked, 1, sleep=0.05)
    _stats(rescuer)
    after = {t.number: t for t in _trials(pg_url, "kill-fcn")}
    for number, values in finished_before.items():  # no finished trial lost or changed
        assert after[number].state.is_finished() and after[number].values == values
    assert all(t.state.is_finished() for t in after.values())
    # the rescuer added every trial asked, the victim's claim aside
    assert len(after) == len(finished_before) + asked
    # The victim's claim is abandoned (past --grace on the database's clock): a worker gets it.
    import optuna

    from advisor.service import api, trials

    storage = api.optuna_storage(pg_url)
    study = optuna.load_study(study_name="kill-fcn", storage=storage)
    machine, _, batch = held[0].rpartition("|")
    assert trials.TableClaims(pg_url, storage, study, 3.0).claim((machine, int(batch)), 0.0)
    other = trials.TableClaims(pg_url, storage, study, 600.0)
    other.me = "another-host:1"
    assert not other.claim((machine, int(batch)), 0.0)  # now a live claim: refused
    assert _charged_twice(list(after.values())) == 0


@pytest.mark.slow
def test_postgres_restart_mid_study_is_ridden_out(
    tmp_path: Path, postgres: Any, pg_url: str, replay: str
) -> None:
    _init(pg_url)
    req = _req(tmp_path, "restart-fcn")
    procs = [_worker(replay, req, pg_url, 4, i, sleep=0.3) for i in range(2)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_trials(pg_url, "restart-fcn")) < 3:
        time.sleep(0.1)
    before = {t.number: t.values for t in _trials(pg_url, "restart-fcn")}
    postgres.stop("fast")
    time.sleep(2)
    postgres.start()
    stats = [_stats(p) for p in procs]
    after = {t.number: t for t in _trials(pg_url, "restart-fcn")}
    for number, values in before.items():
        assert after[number].values == values
    assert all(t.state.is_finished() for t in after.values())
    # A trial the outage cut mid-write is recorded as failed and its configuration run again
    # (seen once in a loaded full run: 9 trials, one more FAIL than the workers wrote): the
    # workers still wrote exactly their 8, and nothing is charged twice.
    assert sum(s["trials"] for s in stats) == 8
    cut = len(after) - 8
    failed = [t for t in after.values() if t.state == optuna.trial.TrialState.FAIL]
    assert 0 <= cut <= len(procs) and len(failed) >= cut  # at most one cut trial per worker
    assert _charged_twice(list(after.values())) == 0


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
