"""Where the advisor keeps its state (studies, probe caches, catalog snapshots)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The advisor's folder: ``$ADVISOR_HOME``, else ``~/.advisor``. Not created here."""
    env = os.environ.get("ADVISOR_HOME")
    return Path(env).expanduser() if env else Path.home() / ".advisor"


def default_storage_url() -> str:
    """The default Optuna storage: a SQLite file in the advisor's folder."""
    return f"sqlite:///{home() / 'studies.db'}"


def user_catalog_dir() -> Path:
    """Where `advisor catalog refresh` writes new dated snapshots."""
    return home() / "catalog"


def storage_driver_url(url: str) -> str:
    """``postgresql://...`` -> ``postgresql+psycopg://...`` (issue #17): SQLAlchemy's default
    PostgreSQL driver is psycopg2, while the ``postgres`` extra installs psycopg 3. Needs
    psycopg; a clear error says which extra to install when it is missing."""
    if not url.startswith(("postgresql://", "postgres://")):
        return url
    import importlib.util

    if importlib.util.find_spec("psycopg") is None:
        from advisor.errors import MissingExtraError

        raise MissingExtraError("psycopg", "postgres", "A PostgreSQL storage")
    return "postgresql+psycopg://" + url.split("://", 1)[1]
