"""A row as a SkyPilot task: the machine as SkyPilot names it, the region, spot or on demand,
the disk; ``setup`` installs this project; ``run`` starts ``python -m advisor.train`` with the
row's batch size, epochs, plan, hyperparameters and predictions, the values that vary
(workload, batch size, epochs) in ``envs`` so ``sky launch --env`` can change them. One
machine: ``advisor.train`` runs one data-parallel process per GPU of one machine
(``advisor.train.device``), ``num_nodes: 1``. A row on N machines (issue #49) has
``num_nodes: N`` and ``run`` starts ``torchrun`` on each with the rendezvous SkyPilot's
variables give (its "Distributed multi-node jobs" guide: ``SKYPILOT_NUM_NODES``,
``SKYPILOT_NODE_RANK``, the head first in ``SKYPILOT_NODE_IPS``, ``SKYPILOT_NUM_GPUS_PER_NODE``).

An on-demand row is a plain task (``sky launch``). A spot row is a managed job (``sky jobs
launch``: SkyPilot's jobs controller relaunches it when the spot machine is taken back) with a
checkpoint bucket mounted as SkyPilot's storage docs describe -- ``file_mounts`` with ``name``,
``store`` and ``mode: MOUNT`` -- and ``advisor.train --checkpoint-dir`` on that mount, so the
relaunched ``run`` resumes from the last finished epoch.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from advisor.export.names import bucket_name, check_bucket, check_name
from advisor.export.row import ExportRow
from advisor.providers.train_command import TORCHRUN_PORT

DEFAULT_DISK_GB = 100  # the user's choice (--disk-gb); SkyPilot's own default is 256 GB
SKY_CLOUD = {"aws": "aws", "gcp": "gcp", "azure": "azure"}
# Our accelerator names -> SkyPilot's, where they differ (SkyPilot's catalog: "A100" is the
# 40 GB board). Only GCP's N1 machines take an attached accelerator; others imply theirs.
SKY_ACCELERATOR = {"A100-40GB": "A100", "A100-40GB-PCIe": "A100"}
ENVS = {"ADVISOR_MODEL": "--model", "ADVISOR_BATCH_SIZE": "--batch-size",
        "ADVISOR_EPOCHS": "--epochs"}  # fmt: skip
CHECKPOINTS = "/checkpoints"  # where a spot row's bucket is mounted
SKY_STORE = {"aws": "s3", "gcp": "gcs", "azure": "azure"}  # the bucket on the row's own cloud


def sky_instance(row: ExportRow) -> tuple[str, str | None]:
    """SkyPilot's ``instance_type`` and ``accelerators`` for the row's machine: a managed
    service's row runs the same hardware as a virtual machine (``ml.g5.xlarge`` ->
    ``g5.xlarge``, Azure ``NC4as_T4_v3`` -> ``Standard_NC4as_T4_v3``); a GCP N1 machine with
    GPUs attached (``n1-standard-8+1xT4``) is ``n1-standard-8`` with ``T4:1``."""
    itype = row.instance_type
    if row.provider == "aws":
        return itype.removeprefix("ml."), None
    if row.provider == "azure":
        return (itype if itype.startswith("Standard_") else f"Standard_{itype}"), None
    vm, plus, _ = itype.partition("+")
    if plus and row.accelerator:
        name = SKY_ACCELERATOR.get(row.accelerator, row.accelerator)
        return vm, f"{name}:{row.gpus}"
    return itype, None


def project_root() -> Path | None:
    """This project's source checkout (the folder with pyproject.toml), when it runs from one."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def launch_hint(row: ExportRow) -> str:
    """How to start it: a managed job for a spot row, a plain launch on demand."""
    return "sky jobs launch FILE" if row.spot else "sky launch FILE"


def task(row: ExportRow, disk_gb: int = DEFAULT_DISK_GB, name: str | None = None) -> dict[str, Any]:
    """The SkyPilot task for ``row`` as a mapping (``sky.Task.from_yaml_config`` reads it)."""
    from advisor.export.names import job_name

    name = check_name("skypilot", name or job_name(row.workload, row.batch_size, "task"))
    instance_type, accelerators = sky_instance(row)
    resources: dict[str, Any] = {"cloud": SKY_CLOUD[row.provider]}
    if row.region:
        resources["region"] = row.region
    resources["instance_type"] = instance_type
    if accelerators:
        resources["accelerators"] = accelerators
    resources["use_spot"] = row.spot
    resources["disk_size"] = int(disk_gb)
    envs = {"ADVISOR_MODEL": row.workload, "ADVISOR_BATCH_SIZE": str(row.batch_size)}
    if row.epochs is not None:
        envs["ADVISOR_EPOCHS"] = str(row.epochs)
    args = row.train_args(f"{CHECKPOINTS}/{name}" if row.spot else None)
    for env, flag in ENVS.items():  # "--batch-size 512" -> "--batch-size ${ADVISOR_BATCH_SIZE}"
        if flag in args:
            args[args.index(flag) + 1] = f"${{{env}}}"
    root = project_root()
    out: dict[str, Any] = {"name": name}
    if root is not None:
        out["workdir"] = str(root)
    out |= {"resources": resources, "num_nodes": row.nodes, "envs": envs}
    if row.spot:  # the checkpoint bucket, created on first use and kept (SkyPilot storage)
        bucket = check_bucket(bucket_name(name))
        out["file_mounts"] = {
            CHECKPOINTS: {"name": bucket, "store": SKY_STORE[row.provider], "mode": "MOUNT"}
        }
    out |= {
        "setup": _setup(root is not None),
        "run": " ".join([*_launcher(row), "-m", "advisor.train", *(_quote(a) for a in args)]),
    }
    return out


def _launcher(row: ExportRow) -> list[str]:
    """``python`` on one machine; ``torchrun`` with SkyPilot's rendezvous on several."""
    if row.nodes <= 1:
        return ["python"]
    per_node = "${SKYPILOT_NUM_GPUS_PER_NODE}" if row.gpus else "1"
    return [
        "torchrun", "--nnodes=${SKYPILOT_NUM_NODES}", "--node-rank=${SKYPILOT_NODE_RANK}",
        f"--nproc-per-node={per_node}",
        '--master-addr="$(echo "$SKYPILOT_NODE_IPS" | head -n1)"',
        f"--master-port={TORCHRUN_PORT}",
    ]  # fmt: skip


def _setup(from_workdir: bool) -> str:
    """Install the project: the synced workdir (a source checkout), else the package."""
    target = '-e ".[torch]"' if from_workdir else '"advisor[torch]"'
    return f"set -e\npip install --upgrade pip\npip install {target}\n"


def _quote(arg: str) -> str:
    """Shell-quote an argument, leaving ``${ENV}`` references for the shell to expand."""
    if arg.startswith("${") and arg.endswith("}"):
        return f'"{arg}"'
    return shlex.quote(arg)


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings (``setup``) as literal blocks."""


_Dumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def task_yaml(row: ExportRow, disk_gb: int = DEFAULT_DISK_GB, name: str | None = None) -> str:
    """The task as YAML text, with a header that says what it runs and what the report said."""
    head = [
        f"# SkyPilot task: {row.label} of the advisor's report "
        f"(`{launch_hint(row).replace(' FILE', '')}` this file).",
        f"# {row.machine} in {row.region or 'its cheapest region'}, "
        f"{'spot' if row.spot else 'on demand'}; {row.layout()}.",
        f"# Plan: {row.plan_text()}.",
    ]
    if row.runtime_s is not None and row.cost_usd is not None:
        head.append(
            f"# Predicted: {row.runtime_s:.0f} s (up to {row.runtime_high_s or row.runtime_s:.0f}"
            f" s), USD {row.cost_usd:.4g} at USD {row.price_per_hour or 0:.4g}/h "
            f"({row.service} price)" + (f"; {row.predicted()}." if row.predicted() else ".")
        )
    if row.spot:
        head.append(
            "# Spot: a managed job; when the machine is taken back SkyPilot relaunches it and "
            f"advisor.train resumes from the checkpoint bucket mounted at {CHECKPOINTS}."
        )
    body = yaml.dump(task(row, disk_gb, name), Dumper=_Dumper, sort_keys=False)
    return "\n".join(head) + "\n" + body
