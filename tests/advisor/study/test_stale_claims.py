"""A claim left by a process that was killed on this machine frees its configuration at once;
claims of live processes, and of processes on other hosts (until they lapse), still hold."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import optuna

from advisor.study.claims import Claims


def _claims() -> tuple[Claims, optuna.storages.BaseStorage, int]:
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(storage=storage, study_name="s")
    return Claims(storage, study._study_id), storage, study._study_id


def _claim_as(storage: optuna.storages.BaseStorage, sid: int, owner: str, config: str) -> None:
    value = {"owner": owner, "at": time.time(), "probe_usd": 0.01}
    storage.set_study_system_attr(sid, f"claim:{config}", value)


def test_a_killed_process_claim_is_ignored_a_live_one_holds() -> None:
    claims, storage, sid = _claims()
    host = socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _claim_as(storage, sid, f"{host}:{dead.pid}", "ec2:g5.xlarge|256")
        _claim_as(storage, sid, f"{host}:{live.pid}", "ec2:g5.xlarge|512")
        _claim_as(storage, sid, "another-host:12345", "ec2:g5.xlarge|1024")
        busy = claims.others()
    finally:
        live.kill()
        live.wait()
    assert ("ec2:g5.xlarge", 256) not in busy  # its process is gone: free at once
    assert busy[("ec2:g5.xlarge", 512)] == 0.01  # its process runs: still claimed
    assert ("ec2:g5.xlarge", 1024) in busy  # another host: held until STALE_S
    assert ("ec2:g5.xlarge", 512) not in claims.others()  # killed now: freed on the next read
