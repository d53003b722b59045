"""What `advisor suggest` shows: ranking, best by time and cost, Pareto set, epoch sweep.

``build_report(outcome)`` returns one JSON-able dict (printed as is by ``--json``);
``advisor.report.render`` draws it (``render``) and plots it (``plot``).
``check_feasible`` raises the "nothing fits" error with the cheapest (or fastest) option and
the fix.

Size: one report, one builder; its sections' own computations already live beside it
(``ranking``, ``tokens``, ``nodes``, ``memory``...): what is left here is the order in which
they are put together, which a split would scatter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.evaluation.contention import notes as contention_notes
from advisor.evaluation.ranking import (
    TIE_MAX_SHARE,
    TIE_SHARE,
    Point,
    cheapest,
    fastest,
    pareto_set,
    rank,
    recommended,
)
from advisor.options import METRIC_NAMES
from advisor.providers.pricing import SPOT_RESTART_OVERHEAD, SPOT_RESTART_OVERHEAD_HIGH
from advisor.records import TrialRecord, is_accuracy_trial
from advisor.report.confidence import confidence, edge_section, quiet_pick, report_band
from advisor.report.epochs import epochs_note, epochs_per_batch
from advisor.report.feasible import check_feasible as check_feasible  # re-exported
from advisor.report.memory import left_out as memory_left_out
from advisor.report.nodes import section as nodes_section
from advisor.report.overheads import overheads_notes, overheads_section, run_overheads_of
from advisor.report.owned import section as owned_section
from advisor.report.reason import why
from advisor.report.rows import KNOWN, managed_rows, runtime_params, scored_rows, tuned_ranges
from advisor.report.value_of_time import reason as value_reason
from advisor.report.value_of_time import section as value_section
from advisor.report.value_of_time import total_points

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

    from advisor.outcome import SuggestOutcome

SWEEP_EPOCHS = (5, 10, 20)
SWEEP_ROWS = 8
RANKING_ROWS = 50  # rows kept in the report (the study keeps every trial)


def _point(row: dict[str, Any]) -> Point:
    return Point(
        row["runtime_s"]["value"],
        row["cost_usd"]["value"],
        row["feasible"],
        row,
        tiebreak=(row.get("price_per_hour") or 0.0, row["machine"], row["batch_size"]),
    )


def build_report(outcome: SuggestOutcome) -> dict[str, Any]:
    """Everything the user sees, as one JSON-able document. The recommendation, ranking,
    fastest, cheapest and Pareto set all come from one scored set (every trial and every
    screened candidate) by one rule (``advisor.study.selection``)."""
    import optuna

    study = outcome.study
    objective = outcome.objective
    rows = scored_rows(outcome)
    points = [_point(r) for r in rows]
    startup = overheads_section(rows, outcome.workload)  # issue #14
    vot = getattr(outcome.options, "value_of_time", None)  # issue #37: rank cost + time x V
    chosen_by = total_points(rows, vot) if vot else points
    band = report_band(outcome.screen.values())  # issue #36: as wide as the probes' noise
    reach = TIE_SHARE if vot else TIE_MAX_SHARE  # a priced total keeps the fixed 5 % band
    ranked = rank(chosen_by, objective, band["share"], reach)
    ranking = [p.ref for p in ranked]
    best = recommended(chosen_by, objective, band["share"], reach)
    band.update(edge_section(chosen_by, objective, reach))
    band["pick_at_quiet_band"] = quiet_pick(chosen_by, objective, best, band["share"], reach)
    front = pareto_set(points)
    # issue #29: the short accuracy runs of --tune are reported apart (report.hyperparameters)
    machine_trials = [t for t in study.get_trials(deepcopy=False) if not is_accuracy_trial(t)]
    complete = [t for t in machine_trials if t.state == optuna.trial.TrialState.COMPLETE]
    states = [t.state for t in machine_trials]
    rec_row = None
    if best is not None:
        rec_row = dict(best.ref, reason=why(outcome, chosen_by, best, front, band["share"], reach))
        rec_row["region_note"] = _region_note(outcome, rec_row)
    value = value_section(points, best, vot) if vot else None
    if rec_row is not None and value is not None:
        rec_row["reason"] = value_reason(value)
    conf = confidence(chosen_by, best, objective, KNOWN, band["share"], reach)  # #28, #36
    if conf is not None and value is not None and objective == "cost":
        conf["objective"] = "total"  # ties are of cost + time x value
    fast, cheap = fastest(points), cheapest(points)
    memory_out = memory_left_out(outcome)
    epochs_rows = epochs_per_batch(complete, outcome.screen.values())  # issue #19
    report: dict[str, Any] = {
        "study": study.study_name,
        "storage": outcome.storage_url,
        "resumed": outcome.resumed,
        "workload": outcome.workload.name,
        **_tokens(outcome.workload),  # issue #48: an hf: model's tokens a pass
        "framework": outcome.workload.framework,
        "objective": objective,
        "metric_names": METRIC_NAMES[objective],
        "budget_usd": outcome.options.budget_usd,
        "deadline_s": outcome.options.deadline_s,
        "epochs": outcome.options.epochs or "per batch size (table below)",  # issue #19
        "catalog_snapshot": outcome.snapshot,
        "candidates": len(outcome.candidates),
        "guided_by_screen": outcome.guided,
        "stop_reason": outcome.stop_reason,
        # Ctrl-C or SIGTERM stopped the search: the report is partial (the CLI exits 130/143)
        "interrupted": _signal_of(outcome),
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
            # issue #27: what the spend counts -- only probes that ran on a billed machine
            "charged_for": CHARGED_FOR,
        },
        "recommended": rec_row,
        "value_of_time": value,  # issue #37: the split and the place on the front
        "owned": owned_section(ranking),  # issue #37: renting against the machines you own
        "confidence": conf,
        "best_by_time": fast.ref if fast else None,
        "best_by_cost": cheap.ref if cheap else None,
        "best_by_service": _best_by_service(ranking),  # issue #28: what submit --study takes
        "tie_share": band["share"],
        "tie_band": band,  # issue #36: the band and what it was measured from
        "pareto": [p.ref for p in front],
        "runtime_hyperparameters": runtime_params(outcome.space),
        "tuned_ranges": tuned_ranges(outcome.space),
        "ranking_total": len(ranking),
        "local": _local_row(ranking),
        "measured_elsewhere": _measured_rows(ranking),  # issue #14: probed machines' places
        "ranking": ranking[:RANKING_ROWS],
        "points": [_compact(r) for r in ranking],  # every scored candidate, for the plot
        "managed": managed_rows(study.get_trials(deepcopy=False)),
        "epoch_sweep": _epoch_sweep(outcome, [p.ref for p in front][:SWEEP_ROWS]),
        "epochs_per_batch": epochs_rows,  # issue #19
        "stale_warning": _stale(outcome),
        "probe_failures": outcome.probe_failures,  # {status, batch_sizes, reason, text}
        # issue #28: local probes timed while other processes kept the CPU busy
        "contention_notes": contention_notes(
            (ev.batch_size, ev.probe) for ev in outcome.screen.values() if ev.probe is not None
        ),
        "known_legend": KNOWN,  # issue #14: each row's "known" (measured here/there, modelled)
        "cloud_probes": outcome.cloud or None,  # issue #14: --cloud-probes jobs, stop reason
        "overheads": startup,  # issue #14: start-up terms per service, billing
        "left_out": outcome.left_out,  # issue #27: TPUs, previous-generation types
        "predicted_only": outcome.predicted_only,  # issue #47: TPUs screened, not candidates
        "memory_left_out": memory_out,  # issue #34: pairs whose step does not fit
        "nodes": nodes_section(outcome, rec_row, rows),  # issue #49: more machines, or why not
        "notes": ([memory_out["text"] + "."] if memory_out else [])
        + _notes(outcome, complete)
        + _charge_notes(outcome, rows)  # issue #27
        + predicted_only_notes(outcome, fast, cheap)  # issue #47
        + overheads_notes(startup)  # issue #14
        + _epochs_notes(epochs_rows),  # issue #19
    }
    return report


def predicted_only_notes(outcome: SuggestOutcome, fast: Any, cheap: Any) -> list[str]:
    """Issue #47: where a machine advisor cannot train on (a TPU) is predicted to beat the
    fastest or the cheapest candidate, said (it is never the recommendation)."""
    from advisor.durations import format_duration

    rows = outcome.predicted_only
    out = []
    for what, best, key in (("faster", fast, "runtime_s"), ("cheaper", cheap, "cost_usd")):
        if not rows or best is None:
            continue
        top = min(rows, key=lambda r: (r[key], r["runtime_s"]))
        theirs = best.runtime if key == "runtime_s" else best.cost
        if top[key] >= theirs:
            continue
        said = format_duration(top[key]) if key == "runtime_s" else f"USD {top[key]:.3g}"
        ref = format_duration(theirs) if key == "runtime_s" else f"USD {theirs:.3g}"
        out.append(
            f"Predicted {what} on a TPU: {top['machine']} at batch {top['batch_size']}, {said} "
            f"against {ref} for the {'fastest' if key == 'runtime_s' else 'cheapest'} "
            "candidate -- not recommended: advisor cannot train or probe on TPUs yet "
            "(advisor predict -i that machine shows its terms)."
        )
    return out


CHARGED_FOR = (
    "remote probes that ran (--cloud-probes), at their billed time x price; this machine's "
    "probes and modelled trials cost nothing"
)


def _charge_notes(outcome: SuggestOutcome, rows: list[dict[str, Any]]) -> list[str]:
    """Issue #27: what the probe budget was charged for, and which machines were left out."""
    trials = [r for r in rows if r["trial"] is not None]
    modelled = sum(1 for r in trials if r.get("known") == "model")
    charged = sum(float(r.get("charged_usd") or 0.0) for r in trials)
    cloud = float((outcome.cloud or {}).get("spent_usd") or 0.0)
    notes = [
        f"Probe budget: USD {outcome.probe_spent_usd:.4f} of {outcome.probe_budget_usd:g} "
        f"charged, for {CHARGED_FOR} (remote probes USD {cloud:.4f}, trials USD "
        f"{charged:.4f}; {modelled} modelled trial(s) charged nothing)."
    ]
    tpus = outcome.left_out.get("predicted only") or []
    old = outcome.left_out.get("previous generation") or []
    if tpus:
        notes.append(
            f"Left out: {len(tpus)} TPU machine type(s), predicted only -- advisor cannot train "
            "or probe on TPUs (advisor predict shows them)."
        )
    if old:
        notes.append(
            f"Left out: {len(old)} previous-generation or retired machine type(s) (e.g. "
            f"{', '.join(sorted(old)[:3])}); --include-previous-generation adds them."
        )
    return notes


def _best_by_service(ranking: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each service's first feasible row of the ranking (its best by the one rule)."""
    out: dict[str, dict[str, Any]] = {}
    for row in ranking:
        if row["feasible"] and row.get("service") and row["service"] not in out:
            out[row["service"]] = row
    return out


def _signal_of(outcome: SuggestOutcome) -> str | None:
    """Which signal stopped the search ("SIGINT", "SIGTERM"), or None."""
    from advisor.outcome import StopReason

    reason = outcome.stop.reason if outcome.stop is not None else None
    if reason is StopReason.TERMINATED:
        return "SIGTERM"
    return "SIGINT" if reason is StopReason.INTERRUPTED else None


POINT_FIELDS = (
    "machine", "batch_size", "spot", "service", "feasible", "runtime_s", "cost_usd", "known",
)  # fmt: skip


def _compact(row: dict[str, Any]) -> list[Any]:
    """A scored row as [machine, batch, spot, service, feasible, [time v, lo, hi], [cost v,
    lo, hi], known] (``POINT_FIELDS``): the plot needs every point, the JSON stays small."""
    return [
        *(row[k] for k in POINT_FIELDS[:5]),
        *([round(d["value"], 6), round(d["low"], 6), round(d["high"], 6)]
          for d in (row["runtime_s"], row["cost_usd"])),
        row.get("known"),
    ]  # fmt: skip


def _region_note(outcome: SuggestOutcome, row: dict[str, Any]) -> str | None:
    """Where the recommended machine is priced and why (the catalog's region note)."""
    if row.get("service") == "local":
        return "this machine"
    try:
        from advisor.providers.catalog import MachineKey, load

        cat = load(outcome.snapshot)
        base = MachineKey(row["machine"]).base
        inst = next(i for i in cat.instances if i.key == base)
        return cat.region_note(inst)
    except Exception:  # a replay table's snapshot is no catalog: no note
        return row.get("region")


def _stale(outcome: SuggestOutcome) -> str | None:
    """The catalog's stale-price warning (with the refresh command), or None."""
    from advisor.providers.catalog import stale_warning

    try:
        return stale_warning(outcome.snapshot, [c.instance for c in outcome.candidates])
    except (ValueError, TypeError):  # a snapshot name that is not a date (replay tables)
        return None


def _notes(outcome: SuggestOutcome, trials: list[FrozenTrial]) -> list[str]:
    ranges = tuned_ranges(outcome.space)
    notes = [
        "Times are probed at the start of training; a model whose kernels get faster as it "
        "trains (e.g. max pooling on channels-first CPU tensors: the probe warns) takes less "
        "than predicted (docs/benchmarks.md).",
        f"Spot runs include a restart overhead of +{SPOT_RESTART_OVERHEAD:.0%} "
        f"(upper bound +{SPOT_RESTART_OVERHEAD_HIGH:.0%}) for interruptions.",
    ]
    if ranges:
        notes.insert(
            0,
            f"{', '.join(ranges)} do not change the run time, so this study does not judge "
            "them: it hands their ranges to the managed tuning job (advisor submit), and "
            "their importance in the dashboard means nothing yet.",
        )
    notes += [f"Probe: {w}." for w in _probe_warnings(trials)]
    notes[:0] = [f"Failed probes: {f['text']}." for f in outcome.probe_failures]
    return notes


def _epochs_notes(rows: list[dict[str, Any]]) -> list[str]:  # issue #19
    note = epochs_note(rows)
    return [note] if note else []


def _probe_warnings(trials: list[FrozenTrial]) -> list[str]:
    """The distinct warnings of the probes behind ``trials``."""
    records = [TrialRecord.from_trial(t) for t in trials]
    found = {w for r in records if r is not None for w in (r.probe or {}).get("warnings", ())}
    return sorted(found)


def _local_row(ranking: list[dict[str, Any]]) -> dict[str, Any] | None:
    """This machine's best row in the ranking, with its rank (1-based)."""
    for place, row in enumerate(ranking, 1):
        if row["service"] == "local":
            return dict(row, rank=place)
    return None


def _measured_rows(ranking: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row measured on its machine by a remote probe (or emulated), with its rank, so
    the report shows where the measured machines stand even below the top rows."""
    return [
        dict(row, rank=place)
        for place, row in enumerate(ranking, 1)
        if row.get("known") in ("probed", "emulated")
    ]


def _overheads(outcome: SuggestOutcome, row: dict[str, Any]) -> Any:
    """The start-up terms the row was priced with (a remote probe job's measured start-up, or
    the service's priors), so the sweep's costs follow the row's (issue #27)."""
    from advisor.providers.overheads import RunOverheads

    est = _estimate(outcome, row)
    over = (est or {}).get("overheads")
    if over and over.get("terms") is not None and "billing" in over:
        return RunOverheads.from_dict(over)
    return run_overheads_of(row, outcome.workload)


def _estimate(outcome: SuggestOutcome, row: dict[str, Any]) -> dict[str, Any] | None:
    if row["trial"] is not None:
        t = next(t for t in outcome.study.get_trials(deepcopy=False) if t.number == row["trial"])
        rec = TrialRecord.from_trial(t)
        return None if rec is None else rec.estimate
    ev = outcome.screen.get((row["machine"], row["batch_size"]))
    return None if ev is None else ev.estimate


def _phases(outcome: SuggestOutcome, row: dict[str, Any]) -> Any:
    """The phase times behind a row: its trial's record, else its screen evaluation."""
    if row["trial"] is not None:
        trials = outcome.study.get_trials(deepcopy=False)
        t = next(t for t in trials if t.number == row["trial"])
        rec = TrialRecord.from_trial(t)
        return None if rec is None else rec.phases
    ev = outcome.screen.get((row["machine"], row["batch_size"]))
    return None if ev is None else ev.phases


def _epoch_sweep(outcome: SuggestOutcome, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Run time (relative to the best per column) and cost (USD; the local machine costs 0)
    for 5/10/20 (+ the run's own) epochs of the Pareto set's runs: the whole job, start-up
    overheads included (issue #14), priced as the scorer priced the run."""
    with_phases = [(r, ph) for r in rows if (ph := _phases(outcome, r)) is not None]
    if not with_phases:
        return None
    from advisor.prediction.run.iteration_model import epoch_sweep, normalise

    epochs = sorted({*SWEEP_EPOCHS, *(r["epochs"] or 10 for r, _ in with_phases)})
    runtime: dict[str, dict[int, float]] = {}
    cost: dict[str, dict[int, float]] = {}
    wl = outcome.workload
    for r, phases in with_phases:
        sweep = epoch_sweep(
            phases, wl.n_train, wl.n_val, r["batch_size"], epochs, r["price_per_hour"] or 0.0,
            spot=r["spot"], service=r["service"], overheads=_overheads(outcome, r),
        )  # fmt: skip
        label = f"{r['machine']} b{r['batch_size']}"
        runtime[label] = {ep: est.runtime.value for ep, est in sweep.items()}
        cost[label] = {ep: est.cost.value for ep, est in sweep.items() if est.cost is not None}
    return {
        "epochs": epochs,
        "runtime_s": runtime,
        "cost_usd": cost,
        "runtime_normalised": normalise(runtime),
    }


def _tokens(workload: Any) -> dict[str, int]:
    """``{"tokens_per_pass": N}`` for an ``hf:`` model, else nothing (issue #48)."""
    from advisor.report.tokens import tokens_per_pass

    n = tokens_per_pass(workload.name, workload.n_train)
    return {} if n is None else {"tokens_per_pass": n}
