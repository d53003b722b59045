"""The provider-neutral spec, machine mapping, the registry and building a spec from a study."""

from __future__ import annotations

import re
from typing import Any

import pytest
from advisor.providers import backends
from advisor.providers.catalog import MachineKey
from advisor.providers.tuning import METRIC_LINE, job_name, metric_regex
from advisor.search_spaces.space import FloatParam

from advisor.errors import AdvisorError
from advisor.tuning.jobs import spec_from_study


def test_spec_rejects_bad_values_with_the_values_in_the_message(make_spec: Any) -> None:
    with pytest.raises(ValueError, match="parallel_trials=20, max_trials=12"):
        make_spec(parallel_trials=20)
    with pytest.raises(ValueError, match=r"\['lr'\] are both tuned and fixed"):
        make_spec(fixed={"lr": 0.1})
    with pytest.raises(ValueError, match="accelerator_count=0"):
        make_spec(accelerator="V100", accelerator_count=0)
    with pytest.raises(ValueError, match="strategy must be one of"):
        make_spec(strategy="bohb")


def test_entry_args_carry_fixed_values_and_metric(make_spec: Any) -> None:
    args = make_spec().entry_args()
    assert args == ["--model", "fcn", "--batch-size", "512", "--epochs", "14",
                    "--metric", "val_accuracy", "--device", "cuda"]  # fmt: skip
    assert make_spec(accelerator=None, accelerator_count=0).entry_args()[-2:] == ["--device", "cpu"]


def test_metric_regex_reads_the_printed_line() -> None:
    line = METRIC_LINE.format(name="val_accuracy", value=0.912345678)
    match = re.search(metric_regex("val_accuracy"), f"[epoch 3] {line}\n")
    assert match is not None and float(match.group(1)) == pytest.approx(0.912346)
    assert re.search(metric_regex("val_loss"), line) is None


def test_job_names_fit_sagemaker_limits() -> None:
    name = job_name("a-very-long_workload.name/with junk", "1122-214630")
    assert len(name) <= 32
    assert re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,31}", name)


def test_machine_keys() -> None:
    key = MachineKey("sagemaker:ml.p3.2xlarge:spot")
    assert (key.service, key.instance_type, key.spot) == ("sagemaker", "ml.p3.2xlarge", True)
    assert key.base == "sagemaker:ml.p3.2xlarge" and not key.base.spot
    assert MachineKey.of(key.base, spot=True) == key and key == "sagemaker:ml.p3.2xlarge:spot"
    assert MachineKey.named("ml.g5.xlarge", "sagemaker") == "sagemaker:ml.g5.xlarge"
    assert MachineKey.named("ec2:g5.xlarge", "sagemaker") == "ec2:g5.xlarge"
    for bad in ("p3.2xlarge", "ec2:", ":p3", "a:b:c", ""):
        with pytest.raises(AdvisorError, match="not a machine key"):
            MachineKey(bad)


def test_registry_lists_valid_names_on_unknown() -> None:
    with pytest.raises(AdvisorError, match="azureml, sagemaker, vertex"):
        backends.backend_class("sagemkr")


def test_sagemaker_maps_ec2_types_and_refuses_other_clouds() -> None:
    cls = backends.backend_class("sagemaker")
    assert cls.machine_type("ec2:p3.2xlarge", None) == "ml.p3.2xlarge"
    assert cls.machine_type("sagemaker:ml.g5.xlarge:spot", None) == "ml.g5.xlarge"
    with pytest.raises(AdvisorError, match="--provider vertex"):
        cls.machine_type("vertex:n1-standard-8", None)
    with pytest.raises(AdvisorError, match="--provider sagemaker"):
        backends.backend_class("azureml").machine_type("ec2:p3.2xlarge", None)


def test_spec_from_study_fixes_machine_batch_and_runtime_params(
    storage: str, study_factory: Any
) -> None:
    params = (
        FloatParam("lr", 0.01, 0.3, log=True),
        FloatParam("dropout", 0.0, 0.5, affects_runtime=True),
    )
    study = study_factory(storage, machine="sagemaker:ml.p3.2xlarge:spot", params=params)
    spec = spec_from_study(study, "sagemaker", image="img", catalog=_NoCatalog())
    assert spec.instance_type == "ml.p3.2xlarge"
    assert spec.spot is True
    assert [p.name for p in spec.hyperparameters] == ["lr"]
    assert spec.fixed == {"model": "fcn", "batch_size": 512, "epochs": 14, "dropout": 0.2}
    assert spec.price_per_hour == 3.825
    assert spec.machine_key == "sagemaker:ml.p3.2xlarge:spot"


def test_spec_from_study_refuses_a_local_recommendation(storage: str, study_factory: Any) -> None:
    study = study_factory(storage, machine="local:local")
    with pytest.raises(AdvisorError, match="--instance"):
        spec_from_study(study, "vertex", image="img", catalog=_NoCatalog())


def test_spec_from_study_takes_accelerator_from_the_catalog(
    storage: str, study_factory: Any
) -> None:
    from advisor.providers.catalog._types import InstanceType

    row = InstanceType("gcp", "vertex", "n1-standard-8+V100x1", 8, 30.0, "V100", 1, 16.0,
                       2.86, 0.9, "2026-11-01", "test")  # fmt: skip
    study = study_factory(storage, machine="vertex:n1-standard-8+V100x1")
    spec = spec_from_study(study, "vertex", image="img", catalog=_OneRow(row))
    assert (spec.instance_type, spec.accelerator, spec.accelerator_count) == (
        "n1-standard-8",
        "V100",
        1,
    )


class _NoCatalog:
    def get(self, key: str) -> Any:
        raise AdvisorError(f"Unknown machine '{key}'.")


class _OneRow:
    def __init__(self, row: Any) -> None:
        self.row = row

    def get(self, key: str) -> Any:
        if key == self.row.key:
            return self.row
        raise AdvisorError(f"Unknown machine '{key}'.")
