"""`advisor catalog import-skypilot`: a dated snapshot from SkyPilot's catalog files.

SkyPilot users already hold fresh catalogs generated from the providers' price APIs under
``~/.sky/catalogs/<version>/<cloud>/vms.csv`` (one row per instance type and zone, columns
``InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, Price, SpotPrice, Region``
plus ``AvailabilityZone``, ``GpuInfo``... by version). The import reprices the virtual-machine
rows (``ec2``, ``compute-engine``, ``azure-vm``) of the newest snapshot in every region
SkyPilot lists (``regions`` narrows that): on-demand and spot are the lowest zone prices in
the region; a GCP machine with GPUs costs its VM row plus the accelerator row of its count
(how Google bills and SkyPilot lists it), a TPU slice its ``tpu-<slice>`` row. Hardware columns
come from the snapshot. Managed-service rows and machines SkyPilot does not list keep their
prices and say so. A file in a layout this code does not know is refused, nothing is written.
"""

from __future__ import annotations

import csv
import datetime as dt
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from advisor.providers.catalog._catalog import Catalog
from advisor.providers.catalog._csv import read_accelerators, read_instances, write_instances
from advisor.providers.catalog._store import ACCELERATORS_FILE, DATA_DIR, PROVIDER_FILES, load
from advisor.providers.catalog._types import InstanceType

from advisor.config import user_catalog_dir
from advisor.errors import AdvisorError

REQUIRED = (
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "vCPUs",
    "MemoryGiB",
    "Price",
    "SpotPrice",
    "Region",
)
VM_SERVICES = {"aws": "ec2", "gcp": "compute-engine", "azure": "azure-vm"}
# The catalog's accelerator -> SkyPilot's name in GCP accelerator rows.
GCP_ACCELERATORS = {
    "K80": "K80",
    "P100": "P100",
    "V100": "V100",
    "T4": "T4",
    "L4": "L4",
    "A100-40GB": "A100",
    "A100-80GB": "A100-80GB",
    "H100": "H100",
    "H200": "H200",
    "B200": "B200",
}
_VERSION = re.compile(r"^v(\d+)$")

Zones = dict[str, tuple[float | None, float | None]]  # zone -> (on-demand, spot)


@dataclass(frozen=True)
class ImportResult:
    """What an import wrote: the snapshot, from which files, how many rows it priced."""

    snapshot: str
    path: str
    base_snapshot: str
    files: dict[str, str]
    priced: int
    kept: int
    regions: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_files(root: str | Path | None = None) -> dict[str, Path]:
    """``cloud -> vms.csv`` under ``root`` (default ``~/.sky/catalogs``, newest version)."""
    base = Path(root).expanduser() if root else Path.home() / ".sky" / "catalogs"
    versions = sorted(
        (int(m[1]), p) for p in _children(base) if (m := _VERSION.match(p.name)) and p.is_dir()
    )
    folder = versions[-1][1] if versions else base
    found = {
        c: folder / c / "vms.csv" for c in PROVIDER_FILES if (folder / c / "vms.csv").is_file()
    }
    if not found:
        raise AdvisorError(
            f"No SkyPilot catalog (aws/, gcp/ or azure/ with vms.csv) found in {folder}.",
            "pass the folder holding them, e.g. ~/.sky/catalogs/v7 (SkyPilot fills it on "
            "`sky check` or `sky show-gpus`).",
        )
    return found


def _children(path: Path) -> list[Path]:
    return list(path.iterdir()) if path.is_dir() else []


def read_vms(path: Path) -> list[dict[str, str]]:
    """The rows of one ``vms.csv``; a header without SkyPilot's columns is refused."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise AdvisorError(
                f"{path} is not in a SkyPilot catalog layout advisor knows: no column(s) "
                f"{', '.join(missing)} (header: {', '.join(header) or 'empty'}).",
                f"pass a catalog folder whose vms.csv has {', '.join(REQUIRED)} (SkyPilot "
                "catalog versions v5 to v8), or update advisor.",
            )
        return list(reader)


def _price(text: str | None) -> float | None:
    try:
        value = float(text or "")
    except ValueError:
        return None
    return value if value == value and value >= 0 else None


def _index(rows: Iterable[dict[str, str]]) -> dict[tuple[str, str, int], dict[str, Zones]]:
    """(type, accelerator, count) -> region -> zone -> (on-demand, spot)."""
    out: dict[tuple[str, str, int], dict[str, Zones]] = {}
    for row in rows:
        count = _price(row.get("AcceleratorCount")) or 0
        key = (row["InstanceType"].strip(), row["AcceleratorName"].strip(), int(count))
        zone = (row.get("AvailabilityZone") or row["Region"]).strip()
        region = out.setdefault(key, {}).setdefault(row["Region"].strip(), {})
        region[zone] = (_price(row["Price"]), _price(row["SpotPrice"]))
    return out


def _lowest(zones: Zones) -> tuple[float | None, float | None]:
    """Lowest on-demand and lowest spot price over the zones of one region."""
    on_demand = [p for p, _ in zones.values() if p is not None]
    spot = [s for _, s in zones.values() if s is not None]
    return (min(on_demand) if on_demand else None, min(spot) if spot else None)


def _sum(vm: Zones, acc: Zones) -> Zones:
    """Per zone where both are sold: VM + accelerator (None where either lacks a price)."""
    out: Zones = {}
    for zone in vm.keys() & acc.keys():
        (vp, vs), (ap, asp) = vm[zone], acc[zone]
        out[zone] = (
            None if vp is None or ap is None else vp + ap,
            None if vs is None or asp is None else vs + asp,
        )
    return out


def _zones(
    provider: str, row: InstanceType, index: dict[Any, dict[str, Zones]]
) -> dict[str, Zones]:
    """Region -> zone prices of catalog ``row`` in SkyPilot's file (empty when not listed)."""
    if provider == "aws":
        return _any_accelerator(index, row.instance_type)
    if provider == "azure":
        return _any_accelerator(index, f"Standard_{row.instance_type}")
    if row.accelerator and row.accelerator.startswith("TPU-"):
        return index.get(("", f"tpu-{row.instance_type}", 1), {})
    vm_type = row.instance_type.split("+")[0]
    vm = index.get((vm_type, "", 0), {})
    if not row.accelerator:
        return vm
    name = GCP_ACCELERATORS.get(row.accelerator)
    if vm_type.startswith("a3-mega"):
        name = "H100-MEGA"
    acc = index.get(("", name or "", row.accelerator_count), {})
    return {region: _sum(vm[region], acc[region]) for region in vm.keys() & acc.keys()}


def _any_accelerator(index: dict[Any, dict[str, Zones]], itype: str) -> dict[str, Zones]:
    for (name, _, _), regions in index.items():
        if name == itype:
            return regions
    return {}


def import_skypilot(
    root: str | Path | None = None,
    *,
    regions: Sequence[str] = (),
    today: dt.date | None = None,
    base: str | None = None,
    name: str | None = None,
) -> ImportResult:
    """Write snapshot ``name`` (default: today's date) from SkyPilot's files under ``root``."""
    from advisor.providers.catalog._store import SNAPSHOT_NAME

    if name is not None and not SNAPSHOT_NAME.match(name):
        raise AdvisorError(
            f"Snapshot name '{name}' is not a date YYYY-MM or YYYY-MM-DD.", "pass such a name."
        )
    files = find_files(root)
    catalog = load(base)
    day = (today or dt.date.today()).isoformat()
    snapshot = name or day
    wanted = {r.lower() for r in regions}
    out: list[InstanceType] = []
    priced = 0
    seen_regions: set[str] = set()
    for provider in PROVIDER_FILES:
        rows = [r for r in catalog.regional if r.provider == provider]
        if provider not in files:
            out += rows
            continue
        path = files[provider]
        index = _index(read_vms(path))
        stamp = dt.date.fromtimestamp(path.stat().st_mtime).isoformat()
        where = f"SkyPilot catalog {path.parent.parent.name}/{provider}/vms.csv ({path}, file dated {stamp})"
        done: set[str] = set()
        for row in rows:
            if row.service != VM_SERVICES[provider]:
                out.append(_kept(row, "a managed service: not in SkyPilot's catalog", catalog))
                continue
            if row.key in done:
                continue
            new = _reprice(provider, row, index, wanted, where, stamp)
            if not new:
                out += [
                    _kept(r, "not listed by SkyPilot", catalog) for r in rows if r.key == row.key
                ]
            out += new
            done.add(row.key)
            priced += len(new)
            seen_regions |= {r.region for r in new}
    if not priced:
        raise AdvisorError(
            f"SkyPilot's files in {sorted(str(p) for p in files.values())} price none of the "
            f"machine types of snapshot {catalog.snapshot}"
            + (f" in region(s) {', '.join(regions)}" if regions else "")
            + "; nothing was written.",
            "check the folder and --region.",
        )
    path = _write(snapshot, out)
    return ImportResult(
        snapshot=snapshot,
        path=str(path),
        base_snapshot=catalog.snapshot,
        files={k: str(v) for k, v in files.items()},
        priced=priced,
        kept=len(out) - priced,
        regions=len(seen_regions),
    )


def _reprice(
    provider: str,
    row: InstanceType,
    index: dict[Any, dict[str, Zones]],
    wanted: set[str],
    where: str,
    stamp: str,
) -> list[InstanceType]:
    out = []
    how = "VM row + accelerator row, " if provider == "gcp" and "+" in row.instance_type else ""
    for region, zones in sorted(_zones(provider, row, index).items()):
        if wanted and region.lower() not in wanted:
            continue
        on_demand, spot = _lowest(zones)
        if on_demand is None or on_demand <= 0:
            continue
        note = ""
        if spot is not None and spot >= on_demand:
            spot, note = None, "; spot at or above on-demand in the source: not used"
        out.append(
            replace(
                row,
                region=region,
                on_demand_usd_per_h=round(on_demand, 6),
                spot_usd_per_h=None if spot is None else round(spot, 6),
                price_date=stamp,
                source=f"read-out: {where}; {how}on-demand and spot = lowest zone price in "
                f"{region}{note}",
                price_basis="read-out",  # issue #27
                spot_basis="read-out" if spot is not None else "",
            )
        )
    return out


def _kept(row: InstanceType, why: str, catalog: Catalog) -> InstanceType:
    return replace(row, source=f"{row.source} [{why}; kept from snapshot {catalog.snapshot}]")


def _write(snapshot: str, rows: list[InstanceType]) -> Path:
    """Write the snapshot folder atomically (staged, validated, renamed); never overwrite."""
    root = user_catalog_dir()
    root.mkdir(parents=True, exist_ok=True)
    target = root / snapshot
    if target.exists():
        raise AdvisorError(
            f"Snapshot folder {target} exists already.",
            "remove it, or pass another snapshot name (--name YYYY-MM-DD).",
        )
    with tempfile.TemporaryDirectory(dir=root, prefix=f".{snapshot}-") as tmp:
        staged = Path(tmp) / snapshot
        staged.mkdir()
        for provider in PROVIDER_FILES:
            write_instances(staged / f"{provider}.csv", [r for r in rows if r.provider == provider])
        accelerators = read_accelerators(DATA_DIR / ACCELERATORS_FILE)
        checked = [
            inst
            for provider in PROVIDER_FILES
            for _, inst in read_instances(staged / f"{provider}.csv", provider, accelerators)
        ]
        Catalog.from_rows(snapshot, checked, accelerators)
        shutil.move(str(staged), target)
    return target
