"""Issue #27: the probe container's entry (``python -m advisor.probes.job_entry``) finds its
output folder with only what each real service provides -- not the local emulation's
variables (``SM_MODEL_DIR``, ``ADVISOR_OPT_ML``, ``ADVISOR_GCS_MOUNT``).

What each service provides, from its own documentation:

- SageMaker sets ``TRAINING_JOB_NAME`` and ``TRAINING_JOB_ARN`` in every training container
  ("How Amazon SageMaker AI Provides Training Information", Environment Variables) and uploads
  ``/opt/ml/model`` as ``model.tar.gz`` (API reference, ModelArtifacts). ``SM_MODEL_DIR`` comes
  from the sagemaker-training toolkit only (its ENVIRONMENT_VARIABLES.md), which the advisor
  image does not install.
- Vertex AI sets ``AIP_MODEL_DIR`` (and ``AIP_CHECKPOINT_DIR``, ``AIP_TENSORBOARD_LOG_DIR``)
  from the CustomJob's ``base_output_directory`` and mounts Cloud Storage at ``/gcs/``;
  ``CLOUD_ML_JOB_ID`` names the job.
- Azure ML replaces ``${{outputs.result}}`` in the command by the folder it uploads (the
  command passes it as ``--out``) and sets ``AZUREML_RUN_ID``.

The fixed paths (``/opt/ml/model``, ``/gcs``) are moved into the test's folder through
``ServicePaths``, a parameter, not a variable the service would have to set.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from advisor.probes.job_entry import EntryError, ServicePaths, main, output_dir
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.providers.probe_jobs import RESULT_FILE

# Variables of the emulation or of toolkits the image lacks: none may be needed.
NOT_FROM_THE_SERVICE = ("SM_", "ADVISOR_OPT_ML", "ADVISOR_GCS_MOUNT")
BASE = {"PATH": os.environ.get("PATH", "/usr/bin"), "HOME": "/root", "LANG": "C.UTF-8"}


def _service(name: str, tmp_path: Path) -> tuple[list[str], dict[str, str], Path]:
    """(extra argv, environment, where the service picks the result up) of ``name``."""
    if name == "sagemaker":
        env = {
            **BASE,
            "TRAINING_JOB_NAME": "advisor-probe-fcn-1",
            "TRAINING_JOB_ARN": "arn:aws:sagemaker:us-east-1:123456789012:training-job/"
            "advisor-probe-fcn-1",
        }
        return [], env, tmp_path / "opt" / "ml" / "model"
    if name == "vertex":
        env = {
            **BASE,
            "AIP_MODEL_DIR": "gs://advisor-probes/job-7/model/",
            "AIP_CHECKPOINT_DIR": "gs://advisor-probes/job-7/checkpoints/",
            "AIP_TENSORBOARD_LOG_DIR": "gs://advisor-probes/job-7/logs/",
            "CLOUD_ML_JOB_ID": "7",
        }
        return [], env, tmp_path / "gcs" / "advisor-probes" / "job-7" / "model"
    folder = tmp_path / "azureml" / "outputs" / "result"  # ${{outputs.result}}, replaced
    return ["--out", str(folder)], {**BASE, "AZUREML_RUN_ID": "run-3"}, folder


def _paths(tmp_path: Path) -> ServicePaths:
    return ServicePaths(
        sagemaker_model=tmp_path / "opt" / "ml" / "model", gcs_mount=tmp_path / "gcs"
    )


@pytest.mark.parametrize("service", ["sagemaker", "vertex", "azure-ml"])
def test_each_service_s_own_environment_names_the_output_folder(
    service: str, tmp_path: Path
) -> None:
    argv, env, expected = _service(service, tmp_path)
    assert not any(k.startswith(NOT_FROM_THE_SERVICE) for k in env)
    out = argv[1] if argv else None
    folder, origin = output_dir(out, env, _paths(tmp_path))
    assert folder == expected, origin


def test_sagemaker_without_the_toolkit_variable_used_to_fail_and_now_finds_opt_ml(
    tmp_path: Path,
) -> None:
    _, env, expected = _service("sagemaker", tmp_path)
    folder, origin = output_dir(None, env, _paths(tmp_path))
    assert folder == expected and "TRAINING_JOB_NAME" in origin
    # outside any service (no job variable, no --out) it still stops with the fix in one line
    with pytest.raises(EntryError, match="no output folder: pass --out DIR"):
        output_dir(None, dict(BASE), _paths(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("service", ["sagemaker", "vertex", "azure-ml"])
def test_the_job_entry_runs_a_real_probe_with_only_the_service_s_environment(
    service: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, env, expected = _service(service, tmp_path)
    request = ProbeRequest(
        workload="fcn", batch_size=8, iterations=3, threads=1, device="auto", timeout_s=120.0
    )
    code = main(["--request", request.to_json(), *argv], env=env, paths=_paths(tmp_path))
    log = capsys.readouterr().out
    assert code == 0, log
    result_file = expected / RESULT_FILE
    assert result_file.is_file(), log
    result = ProbeResult.from_dict(json.loads(result_file.read_text()))
    assert result.ok and result.workload == "fcn" and len(result.iteration_s) == 3
    layout = {"sagemaker": "sagemaker", "vertex": "vertex", "azure-ml": "azure-ml"}[service]
    assert result.fingerprint["remote_job"]["layout"] == layout
    assert f"out={expected}" in log
