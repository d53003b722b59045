"""Validation before submission: the metric, numeric categoricals and integer log ranges are
expressed the same way for every service (or refused with the fix); --epochs reaches the
model's learning-rate schedule."""

from __future__ import annotations

import math
from typing import Any

import pytest
from advisor.providers import backends
from advisor.search_spaces.space import CategoricalParam, FloatParam, IntParam
from click.testing import CliRunner

from advisor.cli.main import cli
from advisor.errors import AdvisorError
from advisor.train.entry import parse_args

MACHINE = {"sagemaker": "ml.g5.2xlarge", "vertex": "g2-standard-8",
           "azureml": "Standard_NV36ads_A10_v5"}  # fmt: skip
OPTIONS: dict[str, dict[str, Any]] = {"sagemaker": {}, "vertex": {"project": "p1"},
                                      "azureml": {"compute": "c"}}  # fmt: skip


def test_a_metric_advisor_train_never_reports_is_refused() -> None:
    result = CliRunner().invoke(
        cli, ["submit", "--provider", "sagemaker", "--instance", "ml.g5.2xlarge", "--model", "fcn",
              "--batch-size", "512", "--metric", "f1_score", "--dry-run"],
    )  # fmt: skip
    assert isinstance(result.exception, AdvisorError)  # main() prints it in one line, exit 2
    message = str(result.exception)
    assert "does not report 'f1_score'" in message and "--metric val_accuracy" in message


def test_a_loss_maximised_is_refused_with_the_goal_to_use() -> None:
    from advisor.tuning.jobs import check_metric

    check_metric("val_loss", "minimize")
    with pytest.raises(AdvisorError, match="pass --goal minimize"):
        check_metric("val_loss", "maximize")
    # step_s is reported (for the calibration ledger) but is not a tuning objective.
    check_metric("val_accuracy", "maximize")
    with pytest.raises(AdvisorError, match="not as a tuning objective") as info:
        check_metric("step_s", "minimize")
    assert "--metric val_accuracy" in str(info.value) and "step_s or" not in str(info.value)


def test_numeric_choices_reach_the_trial_as_numbers_from_every_service() -> None:
    # What each service puts on the command line / in hyperparameters.json for choice 64:
    # SageMaker "64" (strings), Vertex a discrete double "64.0", Azure "64".
    for sent in ("64", "64.0"):
        _, hps = parse_args(["--model", "fcn", f"--width={sent}", "--lr", "0.05"])
        assert hps["width"] == 64 and isinstance(hps["width"], int)
        assert hps["lr"] == 0.05 and isinstance(hps["lr"], float)
    _, hps = parse_args(["--model", "fcn", "--weight-decay", "1e-4", "--scale", "1e3"])
    assert hps == {"weight_decay": 1e-4, "scale": 1000.0}


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["sagemaker", "vertex", "azureml"])
def test_numeric_categoricals_and_integer_log_ranges(provider: str, make_spec: Any) -> None:
    params = (CategoricalParam("width", (32, 64, 128)), IntParam("units", 16, 1024, log=True),
              IntParam("layers", 1, 8, log=True), FloatParam("momentum", 0.5, 0.99))  # fmt: skip
    backend = backends.get_backend(provider, **OPTIONS[provider])
    spec = make_spec(instance_type=MACHINE[provider], hyperparameters=params, output=None,
                     accelerator="L4", strategy="random")  # fmt: skip
    request = backend.build_request(spec)
    if provider == "sagemaker":
        ranges = request["HyperParameterTuningJobConfig"]["ParameterRanges"]
        assert ranges["CategoricalParameterRanges"][0]["Values"] == ["32", "64", "128"]
        ints = {r["Name"]: r for r in ranges["IntegerParameterRanges"]}
        assert {r["ScalingType"] for r in ints.values()} == {"Logarithmic"}
        assert (ints["units"]["MinValue"], ints["units"]["MaxValue"]) == ("16", "1024")
    elif provider == "vertex":
        specs = {p["parameterId"]: p for p in request["studySpec"]["parameters"]}
        assert specs["width"]["discreteValueSpec"]["values"] == [32.0, 64.0, 128.0]
        for name in ("units", "layers"):
            assert specs[name]["scaleType"] == 2 and "integerValueSpec" in specs[name]  # log
    else:
        space = request["properties"]["searchSpace"]
        assert space["width"] == ["choice", [[32, 64, 128]]]
        assert space["units"][0] == space["layers"][0] == "qloguniform"
        assert space["units"][1][:2] == pytest.approx([math.log(16), math.log(1024)])
        with pytest.raises(AdvisorError, match=r"\['units', 'layers'\].*--strategy random"):
            backend.build_request(make_spec(instance_type=MACHINE[provider],
                                            hyperparameters=params, strategy="bayesian"))  # fmt: skip


@pytest.mark.slow
def test_epochs_reach_the_learning_rate_schedule() -> None:
    from advisor.probes.torch_loop import build_setup

    from advisor.train.entry import _epochs_arg

    assert _epochs_arg("fcn", 3) == {"epochs": 3}
    setup, _, _ = build_setup("fcn", 32, 64, 16, hyperparameters=_epochs_arg("fcn", 3))
    assert setup.scheduler.T_max == 3


def test_imported_trials_the_ledger_cannot_use_are_counted_not_recorded() -> None:
    from advisor.providers.catalog import load
    from advisor.providers.tuning import TrialResult

    from advisor.tuning.calibration import TrialLedger

    catalog = load()
    multi = next(r for r in catalog.instances if r.accelerator_count > 1)
    single = catalog.get("sagemaker:ml.g5.2xlarge")

    def trial(status: str, step_s: float | None) -> TrialResult:
        return TrialResult("j", status, {}, "val_accuracy", 0.9, step_s=step_s)  # type: ignore[arg-type]

    ledger = TrialLedger(study=None, storage=None, catalog=catalog)  # type: ignore[arg-type]
    ledger(trial("completed", None), single, 512)
    ledger(trial("completed", 0.01), multi, 512)  # a data-parallel step: not this measurement
    ledger(trial("failed", 0.01), single, 512)
    ledger(trial("completed", 0.01), None, 512)
    ledger(trial("completed", 0.01), single, 512)  # no storage to find the local probe in
    assert ledger.recorded == 0
    assert dict(ledger.skipped) == {
        "no measured step time": 1, "several GPUs": 1, "failed": 1,
        "machine not in the catalog": 1, "study storage unknown": 1,
    }  # fmt: skip
