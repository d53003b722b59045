"""Catalog test helpers: user snapshots under the per-test ADVISOR_HOME (the local HTTP
server, `http_server`, is tests/helpers/fake_servers.py's)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from advisor.providers.catalog._store import DATA_DIR

from advisor.config import user_catalog_dir

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def copy_snapshot() -> Callable[[str, str], Path]:
    """Copy a shipped snapshot into the user catalog folder under a new name."""

    def copy(source: str, name: str) -> Path:
        target = user_catalog_dir() / name
        shutil.copytree(DATA_DIR / source, target, ignore=shutil.ignore_patterns("__*"))
        return target

    return copy


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (to show that nothing changed)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }
