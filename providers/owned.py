"""Machines you own (issue #37): ``advisor hardware add NAME --gpus 4xA100-80GB --purchase-usd
...``, kept in ``$ADVISOR_HOME/hardware.json``. Each becomes a candidate like a catalog machine
(provider and service ``owned``), predicted by the same GPU model from the spec records of
the board it names (``providers/catalog/data/accelerators.csv``), and priced per hour of use:

    amortisation = purchase USD / (lifetime hours x utilisation)
    energy       = power kW x USD per kWh
    USD per hour = amortisation + energy

``utilisation`` is the share of its lifetime the machine is busy (default 0.5, a prior the
user should replace with their own): the purchase is spread over the hours it is used, so an
idle machine makes each used hour dearer. The formula and its inputs are the row's price
source (basis ``owned``); the report shows them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from advisor.providers.catalog import InstanceType

from advisor.config import home
from advisor.errors import AdvisorError

OWNED = "owned"  # the provider and service of a machine you own
HARDWARE_FILE = "hardware.json"
HOURS = {"y": 8766.0, "mo": 730.5, "w": 168.0, "d": 24.0, "h": 1.0}  # a year: 365.25 days
DEFAULT_UTILISATION = 0.5  # prior: busy half the time (range 0.1-0.9 in practice; give yours)
CPUS_PER_GPU, MEMORY_GIB_PER_GPU = 8, 32  # priors when --vcpus / --memory-gib are not given
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
# The service's jobs: a team's machines from its database, instead of hardware.json.
_SCOPED: ContextVar[tuple[OwnedMachine, ...] | None] = ContextVar("owned", default=None)


def hardware_path() -> Path:
    return home() / HARDWARE_FILE


def parse_gpus(text: str) -> tuple[str, int]:
    """``4xA100-80GB`` -> ("A100-80GB", 4); ``T4`` -> ("T4", 1)."""
    m = re.fullmatch(r"\s*(?:(\d+)\s*[xX]\s*)?([A-Za-z0-9][A-Za-z0-9._-]*)\s*", text or "")
    if not m or (m.group(1) is not None and int(m.group(1)) < 1):
        raise AdvisorError(
            f"--gpus {text!r} is not COUNTxBOARD.", "write it as 4xA100-80GB (or T4 for one)."
        )
    return m.group(2), int(m.group(1) or 1)


def parse_lifetime(text: str) -> float:
    """``3y``, ``36mo``, ``156w``, ``1000d``, ``20000h`` -> hours."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(y|mo|w|d|h)\s*", str(text))
    if not m or float(m.group(1)) <= 0:
        raise AdvisorError(
            f"--lifetime {text!r} is not a positive time in y, mo, w, d or h.",
            "write it as 3y, 36mo or 26000h.",
        )
    return float(m.group(1)) * HOURS[m.group(2)]


@dataclass(frozen=True)
class OwnedMachine:
    """One machine you own: its GPUs (board name from the accelerator records, count) and
    what it costs to own and run."""

    name: str
    board: str
    count: int
    purchase_usd: float
    lifetime_h: float
    power_w: float
    usd_per_kwh: float
    utilisation: float = DEFAULT_UTILISATION
    vcpus: int | None = None
    memory_gib: float | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise AdvisorError(
                f"Hardware name {self.name!r} is not a plain name.",
                "use letters, digits, '.', '_' and '-' (e.g. rig-4090).",
            )
        checks = {
            "--purchase-usd": self.purchase_usd >= 0,
            "--lifetime": self.lifetime_h > 0,
            "--power-w": self.power_w >= 0,
            "--usd-per-kwh": self.usd_per_kwh >= 0,
            "--utilisation": 0 < self.utilisation <= 1,
        }
        for flag, ok in checks.items():
            values = (self.purchase_usd, self.lifetime_h, self.power_w, self.usd_per_kwh,
                      self.utilisation)  # fmt: skip
            if not ok or not all(math.isfinite(v) for v in values):
                raise AdvisorError(
                    f"{flag} is out of range for '{self.name}'.",
                    "give amounts >= 0, a positive lifetime and a utilisation in (0, 1].",
                )

    @property
    def amortisation_per_h(self) -> float:
        return self.purchase_usd / (self.lifetime_h * self.utilisation)

    @property
    def energy_per_h(self) -> float:
        return self.power_w / 1000.0 * self.usd_per_kwh

    @property
    def usd_per_hour(self) -> float:
        return self.amortisation_per_h + self.energy_per_h

    def formula(self) -> str:
        """The price and how it is made, with every input."""
        years = self.lifetime_h / HOURS["y"]
        return (
            f"owned: USD {self.purchase_usd:,.0f} / ({years:g} y x 8,766 h x "
            f"{self.utilisation:g} used) + {self.power_w / 1000:g} kW x USD "
            f"{self.usd_per_kwh:g}/kWh = USD {self.amortisation_per_h:.3f} + "
            f"{self.energy_per_h:.3f} = USD {self.usd_per_hour:.3f} per hour of use"
        )

    def instance(self, accelerators: dict[str, Any]) -> InstanceType:
        """The machine as a catalog row (``owned:NAME``); ``accelerators``: the catalog's
        accelerator records (an unknown board is one line naming the known ones)."""
        spec = next((s for k, s in accelerators.items() if k.lower() == self.board.lower()), None)
        if spec is None:
            known = ", ".join(sorted(k for k in accelerators if not k.upper().startswith("TPU")))
            raise AdvisorError(
                f"No spec record for GPU board '{self.board}' (the model predicts from it).",
                f"use one of: {known}; or add its row to providers/catalog/data/accelerators.csv.",
            )
        return InstanceType(
            provider=OWNED, service=OWNED, instance_type=self.name,
            vcpus=self.vcpus or CPUS_PER_GPU * self.count,
            memory_gib=self.memory_gib or MEMORY_GIB_PER_GPU * self.count,
            accelerator=spec.name, accelerator_count=self.count,
            accelerator_memory_gib=spec.memory_gib * self.count,
            on_demand_usd_per_h=self.usd_per_hour, spot_usd_per_h=None,
            price_date="owned", source=self.formula(), price_basis=OWNED,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def checked(machine: OwnedMachine, accelerators: dict[str, Any]) -> OwnedMachine:
    """``machine`` with its board spelt as its spec record (an unknown board: one line)."""
    row = machine.instance(accelerators)
    return OwnedMachine(**{**machine.to_dict(), "board": str(row.accelerator)})


@contextmanager
def owned_scope(machines: Iterable[OwnedMachine]) -> Iterator[None]:
    """Within it (this thread or task), the machines you own are ``machines``, not those of
    ``hardware.json``: the service runs each team's jobs with the team's own."""
    token = _SCOPED.set(tuple(machines))
    try:
        yield
    finally:
        _SCOPED.reset(token)


def load_owned(path: Path | None = None) -> list[OwnedMachine]:
    """The machines in ``hardware.json`` (none when it is absent), or those of the
    ``owned_scope`` this runs in."""
    scoped = _SCOPED.get()
    if path is None and scoped is not None:
        return list(scoped)
    path = path or hardware_path()
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [OwnedMachine(**item) for item in data.get("machines", [])]
    except (ValueError, TypeError, AttributeError) as exc:
        raise AdvisorError(
            f"{path} is not a hardware file advisor wrote ({exc}).",
            "fix or delete it, then `advisor hardware add` again.",
        ) from exc


def save_owned(machines: list[OwnedMachine], path: Path | None = None) -> Path:
    """Write ``hardware.json`` whole (a temporary file renamed over it)."""
    path = path or hardware_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    body = {"machines": [m.to_dict() for m in sorted(machines, key=lambda m: m.name)]}
    tmp.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def owned_instances(accelerators: dict[str, Any]) -> list[InstanceType]:
    """Every machine you own, as catalog rows."""
    return [m.instance(accelerators) for m in load_owned()]
