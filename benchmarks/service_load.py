"""Load benchmark of the shared service (issue #17), loopback only, replay back end.

A. ``--workers`` ``advisor worker --join`` processes x ``--trials`` trials on one study in a
   real PostgreSQL (started here in a temporary folder): wall time, trials/s, and the checks
   0 lost (every trial finished, none RUNNING), 0 duplicated (trial numbers unique, each
   probe claimed once and run by exactly one worker).
B. ``--clients`` concurrent HTTP clients x ``--requests`` requests against ``advisor serve``
   (SQLite, in-process job threads): every request answered, p50/p95 latency per endpoint,
   requests/s, and no duplicated (machine, batch) trial in any study.
C. The time of one suggestion job (created to finished, as the job record says) with 10,
   100 and 1,000 studies in the storage (``--studies``): ``advisor serve`` on a real
   PostgreSQL with one in-process job thread, ``--jobs`` jobs per level one after another
   (each a new study of 8 trials), the median reported. The other studies are copies of a
   real job's study (its trials and attributes), written through Optuna's storage API.

    python benchmarks/service_load.py --out docs/service_load.json
    python benchmarks/service_load.py --skip workers --skip clients --studies 10,100,1000

Needs PostgreSQL's binaries (apt-get install postgresql), the service extras and psycopg.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "advisor" / "service"))

from conftest import Postgres, Server, replay_table  # noqa: E402


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def workers_on_one_study(tmp: Path, n_workers: int, n_trials: int, backend: str) -> dict[str, Any]:
    import optuna

    from advisor.service import api
    from advisor.storage.checks import storage_driver_url

    pg_root = Path(tempfile.mkdtemp(prefix="advisor-pg-"))
    pg = Postgres(pg_root)
    try:
        url = pg.url
        api.prepare_storage(url)
        req = tmp / "req.json"
        body = {"model": "fcn", "budget_usd": 50, "study_name": "load", "screen": False}
        req.write_text(json.dumps(body))
        started = time.perf_counter()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "advisor.cli.main",
                    "worker",
                    "--join",
                    str(req),
                    "--storage",
                    url,
                    "--trials",
                    str(n_trials),
                    "--index",
                    str(i),
                    "--backend",
                    backend,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            for i in range(n_workers)
        ]
        stats = [json.loads(p.communicate()[0].decode().strip().splitlines()[-1]) for p in procs]
        wall = time.perf_counter() - started
        study = optuna.load_study(study_name="load", storage=storage_driver_url(url))
        trials = study.get_trials(deepcopy=False)
        charged = Counter(
            (t.params["machine"].removesuffix(":spot"), t.params["batch_size"])
            for t in trials
            if (t.user_attrs.get("probe_cost") or {}).get("charged_usd", 0) > 0
        )
        states = Counter(t.state.name for t in trials)
        return {
            "workers": n_workers,
            "trials_per_worker": n_trials,
            "sampler": "tpe",
            "wall_s": round(wall, 1),
            "trials_per_s": round(len(trials) / wall, 2),
            "trials": len(trials),
            "states": dict(states),
            "reported": sum(s["trials"] for s in stats),
            # trials the workers said they wrote that the study does not hold
            "lost": sum(s["trials"] for s in stats)
            - sum(states[s] for s in ("COMPLETE", "PRUNED", "FAIL")),
            "running_left": states.get("RUNNING", 0),
            "duplicate_numbers": len(trials) - len({t.number for t in trials}),
            "probes_charged_twice": sum(n - 1 for n in charged.values()),
            "probes_run": sum(s["probes_run"] for s in stats),
        }
    finally:
        pg.stop("immediate")
        import shutil

        shutil.rmtree(pg_root, ignore_errors=True)


async def _client(
    i: int, url: str, token: str, n: int, lat: dict[str, list[float]], codes: Counter[int]
) -> None:
    import httpx

    h = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=h, timeout=120) as c:
        job_id = None
        for k in range(n):
            if k == 0:
                kind = "POST /v1/suggestions"
                body = {"model": "fcn", "budget_usd": [20, 30, 40, 50, 60][i % 5], "seed": i}
                call = c.post("/v1/suggestions", json=body)
            elif k % 3 == 1 and job_id:
                kind, call = "GET /v1/jobs/{id}", c.get(f"/v1/jobs/{job_id}")
            elif k % 3 == 2:
                kind, call = "GET /v1/studies", c.get("/v1/studies")
            else:
                kind = "GET /v1/catalog"
                call = c.get("/v1/catalog", params={"provider": "aws", "snapshot": "2021-02"})
            t0 = time.perf_counter()
            r = await call
            lat.setdefault(kind, []).append(1000 * (time.perf_counter() - t0))
            codes[r.status_code] += 1
            if k == 0:
                job_id = r.json()["id"]


def clients_on_server(tmp: Path, n_clients: int, n_requests: int, backend: str) -> dict[str, Any]:
    import httpx
    import optuna

    from advisor.service import auth

    home = tmp / "home"
    home.mkdir()
    os.environ["ADVISOR_HOME"] = str(home)
    url = f"sqlite:///{home / 'studies.db'}"
    token = auth.create_token(url, "load")
    srv = Server(tmp, url, "--backend", backend)
    lat: dict[str, list[float]] = {}
    codes: Counter[int] = Counter()
    try:
        started = time.perf_counter()

        async def main() -> None:
            await asyncio.gather(
                *(_client(i, srv.url, token, n_requests, lat, codes) for i in range(n_clients))
            )

        asyncio.run(main())
        wall = time.perf_counter() - started
        h = {"Authorization": f"Bearer {token}"}
        end = time.monotonic() + 300
        while time.monotonic() < end:  # let the queued suggestions finish
            from sqlalchemy import select

            from advisor.service import db

            with db.engine_for(url).connect() as conn:
                statuses = Counter(r.status for r in conn.execute(select(db.jobs.c.status)))
            if not (statuses["queued"] or statuses["running"]):
                break
            time.sleep(0.5)
        dup = 0
        for s in httpx.get(f"{srv.url}/v1/studies", headers=h).json():
            study = optuna.load_study(study_name=s["name"], storage=url)
            done = [
                (t.params["machine"], t.params["batch_size"])
                for t in study.get_trials(deepcopy=False)
                if t.state.name == "COMPLETE"
            ]
            dup += len(done) - len(set(done))
    finally:
        srv.stop()
    every = [x for xs in lat.values() for x in xs]
    return {
        "clients": n_clients,
        "requests_per_client": n_requests,
        "answered": sum(codes.values()),
        "status_codes": {str(k): v for k, v in sorted(codes.items())},
        "wall_s": round(wall, 2),
        "requests_per_s": round(len(every) / wall, 1),
        "p50_ms": round(statistics.median(every), 1),
        "p95_ms": round(_pct(every, 0.95), 1),
        "per_endpoint": {
            k: {
                "n": len(v),
                "p50_ms": round(statistics.median(v), 1),
                "p95_ms": round(_pct(v, 0.95), 1),
            }
            for k, v in sorted(lat.items())
        },
        "jobs": dict(statuses),
        "duplicated_machine_batch_trials": dup,
    }


def _fill_studies(url: str, template: str, upto: int) -> int:
    """Copy the study ``template`` (its trials and attributes) until the storage holds
    ``upto`` studies; returns how many there are."""
    import optuna

    from advisor.storage.checks import storage_driver_url

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(storage_driver_url(url))
    source = optuna.load_study(study_name=template, storage=storage)
    trials = [t for t in source.get_trials(deepcopy=False) if t.state.is_finished()]
    have = len(storage.get_all_studies())
    for i in range(have, upto):
        copy = optuna.create_study(
            study_name=f"filler-{i:05d}", storage=storage, directions=source.directions
        )
        for key, value in source.user_attrs.items():
            copy.set_user_attr(key, value)
        copy.add_trials(trials)
    return len(storage.get_all_studies())


def per_job_time(tmp: Path, levels: list[int], n_jobs: int, backend: str) -> list[dict[str, Any]]:
    """C: the median time of one job at each number of studies in ``levels``."""
    import httpx

    from advisor.service import auth

    pg_root = Path(tempfile.mkdtemp(prefix="advisor-pg-"))
    pg = Postgres(pg_root)
    srv = None
    budgets = iter(range(1000, 100000))  # every job a new study (the budget names it)
    try:
        token = auth.create_token(pg.url, "bench")
        srv = Server(tmp, pg.url, "--backend", backend, "--workers", "1")
        h = {"Authorization": f"Bearer {token}"}

        def one_job() -> dict[str, Any]:
            body = {"model": "fcn", "budget_usd": next(budgets), "trials": 8}
            r = httpx.post(f"{srv.url}/v1/suggestions", json=body, headers=h, timeout=60)
            r.raise_for_status()
            job_id = r.json()["id"]
            end = time.monotonic() + 600
            while time.monotonic() < end:
                job = httpx.get(f"{srv.url}/v1/jobs/{job_id}", headers=h, timeout=60).json()
                if job["status"] in ("done", "failed"):
                    return dict(job)
                time.sleep(0.1)
            raise TimeoutError(job_id)

        first = one_job()
        assert first["status"] == "done", first["error"]
        template = first["result"]["study"]
        out = []
        for level in levels:
            filled = _fill_studies(pg.url, template, level)
            times = []
            for _ in range(n_jobs):
                job = one_job()
                assert job["status"] == "done", job["error"]
                times.append(job["finished"] - job["created"])
            row = {
                "studies_before": filled,
                "jobs": n_jobs,
                "median_s": round(statistics.median(times), 2),
                "min_s": round(min(times), 2),
                "max_s": round(max(times), 2),
            }
            print(json.dumps(row), flush=True)
            out.append(row)
        return out
    finally:
        if srv is not None:
            srv.stop()
        pg.stop("immediate")
        import shutil

        shutil.rmtree(pg_root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--studies", default="10,100,1000", help="C: studies in the storage")
    ap.add_argument("--jobs", type=int, default=5, help="C: jobs timed per level")
    ap.add_argument(
        "--skip", choices=["workers", "clients", "per-job"], action="append", default=[]
    )
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="advisor-load-"))
    table = tmp / "table.json"
    replay_table().save(table)
    backend = f"replay:{table}"  # the hidden --backend of advisor serve / worker
    os.environ["ADVISOR_HOME"] = str(tmp / "home0")
    out: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
    }
    if "clients" not in a.skip:
        out["http"] = clients_on_server(tmp, a.clients, a.requests, backend)
        print(json.dumps(out["http"], indent=1), flush=True)
    if "workers" not in a.skip:
        out["workers"] = workers_on_one_study(tmp, a.workers, a.trials, backend)
        print(json.dumps(out["workers"], indent=1), flush=True)
    if "per-job" not in a.skip:
        levels = [int(x) for x in a.studies.split(",")]
        out["per_job"] = per_job_time(tmp, levels, a.jobs, backend)
    if a.out:
        a.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
