"""The service's own tables, kept in the study storage next to Optuna's (SQLite or PostgreSQL).

Tokens (hashed, each of one team), jobs, probe claims, the machines each team owns and the deployment's settings (the
jobs' lease length: one per storage, so every server and worker agrees on it). Uniqueness rules live in the
database: one token name, one active job per dedupe key (a partial unique index), one claim
per probe key. Columns added since a table was first created are added at start
(``ALTER TABLE ... ADD COLUMN``, nullable), so an existing storage keeps working.

Engines are per process: a forked child (RQ's work horse) drops the connections it inherited
(``Engine.dispose(close=False)``) and opens its own, so no connection is shared by two
processes.
"""

from __future__ import annotations

import os
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
    Column("team", String(32), nullable=True),  # None: the default team (tokens before teams)
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
    Column("team", String(32), nullable=True),  # None: the default team (jobs before teams)
    # The fencing token: one more at every claim; only its holder may write for the job.
    Column("lease", Integer, nullable=True),
    # Set by the job's first run: the study it runs in (as stored) and how many finished
    # trials that study had then, so a re-run adds only the trials still owed.
    Column("study", String(300), nullable=True),
    Column("trials_before", Integer, nullable=True),
)
Index("advisor_jobs_by_team", jobs.c.team, jobs.c.created)
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

# Issue #37: the machines each team owns (``advisor.providers.owned.OwnedMachine`` as JSON),
# candidates of that team's suggestions only.
owned_machines = Table(
    "advisor_owned_machines",
    metadata,
    Column("team", String(32), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("machine", Text, nullable=False),
    Column("created", Float, nullable=False),
)

# The deployment's settings, one row each: 'lease_s', the jobs' lease (``store_lease``).
settings = Table(
    "advisor_settings",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
DEFAULT_LEASE_S = 30.0

IDLE_TRANSACTION_S = 15
_ENGINES: dict[str, Engine] = {}
_OTHER_ENGINES: list[Engine] = []  # other engines of this process (the API's Optuna storage)
_LOCK = threading.Lock()


def engine_for(url: str) -> Engine:
    """One engine per storage URL per process, with the service's tables created."""
    with _LOCK:
        if url in _ENGINES:
            return _ENGINES[url]
        if is_postgres(url):
            # A transaction left idle (its process paused mid-write) ends after this long,
            # so the job rows it locked are free again (see advisor.service.fencing).
            idle = f"-c idle_in_transaction_session_timeout={IDLE_TRANSACTION_S}s"
            engine = create_engine(
                optuna_url(url), pool_pre_ping=True, connect_args={"options": idle}
            )
        else:
            engine = create_engine(url, connect_args={"timeout": 30})
            event.listen(engine, "connect", _sqlite_pragmas)
        metadata.create_all(engine)
        _add_missing_columns(engine)
        _ENGINES[url] = engine
        return engine


def track_engine(engine: Engine) -> None:
    """Dispose ``engine``'s inherited connections in forked children too."""
    with _LOCK:
        _OTHER_ENGINES.append(engine)


def _add_missing_columns(engine: Engine) -> None:
    """Add the columns a storage created by an older version lacks (all nullable)."""
    from sqlalchemy import inspect
    from sqlalchemy.exc import OperationalError, ProgrammingError

    inspector = inspect(engine)
    for table in (tokens, jobs):
        have = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in have:
                continue
            kind = column.type.compile(dialect=engine.dialect)
            try:
                with engine.begin() as conn:
                    conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column.name} {kind}"))
            except (OperationalError, ProgrammingError):  # another process added it meanwhile
                pass
    with engine.begin() as conn:  # indexes on the added columns
        for index in jobs.indexes:
            index.create(conn, checkfirst=True)


def _after_fork_in_child() -> None:
    """A forked child (RQ's work horse) must not use its parent's pooled connections."""
    global _LOCK
    _LOCK = threading.Lock()  # the parent's may have been held by another thread at fork
    for engine in [*_ENGINES.values(), *_OTHER_ENGINES]:
        engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def optuna_url(url: str) -> str:
    """The URL Optuna's RDB storage gets: PostgreSQL goes through psycopg 3."""
    from advisor.storage.checks import storage_driver_url

    return storage_driver_url(url)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def now(url: str) -> Any:
    """The database's clock (seconds since the epoch) as an SQL expression: leases, heart-
    beats and cut-offs are all read from one clock, whatever the hosts' clocks say."""
    from sqlalchemy import literal_column

    if is_postgres(url):
        return literal_column("extract(epoch from now())::float8")
    return literal_column("((julianday('now') - 2440587.5) * 86400.0)")


def started(url: str) -> Any:
    """When the database server last started, as ``now``'s seconds (PostgreSQL; SQLite has
    no server: 0): no lease expires within a lease of a restart, so the workers that waited
    for it renew theirs before a sweeper takes their jobs."""
    from sqlalchemy import literal_column

    if is_postgres(url):
        return literal_column("extract(epoch from pg_postmaster_start_time())::float8")
    return literal_column("0.0")


def lease_expr() -> Any:
    """The deployment's lease (s) as an SQL expression (the stored one, else the default)."""
    from sqlalchemy import Float, cast, func, select

    stored = select(cast(settings.c.value, Float)).where(settings.c.name == "lease_s")
    return func.coalesce(stored.scalar_subquery(), DEFAULT_LEASE_S)


def store_lease(url: str, seconds: float | None, replace: bool) -> float:
    """The deployment's lease (s), stored in the storage: ``seconds`` is stored when none
    is yet, or when ``replace`` (``advisor serve --stale-after N``); returns the stored one."""
    from sqlalchemy import select, update
    from sqlalchemy.exc import IntegrityError

    engine = engine_for(url)
    if seconds is not None:
        value = repr(float(seconds))
        try:
            with engine.begin() as conn:
                conn.execute(settings.insert().values(name="lease_s", value=value))
        except IntegrityError:  # one is stored already
            if replace:
                with engine.begin() as conn:
                    conn.execute(
                        update(settings).where(settings.c.name == "lease_s").values(value=value)
                    )
    with engine.connect() as conn:
        stored = conn.execute(select(settings.c.value).where(settings.c.name == "lease_s"))
        row = stored.scalar()
    return DEFAULT_LEASE_S if row is None else float(row)


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


def is_postgres(url: str) -> bool:
    """Whether ``url`` is a PostgreSQL storage."""
    return url.startswith(("postgresql", "postgres://"))
