"""How the accelerators of one machine are linked (issue #47): NVLink or PCIe, and how many
devices share one link to the host (a K80 board's two dies share one PCIe x16 link).

``data/topology.csv`` names, per provider and instance-type pattern, the link its
accelerators use between each other and the devices per host link, each row with its source.
A machine no row matches takes its accelerator spec's link (``accelerators.csv``'s ``link``
column, from the datasheet), one device per host link.
"""

from __future__ import annotations

import csv
import fnmatch
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "topology.csv"


@dataclass(frozen=True)
class Topology:
    """The intra-node links of one machine: ``link`` ("nvlink", "pcie", "ici"), devices per
    host link and the source of both."""

    link: str
    devices_per_link: int
    source: str


@cache
def _rows() -> tuple[dict[str, str], ...]:
    with DATA.open(newline="") as f:
        return tuple(csv.DictReader(f))


def spec_link(spec: Any) -> str:
    """The link kind an accelerator spec's ``link`` text names."""
    text = str(getattr(spec, "link", "")).lower()
    return "nvlink" if "nvlink" in text else "ici" if "ici" in text else "pcie"


def topology(provider: str, instance_type: str, accelerator: str | None, spec: Any) -> Topology:
    """The topology of ``instance_type`` (of ``provider``) with ``accelerator`` devices."""
    for row in _rows():
        if (
            row["provider"] == provider
            and row["accelerator"] == accelerator
            and fnmatch.fnmatch(instance_type, row["instance_pattern"])
        ):
            return Topology(row["link"], int(row["devices_per_link"]), row["source"])
    name = getattr(spec, "name", accelerator)
    return Topology(spec_link(spec), 1, f"the {name} spec's link ({getattr(spec, 'link', '?')})")
