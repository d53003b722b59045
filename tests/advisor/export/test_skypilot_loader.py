"""Issue #37: every exported SkyPilot task loads with SkyPilot's own loader
(``sky.Task.from_yaml``: its schema, then its resources checked against its catalog) and holds
the row's machine, region, spot and run.

SkyPilot pins click and uvicorn older than the service's, so it lives in its own virtual
environment, ``.venv-sky`` at the repository root (``.ci/run`` and the README's test command
make it: ``python3 -m venv .venv-sky && .venv-sky/bin/pip install skypilot==0.14.1``), and
the tasks are loaded there, in one child process (``tests/helpers/sky_load.py``). Another
interpreter may be named in ``ADVISOR_SKY_PYTHON``; without one this module is skipped,
saying so.

SkyPilot validates a task's resources against its catalog files, which it would download; the
child writes catalog files made from the report's own rows (type, accelerator, count, region,
prices) into its runtime folder, so the check is offline and says whether SkyPilot accepts
that machine in that region at that tier.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from repo_paths import HELPERS, ROOT

from advisor.export.api import export
from advisor.export.skypilot import SKY_ACCELERATOR, sky_instance


def _sky_python() -> str | None:
    """The interpreter with SkyPilot: ``$ADVISOR_SKY_PYTHON``, else ``.venv-sky``'s."""
    named = os.environ.get("ADVISOR_SKY_PYTHON")
    if named:
        return named
    own = ROOT / ".venv-sky" / "bin" / "python"
    return str(own) if own.is_file() else None


SKY_PYTHON = _sky_python()
pytestmark = [
    pytest.mark.slow,  # importing SkyPilot takes seconds
    pytest.mark.skipif(
        SKY_PYTHON is None,
        reason="SkyPilot's environment is missing: python3 -m venv .venv-sky && "
        ".venv-sky/bin/pip install skypilot==0.14.1 (or set ADVISOR_SKY_PYTHON)",
    ),
]
PROVIDERS = ("aws", "gcp", "azure")


def _catalog_rows(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """SkyPilot catalog rows for the report's cloud machines (one zone per region)."""
    from advisor.export.row import pick_row

    out: dict[str, list[dict[str, Any]]] = {c: [] for c in PROVIDERS}
    for n, r in enumerate(report["ranking"], 1):
        if r["provider"] not in PROVIDERS:
            continue
        row = pick_row(report, n)
        itype, attached = sky_instance(row)
        acc = SKY_ACCELERATOR.get(row.accelerator or "", row.accelerator or "")
        price = r["price_per_hour"]
        base = {"Region": row.region, "AvailabilityZone": f"{row.region}-a", "Arch": "x86_64",
                "Generation": "V2", "vCPUs": 8.0, "MemoryGiB": 64.0, "Price": price,
                "SpotPrice": price}  # fmt: skip
        if attached:  # GCP: the VM and its accelerator are separate rows
            out["gcp"].append({**base, "InstanceType": itype})
            out["gcp"].append({**base, "InstanceType": "", "AcceleratorName": acc,
                               "AcceleratorCount": row.gpus, "vCPUs": "", "MemoryGiB": ""})  # fmt: skip
        else:
            gpus = {"AcceleratorName": acc, "AcceleratorCount": float(row.gpus)} if acc else {}
            out[row.provider].append({**base, "InstanceType": itype, **gpus})
    return out


def load_in_skypilot(report: dict[str, Any], folder: Path, *tasks: Path) -> list[dict[str, Any]]:
    """What SkyPilot's loader made of each task (or the error it raised), in its own
    interpreter: one child process for all of them."""
    assert SKY_PYTHON is not None
    catalog = folder / "sky-catalog.json"
    catalog.write_text(json.dumps(_catalog_rows(report)))
    runtime = folder / "sky-runtime"
    runtime.mkdir(exist_ok=True)
    env = {**os.environ, "SKY_RUNTIME_DIR": str(runtime)}
    done = subprocess.run(
        [SKY_PYTHON, str(HELPERS / "sky_load.py"), str(catalog), *map(str, tasks)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def loaded(study: dict[str, Any]) -> dict[str, Any]:
    """Every ranked cloud row and the recommendation exported as a task, and two broken
    copies of the recommendation's, loaded by SkyPilot in one child process."""
    report, folder = study["report"], study["folder"]
    rows = [n for n, r in enumerate(report["ranking"], 1) if r["provider"] in PROVIDERS]
    assert {report["ranking"][n - 1]["provider"] for n in rows} == set(PROVIDERS)
    exported = {}
    for n in [None, *rows]:
        path = folder / f"sky-{n}.yaml"
        exported[path] = export("skypilot", report=report, row=n, out=path)
    text = (folder / "sky-None.yaml").read_text()
    itype = sky_instance(exported[folder / "sky-None.yaml"].row)[0]
    broken = {
        "unknown type": text.replace(f"instance_type: {itype}", "instance_type: p9.mega"),
        "unknown key": text.replace("use_spot:", "use_spots:"),
    }
    for name, body in broken.items():
        assert body != text
        (folder / f"sky-{name.replace(' ', '-')}.yaml").write_text(body)
    paths = [*exported, *(folder / f"sky-{n.replace(' ', '-')}.yaml" for n in broken)]
    tasks = load_in_skypilot(report, folder, *paths)
    assert [Path(t["path"]) for t in tasks] == paths
    return {"exported": exported, "tasks": dict(zip(paths, tasks, strict=True)),
            "broken": dict(zip(broken, tasks[len(exported):], strict=True))}  # fmt: skip


def test_every_exported_task_loads_in_skypilot(loaded: dict[str, Any]) -> None:
    for path, exported in loaded["exported"].items():
        task = loaded["tasks"][path]
        assert task["error"] is None, task
        row = exported.row
        itype, attached = sky_instance(row)
        assert task["instance_type"] == itype and task["region"] == row.region
        assert task["use_spot"] is row.spot and task["num_nodes"] == 1
        assert task["cloud"] == row.provider
        if attached:
            name, count = attached.split(":")
            assert task["accelerators"] == {name: int(count)}
        assert "--batch-size" in task["run"]
        assert task["envs"]["ADVISOR_BATCH_SIZE"] == str(row.batch_size)
        assert task["envs"]["ADVISOR_EPOCHS"] == str(row.epochs)


def test_skypilot_refuses_a_broken_task(loaded: dict[str, Any]) -> None:
    """The check can fail: the recommendation's task on a type the catalog does not list,
    and with a key SkyPilot's schema does not know, are both refused."""
    broken = loaded["broken"]
    assert broken["unknown type"]["error"] and "p9.mega" in broken["unknown type"]["error"]
    assert broken["unknown key"]["error"] and "use_spots" in broken["unknown key"]["error"]


# Issue #45: model references whose names no cloud takes as they are (dots, a colon, 200+
# characters, non-ASCII), each made into valid task and bucket names.
ODD_MODELS = (
    "examples.transformers:gpt2_large",
    "deeply." * 30 + "nested_module:build_the_model",
    "paquete.módulo_ñ:construir_modelo",
    "模型.训练:构建",
)
STORES = {"aws": "S3", "gcp": "GCS", "azure": "AZURE"}


@pytest.fixture(scope="module")
def plan_loaded(plan_study: dict[str, Any]) -> dict[str, Any]:
    """Every cloud row of the planned report, and its recommendation under each odd model
    reference, exported as tasks and loaded by SkyPilot in one child process."""
    report, folder = plan_study["report"], plan_study["folder"]
    rows = [n for n, r in enumerate(report["ranking"], 1) if r["provider"] in PROVIDERS]
    exported = {}
    for n in [None, *rows]:
        path = folder / f"plan-sky-{n}.yaml"
        exported[path] = export("skypilot", report=report, row=n, out=path)
    for i, model in enumerate(ODD_MODELS):
        path = folder / f"odd-sky-{i}.yaml"
        exported[path] = export("skypilot", report=dict(report, workload=model), out=path)
    tasks = load_in_skypilot(report, folder, *exported)
    return {"exported": exported, "tasks": dict(zip(exported, tasks, strict=True))}


def test_planned_tasks_load_with_their_plan_and_checkpoint_bucket(
    plan_loaded: dict[str, Any],
) -> None:
    for path, exported in plan_loaded["exported"].items():
        task = plan_loaded["tasks"][path]
        assert task["error"] is None, task
        row = exported.row
        assert f"--plan {row.plan_arg()}" in task["run"]
        assert task["name"] == yaml.safe_load(exported.text)["name"]
        if row.spot:  # a managed job: the bucket on the row's cloud, mounted for checkpoints
            mount = task["storage_mounts"]["/checkpoints"]
            assert mount["mode"] == "MOUNT" and mount["stores"] == [STORES[row.provider]]
            assert f"--checkpoint-dir /checkpoints/{task['name']}" in task["run"]
        else:
            assert task["storage_mounts"] == {}


def test_odd_model_references_give_valid_names(plan_loaded: dict[str, Any]) -> None:
    names = set()
    for path, exported in plan_loaded["exported"].items():
        if not path.name.startswith("odd-"):
            continue
        task = plan_loaded["tasks"][path]
        assert task["error"] is None, task  # SkyPilot's own name rules accepted it
        assert task["envs"]["ADVISOR_MODEL"] == exported.row.workload  # the reference, whole
        assert len(task["name"]) <= 63
        names.add(task["name"])
    assert len(names) == len(ODD_MODELS)


def test_a_row_on_several_machines_loads_with_its_node_count(
    plan_study: dict[str, Any], tmp_path: Path
) -> None:
    """Issue #49: the recommendation on 4 machines: SkyPilot reads ``num_nodes: 4`` and the
    ``torchrun`` line on its own variables."""
    report = plan_study["report"]
    rec = dict(report["recommended"], nodes=4)
    path = tmp_path / "nodes.yaml"
    export("skypilot", report=dict(report, recommended=rec), out=path)
    (task,) = load_in_skypilot(report, tmp_path, path)
    assert task["error"] is None, task
    assert task["num_nodes"] == 4 and task["run"].startswith("torchrun --nnodes=")
