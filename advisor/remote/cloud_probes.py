"""``advisor suggest --cloud-probes N`` (issue #14): measure the most promising machines for real.

The screen models every cloud machine from a probe of this machine (the published methodology 2,
docs/method.md section 4, measured a few iterations on each candidate instead). This step sits between the screen and
the trial loop:

1. Rank the screened (machine, batch) candidates by the objective with the report's rule
   (``advisor.evaluation.ranking.rank``: feasible first, the tie rule), and pick the next machine to
   probe: the best-ranked cloud machine not probed yet, at its best batch size, a new
   accelerator type first (an A10G and an L4 before a second A10G box). This machine and
   machines whose remote probe is already cached are skipped (their measurement is used).
2. Its probe must fit what is left of the probe budget: the predicted probe time plus the
   service's billed start-up allowance (``providers.overheads``; its upper bound, so a slow
   start cannot push the spend over), at the on-demand price of the row the job runs on (a
   VM's job runs on its managed service: ``remote_probe.job_machine``). After the job, its
   real cost (billed seconds x price) is charged; the trial loop spends what is left
   (``StudyState`` reads the study's record).
3. Run it (``advisor.remote.probe``), then re-screen every batch size of that machine and of
   the machines with its accelerator: the measured batch from the measured phases, the others
   from the model, which the ledger has corrected with the measurement
   (``prediction.timing.correction``; emulated probes are kept out of the ledger).
4. Stop after N machines, or early when the measured leader cannot be overtaken: every
   candidate on a machine not yet probed has an optimistic bound (interval low end of the
   objective; for a Pareto search its low-end point) worse than the measured leader. The
   start-up overheads (a per-service prior no probe measures) count at their expected value
   in that bound: only the training may turn out faster (issue #14).
5. A failed job (failed, out of memory, timed out) is recorded and the next machine is tried;
   a provider that is not configured (no credentials, no settings) is skipped with one line
   and the rest carries on modelled.

Each run records what it probed in the study (user attribute ``cloud_probes``), so a re-run
of the same command probes nothing new (N counts per study) and the money is charged once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.evaluation.contract import Evaluation
from advisor.providers.catalog import MachineKey
from advisor.remote.cloud_prober import Prober, ProviderUnavailable
from advisor.remote.rules import (
    STUDY_ATTR,
    Config,
    accelerator_type,
    expected_cost,
    leader_stands,
    next_machine,
    ranked,
    recorded_jobs,
    recorded_spend,
)

if TYPE_CHECKING:
    from advisor.evaluation.contract import Backend
    from advisor.outcome import SuggestOutcome
    from advisor.providers.catalog import InstanceType


@dataclass
class CloudProbeStep:
    """What the step did: the jobs (one dict each), one-line skips, why it stopped, the spend."""

    requested: int
    jobs: list[dict[str, Any]] = field(default_factory=list)  # started by this run
    skipped: list[str] = field(default_factory=list)
    stop_reason: str = ""
    spent_usd: float = 0.0  # by this run
    earlier: list[dict[str, Any]] = field(default_factory=list)  # the study's earlier runs'

    def to_dict(self) -> dict[str, Any]:
        """For the report: every job of the study (``new``: this run's), the total charged."""
        every = [*self.earlier, *self.jobs]
        return {
            "requested": self.requested,
            "jobs": every,
            "new": len(self.jobs),
            "skipped": self.skipped,
            "stop_reason": self.stop_reason,
            "spent_usd": round(sum(float(j.get("charged_usd") or 0.0) for j in every), 6),
            "new_spent_usd": round(self.spent_usd, 6),
        }


# -- the step -----------------------------------------------------------------------------


def run_cloud_probes(
    outcome: SuggestOutcome,
    backend: Backend,
    progress: Callable[[str, int, int], None] | None = None,
    deadline: float | None = None,
    prober: Prober | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> CloudProbeStep:
    """Probe up to ``outcome.options.cloud_probes`` machines for real (see the module
    docstring); updates ``outcome.screen`` and the study's record, and returns what it did."""
    n = outcome.options.cloud_probes
    step = CloudProbeStep(requested=n)
    if n <= 0:
        return step
    if not hasattr(backend, "use_remote") or not outcome.screen:
        step.stop_reason = (
            "cloud probes need the local back end and a screen; nothing probed"
            if outcome.screen
            else "cloud probes need the screen (not with --no-screen); nothing probed"
        )
        return step
    study = outcome.study
    earlier = recorded_jobs(study.user_attrs)
    step.earlier = earlier
    instances = {c.instance.key: c.instance for c in outcome.candidates}
    exclude = {str(j["machine"]) for j in earlier}
    types_done = {
        accelerator_type(instances[m]) for j in earlier if (m := str(j["machine"])) in instances
    }
    measured: dict[str, Config] = {}  # instance key -> measured candidate config (screen key)
    for j in earlier:
        if j.get("measured") and str(j["machine"]) in instances:
            measured[str(j["machine"])] = (str(j["machine"]), int(j["batch_size"]))
    left = (
        outcome.probe_budget_usd - _spent_by_trials(outcome) - recorded_spend(study.user_attrs)[0]
    )
    blocked: set[str] = set()  # providers not configured
    count = len(earlier)
    if prober is None:
        from advisor.remote.cloud_prober import default_prober

        prober = default_prober(outcome, backend)
    while True:
        if count >= n:
            step.stop_reason = (
                f"probed {n} machine(s)"
                if step.jobs
                else f"the study already probed {count} "
                f"machine(s) in an earlier run (--cloud-probes {n})"
            )
            break
        order = ranked(outcome)
        done = [ev for ev in order if _measured_pair(ev, measured, backend, outcome, instances)]
        for ev in done:  # measured before (a cached remote probe): used, never paid again
            exclude.add(MachineKey(ev.machine).base)
            types_done.add(accelerator_type(instances[MachineKey(ev.machine).base]))
        unprobed = [
            ev
            for ev in order
            if (inst := instances[MachineKey(ev.machine).base]).provider != "local"
            and inst.key not in exclude
        ]
        here = [ev for ev in order if instances[MachineKey(ev.machine).base].provider == "local"]
        if not unprobed:
            step.stop_reason = "no cloud machine left to probe"
            break
        leader, stands = leader_stands(outcome.objective, outcome.options, done + here, unprobed)
        if leader is not None and stands:
            step.stop_reason = (
                f"the measured leader {leader.machine} b{leader.batch_size} cannot be "
                "overtaken: every unprobed candidate's optimistic bound is worse"
            )
            break
        pick = next_machine(unprobed, instances, exclude, types_done)
        if pick is None:
            step.stop_reason = "no cloud machine left to probe"
            break
        ev = pick
        inst = instances[MachineKey(ev.machine).base]
        exclude.add(inst.key)
        if inst.provider in blocked:
            continue
        cost = expected_cost(ev, _job_row(inst, backend))
        if cost > left + 1e-12:
            step.skipped.append(
                f"cloud probe of {inst.key} b{ev.batch_size} skipped for the budget: it may "
                f"cost USD {cost:.4f}, USD {max(left, 0.0):.4f} of the probe budget is left"
            )
            continue
        if deadline is not None and clock() > deadline:
            step.stop_reason = "timeout"
            break
        done_job = _probe_one(outcome, backend, prober, inst, ev, (count, n), progress, clock)
        if isinstance(done_job, ProviderUnavailable):  # cannot start jobs there: one line
            blocked.add(inst.provider)
            step.skipped.append(_not_configured_line(inst, done_job))
            continue
        job = done_job
        job["expected_usd"] = round(cost, 6)
        count += 1
        types_done.add(accelerator_type(inst))
        left -= job["charged_usd"]
        step.spent_usd += job["charged_usd"]
        step.jobs.append(job)
        if job["measured"]:
            measured[inst.key] = (inst.key, ev.batch_size)
        _record(study, job)
    if progress:
        progress("cloud", n, n)
    return step


def _not_configured_line(inst: InstanceType, exc: AdvisorError) -> str:
    fix = f" ({exc.fix.rstrip('.')})" if exc.fix else ""
    return (
        f"cloud probes skipped for {inst.provider}: {exc.problem.rstrip('.')}{fix}; "
        "carrying on modelled"
    )


def _spent_by_trials(outcome: SuggestOutcome) -> float:
    """Probe money the study's trials have charged so far (an earlier run's)."""
    from advisor.records import TrialRecord

    total = 0.0
    for t in outcome.study.get_trials(deepcopy=False):
        rec = TrialRecord.from_trial(t)
        if rec is not None and rec.source != "managed" and t.state.is_finished():
            total += rec.probe_charged_usd
    return total


def _measured_pair(
    ev: Evaluation,
    measured: dict[str, Config],
    backend: Any,
    o: SuggestOutcome,
    instances: dict[str, InstanceType],
) -> bool:
    """Whether a remote probe measured ``ev``'s machine at its batch size."""
    base = MachineKey(ev.machine).base
    if measured.get(base, ("", 0))[1] == ev.batch_size:
        return True
    inst = instances[base]
    return (
        inst.provider != "local" and backend.remote(o.workload, inst, ev.batch_size, {}) is not None
    )


def _probe_one(
    outcome: SuggestOutcome,
    backend: Any,
    prober: Prober,
    inst: InstanceType,
    ev: Evaluation,
    place: tuple[int, int],
    progress: Callable[[str, int, int], None] | None,
    clock: Callable[[], float],
) -> dict[str, Any] | ProviderUnavailable:
    """Run one remote probe and re-screen its machine: the job's dict, or the prober's
    ``ProviderUnavailable`` when jobs cannot be started on that provider.
    A job that fails for any other reason is a result (its state and error recorded)."""
    from advisor.prediction.run.iteration_model import phase_times

    batch = ev.batch_size
    started = clock()

    def status(text: str) -> None:
        if progress:
            elapsed = clock() - started
            progress(f"cloud:{inst.key} b{batch}: {text} ({elapsed:.0f} s)", *place)

    status("starting the probe job")
    local, _ = backend.probe(outcome.workload, batch, {})
    predicted = ev.phases.t2.value if ev.phases is not None else None
    job: dict[str, Any] = {
        "machine": inst.key,
        "accelerator": inst.accelerator,
        "batch_size": batch,
        "predicted_step_s": predicted,
        "measured_step_s": None,
        "ratio": None,
        "measured": False,
        "charged_usd": 0.0,
    }
    try:
        remote = prober(inst, batch, local, status)
    except ProviderUnavailable as exc:
        return exc
    except Exception as exc:  # an SDK or network error mid-job: a failed probe, go on
        status("error")
        wall = clock() - started
        return {**job, "state": "error", "error": f"{type(exc).__name__}: {exc}", "wall_s": wall}
    info = _job_info(remote.job)
    job.update(info)
    job["emulated"] = bool(remote.emulated)
    job["cached"] = bool(remote.cached)
    job["charged_usd"] = 0.0 if remote.cached else float(info.get("cost_usd") or 0.0)
    result = remote.result
    if result.ok:
        step = phase_times(result, outcome.workload.n_train, outcome.workload.n_val).t2.value
        job.update(measured=True, measured_step_s=step)
        if predicted:
            job["ratio"] = step / predicted
        backend.use_remote(remote, batch)
    else:  # out of memory / NaN there: that batch is marked failed on that machine
        job["state"] = f"{info.get('state', 'completed')}, probe {result.status}"
        job["error"] = result.error or info.get("error")
        backend.use_remote(remote, batch)
    status(f"{job['state']}")
    _rescreen(outcome, backend, inst)
    return job


def _job_info(job: Any) -> dict[str, Any]:
    data = job.to_dict() if hasattr(job, "to_dict") else dict(job)
    keep = ("job_id", "service", "state", "wall_s", "billed_s", "billed_source")
    out = {k: data.get(k) for k in keep}
    # issue #27: the job's measured start-up (provisioning; time on the machine), kept
    out["before_start_s"] = data.get("before_start_s")
    out["on_machine_s"] = data.get("on_machine_s")
    out["price_per_hour"] = data.get("price_per_hour")
    out["cost_usd"] = data.get("cost_usd")
    out["error"] = data.get("error")
    return out


def _rescreen(outcome: SuggestOutcome, backend: Any, inst: InstanceType) -> None:
    """Screen every batch size of ``inst`` again (on demand and spot), and of the machines
    with its accelerator (the ledger corrects a device class): the measured batch now from
    the measured phases, the rest from the ledger-corrected model."""
    kind = accelerator_type(inst)
    for cand in outcome.candidates:
        if cand.local or accelerator_type(cand.instance) != kind:
            continue
        for batch in outcome.space.batch_sizes:
            pred = backend.screen(outcome.workload, cand, batch, {})
            if pred is not None:
                outcome.screen[(cand.key, batch)] = pred


def _record(study: Any, job: dict[str, Any]) -> None:
    """Append ``job`` to the study's record (re-read first: another process may have added)."""
    from advisor.storage.locks import sigint_deferred

    jobs = recorded_jobs(study.user_attrs)
    clean = {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in job.items()
    }
    with sigint_deferred():
        study.set_user_attr(STUDY_ATTR, {"jobs": [*jobs, clean]})


def _job_row(inst: InstanceType, backend: Backend) -> InstanceType:
    """The row a probe job on ``inst`` is billed at (a VM's job runs on the managed service)."""
    from advisor.remote.probe import job_machine

    catalog = getattr(backend, "catalog", None)
    return inst if catalog is None else job_machine(inst, catalog)
