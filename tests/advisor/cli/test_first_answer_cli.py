"""Issue #36: the terminal prints the first answer before the final report; ``--json`` stays
one final document. The pipeline is replaced by the replay back end (no probe runs): what is
tested is the CLI's wiring, the first answer itself in ``tests/advisor/test_first_answer.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import advisor.pipeline as pipeline
from advisor.evaluation.replay import backend_from_spec

from .conftest import Replay, run


@pytest.fixture
def heard(replay: Replay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))
    real, calls = pipeline.suggest, []

    def on_replay(options: Any, **kw: Any) -> dict[str, Any]:
        calls.append(kw.get("on_first_answer"))
        backend = backend_from_spec(f"replay:{replay.table}")
        report = real(options, backend=backend, storage=f"sqlite:///{tmp_path / 's.db'}")
        if kw.get("on_first_answer") is not None:  # the replayed report stands in for it
            kw["on_first_answer"](report)
        return report

    monkeypatch.setattr(pipeline, "suggest", on_replay)
    return calls


def test_the_first_answer_comes_before_the_final_report(replay: Replay, heard: list[Any]) -> None:
    done = run("suggest", "--model", "fcn", "--space", str(replay.space), "--budget", "5")
    assert done.code == 0, done.err
    assert heard and heard[0] is not None
    assert done.out.startswith("first answer (from the operator trace")  # printed first
    block, _, final = done.out.partition("\n\n")
    assert "  recommended: " in block
    assert final.startswith("fcn (torch)") and "recommended:" in final  # the report after it


def test_json_prints_one_final_document(replay: Replay, heard: list[Any]) -> None:
    done = run("suggest", "--model", "fcn", "--space", str(replay.space), "--budget", "5", "--json")
    assert done.code == 0, done.err
    assert heard == [None]  # no first answer asked for
    assert json.loads(done.out)["recommended"]  # one document, nothing before it
