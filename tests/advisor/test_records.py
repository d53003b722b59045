"""The trial record owns the stored attribute format: round trips through a real storage, and
old studies (the keys as stored so far) still load."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import optuna
import pytest
from advisor.probes.result import PhaseTimes
from optuna.distributions import CategoricalDistribution, FloatDistribution

from advisor import records
from advisor.intervals import Interval
from advisor.records import ManagedRun, TrialRecord

PHASES = PhaseTimes(
    init=Interval(2.0, 1.9, 2.1),
    t1=Interval(0.5, 0.45, 0.55),
    t2=Interval(0.1, 0.09, 0.12),
    v1=Interval(1.0, 0.95, 1.05),
    v2=Interval(0.8, 0.76, 0.84),
    source="modelled",
    note="from a test",
)

EVALUATED = TrialRecord(
    machine="ec2:p3.2xlarge:spot",
    batch_size=512,
    source="modelled",
    price_per_hour=0.918,
    spot=True,
    epochs=14,
    runtime=Interval(660.0, 500.0, 845.0),
    cost=Interval(0.1683, 0.1275, 0.2155),
    instance={"provider": "aws", "service": "ec2", "catalog_snapshot": "2026-11-01"},
    probe_seconds=12.5,
    probe_charged_usd=0.0032,
    estimate={"epochs": 14, "formula": "iteration, with validation"},
    phases=PHASES,
    probe={"workload": "fcn", "batch_size": 512, "warnings": []},
    feasible=True,
)

FAILED = TrialRecord(
    machine="local:local",
    batch_size=8192,
    source="measured",
    price_per_hour=0.0,
    spot=False,
    epochs=10,
    runtime=None,
    cost=None,
    probe_seconds=3.0,
    error="probe oom: CUDA out of memory",
)

MANAGED = TrialRecord(
    machine="sagemaker:ml.p3.2xlarge",
    batch_size=512,
    source="managed",
    price_per_hour=3.825,
    spot=False,
    epochs=14,
    runtime=Interval.exact(610.0),
    cost=Interval.exact(610.0 * 3.825 / 3600),
    managed=ManagedRun(
        provider="sagemaker",
        tuning_job="advisor-fcn-0001",
        job_name="advisor-fcn-0001-003-abc",
        metric_name="val_accuracy",
        metric=0.91,
        status="completed",
        instance_type="ml.p3.2xlarge",
        billable_s=640.0,
    ),
)

DISTS = {
    "machine": CategoricalDistribution(
        ("ec2:p3.2xlarge:spot", "local:local", "sagemaker:ml.p3.2xlarge")
    ),
    "batch_size": CategoricalDistribution((512, 8192)),
    "lr": FloatDistribution(1e-3, 1.0, log=True),
}


def _stored(tmp_path: Path, rec: TrialRecord) -> optuna.trial.FrozenTrial:
    """Write ``rec`` as a trial into a SQLite storage and read it back from a fresh handle."""
    url = f"sqlite:///{tmp_path / 'records.db'}"
    study = optuna.create_study(study_name="records", storage=url)
    state = optuna.trial.TrialState.COMPLETE if rec.ok else optuna.trial.TrialState.FAIL
    study.add_trial(
        optuna.trial.create_trial(
            params={"machine": rec.machine, "batch_size": rec.batch_size, "lr": 0.1},
            distributions=DISTS,
            value=rec.runtime.value if rec.ok and rec.runtime else None,
            state=state,
            user_attrs=rec.to_attrs(),
        )
    )
    (trial,) = optuna.load_study(study_name="records", storage=url).get_trials()
    return trial


@pytest.mark.parametrize(
    "rec", [EVALUATED, FAILED, MANAGED], ids=["evaluated", "failed", "managed"]
)
def test_record_round_trips_through_sqlite_storage(tmp_path: Path, rec: TrialRecord) -> None:
    assert TrialRecord.from_trial(_stored(tmp_path, rec)) == rec


def test_stored_keys_are_the_format() -> None:
    """The keys written are exactly the documented ones; a rename on one side fails here and in
    the round trip above (the reader would not find the renamed key)."""
    assert set(EVALUATED.to_attrs()) == {*records.EVALUATED_KEYS, "feasible"}
    assert set(FAILED.to_attrs()) == {*records.EVALUATED_KEYS, "pruned_reason"}
    assert set(MANAGED.to_attrs()) == set(records.MANAGED_KEYS)
    assert records.EVALUATED_KEYS == (
        "source", "price_per_hour", "spot", "instance", "epochs", "probe_cost", "estimate",
        "phases", "probe", "runtime_s", "cost_usd",
    )  # fmt: skip


def test_an_old_study_trial_still_loads() -> None:
    """Attributes exactly as `advisor suggest` stored them before the record module existed."""
    ua: dict[str, Any] = {
        "source": "measured",
        "price_per_hour": 0.0,
        "spot": False,
        "instance": {"provider": "local", "catalog_snapshot": "2026-11-01"},
        "epochs": 10,
        "probe_cost": {"seconds": 4.2, "charged_usd": 0.0},
        "estimate": {"epochs": 10},
        "phases": PHASES.to_dict(),
        "probe": None,
        "runtime_s": {"value": 120.0, "low": 110.0, "high": 131.0},
        "cost_usd": {"value": 0.0, "low": 0.0, "high": 0.0},
        "feasible": True,
    }
    rec = TrialRecord.from_attrs("local:local", 256, ua)
    assert rec.runtime == Interval(120.0, 110.0, 131.0)
    assert rec.cost == Interval.exact(0.0)
    assert rec.phases == PHASES
    assert rec.probe_seconds == 4.2 and rec.feasible is True and rec.ok
    assert rec.to_attrs() == ua


def test_a_finished_evaluation_has_runtime_and_cost() -> None:
    with pytest.raises(ValueError, match="both set"):
        TrialRecord("local:local", 256, "measured", 0.0, False, 10, Interval.exact(1.0), None)
    with pytest.raises(ValueError, match="source"):
        TrialRecord("local:local", 256, "guessed", 0.0, False, 10, None, None)
    with pytest.raises(ValueError, match="runtime and a cost"):
        dataclasses.replace(EVALUATED.to_evaluation(), cost=None)


def test_evaluation_round_trip() -> None:
    ev = EVALUATED.to_evaluation()
    assert ev.ok and ev.runtime == EVALUATED.runtime and ev.cost == EVALUATED.cost
    back = TrialRecord.from_evaluation(
        ev, instance=EVALUATED.instance, charged_usd=EVALUATED.probe_charged_usd, feasible=True
    )
    assert back == TrialRecord(**{**EVALUATED.__dict__, "probe": None})
    failed = FAILED.to_evaluation()
    assert not failed.ok and failed.error == FAILED.error


def test_interval_and_phases_from_dict_invert_to_dict() -> None:
    iv = Interval(1.0, 0.5, 2.0)
    assert Interval.from_dict(iv.to_dict()) == iv
    assert Interval.from_dict(3) == Interval.exact(3.0)
    assert PhaseTimes.from_dict(PHASES.to_dict()) == PHASES


def test_managed_helpers(tmp_path: Path) -> None:
    trial = _stored(tmp_path, MANAGED)
    assert records.is_managed(trial) and records.managed_job(trial) == "advisor-fcn-0001-003-abc"
    other = optuna.trial.create_trial(value=1.0, user_attrs=EVALUATED.to_attrs())
    assert not records.is_managed(other) and records.managed_job(other) is None
