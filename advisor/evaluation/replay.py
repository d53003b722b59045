"""A replay back end: serves a fixed, recorded table instead of running probes.

Tests and the search-efficiency benchmark use it exactly the way the real back end is used.
A table is JSON::

    {"snapshot": "replay-2026-11", "source": "how the numbers were obtained",
     "epochs": 10,
     "delay_s": 0.0,   # optional: seconds each evaluation takes (emulates a probe in tests)
     "host_probe": false,  # optional: the delay is a probe of this host, under its locks
     "instances": [InstanceType.to_dict(), ...],
     "entries": [{"machine": "ec2:p3.2xlarge", "batch_size": 512,
                  "runtime_s": {"value": 620, "low": 600, "high": 650},   # or a number
                  "predicted_s": {"value": 700, "low": 500, "high": 900}, # optional screen
                  "phases": PhaseTimes.to_dict(),                          # optional
                  "probe_s": 30.0, "error": null}, ...]}

Entries for ``owned:NAME`` need no instance: they time a machine you own (issue #37), a
candidate when it is owned (``advisor hardware add`` or the service's team), priced by its
own formula.

``runtime_s`` is the on-demand run time for ``epochs`` epochs; when ``phases`` are given the
run time is recomputed with the iteration-time model for the study's epochs instead. Costs
always come from the instance prices (spot variants included), so they stay consistent.
Every distinct (machine, batch size) served counts as one probe.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from advisor.errors import AdvisorError
from advisor.evaluation.candidates import matches, owned_candidates
from advisor.evaluation.contract import Backend, RunTime
from advisor.evaluation.probe_slot import probe_key_lock, probe_slot
from advisor.evaluation.workload import WorkloadInfo
from advisor.intervals import Interval
from advisor.probes.result import PhaseTimes
from advisor.providers.catalog import InstanceType
from advisor.search_spaces.space import MachineFilter


@dataclass(frozen=True)
class ReplayEntry:
    """One recorded (machine, batch size) result."""

    machine: str
    batch_size: int
    runtime: Interval | None
    predicted: Interval | None = None
    phases: PhaseTimes | None = None
    probe_s: float = 60.0
    error: str | None = None
    # What the recorded row's estimate held besides its times (issue #45: its training plan,
    # the plan in words, its memory per device), kept in the row's estimate as recorded.
    estimate: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.runtime is None and self.error is None:
            raise ValueError(f"{self.machine} b{self.batch_size}: need runtime_s or error")
        if self.probe_s < 0:
            raise ValueError(f"probe_s must be >= 0, but got {self.probe_s}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReplayEntry:
        return cls(
            machine=str(d["machine"]),
            batch_size=int(d["batch_size"]),
            runtime=Interval.from_dict(d["runtime_s"]) if d.get("runtime_s") is not None else None,
            predicted=Interval.from_dict(d["predicted_s"])
            if d.get("predicted_s") is not None
            else None,
            phases=PhaseTimes.from_dict(d["phases"]) if d.get("phases") else None,
            probe_s=float(d.get("probe_s", 60.0)),
            error=d.get("error"),
            estimate=dict(d.get("estimate") or {}),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "batch_size": self.batch_size,
            "runtime_s": self.runtime.to_dict() if self.runtime else None,
            "predicted_s": self.predicted.to_dict() if self.predicted else None,
            "phases": self.phases.to_dict() if self.phases else None,
            "probe_s": self.probe_s,
            "error": self.error,
            "estimate": dict(self.estimate),
        }


@dataclass(frozen=True)
class ReplayTable:
    """Instances and recorded entries; ``epochs`` is the run length the runtimes are for."""

    instances: tuple[InstanceType, ...]
    entries: tuple[ReplayEntry, ...]
    snapshot: str = "replay"
    source: str = ""
    epochs: int = 10
    delay_s: float = 0.0
    host_probe: bool = False  # the delay is a probe of this host, under its probe locks
    _index: dict[tuple[str, int], ReplayEntry] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        keys = {i.key for i in self.instances}
        for e in self.entries:
            # issue #37: a machine you own needs no instance row (its price is its own)
            if e.machine not in keys and not e.machine.startswith("owned:"):
                raise ValueError(f"entry machine {e.machine!r} is not among the instances")
            self._index[(e.machine, e.batch_size)] = e

    def entry(self, machine: str, batch_size: int) -> ReplayEntry | None:
        return self._index.get((machine, batch_size))

    def to_dict(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot,
            "source": self.source,
            "epochs": self.epochs,
            "delay_s": self.delay_s,
            "host_probe": self.host_probe,
            "instances": [i.to_dict() for i in self.instances],
            "entries": [e.to_dict() for e in self.entries],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReplayTable:
        return cls(
            instances=tuple(InstanceType(**i) for i in d["instances"]),
            entries=tuple(ReplayEntry.from_dict(e) for e in d["entries"]),
            snapshot=str(d.get("snapshot", "replay")),
            source=str(d.get("source", "")),
            epochs=int(d.get("epochs", 10)),
            delay_s=float(d.get("delay_s", 0.0)),
            host_probe=bool(d.get("host_probe", False)),
        )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> ReplayTable:
        p = Path(path)
        if not p.exists():
            raise AdvisorError(f"Replay table {p} does not exist.", "check the path.")
        try:
            return cls.from_dict(json.loads(p.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError) as exc:
            raise AdvisorError(f"Replay table {p} is invalid ({exc}).", "fix the file.") from exc


class ReplayClock:
    """Simulated seconds for a replayed search: it starts at ``start`` and moves on only by
    each new probe's recorded ``probe_s`` as the replay back end serves it, so ``--timeout``
    and the stop rules see the time the recorded probes took, the same on every run."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ReplayBackend(Backend):
    """Serves a ``ReplayTable``; counts each distinct (machine, batch) served as one probe.
    Given a ``ReplayClock``, the search runs on it (each new probe advances it)."""

    name = "replay"
    # Issue #27: each replayed row stands for a probe run on that machine, charged at its price.
    probes_run_on_candidates = True

    def __init__(self, table: ReplayTable, clock: ReplayClock | None = None) -> None:
        super().__init__()
        self.table = table
        self.probed: list[tuple[str, int]] = []  # distinct (machine, batch), in probing order
        self.replay_clock = clock
        if clock is not None:
            self.clock = clock

    @property
    def snapshot(self) -> str:
        return self.table.snapshot

    def _instances(self, machines: MachineFilter) -> Sequence[InstanceType]:
        out = []
        for inst in self.table.instances:
            if inst.provider == "local":
                if machines.include_local:
                    out.append(inst)
            elif matches(inst, machines):
                out.append(inst)
        return out + self._owned(machines, {i.key for i in out})

    @staticmethod
    def _owned(machines: MachineFilter, have: set[str]) -> list[InstanceType]:
        """Issue #37: the machines you own, candidates as the local back end adds them (the
        table's entries for ``owned:NAME`` give their times; without one, none is served)."""
        from advisor.providers import catalog
        from advisor.providers.owned import load_owned

        if not load_owned():
            return []

        rest = replace(machines, accelerators=())
        found = owned_candidates(catalog.load().accelerators, machines, rest)
        return [i for i in found if i.key not in have]

    @contextlib.contextmanager
    def _probing(self, workload: WorkloadInfo, batch_size: int) -> Iterator[None]:
        """With ``host_probe``, the delay holds the locks a local probe holds (as
        ``LocalBackend.probe`` takes them): its configuration's -- one per workload and batch
        size, whatever the machine, as a local probe's key -- then this host's slot."""
        if not self.table.host_probe:
            yield
            return
        with probe_key_lock(f"replay|{workload.name}|{batch_size}"), probe_slot():
            yield

    def _runtime(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> RunTime:
        epochs_est = workload.epochs_estimate(batch_size)  # issue #19: as suggest counts them
        epochs = epochs_est.epochs
        per_batch = {"epochs_model": epochs_est.to_dict()}
        entry = self.table.entry(instance.key, batch_size)
        if self.table.delay_s > 0:
            with self._probing(workload, batch_size):
                time.sleep(self.table.delay_s)
        new = (instance.key, batch_size) not in self.probed
        if new:
            self.probed.append((instance.key, batch_size))
            if self.replay_clock is not None and entry is not None:
                self.replay_clock.advance(entry.probe_s)
        source = "measured" if instance.provider == "local" else "replayed"
        if entry is None:
            return RunTime(
                None, source, epochs, 0.0, new_probe=new, error="not in the replay table"
            )
        if entry.runtime is None:
            return RunTime(None, source, epochs, entry.probe_s, new_probe=new, error=entry.error)
        if entry.phases is not None:
            from advisor.prediction.run.iteration_model import estimate

            est = estimate(entry.phases, workload.n_train, workload.n_val, epochs, batch_size)
            return RunTime(
                est.runtime,
                entry.phases.source,
                epochs,
                entry.probe_s,
                estimate={**est.to_dict(), **per_batch, **entry.estimate},
                phases=entry.phases,
                new_probe=new,
            )
        return RunTime(
            entry.runtime,
            source,
            self.table.epochs,
            entry.probe_s,
            estimate={
                "runtime": entry.runtime.to_dict(),
                "source": "replay table",
                **entry.estimate,
            },
            new_probe=new,
        )

    def _screen(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> RunTime | None:
        entry = self.table.entry(instance.key, batch_size)
        if entry is None or entry.runtime is None:  # a configuration that cannot run
            error = "not in the replay table" if entry is None else entry.error
            return RunTime(None, "modelled", self.table.epochs, 0.0, error=error)
        if entry.predicted is None:
            return None
        return RunTime(entry.predicted, "modelled", self.table.epochs, entry.probe_s,
                       estimate=dict(entry.estimate), phases=entry.phases)  # fmt: skip


def backend_from_spec(spec: str) -> Backend:
    """Build a back end from ``advisor suggest --backend`` text: ``replay:PATH.json``."""
    kind, _, arg = spec.partition(":")
    if kind == "replay" and arg:
        return ReplayBackend(ReplayTable.load(arg))
    raise AdvisorError(
        f"Unknown back end '{spec}'.",
        "use --backend replay:PATH.json, or leave it out for local probes.",
    )
