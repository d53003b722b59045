"""Issue #28: fix texts that said the wrong thing, and `submit --dry-run` without the cloud
SDKs. Missing packages are made missing for real in a child process (an import hook that
refuses them, as an environment without the extra would)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import SDKS, Replay, error_lines, one_line_error, run, without


def _child(args: list[str], env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "advisor.cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env, "ADVISOR_HOME": str(home)},
        timeout=300,
    )


def _error(result: subprocess.CompletedProcess[str]) -> str:
    lines = error_lines(result.stderr)
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    return lines[0]


def test_a_host_that_is_not_an_address_here_says_to_pass_another_host(replay: Replay) -> None:
    assert run(*replay.args("--budget", "5000")).code == 0  # a study file to serve
    line = one_line_error(run("dashboard", "--host", "999.1.1.1"))
    assert "--host 127.0.0.1" in line and "--port" not in line  # before: "pass another --port"


def test_a_missing_user_module_is_one_fix_not_two(tmp_path: Path) -> None:
    line = one_line_error(run("suggest", "--model", "nosuchmod:build", "--n-train", "100"))
    assert line.count("To fix:") == 1  # before: a ValueError traceback (or "To fix: ... To fix:")
    assert "No module named 'nosuchmod'" in line and "PYTHONPATH" in line


def test_keras_without_tensorflow_says_to_install_it(tmp_path: Path) -> None:
    env = without(tmp_path / "site", ("tensorflow", "keras", "tf_keras"))
    for args in (
        ["suggest", "--model", "fcn", "--framework", "keras", "--budget", "5"],
        ["probe", "--model", "fcn", "--framework", "keras", "--batch-size", "8"],
    ):
        line = _error(_child(args, env, tmp_path / "home"))
        assert "needs TensorFlow (Keras), which is not installed" in line
        assert "pip install 'advisor[tensorflow]'" in line and "PYTHONPATH" not in line


def test_catalog_refresh_without_boto3_says_to_install_it_not_to_check_the_network(
    tmp_path: Path,
) -> None:
    env = without(tmp_path / "site", SDKS)
    line = _error(_child(["catalog", "refresh", "--provider", "aws"], env, tmp_path / "home"))
    assert "needs the 'boto3' package" in line and "pip install 'advisor[aws]'" in line
    assert "network" not in line


def test_submit_dry_run_works_without_the_cloud_sdks(tmp_path: Path) -> None:
    env = without(tmp_path / "site", SDKS)
    machines = {
        "sagemaker": ["--instance", "ml.p3.2xlarge"],
        "vertex": ["--instance", "n1-standard-8", "--accelerator", "T4"],
        "azureml": ["--instance", "Standard_NC6s_v3"],
    }
    for provider, machine in machines.items():
        result = _child(
            ["submit", "--provider", provider, *machine, "--model", "fcn", "--batch-size", "256",
             "--dry-run"],
            env,
            tmp_path / "home",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr  # before: exit 2, "needs the ... package"
        plan = json.loads(result.stdout)["plan"]
        assert plan["fixed"]["batch_size"] == 256 and plan["workload"] == "fcn"
        assert "The exact request is built by that SDK" in result.stderr
