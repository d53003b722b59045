"""The real back end: probes on this machine, cached in the study storage, and the
performance model for catalog machines.

- ``ProbeCache`` (``evaluation.probe_cache``): probe results kept as user attributes of a study
  named ``advisor-probe-cache`` in the same storage as the studies, each with its operator
  trace and loader time (taken once, ``prediction.step.ready``), and the traces of other batches.
- ``LocalBackend``: real probes (``advisor.probes.runner.run_probe``), measured phases for the
  local machine, the one prediction path (``forecast.forecast.forecast_machine``, as ``advisor
  predict`` and the service) for catalog machines, the iteration-time model for the run. A
  catalog machine with a remote probe (issue #14, ``advisor.remote.probe``) uses its measured
  phases at that batch size instead; an emulated one (run here) is labelled so. Issue #34: the
  memory checks of ``evaluation.memory_checks`` (no probe too big for this machine; rows that
  do not fit their GPUs' memory are scored as such).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from advisor.evaluation.candidates import matches, owned_candidates
from advisor.evaluation.contention import Retakes
from advisor.evaluation.contract import Backend, RunTime, probe_duration_s
from advisor.evaluation.failures import TRANSIENT_FAILURES
from advisor.evaluation.measured import EMULATED_SOURCE, REMOTE_SOURCE, RemoteLookup, remote_summary
from advisor.evaluation.memory_checks import BatchLimits, StandIns, not_probed_here
from advisor.evaluation.probe_cache import (
    PROBE_CACHE_STUDY,
    ProbeCache,
    machine_fingerprint,
    probe_cache_key,
)
from advisor.evaluation.probe_slot import probe_key_lock, probe_slot
from advisor.evaluation.untimed import default_threads
from advisor.evaluation.workload import WorkloadInfo
from advisor.prediction.run.epochs_model import EpochsEstimate
from advisor.probes.result import PhaseTimes, ProbeRequest, ProbeResult
from advisor.providers.catalog import InstanceType
from advisor.search_spaces.space import MachineFilter

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

__all__ = ["PROBE_CACHE_STUDY", "LocalBackend", "ProbeCache", "machine_fingerprint",
           "probe_cache_key"]  # fmt: skip

RunProbe = Callable[[ProbeRequest], ProbeResult]
PredictPhases = Callable[[ProbeResult, InstanceType, Any, int], PhaseTimes]


class LocalBackend(Backend):
    """Real probes on this machine + the performance model for catalog machines.

    ``run_probe`` and ``predict_phases`` are injectable (tests pass fakes); by default they
    are ``advisor.probes.runner.run_probe`` and the one prediction path,
    ``advisor.prediction.forecast.forecast.forecast_machine`` (on the probe made ready by ``ready``).
    """

    name = "local"
    # Issues #27: trials charge nothing, repeat their screen; #35: each GPU's training plan
    probes_run_on_candidates, trials_repeat_screen, plans = False, True, True
    models_nodes = True  # issue #49: a type on N machines, by the one prediction path

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
        on_probe: Callable[..., None] | None = None,  # (text[, done, total])
        remote_lookup: RemoteLookup | None = None,
        ledger_storage: str | None = None,
    ) -> None:
        super().__init__()
        if catalog is None:
            from advisor.providers import catalog as catalog_mod

            catalog = catalog_mod.load(snapshot)
        self.catalog = catalog
        self.cache = ProbeCache(storage)
        self.storage = storage  # the study storage (remote probes are cached there too)
        # The calibration ledger the model reads (None: the advisor's SQLite file).
        self.ledger_storage = ledger_storage
        self.started_at = time.time()  # transient probe failures from before are retried
        self.iterations = iterations
        self.max_probe_s = max_probe_s  # time box of a probe's iterations (at least 5 run)
        self.threads = threads or default_threads()
        self.timeout_s = timeout_s
        self.runtime_params = tuple(runtime_params)
        self._run_probe = run_probe
        self._predict = predict_phases
        self._on_probe = on_probe
        # Remote probes (issue #14) by (machine key, batch, runtime hps): found in the storage
        # by ``remote_lookup`` (once per key), or handed over by the cloud-probe step.
        self._remote_lookup = remote_lookup
        self._remote: dict[tuple[str, int, str], Any] = {}
        self._fresh: set[str] = set()  # probe keys ``prefetch`` took in this run (new probes)
        self.retakes = Retakes()  # busy-machine probes judged (and retaken) this run
        # Issue #34: a probe too big for this machine is never run (its stand-in is traced),
        # and each machine's largest fitting batch is computed once (evaluation.memory_checks)
        self.stand_ins, self.limits = StandIns(), BatchLimits()

    @property
    def snapshot(self) -> str:
        return str(self.catalog.snapshot)

    def _instances(self, machines: MachineFilter) -> list[InstanceType]:
        catalog = self.catalog
        if machines.region is not None:  # issue #28: --region prices every type there
            from advisor.providers import catalog as catalog_mod

            catalog = catalog_mod.load(self.catalog.snapshot, region=machines.region)
        found = catalog.filter(  # the catalog knows accelerator aliases (v100, tpu, cpu)
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
        out += owned_candidates(self.catalog.accelerators, machines, rest)  # issue #37
        if machines.include_local:
            from advisor.providers.catalog import local_machine

            local = local_machine()
            if matches(local, _local_filter(machines)):
                out.append(local)
        return out

    def probe(
        self, workload: WorkloadInfo, batch_size: int, hps: dict[str, Any], noise: bool = False
    ) -> tuple[ProbeResult, bool]:
        """The local probe for (workload, batch[, runtime hps]): cached, else run now.
        ``noise``: also measure the gradient noise scale (issue #19; the reference probe)."""
        rt_hps = {k: hps[k] for k in self.runtime_params if k in hps}
        key = probe_cache_key(workload, batch_size, self.threads, self.iterations, rt_hps, noise)
        cached = self.cache.get(key, since=self.started_at)
        if cached is not None and not self.retakes.due(key, cached):
            fresh = key in self._fresh  # taken by ``prefetch`` in this run: a new probe
            self._fresh.discard(key)
            return cached, fresh
        stale = cached  # None, or a busy machine's probe to retake now
        # One probe per key across cooperating processes on this machine: the second waits
        # for the first and reads its result from the cache (a stopped first one is passed,
        # and the wait is told to the service's lease keeper: ``probe_slot``).
        with probe_key_lock(key):
            cached = self.cache.get(key, since=self.started_at)
            # issue #36: the probe judged to retake is retaken (asking ``due`` again here
            # answered "judged already", so it was reused); one another process took
            # meanwhile is used
            if cached is not None and cached != stale and not self.retakes.due(key, cached):
                return cached, False
            self.retakes.taken(key)
            if self._run_probe is None:  # issue #34: decided before any probe runs
                stand_in = self.stand_ins.stand_in(workload, batch_size, rt_hps)
                if stand_in is not None:
                    self.cache.put(key, stand_in)
                    return stand_in, False
            return self._run_and_cache(key, workload, batch_size, rt_hps, noise), True

    def ready(
        self,
        workload: WorkloadInfo,
        batch_size: int,
        hps: dict[str, Any],
        probe: ProbeResult,
        noise: bool = False,
    ) -> ProbeResult:
        """``probe`` with its operator trace and loader time (issue #26: taken once, the first
        time a GPU or TPU machine is predicted from it, and kept with it in the cache)."""
        from advisor.evaluation.user_code import traced_probe
        from advisor.prediction.step.ready import needs_trace

        if not needs_trace(probe):
            return probe
        rt_hps = {k: hps[k] for k in self.runtime_params if k in hps}
        out, _ = traced_probe(probe, rt_hps)  # issue #50: a user model's in the worker
        key = probe_cache_key(workload, batch_size, self.threads, self.iterations, rt_hps, noise)
        self.cache.put(key, out)
        return out

    def trace_ahead(self, workload: WorkloadInfo, batches: Sequence[int],
                    starting: Callable[[int], None] | None = None) -> None:  # fmt: skip
        """Issue #48: ``step.traces.trace_ahead`` of the screen's steps, into the probe cache."""
        from advisor.prediction.step.traces import trace_ahead

        trace_ahead(workload.name, workload.framework, batches, self.cache, starting)

    def prefetch(self, workload: WorkloadInfo, batch_sizes: Sequence[int]) -> None:
        """Issue #28: the probes the screen needs, not yet cached, in one child process
        (``advisor.evaluation.probe_batch``)."""
        from advisor.evaluation.probe_batch import prefetch

        self.limits.set_batches(batch_sizes)
        prefetch(self, workload, batch_sizes)

    def _run_and_cache(
        self,
        key: str,
        workload: WorkloadInfo,
        batch_size: int,
        rt_hps: dict[str, Any],
        noise: bool = False,
    ) -> ProbeResult:
        if self._on_probe is not None:
            self._on_probe(f"probing {workload.name} at batch {batch_size} on this machine")
        from advisor.probes.runner import run_probe

        # suggest's own per-probe limit: a wait for a busy CPU does not count (issue #36),
        # a sleep does (#50); --timeout's deadline is wall-clock over everything
        run = self._run_probe or (lambda r: run_probe(r, excuse_cpu_wait=True))
        with probe_slot():  # one timing probe at a time on this host, only while it runs
            probe = run(self._request(workload, batch_size, rt_hps, noise))
        self.cache.put(key, probe)
        return probe

    def _request(
        self, workload: WorkloadInfo, batch_size: int, rt_hps: dict[str, Any], noise: bool
    ) -> ProbeRequest:
        timeout = self.timeout_s
        if self.deadline is not None:  # --timeout bounds the whole search, probes included
            timeout = max(1.0, min(timeout, self.deadline - self.clock()))
        return ProbeRequest(
            workload=workload.name,
            batch_size=batch_size,
            framework=workload.framework,
            iterations=self.iterations,
            threads=self.threads,
            hyperparameters=rt_hps,
            timeout_s=timeout,
            max_seconds=self.max_probe_s,
            gradient_noise=noise,  # issue #19
        )

    def _rt_key(self, machine: str, batch_size: int, hps: dict[str, Any]) -> tuple[str, int, str]:
        rt_hps = {k: hps[k] for k in self.runtime_params if k in hps}
        return machine, batch_size, json.dumps(rt_hps, sort_keys=True)

    def use_remote(self, remote: Any, batch_size: int, hps: dict[str, Any] | None = None) -> None:
        """Use ``remote`` (a ``RemoteProbe``) for its machine at ``batch_size``: its phases, or
        its lasting failure (out of memory, NaN); a transient failure is not used."""
        if _lasting(remote):
            self._remote[self._rt_key(remote.machine, batch_size, hps or {})] = remote

    def remote(
        self, workload: WorkloadInfo, instance: InstanceType, batch_size: int, hps: dict[str, Any]
    ) -> Any:
        """The remote probe of ``instance`` at ``batch_size``: a successful one, or one that
        failed for good there (out of memory, NaN: properties of that machine); else None."""
        if instance.provider == "local" or instance.accelerator_count > 1:
            return None  # a probe times one device: a multi-device run stays modelled
        key = self._rt_key(instance.key, batch_size, hps)
        if key not in self._remote:
            found = None
            if self._remote_lookup is not None:
                rt_hps = {k: hps[k] for k in self.runtime_params if k in hps}
                found = self._remote_lookup(workload, instance, batch_size, rt_hps)
            self._remote[key] = found if found is not None and _lasting(found) else None
        return self._remote[key]

    def _runtime(
        self,
        workload: WorkloadInfo,
        instance: InstanceType,
        batch_size: int,
        hps: dict[str, Any],
        nodes: int = 1,
        **how: Any,  # ``planned_row``'s mode and outpaced (the screen's)
    ) -> RunTime:
        from advisor.prediction.run.iteration_model import estimate, phase_times

        anchor = workload.epochs_anchor()  # issue #19: the anchor's probe measures the noise
        # the reference probe measures the noise scale only when the model uses it (one known
        # point): fcn's four published points fit it without (issue #28: 10-20 s a cold run)
        is_ref = (
            anchor is not None and anchor.batch_size == batch_size and workload.needs_noise_scale()
        )
        probe, new = self.probe(workload, batch_size, hps, noise=is_ref)
        epochs_est, new_ref = self._epochs(workload, batch_size, hps)
        epochs, new = epochs_est.epochs, new or new_ref
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
        if instance.provider == "local":  # issue #34: too big or too slow to probe here
            here = not_probed_here(probe, epochs, new)
            if here is not None:
                return here
        # a remote probe times one machine: several stay modelled (issue #49)
        remote = self.remote(workload, instance, batch_size, hps) if nodes == 1 else None
        source, overheads, est = None, None, None
        extra: dict[str, Any] = {}
        if remote is not None and not remote.result.ok:  # measured there: it cannot run
            r = remote.result
            return RunTime(
                None,
                EMULATED_SOURCE if remote.emulated else REMOTE_SOURCE,
                epochs,
                0.0,
                estimate={"remote_probe": remote_summary(remote)},
                probe=probe,
                new_probe=new,
                error=f"remote probe {r.status} on {instance.key}: {r.error or 'no detail'}",
            )
        try:
            if remote is not None:  # measured on that machine (or emulated here): no model
                phases = phase_times(remote.result, workload.n_train, workload.n_val)
                source = EMULATED_SOURCE if remote.emulated else REMOTE_SOURCE
                extra = {"remote_probe": remote_summary(remote)}
                from advisor.evaluation.measured import measured_overheads  # issue #27

                overheads = measured_overheads(
                    remote, instance, workload.data_bytes, workload.data_basis
                )
            elif instance.provider == "local":
                phases = phase_times(probe, workload.n_train, workload.n_val)
            elif self._predict is not None and nodes == 1:
                phases = self._predict(probe, instance, self.catalog, batch_size)
            else:  # the one prediction path (advisor predict's and the service's)
                if instance.accelerator is not None:  # its operator trace, taken once
                    probe = self.ready(workload, batch_size, hps, probe, noise=is_ref)
                from advisor.evaluation.memory_checks import planned_row

                row = planned_row(self, workload, probe, instance, batch_size, epochs, new,
                                  nodes, **how)  # fmt: skip
                if isinstance(row, RunTime):  # issue #34: does not fit its GPUs' memory
                    return row
                phases, est, extra = row
            if est is None:  # measured here or there, or an injected predictor
                est = estimate(phases, workload.n_train, workload.n_val, epochs, batch_size)
        except (ValueError, ArithmeticError) as exc:
            return RunTime(
                None, "modelled", epochs, 0.0, probe=probe, new_probe=new, error=str(exc)
            )
        return RunTime(
            runtime=est.runtime,
            source=source or phases.source,
            epochs=epochs,
            probe_s=probe_duration_s(phases, self.iterations),
            estimate={**est.to_dict(), "epochs_model": epochs_est.to_dict(), **extra},
            phases=phases,
            probe=probe,
            new_probe=new,
            overheads=overheads,
        )

    def _epochs(
        self, workload: WorkloadInfo, batch_size: int, hps: dict[str, Any]
    ) -> tuple[EpochsEstimate, bool]:
        """Issue #19: epochs at ``batch_size`` from the gradient noise scale of one probe, at
        the anchor's batch size (cached like every probe); returns (estimate, new probe)."""
        from advisor.probes.gradient_noise import from_probe

        anchor = workload.epochs_anchor()
        if anchor is None or not workload.needs_noise_scale():  # none, or fitted to points
            return workload.epochs_estimate(batch_size), False
        ref, new = self.probe(workload, anchor.batch_size, hps, noise=True)
        return workload.epochs_estimate(batch_size, from_probe(ref) if ref.ok else None), new

    def _screen(
        self,
        workload: WorkloadInfo,
        instance: InstanceType,
        batch_size: int,
        hps: dict[str, Any],
        nodes: int = 1,
        **how: Any,
    ) -> RunTime | None:
        # The model is the cheap part: one local probe per batch size, then arithmetic.
        return self._runtime(workload, instance, batch_size, hps, nodes, **how)


def _lasting(remote: Any) -> bool:
    """Whether a remote probe's result holds for good: a success, or out of memory / NaN."""
    return bool(remote.result.ok or remote.result.status not in TRANSIENT_FAILURES)


def _local_filter(machines: MachineFilter) -> MachineFilter:
    """The local machine ignores provider/service/price limits (it is always 'yours')."""
    return MachineFilter(accelerators=machines.accelerators, spot=False)
