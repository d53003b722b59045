"""The study the export tests read: `advisor suggest ... --export skypilot:FILE` run once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_run import run
from export_study import SPACE, plan_table, table


def _suggest(folder: Any, replay: Any, budget: str = "5000") -> dict[str, Any]:
    """`advisor suggest ... --export skypilot:FILE` on the replay table ``replay``."""
    patch = pytest.MonkeyPatch()
    patch.setenv("ADVISOR_HOME", str(folder / "home"))
    replay.save(folder / "table.json")
    (folder / "space.yaml").write_text(SPACE)
    storage = f"sqlite:///{folder / 's.db'}"
    task = folder / "task.yaml"
    result = run(
        "suggest", "--model", "fcn", "--budget", budget, "--trials", "3",
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


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`advisor suggest ... --export skypilot:FILE` run once: the report, its storage, the task."""
    return _suggest(tmp_path_factory.mktemp("export"), table())


@pytest.fixture(scope="module")
def plan_study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Issue #45: the same on rows that carry a training plan, memory and a steady step; within
    USD 50 the on-demand 8x B200 is out, so the recommendation is the issue's: 8x B200 spot,
    batch 256, bf16, 2 accumulation steps, ZeRO-1."""
    return _suggest(tmp_path_factory.mktemp("export-plan"), plan_table(), budget="50")
