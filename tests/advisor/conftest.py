"""Fixtures of the `advisor/` tests: the small replay table (``tests/helpers/replay_tables.py``),
as a value and saved for ``advisor suggest --backend replay:PATH``."""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_tables import small_table

from advisor.evaluation.replay import ReplayTable


@pytest.fixture
def table() -> ReplayTable:
    """The small replay table with screen predictions."""
    return small_table()


@pytest.fixture
def table_file(tmp_path: Path) -> Path:
    """The small replay table saved as JSON (for `advisor suggest --backend replay:PATH`)."""
    path = tmp_path / "table.json"
    small_table().save(path)
    return path
