"""Issue #38, the parts that need no second process: leases on the database's clock, one
stored lease per deployment, re-queued jobs first, the lease keeper while a job waits for the
host's probe slot, and the slot itself (a stopped holder is passed). SQLite; fast."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from advisor.evaluation import probe_slot
from advisor.service import db, jobs
from advisor.service.dispatch import Sweeper
from advisor.service.fencing import Lease
from advisor.service.runner import LeaseKeeper

REQUEST = {"model": "fcn", "budget_usd": 5}


def _job(url: str, budget: float) -> str:
    job_id, _ = jobs.submit(url, "suggest", {**REQUEST, "budget_usd": budget}, "me")
    return job_id


def _heartbeat(url: str, job_id: str) -> float:
    with db.engine_for(url).connect() as conn:
        row = conn.execute(db.jobs.select().where(db.jobs.c.id == job_id)).first()
    assert row is not None
    return float(row.heartbeat)


def test_a_sweeper_whose_clock_is_ahead_expires_no_lease(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = _job(sqlite_url, 1)
    assert jobs.claim(sqlite_url, job_id, "worker-a")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 15.0)  # this host's clock: 15 s ahead
    assert jobs.requeue_expired(sqlite_url, 10.0) == []  # the database's clock: 0 s old
    assert abs(_heartbeat(sqlite_url, job_id) - real()) < 2  # written on the database's clock
    assert jobs.requeue_expired(sqlite_url, 0.0) == [job_id]


def test_one_stored_lease_per_deployment(sqlite_url: str) -> None:
    assert db.store_lease(sqlite_url, None, replace=False) == db.DEFAULT_LEASE_S
    assert db.store_lease(sqlite_url, 8.0, replace=False) == 8.0  # the first one is stored
    assert db.store_lease(sqlite_url, 1.5, replace=False) == 8.0  # a worker's is not
    assert db.store_lease(sqlite_url, 1.5, replace=True) == 1.5  # `advisor serve` sets it
    job_id = _job(sqlite_url, 2)
    job = jobs.claim(sqlite_url, job_id, "w")
    assert job is not None
    assert jobs.renew(sqlite_url, Lease(job_id, int(job["lease"]))) == 1.5  # every holder reads it


class _Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bool]] = []

    def dispatch(self, job_id: str, front: bool = False) -> None:
        self.sent.append((job_id, front))

    def waiting_ids(self) -> set[str]:
        return set()


def test_an_expired_job_goes_to_the_front_of_the_queue(sqlite_url: str) -> None:
    first, second, third = (_job(sqlite_url, b) for b in (3, 4, 5))
    assert jobs.claim(sqlite_url, second, "w")
    assert jobs.requeue_expired(sqlite_url, 0.0) == [second]
    assert jobs.queued_ids(sqlite_url) == [second, first, third]
    queue = _Recorder()
    Sweeper(sqlite_url, queue, 0.0).sweep()  # every_s 0: jobs queued just now too
    assert queue.sent == [(second, True), (first, False), (third, False)]


def test_waiting_long_for_the_probe_slot_stops_the_renewals(sqlite_url: str) -> None:
    job_id = _job(sqlite_url, 6)
    job = jobs.claim(sqlite_url, job_id, "w")
    assert job is not None
    keeper = LeaseKeeper(sqlite_url, Lease(job_id, int(job["lease"])), 0.1, slot_wait_s=0.3)
    with keeper:
        keeper.wait_for_slot(True)
        time.sleep(0.6)
        stopped_at = _heartbeat(sqlite_url, job_id)
        time.sleep(0.6)
        assert _heartbeat(sqlite_url, job_id) == stopped_at  # not progressing: no renewal
        keeper.wait_for_slot(False)  # holds the slot: renewed at once (the lease is still its)
        assert _heartbeat(sqlite_url, job_id) > stopped_at


_HOLDER = """
import sys, time
from advisor.evaluation.probe_slot import probe_slot
with probe_slot():
    print("held", flush=True)
    time.sleep(60)
"""


def test_the_probe_slot_is_passed_when_its_holder_is_stopped(tmp_path: Path) -> None:
    told: list[bool] = []
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert probe_slot.holder() == holder.pid
        got: list[float] = []

        def take() -> None:
            with probe_slot.on_wait(told.append), probe_slot.probe_slot():
                got.append(time.monotonic())

        waiter = threading.Thread(target=take, daemon=True)
        waiter.start()
        time.sleep(0.5)
        assert not got and told == [True]  # a running holder is waited for
        holder.send_signal(signal.SIGSTOP)
        paused = time.monotonic()
        waiter.join(5)
        assert got and got[0] - paused < probe_slot.STOPPED_S + 1 and told == [True, False]
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait()


def test_the_probe_slot_is_one_at_a_time(tmp_path: Path) -> None:
    inside: list[int] = []
    most: list[int] = [0]

    def probe(_: Any) -> None:
        with probe_slot.probe_slot():
            inside.append(1)
            most[0] = max(most[0], len(inside))
            time.sleep(0.05)
            inside.pop()

    threads = [threading.Thread(target=probe, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert most[0] == 1
