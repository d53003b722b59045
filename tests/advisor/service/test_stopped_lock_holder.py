"""Issue #50, section 6: a paused worker stalled its own job's re-run on the same host. The
re-run waited on the paused process's per-configuration probe lock (a plain ``flock``, which
the kernel frees only when its holder exits) while its lease kept renewing: 65 s for a 40 s
pause, for good if it never resumed. Now a probe lock's holder must be alive to hold it
(``advisor.storage.locks.live_lock``), and a job that waits on one is told to its lease
keeper, which stops renewing after ``slot_wait_s``.

Real processes hold the lock through the local back end's own ``probe`` (``LocalBackend``
with an injected probe that sleeps); one is stopped with a real SIGSTOP."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from advisor.probes.result import ProbeRequest, ProbeResult

from advisor.evaluation import probe_slot
from advisor.evaluation.local import LocalBackend
from advisor.evaluation.workload import WorkloadInfo
from advisor.service import db, jobs
from advisor.service.fencing import Lease
from advisor.service.runner import LeaseKeeper

WORKLOAD = WorkloadInfo(name="fcn", framework="torch", n_train=40_512, n_val=212)

# A process that takes the probe of fcn at batch 256 through the local back end: it holds
# that configuration's lock and then the host's slot, says so, and probes for a minute.
_HOLDER = """
import sys, time
from advisor.evaluation.local import LocalBackend
from advisor.evaluation.workload import WorkloadInfo

def run_probe(request):
    print("probing", flush=True)
    time.sleep(60)

backend = LocalBackend(sys.argv[1], run_probe=run_probe)
backend.probe(WorkloadInfo(name="fcn", framework="torch", n_train=40_512, n_val=212), 256, {})
"""


def _result(request: ProbeRequest) -> ProbeResult:
    return ProbeResult(
        workload="fcn", framework="torch", batch_size=request.batch_size, device="cpu",
        threads=request.threads, init_s=1.0, iteration_s=(0.5, *([0.1] * 7)),
        validation_s=(0.2, 0.1), validation_samples_measured=212, n_train=40_512, n_val=212,
        wall_s=2.0,
    )  # fmt: skip


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Another process of this host (the same ADVISOR_HOME) in the middle of that probe."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, f"sqlite:///{tmp_path / 'other.db'}"],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"probing\n"
        yield proc
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait()


def _probe_in_thread(
    tmp_path: Path, listener: Any, got: list[float]
) -> tuple[threading.Thread, list[ProbeRequest]]:
    """This process's probe of the same configuration (its own storage), in a thread that
    tells ``listener`` when it waits for a probe lock."""
    taken: list[ProbeRequest] = []

    def run_probe(request: ProbeRequest) -> ProbeResult:
        taken.append(request)
        return _result(request)

    backend = LocalBackend(f"sqlite:///{tmp_path / 'mine.db'}", run_probe=run_probe)

    def probe() -> None:
        with probe_slot.on_wait(listener):
            backend.probe(WORKLOAD, 256, {})
        got.append(time.monotonic())

    return threading.Thread(target=probe, daemon=True), taken


def test_a_stopped_holder_of_a_configurations_probe_lock_is_passed(
    tmp_path: Path, holder: subprocess.Popen[bytes]
) -> None:
    told: list[bool] = []
    got: list[float] = []
    thread, taken = _probe_in_thread(tmp_path, told.append, got)
    thread.start()
    time.sleep(1.5)
    assert not got and told == [True]  # a live holder is waited for, and the wait is told
    holder.send_signal(signal.SIGSTOP)  # paused mid-probe, holding the lock and the slot
    paused = time.monotonic()
    thread.join(10)
    assert got, "the probe still waits on the stopped process's lock"
    # passed twice (its configuration's lock, then the slot), about a second each
    assert got[0] - paused < 2 * probe_slot.STOPPED_S + 3
    assert told[0] is True and told[-1] is False and len(taken) == 1


def _heartbeat(url: str, job_id: str) -> float:
    with db.engine_for(url).connect() as conn:
        row = conn.execute(db.jobs.select().where(db.jobs.c.id == job_id)).first()
    assert row is not None
    return float(row.heartbeat)


def test_a_job_waiting_on_a_configurations_probe_lock_stops_renewing_its_lease(
    tmp_path: Path, sqlite_url: str, holder: subprocess.Popen[bytes]
) -> None:
    job_id, _ = jobs.submit(sqlite_url, "suggest", {"model": "fcn", "budget_usd": 7}, "me")
    job = jobs.claim(sqlite_url, job_id, "w")
    assert job is not None
    keeper = LeaseKeeper(sqlite_url, Lease(job_id, int(job["lease"])), 0.1, slot_wait_s=0.3)
    got: list[float] = []
    with keeper:
        thread, taken = _probe_in_thread(tmp_path, keeper.wait_for_slot, got)
        thread.start()
        time.sleep(1.0)  # the holder is alive and probing: waited for, past slot_wait_s
        assert not got
        stopped_at = _heartbeat(sqlite_url, job_id)
        time.sleep(0.8)
        assert _heartbeat(sqlite_url, job_id) == stopped_at  # waiting alone is not progress
        holder.kill()  # its probe ends: the lock is free, the wait ends, the lease is renewed
        thread.join(10)
        assert got and len(taken) == 1
        assert _heartbeat(sqlite_url, job_id) > stopped_at
