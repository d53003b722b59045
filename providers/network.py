"""The network between machines of one instance type (issue #49): the bandwidth each machine
has for the GPUs' collectives across machines, its fabric, and the cloud's page that says so.

``catalog/data/network.csv`` holds one row per instance type (a SageMaker or Azure ML type is
its virtual machine's: ``ml.p4d.24xlarge`` is ``p4d.24xlarge``), the figure as the cloud
publishes it (EFA Gbps on AWS, the GPU NICs of GCP's A3/A4 or its per-VM egress tier, Azure's
InfiniBand per VM), each with its source. A type without a row has no cited figure: it is not
offered on several machines. The fabric's latency and the share of the nominal bandwidth a
collective achieves are priors (``FABRIC_PRIORS``), said so wherever they are used.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

NETWORK_FILE = Path(__file__).resolve().parent / "catalog" / "data" / "network.csv"
# fabric -> (latency per message, seconds; achieved / nominal bandwidth): priors, not
# measurements (docs/multi-node.md): RDMA fabrics (InfiniBand, RoCE) a few microseconds,
# EFA's SRD and GPUDirect-TCPX(O) tens, kernel TCP more; NCCL reaches 70-85 % of line rate on
# RDMA fabrics, less over TCP sockets.
FABRIC_PRIORS: dict[str, tuple[float, float]] = {
    "infiniband": (5e-6, 0.85),
    "roce": (8e-6, 0.8),
    "efa": (20e-6, 0.8),
    "gpudirect-tcpx": (25e-6, 0.7),
    "gpudirect-tcpxo": (25e-6, 0.75),
    "ethernet": (50e-6, 0.6),
}


@dataclass(frozen=True)
class Network:
    """One machine's network for collectives across machines: ``gbps`` nominal (the cloud's
    figure, gigabits per second each way), its ``fabric``, and the ``source`` of the figure."""

    instance_type: str
    provider: str
    gbps: float
    fabric: str
    source: str

    @property
    def latency_s(self) -> float:
        """Seconds per message across machines (a prior, by fabric)."""
        return FABRIC_PRIORS[self.fabric][0]

    @property
    def bytes_per_s(self) -> float:
        """Bytes per second a collective achieves (nominal x the fabric's prior share)."""
        return self.gbps * 1e9 / 8 * FABRIC_PRIORS[self.fabric][1]

    def describe(self) -> str:
        return f"{self.gbps:g} Gbps {self.fabric} ({self.source})"


@functools.cache
def _table(path: Path = NETWORK_FILE) -> dict[tuple[str, str], Network]:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [
            Network(
                r["instance_type"],
                r["provider"],
                float(r["network_gbps"]),
                r["fabric"],
                r["source"],
            )
            for r in csv.DictReader(handle)
        ]
    for row in rows:
        if row.fabric not in FABRIC_PRIORS or row.gbps <= 0:
            raise ValueError(f"{path}: bad network row {row}")
    return {(r.provider, r.instance_type): r for r in rows}


def rows() -> list[Network]:
    """Every row of the network table."""
    return list(_table().values())


def network_of(provider: str, instance_type: str) -> Network | None:
    """The network of ``instance_type`` on ``provider`` (the VM's row for a managed
    service's type), or None where no figure is cited."""
    name = instance_type.removeprefix("ml.").removeprefix("Standard_")
    return _table().get((provider, name))
