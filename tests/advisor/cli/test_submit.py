"""`advisor submit --dry-run` from a study for every provider, errors, and secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("provider", "machine", "extra", "needle"),
    [
        ("sagemaker", "sagemaker:ml.p3.2xlarge", [], '"InstanceType": "ml.p3.2xlarge"'),
        (
            "vertex",
            "vertex:n1-standard-8+1xT4",
            ["--project", "p1"],
            '"machineType": "n1-standard-8"',
        ),
        (
            "azureml",
            "azure-ml:NC6s_v3",
            ["--compute", "gpu"],
            '"advisor:vm_size": "Standard_NC6s_v3"',
        ),
    ],
)
def test_dry_run_from_a_study(
    storage: str, study_factory: Any, provider: str, machine: str, extra: list[str], needle: str,
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
) -> None:  # fmt: skip
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "sEcReT-aws")
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "sEcReT-azure")
    study_factory(storage, machine=machine)
    out = tmp_path / "req.json"
    result = CliRunner().invoke(
        cli, ["submit", "--provider", provider, "--study", "fcn-study", "--storage", storage,
              "--image", "img:1", "--dry-run", *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert needle in result.output
    request = json.loads(result.stdout)
    assert "lr" in json.dumps(request) and "512" in json.dumps(request)
    assert "sEcReT" not in result.output
    written = CliRunner().invoke(
        cli, ["submit", "--provider", provider, "--study", "fcn-study", "--storage", storage,
              "--image", "img:1", "--dry-run", "--out", str(out), *extra],
    )  # fmt: skip
    assert written.exit_code == 0
    assert json.loads(out.read_text()).keys() == request.keys()


def test_user_errors_are_one_line_with_exit_2(storage: str, study_factory: Any) -> None:
    study_factory(storage, machine="vertex:n1-standard-8+1xT4")
    env = {**os.environ, "ADVISOR_HOME": os.environ["ADVISOR_HOME"]}
    proc = subprocess.run(
        [sys.executable, "-m", "advisor.cli.main", "submit", "--provider", "sagemaker",
         "--study", "fcn-study", "--storage", storage, "--dry-run"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "--provider vertex" in proc.stderr


def test_missing_extra_names_the_pip_command(tmp_path: Any) -> None:
    # A real submission needs the SDK (a dry run does not since issue #28: it prints the plan).
    code = (
        "import sys; sys.modules['boto3'] = None; sys.modules['botocore'] = None\n"
        "from advisor.cli.main import main\n"
        "main(['submit', '--provider', 'sagemaker', '--instance', 'ml.p3.2xlarge',"
        " '--model', 'fcn', '--batch-size', '512',"
        " '--image', '123456789012.dkr.ecr.us-east-1.amazonaws.com/advisor:1',"
        " '--role', 'arn:aws:iam::123456789012:role/advisor'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "ADVISOR_HOME": str(tmp_path)})  # fmt: skip
    assert proc.returncode == 2
    assert "pip install 'advisor[aws]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_instance_without_model_is_refused() -> None:
    result = CliRunner().invoke(
        cli, ["submit", "--provider", "vertex", "--instance", "n1-standard-8", "--dry-run"]
    )
    assert result.exit_code != 0
    assert "--model M --batch-size B" in str(result.exception)


def test_submit_to_another_cloud_uses_its_best_trial(storage: str, study_factory: Any) -> None:
    import optuna

    study = study_factory(  # the overall recommendation is on AWS
        storage, machine="ec2:p3.2xlarge", other_machines=("vertex:n1-standard-8+1xT4",)
    )
    first = study.trials[0]
    study.add_trial(
        optuna.trial.create_trial(
            params={**first.params, "machine": "vertex:n1-standard-8+1xT4"},
            distributions=first.distributions,
            values=[900.0],  # slower than the ec2 trial, but the best on Vertex
            user_attrs=first.user_attrs,
        )
    )
    result = CliRunner().invoke(
        cli, ["submit", "--provider", "vertex", "--study", "fcn-study", "--storage", storage,
              "--image", "img:1", "--project", "p1", "--dry-run"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "recommends ec2:p3.2xlarge, which vertex does not run" in result.output
    assert '"machineType": "n1-standard-8"' in result.output
