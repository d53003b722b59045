"""Issue #36: a probe file (`advisor estimate --probe`, `advisor predict --probe`) and a probe
upload (the service's /v1/predict) are read and checked in one place
(`advisor.evaluation.probe_source`), with the same bounds: a malformed one is one line, exit 2
(HTTP 400 for the service), never a traceback, an absurd answer or a wait for ever. Each case
failed on the code before the issue (a traceback, exit 0 with an absurd or silently replaced
size, or a read that never returned)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from cli_run import Outcome, run
from perf_fixtures import probe

from .conftest import check

GOOD = probe().to_dict()
CASES = {
    # field -> (value, what the one line must say)
    "overflow": ({"iteration_s": [1e308] * 10}, "iteration_s[0] must be <= 1e+08"),
    "zero size": ({"n_train": 0}, "n_train must be an integer from 1 to 1,000,000,000"),
    "absurd size": ({"n_train": 1e30}, "n_train must be an integer from 0 to 1,000,000,000"),
    "float size": ({"n_val": 212.5}, "n_val must be an integer"),
}


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(outcome: Outcome, args: list[str]) -> str:
    check(outcome, args)
    assert outcome.code == 2, outcome
    return outcome.err.strip()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["estimate", "predict"])
def test_a_probe_file_out_of_bounds_is_one_line(tmp_path: Path, case: str, command: str) -> None:
    change, says = CASES[case]
    path = _file(tmp_path, "p.json", json.dumps({**GOOD, **change}))
    args = ["estimate", "--probe", str(path)]
    if command == "predict":  # refused before any trace or catalog work
        args = ["predict", "--model", "fcn", "--batch-size", "512", "--probe", str(path),
                "--instances", "p3.2xlarge", "--n-train", "1000"]  # fmt: skip
    error = _error(run(*args), args)
    assert says in error and str(path) in error and "advisor probe --out" in error


def test_deep_big_and_odd_probe_files_are_one_line(tmp_path: Path) -> None:
    cases = {
        _file(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000): "deeper than 32 levels",
        _file(tmp_path, "deep_obj.json", '{"a":' * 40 + "1" + "}" * 40): "deeper than 32",
        _file(tmp_path, "big.json", " " * (16 * 2**20 + 1)): "over 16 MiB",
        _file(tmp_path, "empty.json", "\n\n"): "is empty",
        _file(tmp_path, "list.json", "[1, 2]"): "must be a JSON object",
        _file(tmp_path, "failed.json", json.dumps({**GOOD, "status": "oom", "error": "x"})): (
            "holds a failed probe (oom: x)"
        ),
    }
    (tmp_path / "latin1.json").write_bytes(b'{"workload": "\xe9"}')
    cases[tmp_path / "latin1.json"] = "is not UTF-8"
    for path, says in cases.items():
        args = ["estimate", "--probe", str(path)]
        assert says in _error(run(*args), args), path


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "probe.json"
    os.mkfifo(fifo)
    args = ["estimate", "--probe", str(fifo)]
    done: list[Outcome] = []
    reader = threading.Thread(target=lambda: done.append(run(*args)), daemon=True)
    reader.start()
    reader.join(timeout=20)
    if not done:  # it waits for a writer: unblock it so the thread ends, then fail
        with open(fifo, "w") as writer:
            writer.write("{}")
        reader.join(timeout=5)
        pytest.fail("reading a FIFO as the probe file waited for a writer")
    assert "is not a regular file" in _error(done[0], args)


def test_the_last_line_of_a_probe_out_file_and_a_good_file_still_work(tmp_path: Path) -> None:
    path = _file(tmp_path, "p.json", "progress\n" + json.dumps(GOOD) + "\n")
    outcome = run("estimate", "--probe", str(path), "--json")
    assert outcome.code == 0, outcome
    assert json.loads(outcome.out)["estimate"]["n_train"] == GOOD["n_train"]


def test_the_service_applies_the_same_checks(sqlite_url_e2e: str) -> None:
    """`/v1/predict` with the probe of `advisor predict --probe`'s cases: 400 with the same
    reason, never a silent n_train of the workload's size."""
    from fastapi.testclient import TestClient

    from advisor.service import auth
    from advisor.service.app import Settings, create_app
    from advisor.service.dispatch import ThreadDispatcher

    token = auth.create_token(sqlite_url_e2e, "ci")
    dispatcher = ThreadDispatcher(sqlite_url_e2e)
    answers: dict[str, Any] = {}
    with TestClient(create_app(Settings(sqlite_url_e2e, dispatcher))) as client:
        for case, (change, _says) in CASES.items():
            body = {"probe": {**GOOD, **change}, "instances": ["p3.2xlarge"]}
            r = client.post("/v1/predict", json=body, headers={"Authorization": f"Bearer {token}"})
            answers[case] = (r.status_code, r.text)
    dispatcher.close()
    for case, (status, text) in answers.items():
        assert status == 400, (case, text)
        assert CASES[case][1] in text and "The uploaded probe" in text, (case, text)


@pytest.fixture
def sqlite_url_e2e(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return f"sqlite:///{tmp_path / 'home' / 'studies.db'}"


def test_probe_out_that_cannot_be_written_after_the_probe_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`advisor probe --out PATH` whose folder goes away while the probe runs: the probe is
    printed, then one line (before: a 31-line traceback after the probe ran)."""
    import shutil

    import advisor.cli.probe as probe_cli
    import advisor.evaluation.predict_api as predict_api

    folder = tmp_path / "out"
    folder.mkdir()

    def probe_then_lose_the_folder(request: Any, show: bool = True) -> Any:
        shutil.rmtree(folder)
        return probe(batch=request.batch_size)

    monkeypatch.setattr(probe_cli, "run_with_progress", probe_then_lose_the_folder)
    monkeypatch.setattr(predict_api, "ready", lambda result, *a, **k: result)
    args = ["probe", "--model", "fcn", "--batch-size", "512", "--json",
            "--out", str(folder / "p.json")]  # fmt: skip
    outcome = run(*args)
    error = _error(outcome, args)
    assert "Could not write the probe result to" in error and "--out" in error
    assert json.loads(outcome.out)["batch_size"] == 512  # the printed probe is kept
    assert not folder.exists()
