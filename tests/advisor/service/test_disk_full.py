"""A SQLite store whose disk fills up (a 3 MiB tmpfs): requests get a clear 503 or the job a
clear error, no finished trial is lost, and the service recovers once space is freed."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from advisor.service import auth, jobs, studies
from advisor.service.app import Settings, create_app
from advisor.service.dispatch import ThreadDispatcher
from advisor.service.runner import RunSettings


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.decode().strip()})")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with filler.open("wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    return filler


def _wait(url: str, job_id: str, timeout: float = 60) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        job = jobs.get(url, job_id)
        assert job is not None
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.1)
    return job


def test_sqlite_disk_full_is_a_clear_error_and_recovers(small_disk: Path, replay: str) -> None:
    url = f"sqlite:///{small_disk / 'studies.db'}"
    token = auth.create_token(url, "ci")
    h = {"Authorization": f"Bearer {token}"}
    # Storage errors are retried with backoff for 2 s here (120 s by default), then the job
    # fails with the reason and can be retried by its client.
    dispatcher = ThreadDispatcher(url, threads=1, backend=replay, settings=RunSettings(0.5, 2.0))
    with TestClient(create_app(Settings(url, dispatcher))) as client:
        first = client.post("/v1/suggestions", json={"model": "fcn", "budget_usd": 50}, headers=h)
        report = _wait(url, first.json()["id"])["result"]
        kept = _trials(url, report["study"])
        filler = _fill(small_disk)
        r = client.post(
            "/v1/suggestions", json={"model": "fcn", "budget_usd": 40, "seed": 7}, headers=h
        )
        if r.status_code == 503:  # the job record itself could not be written
            detail = r.json()["detail"]
            assert "disk is full" in detail and "try again" in detail, detail
            assert r.headers["retry-after"] == "5"
            job_id = None
        else:  # the record fitted in the WAL; the study then ran out of space
            assert r.status_code == 202
            job_id = r.json()["id"]
            job = _wait(url, job_id)
            assert job["status"] != "done"
            if job["status"] == "failed":
                assert "disk is full" in job["error"], job["error"]
                assert "retry the job" in job["error"], job["error"]
        filler.unlink()
        # Recovery: finished trials are intact, and the work runs again.
        assert _trials(url, report["study"]) == kept
        if job_id is None:
            r = client.post(
                "/v1/suggestions", json={"model": "fcn", "budget_usd": 40, "seed": 7}, headers=h
            )
            assert r.status_code == 202
            job_id = r.json()["id"]
        elif jobs.get(url, job_id)["status"] == "failed":  # the client retries it
            retried = client.post(f"/v1/jobs/{job_id}/retry", headers=h)
            assert retried.status_code == 202, retried.text
        assert _wait(url, job_id)["status"] == "done"
    dispatcher.close()


def _trials(url: str, study: str) -> dict[int, Any]:
    found = studies.read_study(url, "default", study)
    assert found is not None
    return {t["number"]: t["values"] for t in found["trials"]}
