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
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from advisor.providers.catalog import InstanceType
from advisor.providers.owned_checks import (
    BOARD,
    BOUNDS,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_GPUS,
    MAX_MACHINES,
    NAME,
    FieldError,
    check_text,
    check_value,
    shown,
    text_depth,
)

from advisor.config import home
from advisor.errors import AdvisorError

OWNED = "owned"  # the provider and service of a machine you own
HARDWARE_FILE = "hardware.json"
LOCK_FILE = "hardware.json.lock"  # its writers' lock (``advisor.storage.locks.file_lock``)
HOURS = {"y": 8766.0, "mo": 730.5, "w": 168.0, "d": 24.0, "h": 1.0}  # a year: 365.25 days
DEFAULT_UTILISATION = 0.5  # prior: busy half the time (range 0.1-0.9 in practice; give yours)
CPUS_PER_GPU, MEMORY_GIB_PER_GPU = 8, 32  # priors when --vcpus / --memory-gib are not given
# The service's jobs: a team's machines from its database, instead of hardware.json.
_SCOPED: ContextVar[tuple[OwnedMachine, ...] | None] = ContextVar("owned", default=None)


def hardware_path() -> Path:
    return home() / HARDWARE_FILE


def lock_path(path: Path | None = None) -> Path:
    """The lock its writers hold around read-modify-write (``advisor hardware add|remove``)."""
    return (path or hardware_path()).with_name(LOCK_FILE)


def parse_gpus(text: str) -> tuple[str, int]:
    """``4xA100-80GB`` -> ("A100-80GB", 4); ``T4`` -> ("T4", 1). The count is 1 to
    ``MAX_GPUS`` (``owned_checks``), read without converting a 400-digit number."""
    m = re.fullmatch(r"\s*(?:(\d+)\s*[xX]\s*)?([A-Za-z0-9][A-Za-z0-9._-]*)\s*", text or "")
    fix = f"write it as 4xA100-80GB (or T4 for one), at most {MAX_GPUS} GPUs."
    if not m:
        raise AdvisorError(f"--gpus {shown(text)} is not COUNTxBOARD.", fix)
    digits = (m.group(1) or "1").lstrip("0") or "0"
    if len(digits) > 3 or not 1 <= int(digits) <= MAX_GPUS:
        count = BOUNDS["count"]
        raise AdvisorError(
            f"--gpus {shown(text)}: the count of COUNTxBOARD must be {count.rule()} "
            f"({count.what}).",
            fix,
        )
    return m.group(2), int(digits)


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
        """Every field's type and range (``owned_checks.BOUNDS``), named by its CLI flag;
        ``from_dict`` re-words an error with where the value was read."""
        check_text("name", self.name, NAME, "Hardware name", "a plain name")
        check_text("board", self.board, BOARD, "--gpus's board", "a GPU board name")
        for field, bound in BOUNDS.items():
            label = f"{bound.flag} for {self.name!r}"
            object.__setattr__(self, field, check_value(field, getattr(self, field), label))

    @classmethod
    def from_dict(cls, item: Any, where: str, fix: str) -> OwnedMachine:
        """The machine ``item`` (``to_dict``'s form, as ``hardware.json``, the service's
        database and its API hold it), every field checked; anything else is one line naming
        ``where`` and the field, and ``fix``."""
        if not isinstance(item, dict):
            raise AdvisorError(f"{where} must be an object of a machine's fields.", fix)
        known = [f.name for f in fields(cls)]
        required = [f for f in known if f not in ("utilisation", "vcpus", "memory_gib")]
        unknown = sorted(str(k)[:40] for k in item if k not in known)
        missing = [f for f in required if f not in item]
        if unknown or missing:
            which = f"unknown field(s) {', '.join(unknown)}" if unknown else ""
            which += ("; " if unknown and missing else "") + (
                f"no {', '.join(missing)}" if missing else ""
            )
            raise AdvisorError(f"{where} has {which} (a machine has {', '.join(known)}).", fix)
        name = item["name"]
        label = f"{where} ({name!r})" if isinstance(name, str) and NAME.match(name) else where
        try:
            return cls(**item)
        except FieldError as exc:
            raise AdvisorError(f"{label}: {exc.field} {exc.rule}.", fix) from exc

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
    ``owned_scope`` this runs in. The one reader of the file (``suggest``, ``hardware list``,
    ``add`` and ``remove``): a regular file of at most ``MAX_FILE_BYTES``, UTF-8 JSON nested
    at most ``MAX_DEPTH`` deep, ``{"machines": [...]}`` of at most ``MAX_MACHINES`` machines
    with distinct names, each checked by ``OwnedMachine.from_dict``; anything else is one
    ``AdvisorError`` naming the file, the field and the fix."""
    scoped = _SCOPED.get()
    if path is None and scoped is not None:
        return list(scoped)
    path = path or hardware_path()
    whole = f"fix or delete {path}, then `advisor hardware add` your machines again."
    try:
        with open(path, "rb", opener=_nonblocking) as handle:  # a FIFO must not block
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise AdvisorError(f"{path} is not a regular file.", whole)
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return []
    except IsADirectoryError as exc:
        raise AdvisorError(f"{path} is not a regular file (a folder).", whole) from exc
    except OSError as exc:
        raise AdvisorError(f"Cannot read {path} ({exc.strerror}).", whole) from exc
    if len(raw) > MAX_FILE_BYTES:
        raise AdvisorError(f"{path} is over {MAX_FILE_BYTES // 2**20} MiB.", whole)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdvisorError(f"{path} is not UTF-8 text ({exc.reason}).", whole) from exc
    if text_depth(text) > MAX_DEPTH:
        raise AdvisorError(f"{path} nests deeper than {MAX_DEPTH} levels.", whole)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AdvisorError(f"{path} is not JSON ({exc}).", whole) from exc
    if not isinstance(data, dict) or set(data) != {"machines"}:
        raise AdvisorError(f'{path} is not {{"machines": [...]}}, as advisor writes it.', whole)
    items = data["machines"]
    if not isinstance(items, list) or len(items) > MAX_MACHINES:
        raise AdvisorError(f"{path}: machines must be a list of at most {MAX_MACHINES}.", whole)
    machines: list[OwnedMachine] = []
    for i, item in enumerate(items):
        fix = (
            f"correct machines[{i}] in {path}, or delete it there and `advisor hardware add` "
            "the machine again."
        )
        machine = OwnedMachine.from_dict(item, f"{path}: machines[{i}]", fix)
        if any(m.name == machine.name for m in machines):
            raise AdvisorError(f"{path}: machines[{i}] repeats the name {machine.name!r}.", fix)
        machines.append(machine)
    return machines


def save_owned(machines: list[OwnedMachine], path: Path | None = None) -> Path:
    """Write ``hardware.json`` whole and atomically: a temporary file of its own in the same
    folder, flushed to disk, renamed over it (a reader sees the old file or the new one).
    Read-modify-write callers hold ``lock_path`` around it (``advisor hardware add``: eight
    at once kept 5-7 of eight machines before)."""
    path = path or hardware_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"machines": [m.to_dict() for m in sorted(machines, key=lambda m: m.name)]}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(body, indent=1) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NONBLOCK)


def owned_instances(accelerators: dict[str, Any]) -> list[InstanceType]:
    """Every machine you own, as catalog rows."""
    return [m.instance(accelerators) for m in load_owned()]
