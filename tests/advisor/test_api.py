"""The Python API: `advisor.suggest` / `advisor.predict` as functions, exposed lazily."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from dataclasses import replace

import optuna
import pytest
from advisor.search_spaces.loader import default_space
from perf_fixtures import FakeCatalog, gpu_machine, probe, with_synthetic_trace
from replay_tables import small_table

import advisor
from advisor.evaluation.replay import ReplayBackend

# issue #26: a probe made ready for prediction (its operator trace and loader time), so
# no trace is taken here (no torch import)
TRACE = {"data_s": 0.004}


def test_public_names_are_lazy_and_listed() -> None:
    for name in ("suggest", "predict", "SuggestOptions", "plan_job", "submit_job"):
        assert name in advisor.__all__
    code = (
        "import sys, advisor\n"
        "assert 'advisor.study.run' not in sys.modules and 'optuna' not in sys.modules\n"
        "advisor.SuggestOptions\n"
        "assert 'advisor.options' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        advisor.nope  # noqa: B018


def test_tuning_job_functions_plan_and_refuse_through_the_public_names() -> None:
    from advisor.errors import AdvisorError

    spec = advisor.plan_job(
        "sagemaker", instances=["ml.g5.xlarge"], model="fcn", batch_size=256, epochs=3
    )
    assert spec.machine_key == "sagemaker:ml.g5.xlarge" and spec.accelerator == "A10G"
    assert spec.fixed == {"model": "fcn", "batch_size": 256, "epochs": 3}
    tuned = {p.name for p in default_space("fcn").hyperparameters if not p.affects_runtime}
    assert {p.name for p in spec.hyperparameters} == tuned
    # no role given: refused with the fix before anything is sent
    with pytest.raises(AdvisorError, match="execution role"):
        advisor.submit_job(spec, "sagemaker")
    for name in ("job_status", "import_job"):  # the same functions as advisor.tuning.jobs'
        from advisor.tuning import jobs

        assert getattr(advisor, name) is getattr(jobs, name)


def test_suggest_returns_the_report_of_the_cli() -> None:
    report = advisor.suggest(
        model="fcn",
        budget_usd=5.0,
        space=replace(default_space("fcn"), batch_sizes=(256, 512)),
        backend=ReplayBackend(small_table()),
        storage=optuna.storages.InMemoryStorage(),
    )
    assert report["objective"] == "time" and report["workload"] == "fcn"
    rec = report["recommended"]
    assert rec is not None and rec["cost_usd"]["value"] <= 5.0
    assert rec["runtime_s"]["value"] == min(
        r["runtime_s"]["value"]
        for r in report["ranking"]
        if r["feasible"] and r["trial"] is not None
    )


def test_suggest_takes_options_or_fields_not_both() -> None:
    with pytest.raises(TypeError, match="not both"):
        advisor.suggest(advisor.SuggestOptions(model="fcn"), budget_usd=1.0)


def test_predict_is_a_function() -> None:
    p3 = gpu_machine("p3.2xlarge", "V100", 1, 3.06)
    p2 = gpu_machine("p2.xlarge", "K80", 1, 0.9)
    result = advisor.predict(
        "fcn",
        512,
        machines=[p2, p3],
        catalog=FakeCatalog(),
        epochs=5,
        probe=with_synthetic_trace(dataclasses.replace(probe(), fingerprint=dict(TRACE))),
    )
    assert [f.machine.key for f in result.rows] == ["ec2:p3.2xlarge", "ec2:p2.xlarge"]
    doc = result.to_dict()
    assert doc["fastest"] == "ec2:p3.2xlarge" and doc["epochs"] == 5
    with pytest.raises(advisor.AdvisorError, match="not 'fcn'"):
        advisor.predict("fcn", 512, machines=[p3], catalog=FakeCatalog(), probe=probe(workload="x"))
