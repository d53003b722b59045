"""Shared test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _advisor_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep every test's studies, caches and snapshots in its own temporary folder."""
    home = tmp_path / "advisor-home"
    monkeypatch.setenv("ADVISOR_HOME", str(home))
    return home
