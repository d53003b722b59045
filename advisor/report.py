"""What `advisor suggest` shows: ranking, best by time and cost, Pareto set, epoch sweep.

``build_report(outcome)`` returns one JSON-able dict (printed as is by ``--json``);
``advisor.report_render`` draws it (``render``) and plots it (``plot``).
``check_feasible`` raises the "nothing fits" error with the cheapest (or fastest) option and
the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.options import METRIC_NAMES, is_feasible
from advisor.providers.pricing import SPOT_RESTART_OVERHEAD, SPOT_RESTART_OVERHEAD_HIGH
from advisor.records import TrialRecord
from advisor.scoring import Evaluation
from advisor.selection import feasible_trials, pareto_front, recommended_trial

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from advisor.study import SuggestOutcome

SWEEP_EPOCHS = (5, 10, 20)
SWEEP_ROWS = 8
RANKING_ROWS = 50  # rows kept in the report (the study keeps every trial)


def _row(t: FrozenTrial) -> dict[str, Any]:
    rec = TrialRecord.from_trial(t)
    assert rec is not None, f"trial {t.number} has no advisor record"
    inst = rec.instance or {}
    return {
        "trial": t.number,
        "machine": rec.machine,
        "provider": inst.get("provider"),
        "service": inst.get("service"),
        "instance_type": inst.get("instance_type"),
        "accelerator": inst.get("accelerator"),
        "gpus": inst.get("accelerator_count", 0),
        "spot": rec.spot,
        "batch_size": rec.batch_size,
        "hyperparameters": {
            k: v for k, v in t.params.items() if k not in ("machine", "batch_size")
        },
        "runtime_s": rec.runtime.to_dict() if rec.runtime else None,
        "cost_usd": rec.cost.to_dict() if rec.cost else None,
        "source": rec.source,
        "feasible": rec.feasible is not False,
        "epochs": rec.epochs,
        "price_per_hour": rec.price_per_hour,
    }


def _screen_row(outcome: SuggestOutcome, ev: Evaluation) -> dict[str, Any]:
    cand = {c.key: c for c in outcome.candidates}[ev.machine]
    inst = cand.instance
    return {
        "trial": None,
        "machine": ev.machine,
        "provider": inst.provider,
        "service": inst.service,
        "instance_type": inst.instance_type,
        "accelerator": inst.accelerator,
        "gpus": inst.accelerator_count,
        "spot": ev.spot,
        "batch_size": ev.batch_size,
        "hyperparameters": {},
        "runtime_s": ev.runtime.to_dict() if ev.runtime else None,
        "cost_usd": ev.cost.to_dict() if ev.cost else None,
        "source": f"{ev.source}, screen only",
        "feasible": is_feasible(outcome.options, ev),
        "epochs": ev.epochs,
        "price_per_hour": ev.price_per_hour,
    }


def _merge_screen(
    outcome: SuggestOutcome, rows: list[dict[str, Any]], key_index: int
) -> list[dict[str, Any]]:
    """Trials first-class; screened (predicted, never a trial) candidates ranked among them."""
    seen = {(r["machine"], r["batch_size"]) for r in rows}
    extra = [
        _screen_row(outcome, ev) for key, ev in outcome.screen.items() if ev.ok and key not in seen
    ]
    metric, other = ("runtime_s", "cost_usd")[key_index], ("runtime_s", "cost_usd")[1 - key_index]
    return sorted(
        rows + extra, key=lambda r: (not r["feasible"], r[metric]["value"], r[other]["value"])
    )


def _unique_complete(outcome: SuggestOutcome) -> list[tuple[FrozenTrial, TrialRecord]]:
    """Finished trials with a run time and cost, one per (machine, batch), with records."""
    import optuna

    seen: set[tuple[str, int]] = set()
    out = []
    for t in outcome.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        rec = TrialRecord.from_trial(t)
        if rec is None or not rec.ok:
            continue
        key = (rec.machine, rec.batch_size)
        if key not in seen:
            seen.add(key)
            out.append((t, rec))
    return out


def build_report(outcome: SuggestOutcome) -> dict[str, Any]:
    """Everything the user sees, as one JSON-able document."""
    import optuna

    study = outcome.study
    pairs = _unique_complete(outcome)
    key_index = 0 if outcome.objective in ("time", "pareto") else 1

    def values(rec: TrialRecord) -> tuple[float, float]:
        assert rec.runtime is not None and rec.cost is not None
        return rec.runtime.value, rec.cost.value

    def sort_key(pair: tuple[FrozenTrial, TrialRecord]) -> tuple[bool, float, float]:
        vals = values(pair[1])
        return (pair[1].feasible is False, vals[key_index], vals[1 - key_index])

    ranked_pairs = sorted(pairs, key=sort_key)
    trials = [t for t, _ in pairs]
    ranked = [t for t, _ in ranked_pairs]
    feasible_pairs = [(t, r) for t, r in ranked_pairs if r.feasible is not False]
    feasible = [t for t, _ in feasible_pairs]
    ranking = _merge_screen(outcome, [_row(t) for t in ranked], key_index)
    states = [t.state for t in study.get_trials(deepcopy=False)]
    recommended = None
    if feasible:
        recommended = _row(recommended_trial(study))
    report: dict[str, Any] = {
        "study": study.study_name,
        "storage": outcome.storage_url,
        "resumed": outcome.resumed,
        "workload": outcome.workload.name,
        "framework": outcome.workload.framework,
        "objective": outcome.objective,
        "metric_names": METRIC_NAMES[outcome.objective],
        "budget_usd": outcome.options.budget_usd,
        "deadline_s": outcome.options.deadline_s,
        "epochs": outcome.options.epochs or "epochs to stabilise per batch size",
        "catalog_snapshot": outcome.snapshot,
        "candidates": len(outcome.candidates),
        "guided_by_screen": outcome.guided,
        "stop_reason": outcome.stop_reason,
        "wall_s": round(outcome.wall_s, 3),
        "trials": {
            "total": len(states),
            "new": outcome.new_trials,
            "complete": sum(s == optuna.trial.TrialState.COMPLETE for s in states),
            "failed": sum(s == optuna.trial.TrialState.FAIL for s in states),
            "pruned": sum(s == optuna.trial.TrialState.PRUNED for s in states),
        },
        "probes": {
            "new": outcome.new_probes,
            "budget_usd": round(outcome.probe_budget_usd, 6),
            "spent_usd": round(outcome.probe_spent_usd, 6),
        },
        "recommended": recommended,
        "best_by_time": _row(min(feasible_pairs, key=lambda p: values(p[1])[0])[0])
        if feasible
        else None,
        "best_by_cost": _row(min(feasible_pairs, key=lambda p: values(p[1])[1])[0])
        if feasible
        else None,
        "pareto": [_row(t) for t in pareto_front(feasible)],
        "ranking_total": len(ranking),
        "local": _local_row(ranking),
        "ranking": ranking[:RANKING_ROWS],
        "epoch_sweep": _epoch_sweep(outcome, pareto_front(feasible)[:SWEEP_ROWS]),
        "notes": [
            "Times are probed at one hyperparameter setting and at the start of training; "
            "the values shown are the study's samples, and their ranges go to the managed "
            "tuning job (advisor submit). A model whose kernels get faster as it trains "
            "(e.g. max pooling on channels-first CPU tensors: the probe warns) takes less "
            "than predicted (docs/benchmarks.md).",
            f"Spot runs include a restart overhead of +{SPOT_RESTART_OVERHEAD:.0%} "
            f"(upper bound +{SPOT_RESTART_OVERHEAD_HIGH:.0%}) for interruptions.",
            *(f"Probe: {w}." for w in _probe_warnings(trials)),
        ],
    }
    return report


def _probe_warnings(trials: list[FrozenTrial]) -> list[str]:
    """The distinct warnings of the probes behind ``trials``."""
    records = [TrialRecord.from_trial(t) for t in trials]
    found = {w for r in records if r is not None for w in (r.probe or {}).get("warnings", ())}
    return sorted(found)


def _local_row(ranking: list[dict[str, Any]]) -> dict[str, Any] | None:
    """This machine's best row in the ranking, with its rank (1-based)."""
    for rank, row in enumerate(ranking, 1):
        if row["service"] == "local":
            return dict(row, rank=rank)
    return None


def _label(t: FrozenTrial) -> str:
    return f"{t.params['machine']} b{t.params['batch_size']}"


def _epoch_sweep(outcome: SuggestOutcome, trials: list[FrozenTrial]) -> dict[str, Any] | None:
    """Runtime and cost for 5/10/20 (+ the run's own) epochs, each column over its best."""

    rows = [(t, r) for t in trials if (r := TrialRecord.from_trial(t)) and r.phases]
    if not rows:
        return None
    try:
        from advisor.probes.iteration_model import epoch_sweep, normalise
    except ImportError:
        return None
    epochs = sorted({*SWEEP_EPOCHS, *(r.epochs or 10 for _, r in rows)})
    runtime: dict[str, dict[int, float]] = {}
    cost: dict[str, dict[int, float]] = {}
    wl = outcome.workload
    for t, r in rows:
        assert r.phases is not None
        sweep = epoch_sweep(
            r.phases, wl.n_train, wl.n_val, r.batch_size, epochs, r.price_per_hour or 0.0,
            spot=r.spot, service=(r.instance or {}).get("service"),
        )  # fmt: skip
        label = _label(t)
        runtime[label] = {ep: est.runtime.value for ep, est in sweep.items()}
        cost[label] = {ep: est.cost.value for ep, est in sweep.items() if est.cost is not None}
    return {
        "epochs": epochs,
        "runtime_s": runtime,
        "cost_usd": cost,
        "runtime_normalised": normalise(runtime),
        "cost_normalised": _normalise_safe(cost, normalise),
    }


def _normalise_safe(table: dict[str, dict[int, float]], normalise: Any) -> dict[str, Any]:
    """Normalise, but leave a column whose best is 0 (a free local machine) unnormalised."""
    cols = {ep for row in table.values() for ep in row}
    if any(min(row[ep] for row in table.values()) <= 0 for ep in cols):
        return {}
    out: dict[str, Any] = normalise(table)
    return out


def check_feasible(outcome: SuggestOutcome) -> None:
    """Raise "no candidate fits" with the cheapest/fastest option seen and how to fix it."""
    if feasible_trials(outcome.study):
        return
    opts = outcome.options
    evs: list[Evaluation] = []
    for t in outcome.study.get_trials(deepcopy=False):
        rec = TrialRecord.from_trial(t)
        if rec is not None and rec.ok:
            evs.append(rec.to_evaluation())
    kind = "estimated"
    if not evs:
        evs = [e for e in outcome.screen.values() if e.ok]
        kind = "predicted"
    if not evs:
        raise AdvisorError(
            "No candidate could be evaluated (every probe failed or was unaffordable).",
            "check the probe errors with `advisor probe`, or raise --probe-budget.",
        )
    limits = []
    fixes = []
    if opts.budget_usd is not None:
        cheapest = min(evs, key=lambda e: e.cost.value)  # type: ignore[union-attr]
        limits.append(f"a budget of USD {opts.budget_usd:g}")
        fixes.append(f"raise --budget to at least {_ceil(cheapest.cost.value)}")  # type: ignore[union-attr]
        best, what = cheapest, "cheapest"
    if opts.deadline_s is not None:
        fastest = min(evs, key=lambda e: e.runtime.value)  # type: ignore[union-attr]
        limits.append(f"a deadline of {duration_text(opts.deadline_s)}")
        fixes.append(f"extend --deadline to at least {duration_text(fastest.runtime.value)}")  # type: ignore[union-attr]
        if opts.budget_usd is None:
            best, what = fastest, "fastest"
    assert best.runtime is not None and best.cost is not None
    raise AdvisorError(
        f"No candidate fits {' and '.join(limits)}. The {what} option is {best.machine} at batch "
        f"{best.batch_size}: USD {best.cost.value:.2f} ({best.cost.low:.2f}-{best.cost.high:.2f}) "
        f"in {duration_text(best.runtime.value)}, {kind}.",
        " or ".join(fixes) + ".",
    )


def _ceil(x: float) -> str:
    import math

    return f"{math.ceil(x * 100) / 100:.2f}"


def duration_text(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.0f} s"
