"""Issue #36, section 4: a user's model as its author wrote it: the dataset sizes come from
the builder's own data (``len(dataset)``, a ``KerasSetup``'s declared ``n_train``/``n_val``),
and ``--n-train``/``--n-val`` stay overrides. Before: "its dataset size is unknown, pass
--n-train" from `advisor suggest --model user_models:build --budget 1` and from `advisor
predict --framework keras` on a builder that declares them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import optuna
import pytest
from perf_fixtures import mlp_trace

from .conftest import Replay, run

MODEL = "keras_user_models:build_declared"


def _study_sizes(db: Path) -> tuple[int, int]:
    storage = f"sqlite:///{db}"
    (summary,) = [
        s for s in optuna.get_all_study_summaries(storage) if "user_models" in s.study_name
    ]
    attrs = optuna.load_study(study_name=summary.study_name, storage=storage).user_attrs
    return attrs["n_train"], attrs["n_val"]


@pytest.mark.slow  # builds the user's PyTorch model (torch imported): about 30 s here
def test_suggest_reads_a_user_models_sizes_from_its_datasets(
    replay: Replay, tmp_path: Path
) -> None:
    """`tests/helpers/user_models.py:build` returns 512 training and 128 validation samples."""
    db = tmp_path / "s.db"
    args = ["suggest", "--model", "user_models:build", "--budget", "5",
            "--backend", f"replay:{replay.table}", "--storage", f"sqlite:///{db}"]  # fmt: skip
    outcome = run(*args)
    assert outcome.code == 0, outcome
    assert _study_sizes(db) == (512, 128)
    db2 = tmp_path / "s2.db"  # the flags override what the builder says
    args[-1] = f"sqlite:///{db2}"
    outcome = run(*args, "--n-train", "50000", "--n-val", "1000")
    assert outcome.code == 0, outcome
    assert _study_sizes(db2) == (50_000, 1_000)


def test_predict_keras_untimed_reads_the_declared_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Keras model too big to time here (the untimed path): its KerasSetup declares 25,000
    training and 5,000 validation samples."""
    import advisor.evaluation.untimed as untimed

    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))
    # a step holding 2 TiB: no local probe (the decision ``decide`` takes on the meta device)
    trace = dataclasses.replace(
        mlp_trace(32, workload=MODEL), framework="keras", memory_bytes={"activations": 2 * 2**40}
    )
    decision = untimed.LocalDecision(trace, False, "a step holds 2 TiB")
    monkeypatch.setattr(untimed, "decide", lambda *a, **k: decision)
    args = ["predict", "--framework", "keras", "--model", MODEL,
            "--batch-size", "32", "--instances", "p3.2xlarge", "--json"]  # fmt: skip
    outcome = run(*args)
    assert outcome.code == 0, outcome
    result: dict[str, Any] = json.loads(outcome.out)
    assert (result["probe"]["n_train"], result["probe"]["n_val"]) == (25_000, 5_000)
    again = json.loads(run(*args, "--n-train", "1000", "--n-val", "10").out)  # overrides
    assert (again["probe"]["n_train"], again["probe"]["n_val"]) == (1_000, 10)
