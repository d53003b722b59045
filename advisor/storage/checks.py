"""Checks on a study storage before and while it is opened: one-line errors, never a traceback.

``check_storage(url)`` runs before anything is opened: ``ADVISOR_HOME`` must be a folder (or
creatable), the URL's scheme must name a SQLAlchemy dialect whose driver is installed, and a
SQLite file must be a file that starts like an SQLite database. ``storage_errors(url)`` wraps
the opening itself and turns what the database says (unreachable server, bad password, a
schema written by a newer Optuna, a file that is not a database) into an ``AdvisorError``.
Passwords in URLs are never printed.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from advisor.config import default_storage_url, home
from advisor.errors import AdvisorError

POSTGRES_FIX = "pip install 'advisor[postgres]' (psycopg[binary])."
_DRIVER_FIX = {
    "postgresql": POSTGRES_FIX,
    "mysql": "pip install pymysql and write the URL as mysql+pymysql://USER:PASSWORD@HOST/DB.",
}


def _shown(url: str) -> str:
    """The URL as it may be printed: the password replaced by ***."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL holds no readable password field
        return url.split("@")[-1] if "@" in url else url


def storage_driver_url(url: str) -> str:
    """``postgresql://...`` (or ``postgres://``) -> ``postgresql+psycopg://...``: SQLAlchemy's
    default PostgreSQL driver is psycopg2, while the ``postgres`` extra installs psycopg 3.
    The one place that maps a URL to its driver; ``check_storage`` then names the ``postgres``
    extra when psycopg is missing."""
    if not url.startswith(("postgresql://", "postgres://")):
        return url
    return "postgresql+psycopg://" + url.split("://", 1)[1]


def check_home() -> None:
    """``ADVISOR_HOME`` (or ~/.advisor) must be a folder, or a path where one can be made, and
    writable (tried for real: a root user without the right to override permissions, or a
    read-only mount, would pass ``os.access``)."""
    folder = home()
    if folder.exists() and not folder.is_dir():
        raise AdvisorError(
            f"ADVISOR_HOME {folder} is a file, not a folder.",
            "point ADVISOR_HOME at a folder (or unset it to use ~/.advisor).",
        )
    parent = next((p for p in folder.parents if p.exists()), None)
    if not folder.exists() and parent is not None and not parent.is_dir():
        raise AdvisorError(
            f"ADVISOR_HOME {folder} cannot be created: {parent} is a file.",
            "point ADVISOR_HOME at a folder (or unset it to use ~/.advisor).",
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise AdvisorError(
            f"ADVISOR_HOME {folder} is not writable ({exc.strerror or type(exc).__name__}).",
            f"make it writable (chmod u+w {folder}) or point ADVISOR_HOME at a writable "
            "folder (or unset it to use ~/.advisor).",
        ) from exc


def check_storage(url: str | None) -> None:
    """Refuse a storage that cannot work, before opening it (``None``: the default file)."""
    if url is None:
        check_home()
        _check_sqlite_file(home() / "studies.db", "the advisor's study file")
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise AdvisorError(
            f"--storage '{_shown(url)}' is not a database URL.",
            "write it like sqlite:///PATH/studies.db or postgresql+psycopg://USER@HOST/DB.",
        ) from exc
    backend = parsed.get_backend_name()
    try:
        dialect = parsed.get_dialect()
    except NoSuchModuleError as exc:
        raise AdvisorError(
            f"--storage '{_shown(url)}': unknown database scheme '{parsed.drivername}'.",
            "use sqlite:///PATH, postgresql+psycopg://... or mysql+pymysql://...",
        ) from exc
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        raise AdvisorError(
            f"--storage '{_shown(url)}' needs the database driver for '{parsed.drivername}', "
            "which is not installed.",
            _DRIVER_FIX.get(backend, f"install the Python driver for {parsed.drivername}."),
        ) from exc
    if backend == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(str(parsed.database))
        if not path.parent.exists():
            raise AdvisorError(
                f"The storage folder {path.parent} does not exist.",
                f"create it (mkdir -p {path.parent}) or pass another --storage URL.",
            )
        _check_sqlite_file(path, "the --storage file")


def _check_sqlite_file(path: Path, what: str) -> None:
    """A SQLite file must be a folder-free, readable, writable SQLite database. Its header is
    read through SQLite itself, never a plain file handle: closing any handle on a SQLite file
    drops every POSIX lock this process holds on it -- the locks its open connections rely on
    -- so another process could write under them (seen as "disk I/O error" and "file is not
    a database" when two studies ran at once, issue #28)."""
    if path.is_dir():
        raise AdvisorError(
            f"{what[:1].upper()}{what[1:]} {path} is a folder.",
            "remove it or pass another --storage.",
        )
    if not path.exists() or path.stat().st_size == 0:
        return
    if not os.access(path, os.R_OK):
        raise AdvisorError(
            f"{what[:1].upper()}{what[1:]} {path} is not readable.", "fix its permissions."
        )
    if not _is_sqlite(path):
        raise AdvisorError(
            f"{what[:1].upper()}{what[1:]} {path} is not an SQLite database.",
            f"move it away (mv {path} {path}.bad; the advisor then starts a new one) or pass "
            "another --storage.",
        )
    if not os.access(path, os.W_OK):
        raise read_only(path, PermissionError(errno.EACCES, os.strerror(errno.EACCES)))


def _is_sqlite(path: Path) -> bool:
    """Whether SQLite reads ``path`` as a database (its header), through SQLite's own file
    handling; a damaged file whose header is intact passes here and is reported when read."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            con.execute("PRAGMA schema_version").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return "not a database" not in str(exc)
    return True


def read_only(path: Path, exc: BaseException | None = None) -> AdvisorError:
    """The one line for a study file the advisor may read but not write."""
    why = getattr(exc, "strerror", None) or "read-only"
    return AdvisorError(
        f"The study file {path} cannot be written ({why}).",
        f"make it writable (chmod u+w {path}), or copy it somewhere writable and pass "
        "--storage sqlite:///COPY.",
    )


@contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Turn what opening or reading the storage raises into a one-line ``AdvisorError``."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except AdvisorError:
        raise
    except SQLAlchemyError as exc:
        fault = storage_fault(exc, url)  # a damaged, read-only or locked file: what to do
        if fault is not None:
            raise fault from exc
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        first = reason[0] if reason else type(exc).__name__
        raise AdvisorError(
            f"Cannot use the storage {_shown(url)}: {first}.",
            "check that the database is reachable, the URL and credentials are right, "
            "and that a SQLite file is an Optuna study file.",
        ) from exc
    except RuntimeError as exc:  # Optuna: schema written by another version
        if "table schema" not in str(exc):
            raise
        raise AdvisorError(
            f"The storage {_shown(url)} was written by another Optuna version "
            f"({' '.join(str(exc).split())})",
            "run `optuna storage upgrade --storage URL` for an older file, upgrade optuna for "
            "a newer one, or pass another --storage.",
        ) from exc


_IN_USE: list[str] = []  # the storage URL this process opened last (for storage_fault)


def note_in_use(url: str) -> None:
    """Remember ``url`` as the storage a later fault is about (``storage_fault``)."""
    _IN_USE[:] = [url]


# What SQLite says (anywhere in an exception's chain) -> why, and what to do about it.
_SQLITE_FAULTS = (
    ("readonly database", "read-only"),
    ("malformed", "damaged"),
    ("file is not a database", "damaged"),
    ("disk i/o error", "i/o"),
    ("database is locked", "locked"),
    ("unable to open database file", "unopenable"),
)


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in out and len(out) < 20:
        orig = getattr(seen, "orig", None)  # SQLAlchemy keeps the driver's own error here
        if isinstance(orig, BaseException) and orig not in out:
            out.append(orig)  # first: its message is SQLite's, without the SQL
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def storage_fault(exc: BaseException, url: str | None = None) -> AdvisorError | None:
    """The one-line error for a fault of the study storage met while it is used (a damaged,
    read-only or locked SQLite file, a folder that cannot be written, a full disk); None when
    ``exc`` is not one. ``url``: the storage (default: the advisor's own file)."""
    url = url or (_IN_USE[-1] if _IN_USE else default_storage_url())
    shown = _shown(url)
    db = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    for err in _chain(exc):
        if isinstance(err, OSError) and err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            where = Path(err.filename) if err.filename else home()
            folder = where.parent
            if home() in (where, *where.parents):
                return AdvisorError(
                    f"Cannot write {where} ({err.strerror}): the advisor keeps its studies "
                    f"and locks in ADVISOR_HOME {home()}.",
                    f"make {folder} writable (chmod u+w {folder}) or point ADVISOR_HOME at a "
                    "writable folder.",
                )
            return AdvisorError(
                f"Cannot write {where} ({err.strerror}).",
                f"make {folder} writable (chmod u+w {folder}) or pick another path.",
            )
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            return AdvisorError(
                f"No space left on the device of {err.filename or shown}.",
                "free some space and re-run the same command (finished trials are kept).",
            )
        text = str(err).lower()
        kind = next((k for needle, k in _SQLITE_FAULTS if needle in text), None)
        if kind is None:
            continue
        first = str(err).strip().splitlines()[0] if str(err).strip() else kind
        if kind == "read-only" and db is not None:
            return read_only(db, None)
        if kind == "damaged":
            move = f"mv {db} {db}.damaged" if db is not None else "restore it from a backup"
            return AdvisorError(
                f"The study storage {shown} is damaged (SQLite: {first}).",
                f"move it away ({move}; the advisor then starts a new one and re-runs its "
                "probes) or pass another --storage.",
            )
        if kind == "locked":
            return AdvisorError(
                f"The study storage {shown} stayed locked by another process for over a "
                f"minute (SQLite: {first}).",
                "wait for the other advisor run to finish and re-run; several runs on one "
                "file are supported, a program holding it open for long is not.",
            )
        return AdvisorError(
            f"The study storage {shown} could not be read or written (SQLite: {first}).",
            "check the disk and the file's folder (a network or read-only mount?), then re-run; "
            "or pass --storage with a file on a local disk.",
        )
    return None
