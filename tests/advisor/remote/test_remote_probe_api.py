"""``advisor.remote.probe``: which runner a machine gets, the job command, job names."""

from __future__ import annotations

import json
import re

import pytest
from advisor.probes.result import ProbeRequest
from advisor.providers.catalog import load
from advisor.providers.probe_jobs_local import LocalJobRunner
from advisor.providers.sagemaker_probe import SageMakerProbeJobRunner

from advisor.errors import AdvisorError
from advisor.remote.probe import job_name, probe_command, runner_for
from advisor.remote.settings import CloudSettings

SETTINGS = CloudSettings(
    image="reg/advisor:1",
    providers={
        "sagemaker": {"role": "arn:aws:iam::1:role/R", "region": "us-east-1", "output": "s3://b/p"},
        "vertex": {"project": "p1", "location": "europe-west4", "output": "gs://b/p"},
        "azureml": {"subscription": "s", "resource_group": "rg", "workspace": "ws", "compute": "c"},
    },
)


@pytest.mark.parametrize(
    ("machine", "runner", "settings"),
    [
        ("sagemaker:ml.g5.xlarge", "sagemaker", {"role": "arn:aws:iam::1:role/R", "output": "s3://b/p"}),
        ("ec2:g5.xlarge", "sagemaker", {"region": "us-east-1"}),
        ("vertex:g2-standard-8", "vertex", {"project": "p1", "location": "europe-west4", "output": "gs://b/p"}),
        ("compute-engine:g2-standard-8", "vertex", {"project": "p1"}),
        ("azure-ml:NC6s_v3", "azure-ml", {"workspace": "ws", "compute": "c"}),
        ("azure-vm:NC6s_v3", "azure-ml", {"subscription": "s", "resource_group": "rg"}),
    ],
)  # fmt: skip
def test_each_service_gets_its_provider_runner_with_its_settings(
    machine: str, runner: str, settings: dict[str, str]
) -> None:
    row = load().get(machine)
    made = runner_for(row, SETTINGS, poll_s=3.0)
    assert made.name == runner and made.can_run(row) and made.poll_s == 3.0
    for attr, value in settings.items():
        assert getattr(made, attr) == value
    emulated = runner_for(row, SETTINGS, emulate=True)
    assert isinstance(emulated, LocalJobRunner) and emulated.layout == runner
    assert emulated.name == "local"


def test_refusals_are_one_line() -> None:
    catalog = load()
    with pytest.raises(AdvisorError, match="probe it locally with `advisor probe`"):
        runner_for(catalog.get("local"), SETTINGS)
    with pytest.raises(AdvisorError, match=r"Vertex AI probe jobs are not configured.*--project"):
        runner_for(catalog.get("vertex:g2-standard-8"), CloudSettings())
    # emulation needs no settings at all
    assert runner_for(catalog.get("vertex:g2-standard-8"), CloudSettings(), emulate=True)
    assert isinstance(runner_for(catalog.get("ec2:g5.xlarge"), SETTINGS), SageMakerProbeJobRunner)


def test_the_command_carries_the_request_in_pieces_and_azure_its_output() -> None:
    request = ProbeRequest(workload="fcn", batch_size=64, device="auto", iterations=8,
                           hyperparameters={"width": 48}, process_start=123.0)  # fmt: skip
    command = probe_command(request)
    assert command[:4] == ("python", "-m", "advisor.probes.job_entry", "--request")
    sent = json.loads("".join(command[4:]))
    assert "process_start" not in sent  # the job's own start is the one that counts
    assert ProbeRequest(**sent) == ProbeRequest(**{**json.loads(request.to_json()),
                                                  "process_start": None})  # fmt: skip
    azure = probe_command(request, "azure-ml")
    assert azure[-2:] == ("--out", "${{outputs.result}}") and azure[:-2] == command
    assert probe_command(request, "vertex") == command


def test_job_names_suit_every_service() -> None:
    name = job_name("examples.my_torch_model:build" * 3, 2048)
    assert len(name) <= 63 and re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", name)
    assert name.startswith("advisor-probe-examples-my-torch-model")
    assert job_name("fcn", 32) != job_name("fcn", 32)


def test_a_vm_rows_probe_job_is_billed_at_its_managed_service_row() -> None:
    from advisor.providers.catalog import load

    from advisor.remote.probe import job_machine

    catalog = load()
    ec2 = catalog.get("ec2:g5.xlarge")
    row = job_machine(ec2, catalog)
    assert row.key == "sagemaker:ml.g5.xlarge" and row.price(False) != ec2.price(False)
    assert job_machine(catalog.get("compute-engine:g2-standard-8"), catalog).service == "vertex"
    assert job_machine(catalog.get("azure-vm:NC6s_v3"), catalog).key == "azure-ml:NC6s_v3"
    managed = catalog.get("sagemaker:ml.g5.xlarge")
    assert job_machine(managed, catalog) is managed
