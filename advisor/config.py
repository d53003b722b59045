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
