"""Issue #47: a TPU that the model says wins is said in the report, never recommended."""

from __future__ import annotations

from types import SimpleNamespace

from advisor.report.build import predicted_only_notes

TPU = {"machine": "compute-engine:v3-8", "batch_size": 1024, "runtime_s": 60.0, "cost_usd": 0.1}


def test_a_faster_tpu_is_said_with_its_reason_not_to_pick_it() -> None:
    outcome = SimpleNamespace(predicted_only=[TPU])
    fast = SimpleNamespace(runtime=120.0, cost=0.5)
    cheap = SimpleNamespace(runtime=600.0, cost=0.05)
    notes = predicted_only_notes(outcome, fast, cheap)  # type: ignore[arg-type]
    assert len(notes) == 1
    assert "faster on a TPU: compute-engine:v3-8 at batch 1024" in notes[0]
    assert "cannot train or probe on TPUs" in notes[0]


def test_nothing_is_said_when_no_tpu_wins() -> None:
    outcome = SimpleNamespace(predicted_only=[TPU])
    best = SimpleNamespace(runtime=30.0, cost=0.01)
    assert predicted_only_notes(outcome, best, best) == []  # type: ignore[arg-type]
    assert predicted_only_notes(SimpleNamespace(predicted_only=[]), best, best) == []  # type: ignore[arg-type]
