"""What `advisor suggest` shows: ranking, best by time and cost, Pareto set, epoch sweep.

``build_report(outcome)`` returns one JSON-able dict (printed as is by ``--json``);
``render(report, console)`` draws it with rich; ``plot(report, path)`` writes the
cost-vs-runtime PNG. ``check_feasible`` raises the "nothing fits" error with the cheapest
(or fastest) option and the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.epochs_report import epochs_note, epochs_per_batch, render_epochs
from advisor.errors import AdvisorError
from advisor.scoring import SPOT_RESTART_OVERHEAD, SPOT_RESTART_OVERHEAD_HIGH, Evaluation

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial
    from rich.console import Console

    from advisor.study import SuggestOutcome

SWEEP_EPOCHS = (5, 10, 20)
SWEEP_ROWS = 8
RANKING_ROWS = 50  # rows kept in the report (the study keeps every trial)


def _row(t: FrozenTrial) -> dict[str, Any]:
    ua = t.user_attrs
    inst = ua.get("instance") or {}
    return {
        "trial": t.number,
        "machine": t.params["machine"],
        "provider": inst.get("provider"),
        "service": inst.get("service"),
        "instance_type": inst.get("instance_type"),
        "accelerator": inst.get("accelerator"),
        "gpus": inst.get("accelerator_count", 0),
        "spot": bool(ua.get("spot")),
        "batch_size": t.params["batch_size"],
        "hyperparameters": {
            k: v for k, v in t.params.items() if k not in ("machine", "batch_size")
        },
        "runtime_s": ua.get("runtime_s"),
        "cost_usd": ua.get("cost_usd"),
        "source": ua.get("source"),
        "feasible": bool(ua.get("feasible", True)),
        "epochs": ua.get("epochs"),
        "price_per_hour": ua.get("price_per_hour"),
    }


def _screen_row(outcome: SuggestOutcome, ev: Evaluation) -> dict[str, Any]:
    from advisor.study import _feasible

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
        "feasible": _feasible(outcome.options, ev),
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


def _unique_complete(outcome: SuggestOutcome) -> list[FrozenTrial]:
    import optuna

    seen: set[tuple[Any, Any]] = set()
    out = []
    for t in outcome.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        key = (t.params.get("machine"), t.params.get("batch_size"))
        if key not in seen and t.user_attrs.get("runtime_s"):
            seen.add(key)
            out.append(t)
    return out


def build_report(outcome: SuggestOutcome) -> dict[str, Any]:
    """Everything the user sees, as one JSON-able document."""
    import optuna

    from advisor.study import METRIC_NAMES, pareto_front, recommended_trial

    study = outcome.study
    trials = _unique_complete(outcome)
    key_index = 0 if outcome.objective in ("time", "pareto") else 1

    def sort_key(t: FrozenTrial) -> tuple[bool, float, float]:
        vals = (t.user_attrs["runtime_s"]["value"], t.user_attrs["cost_usd"]["value"])
        return (not t.user_attrs.get("feasible", True), vals[key_index], vals[1 - key_index])

    ranked = sorted(trials, key=sort_key)
    feasible = [t for t in ranked if t.user_attrs.get("feasible", True)]
    ranking = _merge_screen(outcome, [_row(t) for t in ranked], key_index)
    states = [t.state for t in study.get_trials(deepcopy=False)]
    epochs_rows = epochs_per_batch(trials, outcome.screen.values())  # issue #19
    lr_note = epochs_note(epochs_rows)
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
        "epochs": outcome.options.epochs or "per batch size (table below)",
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
        "best_by_time": _row(min(feasible, key=lambda t: t.user_attrs["runtime_s"]["value"]))
        if feasible
        else None,
        "best_by_cost": _row(min(feasible, key=lambda t: t.user_attrs["cost_usd"]["value"]))
        if feasible
        else None,
        "pareto": [_row(t) for t in pareto_front(feasible)],
        "ranking_total": len(ranking),
        "local": _local_row(ranking),
        "ranking": ranking[:RANKING_ROWS],
        "epoch_sweep": _epoch_sweep(outcome, pareto_front(feasible)[:SWEEP_ROWS]),
        "epochs_per_batch": epochs_rows,  # issue #19
        "notes": [
            "Times are probed at one hyperparameter setting and at the start of training; "
            "the values shown are the study's samples, and their ranges go to the managed "
            "tuning job (advisor submit). A model whose kernels get faster as it trains "
            "(e.g. max pooling on channels-first CPU tensors: the probe warns) takes less "
            "than predicted (docs/benchmarks.md).",
            f"Spot runs include a restart overhead of +{SPOT_RESTART_OVERHEAD:.0%} "
            f"(upper bound +{SPOT_RESTART_OVERHEAD_HIGH:.0%}) for interruptions.",
            *(f"Probe: {w}." for w in _probe_warnings(trials)),
            *([lr_note] if lr_note else []),  # issue #19
        ],
    }
    return report


def _probe_warnings(trials: list[FrozenTrial]) -> list[str]:
    """The distinct warnings of the probes behind ``trials``."""
    found = {w for t in trials for w in (t.user_attrs.get("probe") or {}).get("warnings", ())}
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
    from advisor.scoring import phases_from_dict, with_spot

    rows = [t for t in trials if t.user_attrs.get("phases")]
    if not rows:
        return None
    try:
        from advisor.probes.iteration_model import epoch_sweep, normalise
    except ImportError:
        return None
    epochs = sorted({*SWEEP_EPOCHS, *(int(t.user_attrs.get("epochs", 10)) for t in rows)})
    runtime: dict[str, dict[int, float]] = {}
    cost: dict[str, dict[int, float]] = {}
    wl = outcome.workload
    for t in rows:
        ua = t.user_attrs
        sweep = epoch_sweep(
            phases_from_dict(ua["phases"]), wl.n_train, wl.n_val, t.params["batch_size"], epochs
        )
        label = _label(t)
        runtime[label] = {}
        cost[label] = {}
        for ep, est in sweep.items():
            rt = with_spot(est.runtime, bool(ua.get("spot"))).value
            runtime[label][ep] = rt
            cost[label][ep] = rt * float(ua.get("price_per_hour", 0.0)) / 3600.0
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
    from advisor.study import evaluation_from_trial, feasible_trials

    if feasible_trials(outcome.study):
        return
    opts = outcome.options
    evs: list[Evaluation] = []
    for t in outcome.study.get_trials(deepcopy=False):
        ev = evaluation_from_trial(t)
        if ev is not None and ev.ok:
            evs.append(ev)
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
        limits.append(f"a deadline of {_duration(opts.deadline_s)}")
        fixes.append(f"extend --deadline to at least {_duration(fastest.runtime.value)}")  # type: ignore[union-attr]
        if opts.budget_usd is None:
            best, what = fastest, "fastest"
    assert best.runtime is not None and best.cost is not None
    raise AdvisorError(
        f"No candidate fits {' and '.join(limits)}. The {what} option is {best.machine} at batch "
        f"{best.batch_size}: USD {best.cost.value:.2f} ({best.cost.low:.2f}-{best.cost.high:.2f}) "
        f"in {_duration(best.runtime.value)}, {kind}.",
        " or ".join(fixes) + ".",
    )


def _ceil(x: float) -> str:
    import math

    return f"{math.ceil(x * 100) / 100:.2f}"


def _duration(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.0f} s"


def _iv(d: dict[str, float] | None, fmt: str, scale: float = 1.0) -> str:
    if not d:
        return "-"
    v, lo, hi = d["value"] * scale, d["low"] * scale, d["high"] * scale
    return f"{v:{fmt}} ({lo:{fmt}}-{hi:{fmt}})"


def _money(d: dict[str, float] | None) -> str:
    """USD with cents, or three significant digits below 10 cents (0.00412)."""
    if not d:
        return "-"
    small = 0 < abs(d["value"]) < 0.1
    return _iv(d, ".3g" if small else ".2f")


def _runtime_text(d: dict[str, float] | None) -> str:
    if not d:
        return "-"
    return f"{_duration(d['value'])} ({_duration(d['low'])}-{_duration(d['high'])})"


def _hps_text(hps: dict[str, Any], limit: int = 4) -> str:
    parts = []
    for k, v in list(hps.items())[:limit]:
        parts.append(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}")
    return " ".join(parts)


def _table(title: str, rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col, kw in (
        ("#", {"justify": "right"}),
        ("machine", {"no_wrap": True}),
        ("GPUs", {"justify": "right"}),
        ("capacity", {}),
        ("batch", {"justify": "right"}),
        ("runtime (interval)", {"justify": "right"}),
        ("cost USD (interval)", {"justify": "right"}),
        ("source", {}),
    ):
        table.add_column(col, **kw)
    for i, r in enumerate(rows, 1):
        gpus = f"{r['gpus']}x {r['accelerator']}" if r["gpus"] else "cpu"
        table.add_row(
            str(i),
            r["machine"].removesuffix(":spot"),
            gpus,
            "spot" if r["spot"] else "on demand",
            str(r["batch_size"]),
            _runtime_text(r["runtime_s"]),
            _money(r["cost_usd"]),
            r["source"] + ("" if r["feasible"] else " [over limit]"),
        )
    return table


def render(report: dict[str, Any], console: Console, top: int = 15) -> None:
    """Draw the report with rich."""
    from rich.table import Table

    console.print(
        f"[bold]{report['workload']}[/] ({report['framework']}), objective "
        f"[bold]{report['objective']}[/]"
        + (f", budget USD {report['budget_usd']:g}" if report["budget_usd"] else "")
        + (f", deadline {_duration(report['deadline_s'])}" if report["deadline_s"] else "")
        + f", epochs: {report['epochs']}, catalog {report['catalog_snapshot']}"
    )
    console.print(
        _table(f"Ranking (top {top} of {report['ranking_total']})", report["ranking"][:top])
    )
    picks = [
        ("recommended", report["recommended"]),
        ("fastest", report["best_by_time"]),
        ("cheapest", report["best_by_cost"]),
    ]
    for label, row in picks:
        if row:
            console.print(
                f"[bold]{label}:[/] {row['machine']} batch {row['batch_size']} "
                f"{_hps_text(row['hyperparameters'], 8)} - {_runtime_text(row['runtime_s'])}, "
                f"USD {_money(row['cost_usd'])}, {row['source']}"
            )
    local = report.get("local")
    if local:
        console.print(
            f"[bold]this machine:[/] rank {local['rank']} of {report['ranking_total']}, batch "
            f"{local['batch_size']} - {_runtime_text(local['runtime_s'])}, {local['source']}"
        )
    render_epochs(report.get("epochs_per_batch") or [], console)  # issue #19
    console.print(_table("Pareto set (time vs cost)", report["pareto"]))
    sweep = report.get("epoch_sweep")
    if sweep:
        table = Table(
            title="Epoch sweep: runtime / cost relative to the best machine per column",
            title_justify="left",
        )
        table.add_column("candidate")
        for ep in sweep["epochs"]:
            table.add_column(f"{ep} ep", justify="right")
        for label, row in sweep["runtime_normalised"].items():
            costs = sweep["cost_normalised"].get(label, {})
            table.add_row(
                label,
                *[
                    f"{row[ep]:.2f}x / {costs[ep]:.2f}x" if ep in costs else f"{row[ep]:.2f}x / -"
                    for ep in sweep["epochs"]
                ],
            )
        console.print(table)
    t, p = report["trials"], report["probes"]
    console.print(
        f"study {report['study']} ({'resumed' if report['resumed'] else 'new'}) in "
        f"{report['storage']}: {t['total']} trials ({t['new']} new, {t['failed']} failed, "
        f"{t['pruned']} pruned); {p['new']} new probes; probe budget spent USD "
        f"{p['spent_usd']:.4f} of {p['budget_usd']:.2f}; stopped: {report['stop_reason']}; "
        f"{report['wall_s']:.1f} s"
    )
    for note in report["notes"]:
        console.print(f"[dim]{note}[/]")


def plot(report: dict[str, Any], path: str) -> None:
    """Cost vs runtime scatter with interval error bars and the Pareto front (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["ranking"] if r["runtime_s"] and r["cost_usd"]]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for group, colour in (("on demand", "tab:blue"), ("spot", "tab:orange")):
        pts = [r for r in rows if r["spot"] == (group == "spot")]
        if not pts:
            continue
        x = [r["runtime_s"]["value"] / 3600 for r in pts]
        y = [r["cost_usd"]["value"] for r in pts]
        xerr = [
            [(r["runtime_s"]["value"] - r["runtime_s"]["low"]) / 3600 for r in pts],
            [(r["runtime_s"]["high"] - r["runtime_s"]["value"]) / 3600 for r in pts],
        ]
        yerr = [
            [r["cost_usd"]["value"] - r["cost_usd"]["low"] for r in pts],
            [r["cost_usd"]["high"] - r["cost_usd"]["value"] for r in pts],
        ]
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", color=colour, alpha=0.6, label=group)
    front = sorted(report["pareto"], key=lambda r: r["runtime_s"]["value"])
    if front:
        ax.plot(
            [r["runtime_s"]["value"] / 3600 for r in front],
            [r["cost_usd"]["value"] for r in front],
            "k--",
            label="Pareto front",
        )
        for r in front:
            ax.annotate(
                f"{r['machine'].split(':')[1]} b{r['batch_size']}",
                (r["runtime_s"]["value"] / 3600, r["cost_usd"]["value"]),
                fontsize=7,
            )
    if report.get("budget_usd"):
        ax.axhline(report["budget_usd"], color="red", lw=0.8, label="budget")
    if report.get("deadline_s"):
        ax.axvline(report["deadline_s"] / 3600, color="purple", lw=0.8, label="deadline")
    ax.set_xlabel("estimated runtime (h)")
    ax.set_ylabel("estimated cost (USD)")
    ax.set_title(f"{report['workload']}: cost vs runtime ({report['study']})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
