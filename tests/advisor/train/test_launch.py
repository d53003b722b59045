"""Several machines (issue #49): each launcher's variables read as torchrun's arguments, and
``python -m advisor.train`` run as two "machines" here: two torchrun agents with one static
rendezvous on a free localhost port, separate ``--node-rank``s, gloo on the CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

from advisor.errors import AdvisorError
from advisor.train.device import DevicePlan
from advisor.train.launch import Cluster, Ranks, cluster, launched


def test_skypilot_variables_name_the_head_and_this_node() -> None:
    env = {"SKYPILOT_NODE_IPS": "10.0.0.5\n10.0.0.7\n", "SKYPILOT_NODE_RANK": "1",
           "SKYPILOT_NUM_GPUS_PER_NODE": "8"}  # fmt: skip
    got = cluster(env)
    assert got == Cluster(2, 1, "10.0.0.5", 29500, 8, "SkyPilot")
    assert got.torchrun_args(8) == ["--nnodes=2", "--node-rank=1", "--nproc-per-node=8",
                                    "--master-addr=10.0.0.5", "--master-port=29500"]  # fmt: skip


def test_sagemaker_hosts_are_ranked_in_order_and_the_first_is_the_head() -> None:
    env = {"SM_HOSTS": json.dumps(["algo-2", "algo-1", "algo-3"]), "SM_CURRENT_HOST": "algo-3",
           "SM_NUM_GPUS": "4", "MASTER_PORT": "7777"}  # fmt: skip
    assert cluster(env) == Cluster(3, 2, "algo-1", 7777, 4, "SageMaker")
    with pytest.raises(AdvisorError, match="not among SM_HOSTS"):
        cluster({**env, "SM_CURRENT_HOST": "algo-9"})


def test_vertex_cluster_spec_puts_workerpool0_first() -> None:
    spec = {"cluster": {"workerpool0": ["head-0:2222"], "workerpool1": ["w-0:2222", "w-1:2222"]},
            "environment": "cloud", "task": {"type": "workerpool1", "index": 1}}  # fmt: skip
    got = cluster({"CLUSTER_SPEC": json.dumps(spec)})
    assert (got.nodes, got.node_rank, got.master_addr, got.master_port) == (3, 2, "head-0", 2222)
    del spec["cluster"]["workerpool0"]
    with pytest.raises(AdvisorError, match="workerpool0"):
        cluster({"CLUSTER_SPEC": json.dumps(spec)})


def test_no_launcher_is_one_machine_and_torchrun_or_azure_variables_are_ranks() -> None:
    assert cluster({}) is None and launched({}) is None
    torchrun = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}
    assert launched(torchrun) == Ranks(3, 1, 4, 2) and Ranks(3, 1, 4, 2).nodes == 2
    azure = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "16", "NODE_COUNT": "2"}
    assert launched(azure) == Ranks(5, 1, 16, 8)
    with pytest.raises(AdvisorError, match="not a whole number"):
        launched({**torchrun, "RANK": "x"})


def test_each_machine_gets_its_own_gpu_index_and_hsdp_mesh_shape() -> None:
    from advisor.train.device import torch_device

    plan = DevicePlan("cuda", 16, "test", nodes=2)
    assert plan.per_node == 8 and torch_device(plan, 11).index == 3
    assert "on 2 machines" in plan.describe()


def _node_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SKYPILOT_", "SM_", "CLUSTER_SPEC", "MASTER_"))}  # fmt: skip
    env.update(OMP_NUM_THREADS="1", **extra)
    return env


def _two_nodes(commands: list[list[str]], envs: list[dict[str, str]]) -> list[str]:
    """Run one command per "machine" at once; their outputs (both must exit 0)."""
    procs = [subprocess.Popen(c, cwd=ROOT, env=_node_env(e), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for c, e in zip(commands, envs, strict=True)]  # fmt: skip
    outs = [p.communicate(timeout=240)[0] for p in procs]
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0, out[-3000:]
    return outs


def _metric(out: str, name: str) -> list[float]:
    return [float(v) for v in re.findall(rf"advisor-metric: {name}=([0-9.eE+-]+);", out)]


@pytest.mark.slow
def test_two_machines_train_under_torchrun_and_resume_from_the_checkpoint(tmp_path: Path) -> None:
    """Two torchrun agents (``--nnodes 2``, ``--node-rank`` 0 and 1, one process each) train
    ``fcn`` with DDP over gloo for two epochs; then the same job started as SkyPilot starts
    it (``python -m advisor.train`` with ``SKYPILOT_NODE_IPS``/``SKYPILOT_NODE_RANK``), which
    hands itself to torchrun, resumes from the checkpoint for a third epoch."""
    from advisor.train.device import free_port

    train = ["--model", "fcn", "--batch-size", "32", "--n-train", "512", "--n-val", "64",
             "--threads", "1", "--lr", "0.1", "--device", "cpu",
             "--checkpoint-dir", str(tmp_path)]  # fmt: skip
    port = str(free_port())
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
                "--nproc-per-node=1", "--master-addr=127.0.0.1", f"--master-port={port}"]  # fmt: skip
    first = _two_nodes(
        [[*torchrun, f"--node-rank={r}", "-m", "advisor.train", *train, "--epochs", "2"]
         for r in (0, 1)], [{}, {}])  # fmt: skip
    assert "x2 (DistributedDataParallel) on 2 machines (torchrun: rank 0 of 2)" in first[0]
    losses = _metric(first[0], "train_loss")
    assert len(losses) == 2 and losses[1] < losses[0], first[0]
    assert _metric(first[1], "train_loss") == []  # rank 1 reports nothing
    sky = {"SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.1", "MASTER_PORT": str(free_port())}
    again = _two_nodes(
        [[sys.executable, "-m", "advisor.train", *train, "--epochs", "3"]] * 2,
        [{**sky, "SKYPILOT_NODE_RANK": str(r)} for r in (0, 1)])  # fmt: skip
    assert f"resumed from {tmp_path} after epoch 2" in again[0], again[0]
    third = _metric(again[0], "train_loss")
    assert len(third) == 1 and third[0] < losses[0]


@pytest.mark.slow
def test_hsdp_shards_within_each_machine_and_replicates_across() -> None:
    """``replicate=nodes`` on 2 machines x 2 processes: torch's 2-D device mesh (replicate,
    shard); each process holds half of each weight (its machine's two shards), not a quarter."""
    import multiprocessing

    import sharded_steps as S
    import torch.multiprocessing as mp

    from advisor.train.device import free_port

    queue = multiprocessing.get_context("spawn").SimpleQueue()
    with pytest.MonkeyPatch.context() as mpatch:
        mpatch.setenv("MASTER_ADDR", "127.0.0.1")
        mpatch.setenv("MASTER_PORT", str(free_port()))
        mp.spawn(S.hsdp_worker, args=(queue,), nprocs=4, join=True)
    got = sorted(queue.get() for _ in range(4))
    for _, shape, names, placements, local, whole in got:
        assert shape == (2, 2) and names == ("replicate", "shard")
        assert placements == "(Replicate(), Shard(dim=0))" and local == whole // 2


def test_sagemaker_resource_config_file_stands_in_for_its_variables(tmp_path: Path) -> None:
    """A container without SageMaker's training toolkit has no ``SM_*`` variables, only the
    file SageMaker writes: ``/opt/ml/input/config/resourceconfig.json``."""
    config = tmp_path / "resourceconfig.json"
    config.write_text(json.dumps({"current_host": "algo-2", "hosts": ["algo-1", "algo-2"],
                                  "network_interface_name": "eth0"}))  # fmt: skip
    assert cluster({}, config) == Cluster(2, 1, "algo-1", 29500, None, "SageMaker")
    assert cluster({}, tmp_path / "absent.json") is None
