"""Real `advisor serve` processes (uvicorn on a free loopback port): the CLI client, a client
that disconnects mid-request, a planted secret that must never come back out, and the Redis
queue with `advisor worker` processes (one SIGKILLed mid-job)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

HERE = Path(__file__).parent
SECRET = "AKIAFAKESECRET0123456789zzTOPSECRET"


def cli(*args: str, env: dict[str, str] | None = None, check: bool = True) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "advisor.cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=check,
        timeout=180,
    )


def wait_job(url: str, token: str, job_id: str, timeout: float = 120) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        job = httpx.get(
            f"{url}/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}
        ).json()
        if job["status"] in ("done", "failed"):
            return dict(job)
        time.sleep(0.2)
    raise TimeoutError(job_id)


@pytest.fixture
def server(tmp_path: Path, sqlite_url: str, replay: str, make_server: Any) -> Any:
    return make_server(sqlite_url, "--backend", replay)


@pytest.mark.slow
def test_suggest_server_prints_the_same_report_as_local(
    server: Any, sqlite_url: str, tmp_path: Path, replay: str
) -> None:
    token = cli("token", "create", "ci", "--storage", sqlite_url).stdout.strip()
    args = ["suggest", "--model", "fcn", "--budget", "50", "--json"]
    remote = json.loads(cli(*args, "--server", server.url, env={"ADVISOR_TOKEN": token}).stdout)
    local_db = tmp_path / "local.db"
    local = json.loads(cli(*args, "--storage", f"sqlite:///{local_db}", "--backend", replay).stdout)
    for key in ("recommended", "best_by_time", "best_by_cost", "objective", "study", "pareto"):
        assert remote[key] == local[key], key
    assert [r["machine"] for r in remote["ranking"]] == [r["machine"] for r in local["ranking"]]
    # A wrong token is a one-line error, exit 2, no traceback.
    bad = cli(*args, "--server", server.url, env={"ADVISOR_TOKEN": "adv_nope"}, check=False)
    assert bad.returncode == 2 and "refused the token" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.slow
def test_client_disconnecting_mid_request_changes_nothing(server: Any, sqlite_url: str) -> None:
    from advisor.service import auth

    token = auth.create_token(sqlite_url, "ci")
    body = json.dumps({"model": "fcn", "budget_usd": 50}).encode()
    for _ in range(5):  # send the headers and half the body, then hang up
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(
                b"POST /v1/suggestions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body[: len(body) // 2]
            )
    h = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{server.url}/health").status_code == 200
    from sqlalchemy import func, select

    from advisor.service import db

    with db.engine_for(sqlite_url).connect() as conn:
        assert conn.execute(select(func.count()).select_from(db.jobs)).scalar() == 0
    # ...and the service still serves whole requests.
    r = httpx.post(f"{server.url}/v1/suggestions", json={"model": "fcn"}, headers=h)
    assert wait_job(server.url, token, r.json()["id"])["status"] == "done"


@pytest.mark.slow
def test_an_oversized_body_without_content_length_is_413(server: Any, sqlite_url: str) -> None:
    from advisor.service import auth

    token = auth.create_token(sqlite_url, "ci")

    def chunks() -> Any:  # chunked transfer: no Content-Length to refuse it by
        yield b'{"model": "fcn", "space": "'
        for _ in range(30):
            yield b"x" * 50_000
        yield b'"}'

    r = httpx.post(
        f"{server.url}/v1/suggestions",
        content=chunks(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert r.status_code == 413, r.text
    assert "over 1000000 bytes" in r.json()["detail"]
    small = httpx.post(
        f"{server.url}/v1/suggestions",
        content=iter([b'{"model": "fcn", ', b'"budget_usd": 50}']),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert small.status_code == 202, small.text  # a small chunked body still works


@pytest.mark.slow
def test_planted_secret_never_leaves(
    tmp_path: Path, sqlite_url: str, replay: str, make_server: Any
) -> None:
    from advisor.service import auth

    srv = make_server(
        sqlite_url,
        "--backend",
        replay,
        env={"AWS_SECRET_ACCESS_KEY": SECRET, "AWS_ACCESS_KEY_ID": SECRET},
    )
    token = auth.create_token(sqlite_url, "ci")
    good = {"Authorization": f"Bearer {token}"}
    responses = [
        httpx.get(f"{srv.url}/v1/studies", headers={"Authorization": f"Bearer adv_{SECRET}"}),
        httpx.get(f"{srv.url}/v1/studies", headers={"Authorization": f"Bearer {SECRET}"}),
        httpx.post(f"{srv.url}/v1/suggestions", json={"model": "fcn", "aws": SECRET}, headers=good),
        httpx.post(f"{srv.url}/v1/suggestions", json={"model": SECRET}, headers=good),
        httpx.post(
            f"{srv.url}/v1/suggestions", json={"model": "fcn", "sampler": SECRET}, headers=good
        ),
        httpx.post(
            f"{srv.url}/v1/predict",
            json={"probe": {"x": SECRET}, "instances": ["p3.2xlarge"]},
            headers=good,
        ),
        httpx.get(f"{srv.url}/v1/studies/{SECRET}", headers=good),
    ]
    assert [r.status_code for r in responses] == [401, 401, 422, 422, 422, 400, 404]
    job = httpx.post(f"{srv.url}/v1/suggestions", json={"model": "fcn"}, headers=good).json()
    done = wait_job(srv.url, token, job["id"])
    responses.append(httpx.get(f"{srv.url}/v1/studies/{done['result']['study']}", headers=good))
    srv.stop()
    texts = [r.text for r in responses] + [json.dumps(done), srv.log.read_text()]
    home = Path(sqlite_url.removeprefix("sqlite:///")).parent
    blobs = [p.read_bytes() for p in home.rglob("*") if p.is_file()]
    for secret in (SECRET, token):
        assert [t[:300] for t in texts if secret in t] == [], secret[:6]
        assert not any(secret.encode() in b for b in blobs), secret[:6]
    assert "GET /v1/studies" in srv.log.read_text()  # the log was written (and scanned)


@pytest.mark.slow
def test_redis_queue_workers_and_a_sigkilled_worker(
    tmp_path: Path, pg_url: str, redis_url: str, replay: str, make_server: Any
) -> None:
    from advisor.service import auth

    srv = make_server(pg_url, "--redis", redis_url, "--stale-after", "3")
    token = auth.create_token(pg_url, "ci")
    h = {"Authorization": f"Bearer {token}"}

    def worker(sleep: float) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable,
                str(HERE / "slow_advisor.py"),
                "worker",
                "--redis",
                redis_url,
                "--storage",
                pg_url,
                "--backend",
                replay,
            ],
            env={**os.environ, "ADVISOR_TEST_PROBE_SLEEP": str(sleep)},
            stdout=(tmp_path / f"worker-{sleep}.log").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: RQ forks a work horse per job
        )

    victim = worker(0.5)
    job_id = httpx.post(
        f"{srv.url}/v1/suggestions",
        json={"model": "fcn", "budget_usd": 50, "trials": 12, "screen": False},
        headers=h,
    ).json()["id"]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        job = httpx.get(f"{srv.url}/v1/jobs/{job_id}", headers=h).json()
        if (
            job["status"] == "running"
            and (job["progress"] or {}).get("phase") == "trials"
            and job["progress"]["done"] >= 2
        ):
            break
        time.sleep(0.2)
    assert job["status"] == "running", job
    import psutil

    tree = [*psutil.Process(victim.pid).children(recursive=True), psutil.Process(victim.pid)]
    assert len(tree) >= 2  # RQ's worker and the work horse it forked for the job
    for p in tree:  # SIGKILL the worker and its work horse mid-job
        p.send_signal(signal.SIGKILL)
    victim.wait()
    studies = httpx.get(f"{srv.url}/v1/studies", headers=h).json()
    kept_before = studies[0]["n_trials"] if studies else 0
    rescuer = worker(0.0)
    try:
        done = wait_job(srv.url, token, job_id, timeout=120)
    finally:
        for p in [
            *psutil.Process(rescuer.pid).children(recursive=True),
            psutil.Process(rescuer.pid),
        ]:
            p.send_signal(signal.SIGKILL)
        rescuer.wait(20)
        srv.stop()
    assert done["status"] == "done", done["error"]
    assert done["attempts"] == 2  # the killed run, then the re-queued one
    report = done["result"]
    # the tie rule over the trials this job sampled: within the band of the fastest (it ends
    # in the front's widest gap, issue #36), and no dearer than the fastest
    rec, fast = report["recommended"], report["best_by_time"]
    edge = report["tie_band"]["edge"]
    assert rec["runtime_s"]["value"] <= fast["runtime_s"]["value"] * (1 + edge) + 1e-6
    assert rec["cost_usd"]["value"] <= fast["cost_usd"]["value"]
    logs = [srv.log.read_text()] + [p.read_text() for p in tmp_path.glob("worker-*.log")]
    assert any("re-queued" in text for text in logs)  # by the server's or a worker's sweeper
    # The killed attempt's finished trials were kept and the re-queued one resumed the study.
    assert kept_before >= 2
    assert done["result"]["resumed"] is True
    assert done["result"]["trials"]["total"] >= kept_before
