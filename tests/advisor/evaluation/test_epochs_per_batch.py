"""Issue #19: the local back end's epochs per batch size come from the probe's noise scale."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from advisor.probes.gradient_noise import estimate_pooled
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.providers.catalog import local_machine

from advisor.errors import AdvisorError
from advisor.evaluation.candidates import Candidate
from advisor.evaluation.local import LocalBackend
from advisor.evaluation.workload import WorkloadInfo
from advisor.options import SuggestOptions, workload_info
from advisor.prediction.run.epochs_fit import fit_noise_scale
from advisor.prediction.run.epochs_model import epochs_ratio
from advisor.report.epochs import epochs_note, epochs_per_batch

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


def test_published_points_fit_the_noise_scale_for_every_batch_size(tmp_path: Path) -> None:
    probes = FakeProbes()
    be = backend(tmp_path, probes)
    wl = workload_info(SuggestOptions(model="fcn"))
    fit = fit_noise_scale({256: 13, 512: 14, 1024: 14, 2048: 16})  # docs/method.md 2.3
    at_4096 = evaluate(be, wl, 4096)  # not published: predicted from the fit, not the probe
    expected = fit.epochs_at(4096)[0]
    assert at_4096.epochs == round(expected) > 16
    model = at_4096.estimate["epochs_model"]
    assert model["source"] == "predicted" and model["b_noise_from"] == "fit"
    assert model["value"] == pytest.approx(expected)
    assert "B_simple" not in model["basis"]  # the probe's noise scale is not needed
    assert at_4096.estimate["epochs"] == at_4096.epochs  # the runtime uses these epochs
    at_2048 = evaluate(be, wl, 2048)
    assert at_2048.epochs == 16  # the fit rounds to the published figure here
    assert at_2048.estimate["epochs_model"]["source"] == "fitted"
    assert at_2048.estimate["epochs_model"]["known"] == 16
    assert probes.asked == [4096, 2048]  # no noise probe at the anchor: nothing uses it
    at_1024 = evaluate(be, wl, 1024)
    assert at_1024.epochs == 14 and at_1024.runtime.value < at_2048.runtime.value
    rows = epochs_per_batch([], [at_2048, at_4096, at_1024])
    assert [r["batch_size"] for r in rows] == [1024, 2048, 4096]
    note = epochs_note(rows) or ""
    assert "learning rate" in note and "left out one at a time" in note
    assert "start of training" not in note  # the probe's caveat is not this fit's


def test_given_points_fit_a_user_curve(tmp_path: Path) -> None:
    be = backend(tmp_path, FakeProbes())
    opts = SuggestOptions(model="fcn", epochs=10, at_batch=256, epochs_at=((2048, 20),))
    wl = workload_info(opts)
    assert wl.known_epochs()[0] == {256: 10.0, 2048: 20.0}
    ev = evaluate(be, wl, 1024)
    b_noise = ev.estimate["epochs_model"]["b_noise"]
    assert b_noise == pytest.approx(1536.0, rel=0.01)  # 10 (1 + 256/B) x 2 = 10 (1 + 2048/B)
    assert ev.epochs == round(10 * epochs_ratio(1024, 256, 1536.0))
    assert ev.estimate["epochs_model"]["source"] == "predicted"


def test_epochs_at_is_checked() -> None:
    with pytest.raises(AdvisorError, match="more than once"):
        SuggestOptions(model="fcn", epochs=10, at_batch=256, epochs_at=((256, 12),))
    with pytest.raises(AdvisorError, match="contradicts --epochs-at"):
        SuggestOptions(model="fcn", epochs=10, epochs_at=((256, 12),))
    for bad in [((256, 0),), (256, 13), ("256=13",), ((256, 13.5),)]:
        with pytest.raises(AdvisorError, match="positive whole numbers"):
            SuggestOptions(model="fcn", epochs_at=bad)  # type: ignore[arg-type]
    ok = SuggestOptions(model="fcn", epochs_at=[[2048, 16], [256, 13]])  # as JSON gives them
    assert ok.epochs_at == ((256, 13), (2048, 16))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--epochs-at", "256"], "is not B=N"),
        (["--epochs-at", "256=0"], "is not B=N"),
        (["--epochs", "5", "--epochs-at", "256=13"], "contradicts --epochs-at"),
    ],
)
def test_cli_epochs_at_errors_are_one_line(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from advisor.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["suggest", "--model", "fcn", *args])
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert says in out + err and "Traceback" not in out + err


def test_user_anchor_and_single_epochs(tmp_path: Path) -> None:
    be = backend(tmp_path, FakeProbes())
    anchored = workload_info(SuggestOptions(model="fcn", epochs=20, at_batch=512))
    ev = evaluate(be, anchored, 2048)
    assert ev.epochs == math.ceil(20 * epochs_ratio(2048, 512, 1000.0))
    assert "--epochs 20 --at-batch 512" in ev.estimate["epochs_model"]["basis"]
    note = epochs_note(epochs_per_batch([], [ev])) or ""
    assert "start of training" in note and "--epochs-at" in note  # its bias, and the remedy
    assert "left out one at a time" not in note  # the fit's check is not this prediction's
    flat = workload_info(SuggestOptions(model="fcn", epochs=20))
    assert evaluate(be, flat, 2048).epochs == 20
    assert evaluate(be, flat, 2048).estimate["epochs_model"]["source"] == "given"


def test_one_known_point_without_a_noise_scale_stays_unchanged(tmp_path: Path) -> None:
    be = backend(tmp_path, FakeProbes(with_noise=False))
    wl = workload_info(SuggestOptions(model="simple-cnn", epochs=15, at_batch=256))
    assert evaluate(be, wl, 256).epochs == 15
    other = evaluate(be, wl, 768)  # the anchor, said to be unchanged
    assert other.epochs == 15
    assert "no gradient noise scale" in other.estimate["epochs_model"]["basis"]
    published = workload_info(SuggestOptions(model="simple-cnn"))  # fitted, no probe needed
    assert evaluate(be, published, 2048).epochs == 29  # 28.7 by the fit; 28 published


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


@pytest.mark.slow
def test_cli_epochs_at_fits_the_run_lengths_of_real_probes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`advisor suggest --epochs-at` end to end on this machine's real probes (2 batch sizes)."""
    import json

    from advisor.cli.main import main

    space = tmp_path / "space.yaml"
    space.write_text("workload: fcn\nbatch_sizes: [256, 512]\n")
    args = "--budget 5 --epochs-at 256=10 --epochs-at 2048=30 --trials 2 --probe-iterations 3"
    main(["suggest", "--model", "fcn", "--space", str(space), *args.split(), "--json"])
    report = json.loads(capsys.readouterr().out)
    rows = {r["batch_size"]: r for r in report["epochs_per_batch"]}
    assert rows[256]["source"] == "fitted" and rows[256]["known"] == 10
    fit = fit_noise_scale({256: 10, 2048: 30})
    assert rows[512]["source"] == "predicted"
    assert rows[512]["epochs"] == round(fit.epochs_at(512)[0]) == 13  # B_noise 640
    rec = report["recommended"]
    assert rec["epochs"] == rows[rec["batch_size"]]["epochs"]  # the advice uses the model
    from rich.console import Console

    from advisor.report.render import render

    console = Console(width=200, record=True)
    render(report, console)
    line = next(x for x in console.export_text().splitlines() if x.startswith("recommended:"))
    assert f"batch {rec['batch_size']}, {rec['epochs']} epochs" in line
    assert any("left out one at a time" in n for n in report["notes"])
