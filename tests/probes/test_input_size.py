"""Issue #27: a probe measures its inputs' bytes per sample from the first training batch, so
a user's own model no longer gets 0 bytes (no host-to-device copy) without a word; a probe
that lacks the measurement says so in `advisor predict`."""

from __future__ import annotations

import dataclasses
import os

import pytest
from advisor.probes.result import ProbeRequest, ProbeResult
from repo_paths import HELPERS

from advisor.evaluation.predict_api import prediction_notes
from advisor.prediction.timing.signature import signature


def _probe(workload: str, fingerprint: dict[str, object]) -> ProbeResult:
    return ProbeResult(
        workload=workload, framework="torch", batch_size=32, device="cpu", threads=1,
        init_s=1.0, iteration_s=(0.05, 0.01, 0.01, 0.01), validation_s=(0.02, 0.01),
        validation_samples_measured=128, n_train=512, n_val=128, wall_s=2.0,
        fingerprint=fingerprint,
    )  # fmt: skip


def test_the_model_reads_the_measured_size_and_predict_names_a_missing_one() -> None:
    measured = _probe("user_models:build", {"input_bytes_per_sample": 32.0})
    assert signature(measured).input_bytes_per_sample == 32.0
    assert not any(
        "Input size unknown" in n for n in prediction_notes(measured.workload, measured, [])
    )
    unmeasured = _probe("user_models:build", {})
    assert signature(unmeasured).input_bytes_per_sample == 0.0  # what the model falls back on
    (note,) = [n for n in prediction_notes(unmeasured.workload, unmeasured, []) if "Input" in n]
    assert "counts 0 bytes" in note
    builtin = dataclasses.replace(unmeasured, workload="fcn")  # a built-in has its shape
    assert not prediction_notes("fcn", builtin, [])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        ("user_models:build", 8 * 4),  # 8 float32 features per sample
        ("lstm", 35 * 8),  # 35 int64 token ids, not 35 fp32 values as the shape would say
    ],
)
def test_a_probe_measures_the_first_batch_s_input_bytes(
    workload: str, expected: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.probes.runner import run_probe

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")])
    )
    result = run_probe(ProbeRequest(workload=workload, batch_size=16, iterations=3, threads=1))
    assert result.ok, result.error
    assert result.fingerprint["input_bytes_per_sample"] == expected
