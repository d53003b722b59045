"""Where snapshots live: shipped ones in ``data/``, refreshed ones under ADVISOR_HOME."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from advisor.providers import registry
from advisor.providers.catalog._catalog import Catalog
from advisor.providers.catalog._csv import read_accelerators, read_instances
from advisor.providers.catalog._types import InstanceType

from advisor.config import user_catalog_dir
from advisor.errors import AdvisorError, unknown_value_error

DATA_DIR = Path(__file__).resolve().parent / "data"
ACCELERATORS_FILE = "accelerators.csv"
PROVIDER_FILES = registry.catalog_providers()
SNAPSHOT_NAME = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


def _snapshot_dirs() -> dict[str, Path]:
    """Snapshot name -> folder; a user snapshot shadows a shipped one of the same name."""
    found: dict[str, Path] = {}
    for root in (DATA_DIR, user_catalog_dir()):
        if not root.is_dir():
            continue
        for child in root.iterdir():
            if child.is_dir() and SNAPSHOT_NAME.match(child.name) and any(child.glob("*.csv")):
                found[child.name] = child
    return found


def snapshots() -> list[str]:
    """Names of every available snapshot, oldest first (shipped and refreshed)."""
    return sorted(_snapshot_dirs())


def snapshot_dir(snapshot: str | None = None) -> tuple[str, Path]:
    """The name and folder of ``snapshot`` (None: the newest)."""
    dirs = _snapshot_dirs()
    if not dirs:
        raise AdvisorError(
            f"No catalog snapshot found in {DATA_DIR} or {user_catalog_dir()}.",
            "reinstall advisor, or run `advisor catalog refresh`.",
        )
    name = max(dirs) if snapshot is None else snapshot
    if name not in dirs:
        raise unknown_value_error("snapshot", name, dirs)
    return name, dirs[name]


def load(snapshot: str | None = None, region: str | None = None) -> Catalog:
    """The catalog of ``snapshot`` (None: the newest), every row validated.

    A machine priced in several regions is taken from ``region``, or (None) from the cheapest
    region that sells it; ``Catalog.region_note`` says which. A bad value raises AdvisorError
    naming the file, line and column.
    """
    name, folder = snapshot_dir(snapshot)
    files = [folder / f"{p}.csv" for p in PROVIDER_FILES]
    acc = folder / ACCELERATORS_FILE
    if not acc.is_file():
        acc = DATA_DIR / ACCELERATORS_FILE
    stamp = tuple((str(f), f.stat().st_mtime_ns) for f in [acc, *files] if f.is_file())
    return _load_cached(name, stamp, region)


@lru_cache(maxsize=16)
def _load_cached(name: str, stamp: tuple[tuple[str, int], ...], region: str | None) -> Catalog:
    acc_path, *provider_paths = (Path(p) for p, _ in stamp)
    accelerators = read_accelerators(acc_path)
    rows: list[InstanceType] = []
    where: dict[tuple[str, str], str] = {}
    for path in provider_paths:
        for line, inst in read_instances(path, path.stem, accelerators):
            at = (inst.key, inst.region)
            if at in where:
                raise AdvisorError(
                    f"{path} line {line}: {inst.key} in region '{inst.region}' is listed twice "
                    f"(first at {where[at]}).",
                    "keep one row per service, instance type and region.",
                )
            where[at] = f"{path.name} line {line}"
            rows.append(inst)
    return Catalog.from_rows(name, rows, accelerators, region)
