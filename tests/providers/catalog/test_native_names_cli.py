"""The commands that take a machine accept the providers' own spellings (issue #15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from advisor.providers.catalog import load
from advisor.search_spaces.space import MachineFilter
from click.testing import CliRunner
from perf_fixtures import probe_file

from advisor.cli.main import cli
from advisor.evaluation.candidates import matches


def test_predict_takes_native_names(tmp_path: Path) -> None:
    names = "azure-vm:Standard_NC4as_T4_v3,ml.g5.xlarge,compute-engine:n1-standard-8+T4"
    args = ["predict", "-m", "fcn", "-b", "512", "-i", names, "--snapshot", "2026-11"]
    result = CliRunner().invoke(
        cli, [*args, "--epochs", "14", "--probe", str(probe_file(tmp_path)), "--json"]
    )
    assert result.exit_code == 0, result.output
    machines = sorted(r["machine"] for r in json.loads(result.stdout)["machines"])
    assert machines == [
        "azure-vm:NC4as_T4_v3",
        "compute-engine:n1-standard-8+1xT4",
        "sagemaker:ml.g5.xlarge",
    ]


def test_predict_typo_is_a_did_you_mean_error(tmp_path: Path) -> None:
    args = ["predict", "-m", "fcn", "-b", "512", "-i", "Standard_NC4as_T4_v4"]
    result = CliRunner().invoke(cli, [*args, "--probe", str(probe_file(tmp_path))])
    assert "Did you mean" in str(result.exception)


@pytest.mark.parametrize(
    ("provider", "native", "extra", "needles"),
    [
        (
            "vertex",
            ["n1-standard-8", "--accelerator", "T4"],
            ["--project", "p1"],
            ['"machineType": "n1-standard-8"', '"acceleratorCount": 1'],
        ),
        ("azureml", ["Standard_NC6s_v3"], ["--compute", "gpu"], ['"Standard_NC6s_v3"']),
        ("sagemaker", ["p3.2xlarge"], [], ['"InstanceType": "ml.p3.2xlarge"']),
    ],
)
def test_submit_takes_native_names(
    provider: str, native: list[str], extra: list[str], needles: list[str]
) -> None:
    args = ["submit", "--provider", provider, "--instance", *native, "--model", "fcn"]
    args += ["--batch-size", "512", "--image", "img:1", "--dry-run", *extra]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    for needle in needles:
        assert needle in result.stdout, result.stdout


def test_submit_accelerator_that_the_vm_is_not_sold_with() -> None:
    args = ["submit", "--provider", "vertex", "--instance", "n1-standard-8", "--accelerator"]
    args += ["L4", "--model", "fcn", "--batch-size", "512", "--project", "p1", "--dry-run"]
    result = CliRunner().invoke(cli, args)
    assert "Unknown instance type 'n1-standard-8' with accelerator 'L4'" in str(result.exception)


def test_space_instance_types_match_native_names() -> None:
    cat = load("2026-11")
    names = ("Standard_NC6s_v3", "ml.p3.2xlarge", "n1-standard-8", "not-a-machine")
    keys = cat.matching_keys(names)
    wanted = MachineFilter(instance_types=keys)
    chosen = {r.key for r in cat.instances if matches(r, wanted)}
    assert chosen == {
        "azure-vm:NC6s_v3",
        "azure-ml:NC6s_v3",
        "sagemaker:ml.p3.2xlarge",
        "compute-engine:n1-standard-8+1xT4",
        "compute-engine:n1-standard-8+1xV100",
        "compute-engine:n1-standard-8+1xP100",
        "vertex:n1-standard-8+1xT4",
        "vertex:n1-standard-8+1xV100",
        "vertex:n1-standard-8+1xP100",
    }
    assert "not-a-machine" in keys  # unknown names stay (and match nothing), as before


def test_a_spaces_native_instance_types_become_candidates(tmp_path: Path) -> None:
    from advisor.search_spaces.space import JointSpace

    from advisor.evaluation.local import LocalBackend

    backend = LocalBackend(f"sqlite:///{tmp_path / 's.db'}", catalog=load("2026-11"))
    wanted = MachineFilter(instance_types=("Standard_NC6s_v3",), include_local=False)
    found = {(c.instance.key, c.spot) for c in backend.candidates(JointSpace("fcn", wanted))}
    assert found == {
        ("azure-vm:NC6s_v3", False),
        ("azure-vm:NC6s_v3", True),
        ("azure-ml:NC6s_v3", False),
        ("azure-ml:NC6s_v3", True),
    }
