"""Where studies live: the storage URL and opening it (SQLite pragmas, the schema under a lock)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from advisor.config import default_storage_url, home
from advisor.errors import AdvisorError
from advisor.storage.checks import (
    check_storage,
    note_in_use,
    storage_driver_url,
    storage_errors,
)

_SQLITE_HOOK: list[Any] = []
SQLITE_BUSY_TIMEOUT_S = 60.0
CREATE_ATTEMPTS = 5  # retries for storages the file lock does not cover (other hosts)


def resolve_storage(url: str | None) -> str:
    """The storage URL; the default SQLite folder is created, a user's missing folder is an error."""
    if url is not None:
        url = storage_driver_url(url)  # postgresql:// through psycopg 3
    check_storage(url)  # scheme, driver, ADVISOR_HOME, folder and file checked before opening
    if url is None:
        home().mkdir(parents=True, exist_ok=True)
        note_in_use(default_storage_url())
        return default_storage_url()
    note_in_use(url)
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if str(path) not in ("", ":memory:") and not path.parent.exists():
            raise AdvisorError(
                f"The storage folder {path.parent} does not exist.",
                f"create it (mkdir -p {path.parent}) or pass another --storage URL.",
            )
    return url


def open_storage(url: str) -> Any:
    """The Optuna storage for ``url``. SQLite files use WAL with synchronous=NORMAL: each
    commit then skips an fsync (a trial writes ~20 attributes), and optuna-dashboard can read
    while a study runs. A power cut may lose the last trials, never corrupt the file.

    Several processes may start on a new storage at once: the tables are created under the
    storage's file lock (``advisor.storage.locks.storage_lock``), and a SQLite writer waits up to
    60 s for another's transaction instead of failing with "database is locked"."""
    import optuna
    from sqlalchemy.exc import IntegrityError, OperationalError

    from advisor.storage.locks import storage_lock

    engine_kwargs: dict[str, Any] | None = None
    if url.startswith("sqlite:"):
        _sqlite_pragmas_on_connect()
        engine_kwargs = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    else:  # a restarted server leaves dead pooled connections: test each before use
        engine_kwargs = {"pool_pre_ping": True}
    with storage_errors(url):  # what the database says becomes one line
        for attempt in range(CREATE_ATTEMPTS):
            try:
                with storage_lock(url):
                    rdb = optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
                return optuna.storages.get_storage(rdb)
            except (IntegrityError, OperationalError):  # another host created it meanwhile
                if attempt == CREATE_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _sqlite_pragmas_on_connect() -> None:
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            cur = dbapi_conn.cursor()
            # WAL is a property of the file: set once, by the first connection. Asking for it
            # again on every connection while another process writes failed with "disk I/O
            # error" (issue #28: two studies at once on the default file).
            try:
                (mode,) = cur.execute("PRAGMA journal_mode").fetchone()
            except UnicodeDecodeError as exc:  # a damaged header can answer in garbage bytes
                raise sqlite3.DatabaseError("database disk image is malformed") from exc
            if str(mode).lower() != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

    if not _SQLITE_HOOK:  # once per process
        _SQLITE_HOOK.append(_pragmas)
        event.listen(Engine, "connect", _pragmas)
