"""Job records: what was asked, by whom, its status, progress and result.

A job is queued by the API and run by a worker (a thread of ``advisor serve`` or an
``advisor worker`` process). Claiming is one conditional UPDATE, so two workers never run the
same job; a running job whose heartbeat stops (its worker was killed) is re-queued by
``requeue_stale`` and picked up again. One queued or running job per dedupe key (per study) is
a unique index in the database, so two identical requests share one job.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from advisor.service import db

KINDS = ("suggest", "predict")
MAX_ATTEMPTS = 3


def dedupe_key(kind: str, request: dict[str, Any]) -> str:
    """Requests that would run the same study get the same key (seed, sampler, trials and
    timeout do not name a study: two such jobs at once would duplicate its trials)."""
    from advisor.service.api import study_identity

    ident = study_identity(request) if kind == "suggest" else request
    canon = json.dumps({"kind": kind, "study": ident}, sort_keys=True, default=str)
    return hashlib.sha256(canon.encode()).hexdigest()


def submit(url: str, kind: str, request: dict[str, Any], owner: str) -> tuple[str, bool]:
    """Queue a job; return (id, created). An identical active job is returned instead."""
    key = dedupe_key(kind, request)
    engine = db.engine_for(url)
    job_id = uuid.uuid4().hex
    for _ in range(3):
        try:
            with engine.begin() as conn:
                conn.execute(
                    insert(db.jobs).values(
                        id=job_id,
                        kind=kind,
                        owner=owner,
                        dedupe=key,
                        status="queued",
                        request=json.dumps(request, default=str),
                        attempts=0,
                        created=time.time(),
                    )
                )
            return job_id, True
        except IntegrityError:
            with engine.connect() as conn:
                row = conn.execute(
                    select(db.jobs.c.id).where(
                        db.jobs.c.dedupe == key, db.jobs.c.status.in_(db.ACTIVE)
                    )
                ).first()
            if row is not None:
                return str(row.id), False
    raise RuntimeError("could not queue the job")  # the active job kept finishing under us


def claim(url: str, job_id: str, worker: str) -> dict[str, Any] | None:
    """Mark a queued job running for ``worker``; None if someone else has it."""
    now = time.time()
    with db.engine_for(url).begin() as conn:
        done = conn.execute(
            update(db.jobs)
            .where(db.jobs.c.id == job_id, db.jobs.c.status == "queued")
            .values(status="running", worker=worker, heartbeat=now, attempts=db.jobs.c.attempts + 1)
        )
    if done.rowcount != 1:
        return None
    return get(url, job_id)


def heartbeat(url: str, job_id: str, progress: dict[str, Any] | None = None) -> None:
    """Say the job's worker is alive (and how far it is)."""
    values: dict[str, Any] = {"heartbeat": time.time()}
    if progress is not None:
        values["progress"] = json.dumps(progress)
    with db.engine_for(url).begin() as conn:
        conn.execute(
            update(db.jobs)
            .where(db.jobs.c.id == job_id, db.jobs.c.status == "running")
            .values(**values)
        )


def finish(url: str, job_id: str, result: dict[str, Any] | None, error: str | None) -> None:
    """Record the job's result (done) or its one-line error (failed)."""
    with db.engine_for(url).begin() as conn:
        conn.execute(
            update(db.jobs)
            .where(db.jobs.c.id == job_id)
            .values(
                status="failed" if error else "done",
                result=None if result is None else json.dumps(result, default=str),
                error=error,
                finished=time.time(),
            )
        )


def requeue_stale(url: str, stale_after_s: float) -> list[str]:
    """Re-queue running jobs whose heartbeat is older than ``stale_after_s`` (their worker
    died); after MAX_ATTEMPTS they fail with a clear error instead. Returns re-queued ids."""
    cutoff = time.time() - stale_after_s
    stale = db.jobs.c.status == "running", db.jobs.c.heartbeat < cutoff
    with db.engine_for(url).begin() as conn:
        ids = [
            r.id
            for r in conn.execute(
                select(db.jobs.c.id).where(*stale, db.jobs.c.attempts < MAX_ATTEMPTS)
            )
        ]
        if ids:
            conn.execute(
                update(db.jobs).where(db.jobs.c.id.in_(ids), *stale).values(status="queued")
            )
        conn.execute(
            update(db.jobs)
            .where(*stale, db.jobs.c.attempts >= MAX_ATTEMPTS)
            .values(
                status="failed",
                error=f"its worker stopped {MAX_ATTEMPTS} times without finishing",
                finished=time.time(),
            )
        )
    return ids


def queued_ids(url: str, limit: int = 100) -> list[str]:
    """Queued job ids, oldest first."""
    with db.engine_for(url).connect() as conn:
        rows = conn.execute(
            select(db.jobs.c.id)
            .where(db.jobs.c.status == "queued")
            .order_by(db.jobs.c.created)
            .limit(limit)
        )
        return [str(r.id) for r in rows]


def get(url: str, job_id: str) -> dict[str, Any] | None:
    """The job as a dict (request, status, progress, result, error), or None."""
    with db.engine_for(url).connect() as conn:
        row = conn.execute(select(db.jobs).where(db.jobs.c.id == job_id)).first()
    if row is None:
        return None
    return {
        "id": row.id,
        "kind": row.kind,
        "owner": row.owner,
        "status": row.status,
        "request": json.loads(row.request),
        "progress": json.loads(row.progress) if row.progress else None,
        "result": json.loads(row.result) if row.result else None,
        "error": row.error,
        "attempts": row.attempts,
        "created": row.created,
        "finished": row.finished,
    }
