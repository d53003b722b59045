"""The service's own tables, kept in the study storage next to Optuna's (SQLite or PostgreSQL).

Tokens (hashed), jobs and probe claims. Uniqueness rules live in the database: one token name,
one active job per dedupe key (a partial unique index), one claim per probe key.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    text,
)
from sqlalchemy.engine import Engine

from advisor.errors import AdvisorError

metadata = MetaData()

tokens = Table(
    "advisor_tokens",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("hash", String(64), nullable=False, unique=True),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("revoked", DateTime(timezone=True), nullable=True),
)

ACTIVE = ("queued", "running")
jobs = Table(
    "advisor_jobs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("owner", String(64), nullable=False),
    Column("dedupe", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("request", Text, nullable=False),
    Column("result", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("progress", Text, nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("worker", String(128), nullable=True),
    Column("created", Float, nullable=False),
    Column("heartbeat", Float, nullable=True),
    Column("finished", Float, nullable=True),
)
# At most one queued or running job per dedupe key (the same study), enforced by the database.
Index(
    "advisor_jobs_one_active",
    jobs.c.dedupe,
    unique=True,
    sqlite_where=jobs.c.status.in_(ACTIVE),
    postgresql_where=jobs.c.status.in_(ACTIVE),
)

probe_claims = Table(
    "advisor_probe_claims",
    metadata,
    Column("study", String(200), primary_key=True),
    Column("probe_key", String(200), primary_key=True),
    Column("worker", String(128), nullable=False),
    Column("result", Text, nullable=True),
    Column("created", Float, nullable=False),
)

_ENGINES: dict[str, Engine] = {}
_LOCK = threading.Lock()


def engine_for(url: str) -> Engine:
    """One engine per storage URL per process, with the service's tables created."""
    with _LOCK:
        if url in _ENGINES:
            return _ENGINES[url]
        if url.startswith(("postgresql", "postgres://")):
            engine = create_engine(optuna_url(url), pool_pre_ping=True)
        else:
            engine = create_engine(url, connect_args={"timeout": 30})
            event.listen(engine, "connect", _sqlite_pragmas)
        metadata.create_all(engine)
        _ENGINES[url] = engine
        return engine


def optuna_url(url: str) -> str:
    """The URL Optuna's RDB storage gets: PostgreSQL goes through psycopg 3."""
    from advisor.storage.checks import storage_driver_url

    return storage_driver_url(url)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def ping(url: str) -> None:
    """Raise AdvisorError when the storage cannot be reached."""
    try:
        with engine_for(url).connect() as conn:
            conn.execute(text("SELECT 1"))
    except AdvisorError:
        raise
    except Exception as exc:
        raise AdvisorError(
            f"Cannot reach the storage ({type(exc).__name__}).",
            "check --storage and that the database is running.",
        ) from exc
