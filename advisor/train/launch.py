"""Several machines for ``python -m advisor.train`` (issue #49): the launcher's environment read
as ``torchrun`` arguments, and this process's ranks when a launcher started it.

Each way of starting a job on N machines says who is who in its own variables; they become the
arguments of PyTorch's own launcher (``torch.distributed.run``, ``torchrun``), whose static
rendezvous (``--master-addr``/``--master-port``/``--node-rank``) every node joins:

- SkyPilot: ``SKYPILOT_NODE_IPS`` (one address a line, the head first), ``SKYPILOT_NODE_RANK``,
  ``SKYPILOT_NUM_GPUS_PER_NODE`` (SkyPilot's "Distributed multi-node jobs" guide);
- SageMaker: ``SM_HOSTS`` (a JSON list, ``algo-1`` ...), ``SM_CURRENT_HOST``, ``SM_NUM_GPUS``
  (sagemaker-training-toolkit's environment), else the file SageMaker writes in every training
  container, ``/opt/ml/input/config/resourceconfig.json`` (``hosts``, ``current_host``);
- Vertex AI: ``CLUSTER_SPEC`` (``{"cluster": {"workerpool0": ["host:port"], "workerpool1":
  [...]}, "task": {"type": ..., "index": ...}}``; the head is workerpool0's one replica);
- Azure ML with a PyTorch distribution (``distribution: {type: pytorch,
  process_count_per_instance: G}``) starts every process itself with ``MASTER_ADDR``,
  ``MASTER_PORT``, ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` set, as ``torchrun`` sets them
  for its workers: ``launched`` reads both.

Nothing here makes a rendezvous: ``torch.distributed`` (``init_process_group("env://")``) and
``torchrun`` do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from advisor.errors import AdvisorError
from advisor.providers.train_command import TORCHRUN_PORT

# The head's port where a launcher names none (SkyPilot, SageMaker): ``MASTER_PORT`` when set,
# else torchrun's own default.
DEFAULT_PORT = TORCHRUN_PORT
TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


@dataclass(frozen=True)
class Cluster:
    """The machines of one job as a launcher describes them: ``nodes`` machines, this one
    ``node_rank``, the head at ``master_addr:master_port``, ``gpus_per_node`` processes each
    (None: one per visible GPU, or one on a CPU machine), and which launcher said so."""

    nodes: int
    node_rank: int
    master_addr: str
    master_port: int
    gpus_per_node: int | None
    source: str

    def torchrun_args(self, per_node: int) -> list[str]:
        """``torchrun``'s arguments (before ``-m advisor.train``) for ``per_node`` processes
        on this machine."""
        return [
            f"--nnodes={self.nodes}",
            f"--node-rank={self.node_rank}",
            f"--nproc-per-node={per_node}",
            f"--master-addr={self.master_addr}",
            f"--master-port={self.master_port}",
        ]


@dataclass(frozen=True)
class Ranks:
    """This process's place in a job a launcher started: ``rank`` of ``world`` processes,
    ``local_rank`` of ``local_world`` on this machine (``torchrun``'s and Azure ML's
    variables)."""

    rank: int
    local_rank: int
    world: int
    local_world: int

    @property
    def nodes(self) -> int:
        return max(1, self.world // max(self.local_world, 1))


def launched(env: Mapping[str, str] | None = None) -> Ranks | None:
    """This process's ranks when ``torchrun`` (or Azure ML's PyTorch distribution) started it,
    else None."""
    env = os.environ if env is None else env
    if not all(env.get(name) for name in TORCHRUN_VARS):
        return None
    world = _whole(env, "WORLD_SIZE")
    local_world = int(env.get("LOCAL_WORLD_SIZE") or 0) or _per_node(env, world)
    return Ranks(_whole(env, "RANK"), _whole(env, "LOCAL_RANK"), world, local_world)


def _per_node(env: Mapping[str, str], world: int) -> int:
    """Processes per machine where only the node count is given (Azure ML sets ``NODE_COUNT``
    beside its PyTorch distribution's variables)."""
    nodes = int(env.get("NODE_COUNT") or env.get("AZUREML_NODE_COUNT") or 1)
    return max(1, world // max(nodes, 1))


def cluster(
    env: Mapping[str, str] | None = None, resource_config: Path | None = None
) -> Cluster | None:
    """The job's machines from whichever launcher's variables are set (SkyPilot, SageMaker,
    Vertex AI), or None where none is; SageMaker's ``resource_config`` file (default: under
    ``/opt/ml``) where its variables are not set. Raises ``AdvisorError`` on variables that
    contradict themselves (this host not among the hosts)."""
    env = os.environ if env is None else env
    if not env.get("SM_HOSTS"):
        env = {**env, **_sagemaker_file(resource_config)}
    if env.get("SKYPILOT_NODE_IPS"):
        ips = [line.strip() for line in env["SKYPILOT_NODE_IPS"].splitlines() if line.strip()]
        rank = int(env.get("SKYPILOT_NODE_RANK") or 0)
        return _made(len(ips), rank, ips[0], _port(env), env.get("SKYPILOT_NUM_GPUS_PER_NODE"),
                     "SkyPilot")  # fmt: skip
    if env.get("SM_HOSTS") and env.get("SM_CURRENT_HOST"):
        hosts = sorted(json.loads(env["SM_HOSTS"]))
        here = env["SM_CURRENT_HOST"]
        if here not in hosts:
            raise AdvisorError(
                f"SM_CURRENT_HOST {here!r} is not among SM_HOSTS {hosts}.",
                "run under SageMaker's own launcher, which sets both.",
            )
        return _made(len(hosts), hosts.index(here), hosts[0], _port(env),
                     env.get("SM_NUM_GPUS"), "SageMaker")  # fmt: skip
    if env.get("CLUSTER_SPEC"):
        return _vertex(json.loads(env["CLUSTER_SPEC"]))
    return None


def _sagemaker_file(path: Path | None) -> dict[str, str]:
    """``SM_HOSTS``/``SM_CURRENT_HOST`` from SageMaker's ``resourceconfig.json``, if present."""
    if path is None:
        from advisor.train.checkpoint import opt_ml

        path = opt_ml() / "input" / "config" / "resourceconfig.json"
    if not path.is_file():
        return {}
    config = json.loads(path.read_text())
    return {"SM_HOSTS": json.dumps(config["hosts"]), "SM_CURRENT_HOST": config["current_host"]}


def _vertex(spec: Mapping[str, object]) -> Cluster:
    """Vertex AI's ``CLUSTER_SPEC``: workerpool0's replica is node 0, workerpool1's replica
    ``i`` is node ``1 + i``."""
    pools = dict(cast(Mapping[str, Any], spec.get("cluster") or {}))
    task = dict(cast(Mapping[str, Any], spec.get("task") or {}))
    heads = list(pools.get("workerpool0") or [])
    workers = list(pools.get("workerpool1") or [])
    if not heads:
        raise AdvisorError(
            "CLUSTER_SPEC names no workerpool0 replica (the head).",
            "give the Vertex AI job one workerpool0 replica and N-1 workerpool1 replicas.",
        )
    kind, index = str(task.get("type", "workerpool0")), int(task.get("index", 0))
    rank = 0 if kind == "workerpool0" else 1 + index
    host, _, port = str(heads[0]).rpartition(":")
    return _made(1 + len(workers), rank, host or str(heads[0]), int(port or DEFAULT_PORT), None,
                 "Vertex AI")  # fmt: skip


def _made(nodes: int, rank: int, head: str, port: int, gpus: str | None, source: str) -> Cluster:
    if not 0 <= rank < nodes:
        raise AdvisorError(
            f"{source} says this is node {rank} of {nodes}.",
            f"run under {source}'s own launcher, which sets a node rank below the node count.",
        )
    per_node = int(gpus) if gpus not in (None, "") else None
    return Cluster(nodes, rank, head, port, per_node or None, source)


def _port(env: Mapping[str, str]) -> int:
    return int(env.get("MASTER_PORT") or DEFAULT_PORT)


def _whole(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise AdvisorError(
            f"{name}={env[name]!r} is not a whole number.",
            "start advisor.train with torchrun, which sets it.",
        ) from None


def relaunch(where: Cluster, per_node: int, argv: Sequence[str]) -> int:
    """Run ``torchrun <where's arguments> -m advisor.train <argv>`` in this process (PyTorch's
    own launcher, ``torch.distributed.run``): it joins the other machines' agents and starts
    ``per_node`` workers here; returns when they have finished (0) or raises what torchrun
    raised (``ChildFailedError`` names the failed ranks)."""
    from torch.distributed.run import get_args_parser, run

    args = get_args_parser().parse_args(
        [*where.torchrun_args(per_node), "-m", "advisor.train", *argv]
    )
    run(args)
    return 0
