"""A user's ``module:function`` is found in the working directory, as the probe's child process
(``python -m``) finds it, even where this process's ``sys.path`` lacks that directory (the
``advisor`` console script's does)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from advisor.search_spaces.workloads.available import check_user_module

from advisor.errors import AdvisorError


def test_a_module_in_the_working_directory_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models_only_here.py").write_text("def build(**_):\n    return None\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    before = list(sys.path)
    check_user_module("models_only_here:build")  # raised "No module named" before
    assert sys.path == before  # the lookup leaves the path as it was
    with pytest.raises(AdvisorError, match="No module named 'models_nowhere'"):
        check_user_module("models_nowhere:build")
