"""Shared test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

# Fixtures shared by tests under tests/providers and tests/advisor, kept in tests/helpers:
# the managed-tuning specs and studies (make_spec, storage, study_factory) and moto's SageMaker
# running probe jobs here (sagemaker_on_moto), and local JSON servers (http_server).
pytest_plugins = ["tuning_studies", "sagemaker_moto", "fake_servers"]


@pytest.fixture(autouse=True)
def _advisor_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep every test's studies, caches and snapshots in its own temporary folder."""
    home = tmp_path / "advisor-home"
    monkeypatch.setenv("ADVISOR_HOME", str(home))
    # Reports are as wide as piped output (the console's PIPED_WIDTH) whatever the runner's
    # terminal says: pytest-xdist's workers inherit a COLUMNS that would wrap the tables.
    monkeypatch.delenv("COLUMNS", raising=False)
    return home
