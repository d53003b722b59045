"""The study the export tests read: `advisor suggest ... --export skypilot:FILE` run once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_run import run
from export_study import SPACE, table


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`advisor suggest ... --export skypilot:FILE` run once: the report, its storage, the task."""
    folder = tmp_path_factory.mktemp("export")
    patch = pytest.MonkeyPatch()
    patch.setenv("ADVISOR_HOME", str(folder / "home"))
    table().save(folder / "table.json")
    (folder / "space.yaml").write_text(SPACE)
    storage = f"sqlite:///{folder / 's.db'}"
    task = folder / "task.yaml"
    result = run(
        "suggest", "--model", "fcn", "--budget", "5000", "--trials", "3",
        "--space", str(folder / "space.yaml"), "--storage", storage,
        "--backend", f"replay:{folder / 'table.json'}", "--json",
        "--export", f"skypilot:{task}",
    )  # fmt: skip
    patch.undo()
    assert result.code == 0, result
    return {
        "report": json.loads(result.out),
        "storage": storage,
        "task": task,
        "err": result.err,
        "folder": folder,
    }
