"""The calibration ledger: every measured result, next to what the model predicted for it, kept
in the advisor's Optuna storage (the same RDB as its studies) as trials of one dedicated study.

One record is one COMPLETE trial of the study ``LEDGER_STUDY`` whose value is
``ln(measured / predicted)`` and whose user attributes hold the record's fields (machine,
device class, workload, workload signature, batch, predicted and measured steady iteration,
origin, time). Using Optuna's storage means the ledger travels with the studies (SQLite file,
or any RDB URL with ``--storage``), is safe for concurrent writers, and is visible in
``optuna-dashboard``. Optuna is imported lazily.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from advisor.config import default_storage_url
from advisor.prediction.memo import Memo

LEDGER_STUDY = "advisor-calibration-ledger"


@dataclass(frozen=True)
class CalibrationRecord:
    """One predicted/measured pair of steady iteration times (seconds) on one machine.

    ``signature`` identifies "the same work" more tightly than the workload name (framework,
    FLOPs and parameters per sample; see ``workload_signature``); ``origin`` says where the
    measurement came from ("remote-probe", "tuning-trial", "local-run", "manual", ...).
    """

    workload: str
    batch_size: int
    machine: str
    device_class: str
    predicted_t2: float
    measured_t2: float
    recorded_at: float = 0.0
    origin: str = ""
    signature: str = ""
    # Issue #26: a remote probe's start-up on the device, kept for the device class's init and
    # first iteration (``timing.startup``): its initialisation, its first iteration's extra
    # over the steady one, and the local probe's (host) initialisation it is compared with.
    measured_init_s: float | None = None
    measured_warmup_s: float | None = None
    host_init_s: float | None = None

    def __post_init__(self) -> None:
        if self.predicted_t2 <= 0 or self.measured_t2 <= 0:
            raise ValueError(
                f"times must be > 0, but got predicted_t2={self.predicted_t2}, "
                f"measured_t2={self.measured_t2}"
            )
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, but got {self.batch_size}")

    @property
    def ratio(self) -> float:
        """measured / predicted."""
        return self.measured_t2 / self.predicted_t2

    def describe(self) -> str:
        """One line of evidence: where, what, predicted vs measured."""
        return (
            f"{self.machine} {self.workload} b{self.batch_size}: measured "
            f"{self.measured_t2 * 1e3:.3g} ms vs predicted {self.predicted_t2 * 1e3:.3g} ms "
            f"(x{self.ratio:.2f}, {self.origin or 'unknown origin'})"
        )


# One Optuna storage per URL and process: opening an RDBStorage checks the schema and starts an
# engine, which predictions must not repeat per candidate (and, for SQLite, it waits for a busy
# writer instead of failing: several studies may run at once on the default file).
_STORAGES: Memo[Any] = Memo("ledger storages", bound=16)
SQLITE_BUSY_TIMEOUT_S = 60.0
ATTEMPTS = 5  # a SQLite read or write that fails transiently (locked, I/O race) is retried


def _storage(url: str) -> Any:
    import optuna

    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:"):
        kwargs = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    return _STORAGES.get_or_make(
        url, lambda: optuna.storages.RDBStorage(url, engine_kwargs=kwargs or None)
    )


def _retrying(action: Any) -> Any:
    """``action()``, retried with a short back-off when SQLite reports a transient fault
    (another process holds the file: "database is locked", or "disk I/O error" while a
    writer checkpoints the WAL); the last failure propagates."""
    from sqlalchemy.exc import OperationalError

    for attempt in range(ATTEMPTS):
        try:
            return action()
        except OperationalError:
            if attempt == ATTEMPTS - 1:
                raise
            time.sleep(0.1 * 2**attempt)
    raise AssertionError("unreachable")


def _study(storage: str | None, create: bool) -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = storage or default_storage_url()
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    rdb = _retrying(lambda: _storage(url))
    if not create:
        try:
            return _retrying(lambda: optuna.load_study(study_name=LEDGER_STUDY, storage=rdb))
        except KeyError:  # no ledger yet
            return None
    return _retrying(
        lambda: optuna.create_study(
            study_name=LEDGER_STUDY, storage=rdb, direction="minimize", load_if_exists=True
        )
    )


def append(record: CalibrationRecord, storage: str | None = None) -> CalibrationRecord:
    """Store ``record`` in the ledger (creating the ledger study on first use)."""
    import optuna

    if record.recorded_at == 0.0:
        record = CalibrationRecord(**{**asdict(record), "recorded_at": time.time()})
    study = _study(storage, create=True)
    trial = optuna.trial.create_trial(
        params={},
        distributions={},
        value=math.log(record.ratio),
        user_attrs={"ledger": asdict(record)},
    )
    _retrying(lambda: study.add_trial(trial))
    _CACHE.discard(storage or default_storage_url())
    return record


# url -> (stamp, records): predictions ask for the ledger once per candidate machine, so it is
# read once per change of the storage (the stamp: SQLite's database and WAL files' mtimes;
# other RDBs: the CACHE_TTL_S window), not once per call; a write discards it.
_CACHE: Memo[tuple[tuple[float, ...], list[CalibrationRecord]]] = Memo("ledger records", 16)
CACHE_TTL_S = 10.0


def _stamp(url: str) -> tuple[float, ...]:
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        files = (path, path.with_name(path.name + "-wal"))
        return tuple(f.stat().st_mtime_ns if f.exists() else -1.0 for f in files)
    return (float(int(time.time() // CACHE_TTL_S)),)


def records(storage: str | None = None) -> list[CalibrationRecord]:
    """Every record in the ledger, oldest first (none if there is no ledger yet)."""
    url = storage or default_storage_url()
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return []  # do not create a database just to read it
    stamp = _stamp(url)
    cached = _CACHE.get(url)
    if cached is not None and cached[0] == stamp:
        return list(cached[1])
    found = _read(url)
    _CACHE.put(url, (stamp, found))
    return list(found)


def _read(url: str) -> list[CalibrationRecord]:
    study = _study(url, create=False)
    if study is None:
        return []
    names = {f.name for f in fields(CalibrationRecord)}
    out = []
    for trial in _retrying(lambda: study.get_trials(deepcopy=False)):
        data = trial.user_attrs.get("ledger")
        if isinstance(data, dict):
            out.append(CalibrationRecord(**{k: v for k, v in data.items() if k in names}))
    return sorted(out, key=lambda r: r.recorded_at)
