"""Job records: what was asked, by whom (and which team), its status, progress and result.

The delivery contract (``docs/reliability.md``, "The shared service's faults"):

- The job's row is the truth; a queue message (Redis) only wakes a worker. A job is written
  ``queued`` before anything is enqueued (the outbox), and a sweeper re-dispatches queued
  jobs that no queue holds, so an enqueue lost to an outage or a crash never strands one.
- Claiming is one conditional UPDATE (``queued`` -> ``running``) that also takes the next
  lease number (the fencing token), so two workers never run the same attempt.
- A running job is acknowledged only by its result: ``finish`` writes ``done`` or
  ``failed`` under the lease. Until then the worker renews the lease (``renew``, every few
  seconds); a job whose lease expired (its worker was killed, paused or cut off) is
  re-queued by ``requeue_expired`` and the next claim takes a higher lease number, after which
  the old holder's writes are refused (``renew`` says so; ``finish`` raises ``LeaseLost``; the
  study's writes are fenced by ``advisor.service.fencing``).
- A job that failed can be retried by its team (``retry``): it is queued again and resumes
  its study, whose finished trials are kept.

One queued or running job per dedupe key (per study and team) is a unique index in the
database, so two identical requests share one job.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from sqlalchemy import and_, func, insert, or_, select, text, update
from sqlalchemy.exc import IntegrityError

from advisor.service import db, teams
from advisor.service.fencing import Lease, LeaseLost

KINDS = ("suggest", "predict")
MAX_ATTEMPTS = 3
_PUBLIC = ("id", "kind", "owner", "status", "attempts", "created", "finished")


def dedupe_key(kind: str, request: dict[str, Any], team: str = teams.DEFAULT_TEAM) -> str:
    """Requests that would run the same study of the same team get the same key (seed,
    sampler, trials and timeout do not name a study: two such jobs at once would duplicate
    its trials)."""
    from advisor.service.api import study_identity

    ident = study_identity(request) if kind == "suggest" else request
    named: dict[str, Any] = {"kind": kind, "study": ident}
    if team != teams.DEFAULT_TEAM:  # the default team's keys are those of before teams
        named["team"] = team
    canon = json.dumps(named, sort_keys=True, default=str)
    return hashlib.sha256(canon.encode()).hexdigest()


def submit(
    url: str, kind: str, request: dict[str, Any], owner: str, team: str = teams.DEFAULT_TEAM
) -> tuple[str, bool]:
    """Queue a job; return (id, created). An identical active job is returned instead."""
    from advisor.service.hardware import team_scope

    with team_scope(url, team):  # issue #37: the team's machines name its study
        key = dedupe_key(kind, request, team)
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
                        team=team,
                        dedupe=key,
                        status="queued",
                        request=json.dumps(request, default=str),
                        attempts=0,
                        lease=0,
                        created=db.now(url),
                    )
                )
            return job_id, True
        except IntegrityError:
            active = _active_with_key(url, key)
            if active is not None:
                return active, False
    raise RuntimeError("could not queue the job")  # the active job kept finishing under us


def _active_with_key(url: str, key: str) -> str | None:
    with db.engine_for(url).connect() as conn:
        row = conn.execute(
            select(db.jobs.c.id).where(db.jobs.c.dedupe == key, db.jobs.c.status.in_(db.ACTIVE))
        ).first()
    return None if row is None else str(row.id)


def claim(url: str, job_id: str, worker: str) -> dict[str, Any] | None:
    """Mark a queued job running for ``worker`` under the next lease number; the job (with
    its ``lease``) or None if it is not queued (another worker has it, or it ended)."""
    c = db.jobs.c
    with db.engine_for(url).begin() as conn:
        row = conn.execute(
            update(db.jobs)
            .where(c.id == job_id, c.status == "queued")
            .values(
                status="running",
                worker=worker,
                heartbeat=db.now(url),
                attempts=c.attempts + 1,
                lease=func.coalesce(c.lease, 0) + 1,
            )
            .returning(c.lease)
        ).first()
    if row is None:
        return None
    return get(url, job_id, internal=True)


def _held(lease: Lease) -> Any:
    c = db.jobs.c
    return and_(c.id == lease.job_id, c.lease == lease.number, c.status == "running")


def renew(url: str, lease: Lease, progress: dict[str, Any] | None = None) -> float | None:
    """Extend the lease from the database's clock (and say how far the job is); the
    deployment's lease length (s), or None when the lease is no longer held."""
    values: dict[str, Any] = {"heartbeat": db.now(url)}
    if progress is not None:
        values["progress"] = json.dumps(progress)
    with db.engine_for(url).begin() as conn:
        done = conn.execute(update(db.jobs).where(_held(lease)).values(**values))
        if done.rowcount != 1:
            return None
        return float(conn.execute(select(db.lease_expr())).scalar_one())


def record_study(url: str, lease: Lease, study: str, trials_before: int) -> None:
    """Remember the job's study and its finished trials before the job's first run."""
    with db.engine_for(url).begin() as conn:
        done = conn.execute(
            update(db.jobs)
            .where(_held(lease), db.jobs.c.study.is_(None))
            .values(study=study, trials_before=trials_before)
        )
    if done.rowcount != 1 and not renew(url, lease):
        raise LeaseLost(f"job {lease.job_id}: lease {lease.number} was taken over")


def finish(url: str, lease: Lease, result: dict[str, Any] | None, error: str | None) -> None:
    """Record the job's result (done) or its one-line error (failed), under ``lease``. A done
    job's progress says so (issue #36: it kept its last "screen 1101/1468"): phase ``done``,
    its trials of its trials; a failed job keeps the progress it had, where it stopped."""
    extra: dict[str, Any] = {}
    if not error:
        trials = (result or {}).get("trials") or {}
        n = int(trials.get("total") or 0) if isinstance(trials, dict) else 0
        extra["progress"] = json.dumps({"phase": "done", "done": n, "total": n})
    with db.engine_for(url).begin() as conn:
        done = conn.execute(
            update(db.jobs)
            .where(_held(lease))
            .values(
                **extra,
                status="failed" if error else "done",
                result=None if result is None else json.dumps(result, default=str),
                error=error,
                finished=db.now(url),
            )
        )
    if done.rowcount != 1:
        raise LeaseLost(f"job {lease.job_id}: lease {lease.number} was taken over")


def requeue_expired(url: str, stale_after_s: float | None = None) -> list[str]:
    """Re-queue running jobs whose lease was not renewed for ``stale_after_s`` (default: the
    deployment's stored lease; their worker died, was paused or cut off); after MAX_ATTEMPTS
    they fail with a reason instead, which the client may retry. Returns the re-queued ids.

    Heartbeat and cut-off are both the database's clock, and on PostgreSQL a lease runs from
    the server's start at the earliest: after a restart every worker gets a whole lease to
    renew before its job is taken."""
    c = db.jobs.c
    lease = db.lease_expr() if stale_after_s is None else stale_after_s
    last: Any = func.coalesce(c.heartbeat, 0.0)
    if db.is_postgres(url):
        last = func.greatest(last, db.started(url))
    expired = c.status == "running", last < db.now(url) - lease
    with db.engine_for(url).begin() as conn:
        if db.is_postgres(url):  # a worker committing under its lease holds the row briefly
            conn.execute(text("SET LOCAL lock_timeout = '2s'"))
        ids = [
            str(r.id) for r in conn.execute(select(c.id).where(*expired, c.attempts < MAX_ATTEMPTS))
        ]
        if ids:
            conn.execute(update(db.jobs).where(c.id.in_(ids), *expired).values(status="queued"))
        conn.execute(
            update(db.jobs)
            .where(*expired, c.attempts >= MAX_ATTEMPTS)
            .values(
                status="failed",
                error=f"its worker stopped {MAX_ATTEMPTS} times without finishing; finished "
                "trials are kept: retry the job (POST /v1/jobs/{id}/retry)",
                finished=db.now(url),
            )
        )
    return ids


def queued_ids(url: str, limit: int = 100, older_than_s: float = 0.0) -> list[str]:
    """Queued job ids, those that ran before (re-queued) first, then oldest first (queued
    at least ``older_than_s`` ago)."""
    return [job_id for job_id, _ in queued(url, limit, older_than_s)]


def queued(url: str, limit: int = 100, older_than_s: float = 0.0) -> list[tuple[str, bool]]:
    """(id, ran before) of queued jobs in ``queued_ids``'s order: a job whose lease expired
    goes to the front of the queue, not the back."""
    c = db.jobs.c
    with db.engine_for(url).connect() as conn:
        rows = conn.execute(
            select(c.id, c.attempts)
            .where(c.status == "queued", c.created <= db.now(url) - older_than_s)
            .order_by(c.attempts.desc(), c.created)
            .limit(limit)
        )
        return [(str(r.id), int(r.attempts or 0) > 0) for r in rows]


def get(
    url: str, job_id: str, team: str | None = None, internal: bool = False
) -> dict[str, Any] | None:
    """The job as a dict (request, status, progress, result, error), or None when there is
    none or it is not ``team``'s (None: any team). ``internal`` adds the lease, team and
    study fields a worker needs."""
    with db.engine_for(url).connect() as conn:
        row = conn.execute(select(db.jobs).where(db.jobs.c.id == job_id)).first()
    if row is None or (team is not None and teams.team_of(row.team) != team):
        return None
    out = _public(row)
    if internal:
        out.update(
            team=teams.team_of(row.team),
            lease=row.lease,
            study=row.study,
            trials_before=row.trials_before,
        )
    return out


def _public(row: Any) -> dict[str, Any]:
    out = {k: getattr(row, k) for k in _PUBLIC}
    out.update(
        request=json.loads(row.request),
        progress=json.loads(row.progress) if row.progress else None,
        result=json.loads(row.result) if row.result else None,
        error=row.error,
    )
    return out


def list_jobs(url: str, team: str, limit: int, after: str | None = None) -> list[dict[str, Any]]:
    """``team``'s jobs, newest first, at most ``limit``, after the job ``after`` (keyset)."""
    c = db.jobs.c
    mine = c.team.is_(None) | (c.team == team) if team == teams.DEFAULT_TEAM else c.team == team
    query = select(db.jobs).where(mine)
    with db.engine_for(url).connect() as conn:
        if after is not None:
            mark = conn.execute(select(c.created).where(c.id == after, mine)).first()
            if mark is not None:
                query = query.where(
                    or_(c.created < mark.created, and_(c.created == mark.created, c.id < after))
                )
        rows = conn.execute(query.order_by(c.created.desc(), c.id.desc()).limit(limit)).all()
    return [_public(r) for r in rows]


def retry(url: str, job_id: str, team: str) -> tuple[dict[str, Any] | None, str | None]:
    """Queue a failed job of ``team`` again (its study resumes; finished trials are kept).
    Returns (the job, None), or (None, why not) when it cannot be retried; (None, None)
    when there is no such job."""
    job = get(url, job_id, team)
    if job is None:
        return None, None
    if job["status"] != "failed":
        if job["status"] in db.ACTIVE:
            return job, None
        return None, "it is done; submit the request again to add trials"
    c = db.jobs.c
    try:
        with db.engine_for(url).begin() as conn:
            conn.execute(
                update(db.jobs)
                .where(c.id == job_id, c.status == "failed")
                .values(status="queued", attempts=0, error=None, result=None, finished=None)
            )
    except IntegrityError:
        return None, "another job on the same study is queued or running"
    return get(url, job_id, team), None
