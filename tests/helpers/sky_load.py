"""Load SkyPilot tasks with SkyPilot's own loader, in SkyPilot's own interpreter (issue #37).

Run as ``PYTHON sky_load.py CATALOG.json TASK.yaml ...`` by a Python that has ``skypilot``
installed (its own virtual environment: SkyPilot pins click and uvicorn older than the
service's). It imports nothing of the project. ``CATALOG.json`` holds SkyPilot catalog rows
(``{"aws": [...], "gcp": [...], "azure": [...]}``, the columns of SkyPilot's ``vms.csv``),
written into SkyPilot's runtime folder before ``sky`` is imported, so validation is offline.
Prints one JSON line per task: what SkyPilot read, or the error it raised.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

COLUMNS = {
    "aws": ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
            "Price", "SpotPrice", "Region", "AvailabilityZone", "GpuInfo", "Arch"],
    "gcp": ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
            "GpuInfo", "Price", "SpotPrice", "Region", "AvailabilityZone"],
    "azure": ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
              "GpuInfo", "Price", "SpotPrice", "Region", "Generation"],
}  # fmt: skip


def _write_catalog(rows: dict[str, list[dict[str, Any]]]) -> None:
    """The catalog files where the ``sky`` just imported reads them."""
    from sky.catalog import common

    folder = Path(common._ABSOLUTE_VERSIONED_CATALOG_DIR)
    runtime = Path(os.environ["SKY_RUNTIME_DIR"])
    if not folder.is_relative_to(runtime):
        raise SystemExit(f"sky reads its catalog from {folder}, not {runtime}")
    names = sorted({r["AcceleratorName"] for rs in rows.values() for r in rs
                    if r.get("AcceleratorName")})  # fmt: skip
    (folder / "common").mkdir(parents=True, exist_ok=True)
    (folder / "common" / "accelerators.csv").write_text(
        "AcceleratorName,Clouds\n" + "".join(f'{n},"AWS,GCP,Azure"\n' for n in names)
    )
    for cloud, columns in COLUMNS.items():
        (folder / cloud).mkdir(parents=True, exist_ok=True)
        with (folder / cloud / "vms.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows.get(cloud, []))


def _load(sky: Any, path: str) -> dict[str, Any]:
    """SkyPilot's loader and its validation (resources are checked lazily, on ``validate``)."""
    try:
        task = sky.Task.from_yaml(path)
        task.validate()
        for res in task.resources:
            res.validate()  # instance type, region and accelerators against the catalog
    except Exception as exc:  # what SkyPilot refuses, reported to the test
        return {"path": path, "error": f"{type(exc).__name__}: {exc}"}
    (res,) = task.resources
    return {
        "path": path,
        "error": None,
        "cloud": str(res.cloud).lower(),
        "region": res.region,
        "instance_type": res.instance_type,
        "accelerators": res.accelerators,
        "use_spot": res.use_spot,
        "disk_size": res.disk_size,
        "num_nodes": task.num_nodes,
        "run": task.run,
        "envs": dict(task.envs),
        "name": task.name,
        "storage_mounts": {  # issue #45: a spot task's checkpoint bucket
            path: {"name": st.name, "mode": st.mode.value, "stores": [t.value for t in st.stores]}
            for path, st in task.storage_mounts.items()
        },
        "repr": repr(res),
    }


def main(argv: list[str]) -> int:
    catalog, *tasks = argv
    os.environ.setdefault("SKY_RUNTIME_DIR", tempfile.mkdtemp(prefix="sky-runtime-"))
    import sky  # reads SKY_RUNTIME_DIR once, here

    _write_catalog(json.loads(Path(catalog).read_text()))
    for path in tasks:
        print(json.dumps(_load(sky, path)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
