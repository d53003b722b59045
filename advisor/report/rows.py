"""The rows of ``advisor suggest``'s report: one dict per scored candidate (a trial, or a
screened machine x batch that never became one), the limiting term of its run time, the
hyperparameters the study hands on as ranges, and the imported managed runs.

``advisor.report.build.build_report`` assembles them; nothing here chooses (``advisor.study.selection``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.evaluation.contract import Evaluation
from advisor.options import is_feasible
from advisor.records import TrialRecord, is_managed
from advisor.report.expected import expected
from advisor.report.memory import memory_text

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from advisor.outcome import SuggestOutcome
    from advisor.search_spaces.space import JointSpace

# The run time's terms (advisor.prediction.run.iteration_model.estimate's breakdown), as the report names them.
TERMS = {
    "init": "initialisation",
    "first_iteration": "first iteration",
    "steady_iterations": "training steps",
    "validation": "validation",
}
# The performance model's bottlenecks (advisor.prediction.timing), when a back end records one.
HOST_BOUND = {"input", "dispatch"}


def limiting(estimate: dict[str, Any]) -> str:
    """The largest term of a run's time and its share ("training steps 93 %"), plus the
    modelled iteration bottleneck when the estimate carries one; "" when unknown."""
    parts = {k: float(v) for k, v in (estimate.get("breakdown") or {}).items() if k in TERMS}
    job = job_terms(estimate)  # issue #14: the cloud job's start-up is a term of its own
    if job["startup_s"] and job["startup_s"]["value"] > 0:
        if not parts and job["training_s"]:  # no breakdown (a replayed run): training whole
            parts["training"] = float(job["training_s"]["value"])
        parts["startup"] = float(job["startup_s"]["value"])
    total = sum(parts.values())
    text = ""
    if total > 0:
        top = max(parts, key=lambda k: parts[k])
        text = f"{TERMS.get(top, top.replace('startup', 'start-up'))} {parts[top] / total:.0%}"
    neck = estimate.get("bottleneck")
    if neck:
        text = f"{text}, {'host-bound: ' if neck in HOST_BOUND else ''}{neck}".strip(", ")
    return text


def job_terms(estimate: dict[str, Any]) -> dict[str, Any]:
    """Issue #14: the run's start-up (provisioning, image pull or VM boot, data download) and
    training seconds as {value, low, high}, from the priced estimate; None for a record
    priced before start-up was counted (its runtime is the training alone)."""
    over = estimate.get("overheads") or {}
    return {"startup_s": over.get("startup_s"), "training_s": over.get("training_s")}


# How a row's time is known (issue #14), the report's "known" column, and its legend. Issue #27:
# no row is "measured": a probe times a few iterations, the run is extrapolated from them.
LABELS = {
    "here": "probed here, extrapolated",
    "probed": "probed on the machine, extrapolated",
    "emulated": "emulated (local stand-in), extrapolated",
    "model": "modelled",
    "replay": "replayed",
}
KNOWN = {
    "here": f"{LABELS['here']}: a few iterations timed on this machine, extrapolated over the run "
    "by the iteration-time model (epochs per batch size modelled)",
    "probed": f"{LABELS['probed']}: a few iterations timed there by a remote probe "
    "(--cloud-probes), extrapolated by the iteration-time model; the start-up its job measured",
    "emulated": f"{LABELS['emulated']}: a remote probe run here in its place, so this machine's "
    "timings, not that machine's",
    "model": f"{LABELS['model']}: predicted from this machine's probe by the performance model; "
    "no probe ran on that machine, so it charged nothing",
    "replay": f"{LABELS['replay']} from a recorded table",
}


def how_known(source: str, service: str | None) -> str:
    """A row's ``known`` key (``KNOWN``) from its source and service."""
    if source.startswith("emulated"):
        return "emulated"
    if source.startswith("measured (remote"):
        return "probed"
    if source.startswith("measured"):
        return "here" if service == "local" else "probed"
    if source.startswith("replayed"):
        return "replay"
    return "model"


def runtime_params(space: JointSpace) -> list[str]:
    """Hyperparameters that change the run time (width, depth...): advised with the machine."""
    return [p.name for p in space.hyperparameters if p.affects_runtime]


def tuned_ranges(space: JointSpace) -> dict[str, str]:
    """Hyperparameters that do not change the run time (learning rate, dropout...), as the
    ranges the managed tuning job searches: the study does not judge their quality."""
    out: dict[str, str] = {}
    for p in space.hyperparameters:
        if p.affects_runtime:
            continue
        if hasattr(p, "choices"):
            out[p.name] = "{" + ", ".join(map(str, p.choices)) + "}"
        else:
            scale = " log" if getattr(p, "log", False) else ""
            step = f" step {p.step:g}" if getattr(p, "step", None) else ""  # issue #28
            out[p.name] = f"{p.low:g}..{p.high:g}{scale}{step}"
    return out


def _instance_fields(inst: dict[str, Any], spot: bool) -> dict[str, Any]:
    return {
        "provider": inst.get("provider"),
        "service": inst.get("service"),
        "instance_type": inst.get("instance_type"),
        "accelerator": inst.get("accelerator"),
        "gpus": inst.get("accelerator_count", 0),
        "region": inst.get("region") or None,
        "price_date": inst.get("price_date"),
        **price_provenance(inst, spot),  # issue #27
    }


def price_provenance(inst: dict[str, Any], spot: bool) -> dict[str, Any]:
    """Issue #27: how the row's price (on demand or spot) was obtained -- ``read-out`` from a
    named price list, an ``estimate`` (best knowledge or derived by a stated rule) or
    ``given`` (this machine) -- its source, and whether the type is still current."""
    from advisor.providers.catalog import basis_of

    source = str(inst.get("source") or "")
    basis = inst.get("spot_basis" if spot else "price_basis") or basis_of(
        str(inst.get("provider") or ""), source
    )
    return {
        "price_basis": basis,
        "price_source": source or None,
        "lifecycle": inst.get("lifecycle") or "current",
    }


def label(known: str, screen_only: bool = False) -> str:
    """A row's label: how its figures were obtained (``LABELS``), and "screen only" when no
    trial evaluated it."""
    text = LABELS.get(known, known)
    return f"{text}, screen only" if screen_only else text


def trial_row(t: FrozenTrial, space: JointSpace) -> dict[str, Any]:
    """A finished trial's row."""
    rec = TrialRecord.from_trial(t)
    assert rec is not None, f"trial {t.number} has no advisor record"
    shown = set(runtime_params(space))
    known = how_known(rec.source, (rec.instance or {}).get("service"))
    return {
        "trial": t.number,
        "machine": rec.machine,
        **_instance_fields(rec.instance or {}, rec.spot),
        "spot": rec.spot,
        "batch_size": rec.batch_size,
        "hyperparameters": {k: v for k, v in t.params.items() if k in shown},
        "runtime_s": rec.runtime.to_dict() if rec.runtime else None,
        **job_terms(rec.estimate),  # issue #14: runtime_s = startup_s + training_s
        "cost_usd": rec.cost.to_dict() if rec.cost else None,
        "source": label(known),  # issue #27 (the record's own: "record_source")
        "record_source": rec.source,
        "known": known,
        "charged_usd": rec.probe_charged_usd,  # issue #27: 0 unless a billed probe ran for it
        "feasible": rec.feasible is not False,
        "epochs": rec.epochs,
        "price_per_hour": rec.price_per_hour,
        "limiting": limiting(rec.estimate),
        "basis": rec.estimate.get("basis"),  # issue #26: how the device time was obtained
        "memory": memory_text(rec.estimate),  # issue #34: step memory per GPU vs the GPU's
        "plan": rec.estimate.get("plan") or None,  # issue #35: the training plan in words
        "training_plan": rec.estimate.get("training_plan"),
        "step_terms": rec.estimate.get("step_terms"),  # issue #47
        "expected": expected(rec.estimate, rec.phases),  # issue #45: what its run measures
        **_nodes(rec.machine, rec.estimate),  # issue #49
    }


def screen_row(
    outcome: SuggestOutcome, ev: Evaluation, by_key: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A screened (machine, batch) that never became a trial: modelled from the screen.
    ``by_key``: the candidates by key, built once for many rows (issue #28: the report)."""
    cand = (by_key or {c.key: c for c in outcome.candidates})[ev.machine]
    known = how_known(ev.source, cand.instance.service)
    return {
        "trial": None,
        "machine": ev.machine,
        **_instance_fields(cand.instance.to_dict(), ev.spot),
        "spot": ev.spot,
        "batch_size": ev.batch_size,
        "hyperparameters": {},
        "runtime_s": ev.runtime.to_dict() if ev.runtime else None,
        **job_terms(ev.estimate),  # issue #14
        "cost_usd": ev.cost.to_dict() if ev.cost else None,
        "source": label(known, screen_only=True),
        "record_source": ev.source,
        "known": known,
        "charged_usd": 0.0,  # issue #27: a screen prediction runs no probe there
        "feasible": is_feasible(outcome.options, ev),
        "epochs": ev.epochs,
        "price_per_hour": ev.price_per_hour,
        "limiting": limiting(ev.estimate),
        "basis": ev.estimate.get("basis"),  # issue #26: how the device time was obtained
        "memory": memory_text(ev.estimate),  # issue #34
        "plan": ev.estimate.get("plan") or None,  # issue #35
        "training_plan": ev.estimate.get("training_plan"),
        "step_terms": ev.estimate.get("step_terms"),  # issue #47
        "expected": expected(ev.estimate, ev.phases),  # issue #45
        **_nodes(ev.machine, ev.estimate),  # issue #49
    }


def _nodes(machine: str, estimate: dict[str, Any]) -> dict[str, Any]:
    """Issue #49: the row's machines of its type (the export and submit read ``nodes``) and,
    on several, the share of its step on the network between them (when modelled)."""
    from advisor.providers.catalog import MachineKey

    n = MachineKey(machine).nodes
    share = estimate.get("across_share")
    return {"nodes": n, **({"across_share": share} if n > 1 and share is not None else {})}


def scored_rows(outcome: SuggestOutcome) -> list[dict[str, Any]]:
    """Every scored candidate once: finished trials (one per machine, batch and run-time
    hyperparameters) and the screened candidates no trial evaluated."""
    import optuna

    rows: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    tried: set[tuple[str, int]] = set()
    for t in outcome.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        rec = TrialRecord.from_trial(t)
        if rec is None or not rec.ok or is_managed(t) or _retaken(outcome, rec):
            continue
        row = trial_row(t, outcome.space)
        key = (rec.machine, rec.batch_size, tuple(sorted(row["hyperparameters"].items())))
        if key not in seen:
            seen.add(key)
            tried.add((rec.machine, rec.batch_size))
            rows.append(row)
    by_key = {c.key: c for c in outcome.candidates}
    for pair, ev in outcome.screen.items():
        if isinstance(ev, Evaluation) and pair not in tried:
            rows.append(screen_row(outcome, ev, by_key))
    return rows


def _retaken(outcome: SuggestOutcome, rec: TrialRecord) -> bool:
    """Issue #36: the trial was scored from a local probe timed on a busy machine, and this
    run retook that probe on a quiet one (``advisor.evaluation.contention``): the screen's
    evaluation of the same (machine, batch) from the new probe stands for it. (Before, a study
    that had converged kept the busy machine's times for good.)"""
    from advisor.evaluation.contention import contention

    if rec.probe is None or contention(rec.probe) is None:
        return False
    ev = outcome.screen.get((rec.machine, rec.batch_size))
    return (
        isinstance(ev, Evaluation)
        and ev.ok
        and ev.probe is not None
        and contention(ev.probe) is None
        and ev.probe.to_dict() != rec.probe
    )


def managed_rows(trials: list[FrozenTrial]) -> list[dict[str, Any]]:
    """Imported managed tuning runs: measured run time and metric per training job."""
    out = []
    for t in trials:
        if not is_managed(t):
            continue
        rec = TrialRecord.from_trial(t)
        m = rec.managed if rec is not None else None
        ua = t.user_attrs
        out.append(
            {
                "trial": t.number,
                "provider": m.provider if m else ua.get("provider"),
                "tuning_job": m.tuning_job if m else ua.get("tuning_job"),
                "job": m.job_name if m else ua.get("managed_job"),
                "instance_type": m.instance_type if m else ua.get("instance_type"),
                "status": m.status if m else ua.get("managed_status"),
                "metric": {"name": m.metric_name, "value": m.metric} if m else None,
                "runtime_s": rec.runtime.to_dict() if rec and rec.runtime else None,
                "cost_usd": rec.cost.to_dict() if rec and rec.cost else None,
                "hyperparameters": {
                    k: v for k, v in t.params.items() if k not in ("machine", "batch_size")
                },
            }
        )
    return out
