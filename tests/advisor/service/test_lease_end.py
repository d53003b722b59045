"""Issue #50, section 6: a job that finished normally logged "lease taken over" (2 jobs of
72). Its lease keeper's renewal ran just after ``jobs.finish`` committed: the job was no
longer running, so the renewal matched no row and read as a take-over. The test forces that
interleaving: the keeper renews right after the end is committed, before the job's thread
stops it. SQLite, replay back end; fast."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from advisor.service import jobs
from advisor.service.runner import RunSettings, execute_job


def test_no_take_over_is_reported_after_a_normal_finish(
    sqlite_url: str, replay: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ended, renewed_after_end = threading.Event(), threading.Event()
    real_finish, real_renew = jobs.finish, jobs.renew

    def renew(*args: Any, **kwargs: Any) -> float | None:
        out = real_renew(*args, **kwargs)
        if ended.is_set():
            renewed_after_end.set()
        return out

    def finish(*args: Any, **kwargs: Any) -> None:
        real_finish(*args, **kwargs)  # committed: the job is done
        ended.set()
        # the keeper renews every 0.05 s: on the code before the fix its next renewal lands
        # here, after the commit and before the job's thread stops the keeper
        renewed_after_end.wait(1.5)

    monkeypatch.setattr(jobs, "renew", renew)
    monkeypatch.setattr(jobs, "finish", finish)
    settings = RunSettings(heartbeat_s=0.05, storage_retry_s=5)
    body = {"model": "fcn", "budget_usd": 50, "trials": 2, "screen": False}
    job_id, _ = jobs.submit(sqlite_url, "suggest", body, "ci")
    with caplog.at_level(logging.WARNING, logger="advisor.service"):
        assert execute_job(sqlite_url, job_id, "w1", replay, settings) == "done"
    job = jobs.get(sqlite_url, job_id, internal=True)
    assert job is not None and job["status"] == "done"
    assert not renewed_after_end.is_set()  # no renewal once the end was recorded
    assert "taken over" not in caplog.text, caplog.text
