"""The real back end: probes on this machine, cached in the study storage, and the
performance model for catalog machines.

- ``ProbeCache``: probe results kept as user attributes of a study named
  ``advisor-probe-cache`` in the same storage as the studies.
- ``LocalBackend``: real probes (``advisor.probes.runner.run_probe``), measured phases for the
  local machine, the performance model (``advisor.probes.perf.model.predict_phases``) for
  catalog machines, the iteration-time model for the run.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from advisor.probes.result import PhaseTimes, ProbeRequest, ProbeResult
from advisor.providers.catalog import InstanceType
from advisor.scoring import Backend, RunTime, WorkloadInfo, matches, probe_duration_s
from advisor.search_spaces.space import MachineFilter

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

PROBE_CACHE_STUDY = "advisor-probe-cache"


class ProbeCache:
    """Probe results kept in the study storage (works with any Optuna storage URL).

    They live as user attributes of a dedicated study named ``advisor-probe-cache``: key ->
    ``ProbeResult.to_dict()``. A failed probe is cached when the failure is a property of the
    configuration (out of memory, NaN loss); crashes and timeouts are retried next time.
    """

    def __init__(self, storage: str | BaseStorage) -> None:
        import optuna

        self._storage = optuna.storages.get_storage(storage)
        study = optuna.create_study(
            study_name=PROBE_CACHE_STUDY, storage=self._storage, load_if_exists=True
        )
        self._study_id = study._study_id
        self._memo: dict[str, ProbeResult] = {}

    def get(self, key: str) -> ProbeResult | None:
        if key in self._memo:
            return self._memo[key]
        attrs = self._storage.get_study_user_attrs(self._study_id)
        if key not in attrs:
            return None
        probe = ProbeResult.from_dict(attrs[key])
        self._memo[key] = probe
        return probe

    def put(self, key: str, probe: ProbeResult) -> None:
        if probe.status in ("error", "timeout"):
            return
        self._storage.set_study_user_attr(self._study_id, key, probe.to_dict())
        self._memo[key] = probe

    def keys(self) -> list[str]:
        return list(self._storage.get_study_user_attrs(self._study_id))


def machine_fingerprint(threads: int) -> str:
    """Identifies this machine and thread count in probe-cache keys."""
    return f"{platform.node()}/{platform.machine()}/{os.cpu_count()}cpu/{threads}t"


def probe_cache_key(
    workload: WorkloadInfo,
    batch_size: int,
    threads: int,
    iterations: int,
    runtime_hps: dict[str, Any],
) -> str:
    hp = json.dumps(runtime_hps, sort_keys=True) if runtime_hps else ""
    return (
        f"{workload.name}|{workload.framework}|b{batch_size}|{machine_fingerprint(threads)}"
        f"|k{iterations}|{hp}"
    )


RunProbe = Callable[[ProbeRequest], ProbeResult]
PredictPhases = Callable[[ProbeResult, InstanceType, Any, int], PhaseTimes]


class LocalBackend(Backend):
    """Real probes on this machine + the performance model for catalog machines.

    ``run_probe`` and ``predict_phases`` are injectable (tests pass fakes); by default they
    are ``advisor.probes.runner.run_probe`` and
    ``advisor.probes.perf.model.predict_phases``.
    """

    name = "local"

    def __init__(
        self,
        storage: str | BaseStorage,
        snapshot: str | None = None,
        *,
        iterations: int = 8,
        max_probe_s: float | None = 4.0,
        threads: int | None = None,
        timeout_s: float = 120.0,
        runtime_params: Sequence[str] = (),
        run_probe: RunProbe | None = None,
        predict_phases: PredictPhases | None = None,
        catalog: Any = None,
        on_probe: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        if catalog is None:
            from advisor.providers import catalog as catalog_mod

            catalog = catalog_mod.load(snapshot)
        self.catalog = catalog
        self.cache = ProbeCache(storage)
        self.iterations = iterations
        self.max_probe_s = max_probe_s  # time box of a probe's iterations (at least 5 run)
        self.threads = threads or _default_threads()
        self.timeout_s = timeout_s
        self.runtime_params = tuple(runtime_params)
        self._run_probe = run_probe
        self._predict = predict_phases
        self._on_probe = on_probe

    @property
    def snapshot(self) -> str:
        return str(self.catalog.snapshot)

    def _instances(self, machines: MachineFilter) -> list[InstanceType]:
        found = self.catalog.filter(  # the catalog knows accelerator aliases (v100, tpu, cpu)
            providers=tuple(p for p in machines.providers if p != "local"),
            services=tuple(s for s in machines.services if s != "local"),
            accelerators=machines.accelerators,
            min_gpus=machines.min_gpus,
            max_gpus=machines.max_gpus,
            max_price=machines.max_price,
        )
        rest = replace(machines, accelerators=())
        if machines.instance_types:  # native names (ml.p3.2xlarge, Standard_NC6s_v3) match too
            rest = replace(rest, instance_types=self.catalog.matching_keys(machines.instance_types))
        out = [i for i in found if i.provider != "local" and matches(i, rest)]
        if machines.include_local:
            from advisor.providers.catalog import local_machine

            local = local_machine()
            if matches(local, _local_filter(machines)):
                out.append(local)
        return out

    def probe(
        self, workload: WorkloadInfo, batch_size: int, hps: dict[str, Any]
    ) -> tuple[ProbeResult, bool]:
        """The local probe for (workload, batch[, runtime hps]): cached, else run now."""
        rt_hps = {k: hps[k] for k in self.runtime_params if k in hps}
        key = probe_cache_key(workload, batch_size, self.threads, self.iterations, rt_hps)
        cached = self.cache.get(key)
        if cached is not None:
            return cached, False
        if self._on_probe is not None:
            self._on_probe(f"probing {workload.name} at batch {batch_size} on this machine")
        from advisor.probes.runner import run_probe

        run = self._run_probe or run_probe
        request = ProbeRequest(
            workload=workload.name,
            batch_size=batch_size,
            framework=workload.framework,
            iterations=self.iterations,
            threads=self.threads,
            hyperparameters=rt_hps,
            timeout_s=self.timeout_s,
            max_seconds=self.max_probe_s,
        )
        probe = run(request)
        self.cache.put(key, probe)
        return probe, True

    def _runtime(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> RunTime:
        from advisor.probes.iteration_model import estimate, phase_times

        epochs = workload.epochs_for(batch_size)
        probe, new = self.probe(workload, batch_size, hps)
        if not probe.ok:
            return RunTime(
                None,
                "measured",
                epochs,
                probe.wall_s,
                probe=probe,
                new_probe=new,
                error=f"probe {probe.status}: {probe.error or 'no detail'}",
            )
        try:
            if instance.provider == "local":
                phases = phase_times(probe, workload.n_train, workload.n_val)
            else:
                from advisor.probes.perf.model import predict_phases

                predict = self._predict or predict_phases
                phases = predict(probe, instance, self.catalog, batch_size)
            est = estimate(phases, workload.n_train, workload.n_val, epochs, batch_size)
        except (ValueError, ArithmeticError) as exc:
            return RunTime(
                None, "modelled", epochs, 0.0, probe=probe, new_probe=new, error=str(exc)
            )
        return RunTime(
            runtime=est.runtime,
            source=phases.source,
            epochs=epochs,
            probe_s=probe_duration_s(phases, self.iterations),
            estimate=est.to_dict(),
            phases=phases,
            probe=probe,
            new_probe=new,
        )

    def _screen(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> RunTime | None:
        # The model is the cheap part: one local probe per batch size, then arithmetic.
        return self._runtime(workload, instance, batch_size, hps)


def _local_filter(machines: MachineFilter) -> MachineFilter:
    """The local machine ignores provider/service/price limits (it is always 'yours')."""
    return MachineFilter(accelerators=machines.accelerators, spot=False)


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
