"""Issue #37: every exported SkyPilot task loads with SkyPilot's own loader
(``sky.Task.from_yaml``: its schema, then its resources checked against its catalog) and holds
the row's machine, region, spot and run. SkyPilot is the optional ``skypilot`` extra: without it
this module is skipped, saying so.

SkyPilot validates a task's resources against its catalog files, which it would download; here
its runtime folder (``SKY_RUNTIME_DIR``, read when ``sky`` is imported) holds catalog files
written from the report's own rows (type, accelerator, count, region, prices), so the check
is offline and says whether SkyPilot accepts that machine in that region at that tier.
"""

from __future__ import annotations

import csv
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from advisor.export.api import export
from advisor.export.skypilot import SKY_ACCELERATOR, sky_instance

pytestmark = [
    pytest.mark.slow,  # importing SkyPilot takes seconds
    pytest.mark.skipif(
        importlib.util.find_spec("sky") is None,
        reason="SkyPilot is not installed (pip install 'advisor[skypilot]')",
    ),
]
COLUMNS = {
    "aws": ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
            "Price", "SpotPrice", "Region", "AvailabilityZone", "GpuInfo", "Arch"],
    "gcp": ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
            "GpuInfo", "Price", "SpotPrice", "Region", "AvailabilityZone"],
    "azure": ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
              "GpuInfo", "Price", "SpotPrice", "Region", "Generation"],
}  # fmt: skip


def _catalog_rows(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """SkyPilot catalog rows for the report's cloud machines (one zone per region)."""
    from advisor.export.row import pick_row

    out: dict[str, list[dict[str, Any]]] = {c: [] for c in COLUMNS}
    for n, r in enumerate(report["ranking"], 1):
        if r["provider"] not in COLUMNS:
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


@pytest.fixture(scope="module")
def sky(study: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    runtime = tmp_path_factory.mktemp("sky-runtime")
    os.environ["SKY_RUNTIME_DIR"] = str(runtime)  # read once, when sky is imported
    import sky
    from sky.catalog import common

    folder = Path(common._ABSOLUTE_VERSIONED_CATALOG_DIR)
    assert folder.is_relative_to(runtime), "sky was imported before its runtime folder was set"
    names = sorted({r["AcceleratorName"] for rows in _catalog_rows(study["report"]).values()
                    for r in rows if r.get("AcceleratorName")})  # fmt: skip
    (folder / "common").mkdir(parents=True, exist_ok=True)
    (folder / "common" / "accelerators.csv").write_text(
        "AcceleratorName,Clouds\n" + "".join(f'{n},"AWS,GCP,Azure"\n' for n in names)
    )
    for cloud, rows in _catalog_rows(study["report"]).items():
        (folder / cloud).mkdir(parents=True, exist_ok=True)
        with (folder / cloud / "vms.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, COLUMNS[cloud], extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return sky


def load(sky: Any, path: Path) -> Any:
    """SkyPilot's loader and its validation (resources are checked lazily, on ``validate``)."""
    task = sky.Task.from_yaml(str(path))
    task.validate()
    for res in task.resources:
        res.validate()  # instance type, region and accelerators against the catalog
    return task


def test_every_exported_task_loads_in_skypilot(study: dict[str, Any], sky: Any) -> None:
    report = study["report"]
    rows = [n for n, r in enumerate(report["ranking"], 1) if r["provider"] in COLUMNS]
    assert {report["ranking"][n - 1]["provider"] for n in rows} == {"aws", "gcp", "azure"}
    for n in [None, *rows]:
        path = study["folder"] / f"sky-{n}.yaml"
        done = export("skypilot", report=report, row=n, out=path)
        task = load(sky, path)
        (res,) = task.resources
        row = done.row
        itype, attached = sky_instance(row)
        assert res.instance_type == itype and res.region == row.region
        assert res.use_spot is row.spot and task.num_nodes == 1
        assert str(res.cloud).lower() == row.provider
        if attached:
            name, count = attached.split(":")
            assert res.accelerators == {name: int(count)}
        assert "--batch-size" in task.run and task.envs["ADVISOR_BATCH_SIZE"] == str(row.batch_size)
        assert task.envs["ADVISOR_EPOCHS"] == str(row.epochs)


def test_skypilot_refuses_a_machine_its_catalog_lacks(study: dict[str, Any], sky: Any) -> None:
    """The check can fail: the same task on a type the catalog does not list is refused."""
    path = study["folder"] / "sky-recommended.yaml"
    export("skypilot", report=study["report"], out=path)
    text = path.read_text()
    itype = sky_instance(export("skypilot", report=study["report"]).row)[0]
    path.write_text(text.replace(f"instance_type: {itype}", "instance_type: p9.mega"))
    assert "p9.mega" in path.read_text()
    with pytest.raises(Exception, match=r"p9\.mega"):
        load(sky, path)
