"""Issue #19: the local back end's epochs per batch size come from the probe's noise scale."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from advisor.probes.epochs_model import epochs_ratio
from advisor.probes.gradient_noise import estimate_pooled
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.providers.catalog import local_machine

from advisor.epochs_report import epochs_note, epochs_per_batch
from advisor.errors import AdvisorError
from advisor.local_backend import LocalBackend
from advisor.options import SuggestOptions, workload_info
from advisor.scoring import Candidate, WorkloadInfo

# What the probe's pooled estimator gets from 4 batches of 8 micro-batches of 32 whose
# gradients have pairwise dot products |G|^2 = 1 and squared norms 1 + 1000 / 32
# (tr(Sigma) = 1000): B_simple = 1000 exactly.
_M, _SQ = 8, 1 + 1000 / 32
NOISE = estimate_pooled(
    np.full((4, 4), _M * _M) + np.eye(4) * _M * (_SQ - 1), np.full(4, _M * _SQ), _M, 32
)
assert NOISE.value == pytest.approx(1000.0)


class FakeProbes:
    """Stands in for the child-process probe; records the batch sizes asked for."""

    def __init__(self, with_noise: bool = True) -> None:
        self.asked: list[int] = []
        self.with_noise = with_noise

    def __call__(self, request: ProbeRequest) -> ProbeResult:
        self.asked.append(request.batch_size)
        b = request.batch_size
        return ProbeResult(
            workload=request.workload,
            framework="torch",
            batch_size=b,
            device="cpu",
            threads=request.threads or 1,
            init_s=1.0,
            iteration_s=(0.5, *([0.1 * b / 256] * 7)),
            validation_s=(0.2, 0.1),
            validation_samples_measured=212,
            n_train=40_512,
            n_val=212,
            wall_s=3.0,
            gradient_noise=NOISE.to_dict() if self.with_noise and request.gradient_noise else None,
        )


def backend(tmp_path: Path, probes: FakeProbes) -> LocalBackend:
    return LocalBackend(f"sqlite:///{tmp_path / 'cache.db'}", run_probe=probes, threads=1)


def evaluate(be: LocalBackend, wl: WorkloadInfo, batch: int) -> Any:
    return be.evaluate(wl, Candidate(local_machine()), batch, {})


def test_published_anchor_scaled_by_the_probe_noise_scale(tmp_path: Path) -> None:
    probes = FakeProbes()
    be = backend(tmp_path, probes)
    wl = workload_info(SuggestOptions(model="fcn"))
    at_4096 = evaluate(be, wl, 4096)  # not published: predicted from the anchor
    expected = 13 * epochs_ratio(4096, 256, 1000.0)  # fcn: 13 epochs at 256 (METHOD.md 2.3)
    assert at_4096.epochs == math.ceil(expected)
    model = at_4096.estimate["epochs_model"]
    assert model["source"] == "predicted" and model["value"] == pytest.approx(expected)
    assert at_4096.estimate["epochs"] == at_4096.epochs  # the runtime uses these epochs
    at_256 = evaluate(be, wl, 256)
    assert at_256.epochs == 13 and at_256.estimate["epochs_model"]["source"] == "given"
    assert probes.asked == [4096, 256]  # one reference probe, then served from the cache
    note = epochs_note(epochs_per_batch([], [at_256, at_4096])) or ""
    assert "learning rate" in note
    assert "start of training" in note  # says which way the prediction is likely off


def test_a_published_figure_wins_over_the_noise_scale_prediction(tmp_path: Path) -> None:
    be = backend(tmp_path, FakeProbes())
    wl = workload_info(SuggestOptions(model="fcn"))
    at_2048 = evaluate(be, wl, 2048)  # published: 16 epochs (METHOD.md 2.3)
    assert at_2048.epochs == 16
    assert at_2048.estimate["epochs_model"]["source"] == "given"
    at_1024 = evaluate(be, wl, 1024)
    assert at_1024.epochs == 14
    longer = evaluate(be, wl, 2048)
    assert at_1024.runtime.value < longer.runtime.value  # more epochs and the same time/epoch
    at_256 = evaluate(be, wl, 256)
    rows = epochs_per_batch([], [at_2048, at_256, at_1024])
    assert [r["batch_size"] for r in rows] == [256, 1024, 2048]
    assert epochs_note(rows) is None  # nothing predicted: no learning-rate rule to state


def test_user_anchor_and_single_epochs(tmp_path: Path) -> None:
    be = backend(tmp_path, FakeProbes())
    anchored = workload_info(SuggestOptions(model="fcn", epochs=20, at_batch=512))
    ev = evaluate(be, anchored, 2048)
    assert ev.epochs == math.ceil(20 * epochs_ratio(2048, 512, 1000.0))
    assert "--epochs 20 --at-batch 512" in ev.estimate["epochs_model"]["basis"]
    flat = workload_info(SuggestOptions(model="fcn", epochs=20))
    assert evaluate(be, flat, 2048).epochs == 20
    assert evaluate(be, flat, 2048).estimate["epochs_model"]["source"] == "given"


def test_without_a_noise_scale_the_published_figures_stay(tmp_path: Path) -> None:
    be = backend(tmp_path, FakeProbes(with_noise=False))
    wl = workload_info(SuggestOptions(model="simple-cnn"))
    assert evaluate(be, wl, 2048).epochs == 28  # METHOD.md 2.3
    other = evaluate(be, wl, 768)  # not published: the anchor, said to be unchanged
    assert "no gradient noise scale" in other.estimate["epochs_model"]["basis"]


def test_at_batch_needs_epochs() -> None:
    with pytest.raises(AdvisorError, match="--at-batch"):
        SuggestOptions(model="fcn", at_batch=256)


def test_cli_at_batch_without_epochs_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from advisor.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["suggest", "--model", "fcn", "--at-batch", "256"])
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert "--at-batch 256 needs --epochs" in out + err
    assert "Traceback" not in out + err
