"""``advisor.train`` started as each service starts it, in a subprocess: the device it chose,
the metric each service's collector reads, and resuming an interrupted (killed) run from its
checkpoint."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from advisor.providers.tuning import metric_regex

from advisor.errors import AdvisorError
from advisor.train.device import choose_device

SMALL = ["--model", "fcn", "--batch-size", "32", "--n-train", "128", "--n-val", "32",
         "--threads", "1"]  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CLOUD_ML_", "AIP_", "MLFLOW_", "AZUREML_"))}  # fmt: skip
    env["CUDA_VISIBLE_DEVICES"] = ""  # the test machine's answer, made explicit
    env.update(extra)
    return env


def _train(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "advisor.train", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)  # fmt: skip


# -- device choice --------------------------------------------------------------------------


def test_device_choice() -> None:
    assert choose_device("auto", 0, False).kind == "cpu"
    plan = choose_device("auto", 4, False)
    assert (plan.kind, plan.count, plan.distributed) == ("cuda", 4, True)
    assert "DistributedDataParallel" in plan.describe()
    assert choose_device("cuda", 1, False).distributed is False
    with pytest.raises(AdvisorError, match=r"does not drive PyTorch/XLA.*--device cuda"):
        choose_device("tpu", 0, True)
    with pytest.raises(AdvisorError, match=r"sees no CUDA GPU.*--device cpu"):
        choose_device("cuda", 0, False)
    with pytest.raises(AdvisorError, match=r"torch_xla.*GPU machine type"):
        choose_device("tpu", 0, False)


@pytest.mark.slow
def test_a_gpu_request_on_a_machine_without_one_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = _train([*SMALL, "--epochs", "1", "--device", "cuda"], _env(), tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0
    assert "no CUDA GPU" in proc.stderr


@pytest.mark.slow
def test_distributed_wrapping_in_a_one_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.distributed as dist
    from advisor.probes.torch_loop import build_setup
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DistributedSampler

    from advisor.train.device import DevicePlan, distribute, free_port

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        setup, _, _ = build_setup("fcn", 64, 128, 32)
        plan = DevicePlan("cpu", 1, "test")
        out = distribute(setup, plan, 0, seed=0)
        assert isinstance(out.model, DistributedDataParallel)
        assert isinstance(out.train_loader.sampler, DistributedSampler)
        assert out.train_loader.batch_size == 64  # B / n with n = 1
    finally:
        dist.destroy_process_group()


# -- each service's conventions ---------------------------------------------------------------


@pytest.mark.slow
def test_as_sagemaker_starts_it(tmp_path: Path) -> None:
    """``<image> train`` with /opt/ml/input/config/hyperparameters.json (all strings) and a
    checkpoint folder; SageMaker's metric regex reads the log."""
    root = tmp_path / "opt_ml"
    (root / "input" / "config").mkdir(parents=True)
    (root / "checkpoints").mkdir()
    hps = {"model": "fcn", "batch_size": "32", "epochs": "2", "n_train": "128", "n_val": "32",
           "threads": "1", "metric": "val_accuracy", "device": "auto", "lr": "0.05",
           "_tuning_objective_metric": "val_accuracy"}  # fmt: skip
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hps))
    proc = _train(["train"], _env(ADVISOR_OPT_ML=str(root)), tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("advisor-train: device=cpu (auto: no CUDA GPU visible)")
    assert f"checkpoints={root / 'checkpoints'}" in first
    found = re.findall(metric_regex("val_accuracy"), proc.stdout)
    assert len(found) == 2 and all(0.0 <= float(v) <= 1.0 for v in found)
    assert (root / "checkpoints" / "advisor-checkpoint.pt").is_file()


@pytest.mark.slow
def test_as_vertex_starts_it(tmp_path: Path) -> None:
    """The command and ``--name=value`` args, CLOUD_ML_* environment: the hypertune file."""
    metrics = tmp_path / "hypertune" / "output.metrics"
    env = _env(CLOUD_ML_TRIAL_ID="3", CLOUD_ML_HP_METRIC_FILE=str(metrics),
               AIP_CHECKPOINT_DIR=str(tmp_path / "ckpt"))  # fmt: skip
    proc = _train([*SMALL, "--epochs", "2", "--metric", "val_loss", "--device", "cpu",
                   "--momentum=0.9", "--lr=0.05"], env, tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("advisor-train: device=cpu (asked for)")
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["global_step"] for r in records] == ["1", "2"]
    assert all(r["trial"] == "3" and float(r["val_loss"]) > 0 for r in records)
    assert (tmp_path / "ckpt" / "advisor-checkpoint.pt").is_file()


@pytest.mark.slow
def test_as_azure_ml_starts_it(tmp_path: Path) -> None:
    """MLflow environment with a run to log into: params and per-epoch metrics land in it."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("advisor-fcn")
    run = client.create_run(exp)
    env = _env(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run.info.run_id,
               MLFLOW_EXPERIMENT_ID=exp)  # fmt: skip
    proc = _train([*SMALL, "--epochs", "2", "--device", "cpu", "--lr", "0.05",
                   "--checkpoint-dir", str(tmp_path / "outputs")], env, tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    logged = client.get_run(run.info.run_id).data
    assert logged.params["lr"] == "0.05" and logged.params["batch_size"] == "32"
    history = client.get_metric_history(run.info.run_id, "val_accuracy")
    assert [m.step for m in history] == [1, 2]


@pytest.mark.slow
def test_azureml_tracking_without_the_plugin_still_trains(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("azureml") and importlib.util.find_spec("azureml.mlflow"):
        pytest.skip("azureml-mlflow is installed here: the degraded path does not apply")
    env = _env(MLFLOW_TRACKING_URI="azureml://eastus.api.azureml.ms/mlflow/v1.0/subscriptions/x",
               MLFLOW_RUN_ID="abc")  # fmt: skip
    proc = _train([*SMALL, "--epochs", "2", "--device", "cpu"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "needs azureml-mlflow" in proc.stdout
    assert len(re.findall(metric_regex("val_accuracy"), proc.stdout)) == 2


# -- resume ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    args = ["--model", "fcn", "--batch-size", "32", "--n-train", "1024", "--n-val", "64",
            "--threads", "1", "--epochs", "6", "--device", "cpu", "--checkpoint-dir", str(folder)]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "advisor.train", *args], env=_env(),
                            cwd=tmp_path, stdout=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.time() + 240
    try:
        while not (folder / "advisor-checkpoint.pt").is_file():
            assert proc.poll() is None, "the run ended before its first checkpoint"
            assert time.time() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # the machine is taken back mid-run
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    killed_out = proc.stdout.read() if proc.stdout else ""
    done = _epochs_done(folder)
    assert 1 <= done < 6 and proc.returncode == -signal.SIGKILL
    again = _train(args, _env(), tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"resumed from {folder} after epoch {done}" in again.stdout
    reported = re.findall(metric_regex("val_accuracy"), again.stdout)
    assert len(reported) == 6 - done  # only the epochs not done yet
    assert _epochs_done(folder) == 6
    assert "resumed" not in killed_out


def _epochs_done(folder: Path) -> int:
    import torch

    state: dict[str, Any] = torch.load(folder / "advisor-checkpoint.pt", weights_only=False)
    return int(state["epochs_done"])


@pytest.mark.slow
def test_two_process_data_parallel_training_runs_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The multi-GPU path (one process per device, DDP, sharded sampler, rank 0 reports and
    checkpoints) with two CPU processes over gloo: the same code the CUDA path runs."""
    import multiprocessing

    from advisor.train.device import DevicePlan, spawn
    from advisor.train.entry import _rank_main, parse_args

    args, hps = parse_args([*SMALL, "--epochs", "2", "--device", "cpu", "--lr", "0.05",
                            "--checkpoint-dir", str(tmp_path / "ckpt")])  # fmt: skip
    for var in ("MASTER_ADDR", "MASTER_PORT"):  # a fresh rendezvous for this run
        monkeypatch.delenv(var, raising=False)
    queue = multiprocessing.get_context("spawn").SimpleQueue()
    spawn(_rank_main, DevicePlan("cpu", 2, "test: two processes"), args, hps, queue)
    summary = queue.get()
    assert summary["epochs_run"] == 2 and len(summary["val_accuracy"]) == 2
    # Each rank ran ceil(128 / 2 / 16) = 4 iterations per epoch at batch 32 / 2 = 16.
    assert summary["iterations"] == 8
    assert _epochs_done(tmp_path / "ckpt") == 2
