"""Checks on a study storage before and while it is opened: one-line errors, never a traceback.

``check_storage(url)`` runs before anything is opened: ``ADVISOR_HOME`` must be a folder (or
creatable), the URL's scheme must name a SQLAlchemy dialect whose driver is installed, and a
SQLite file must be a file that starts like an SQLite database. ``storage_errors(url)`` wraps
the opening itself and turns what the database says (unreachable server, bad password, a
schema written by a newer Optuna, a file that is not a database) into an ``AdvisorError``.
Passwords in URLs are never printed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from advisor.config import home
from advisor.errors import AdvisorError

SQLITE_MAGIC = b"SQLite format 3\x00"
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
    """``ADVISOR_HOME`` (or ~/.advisor) must be a folder, or a path where one can be made."""
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
    if path.is_dir():
        raise AdvisorError(
            f"{what[:1].upper()}{what[1:]} {path} is a folder.",
            "remove it or pass another --storage.",
        )
    if not path.exists():
        return
    if not os.access(path, os.R_OK):
        raise AdvisorError(
            f"{what[:1].upper()}{what[1:]} {path} is not readable.", "fix its permissions."
        )
    with path.open("rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if head and head != SQLITE_MAGIC:
        raise AdvisorError(
            f"{what[:1].upper()}{what[1:]} {path} is not an SQLite database.",
            "move it away (the advisor then starts a new one) or pass another --storage.",
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
