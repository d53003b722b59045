"""The report's hyperparameters: what the short runs of ``--tune`` found, with its evidence.

``attach(report, study)`` adds the section ``hyperparameters`` (the plan, the runs by how
they ended, the recommended values with their evidence, the best run per batch size, the
learning-rate rule's check, the narrowed ranges ``advisor submit`` starts from) and, when the
short runs judged the recommended batch size, puts the values into
``recommended.hyperparameters`` with ``recommended.hyperparameter_evidence`` beside them.
A study without short runs gets nothing (the report then lists the tuning ranges only).
``lines(report)`` is the terminal's short section, ``note_lines(report)`` the dashboard note's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.accuracy import evidence as ev
from advisor.accuracy.lr_rule import LrRule
from advisor.accuracy.plan import TunePlan
from advisor.accuracy.step import STUDY_ATTR
from advisor.accuracy.trials import accuracy_trials, spent_s
from advisor.durations import format_duration
from advisor.search_spaces.space import CategoricalParam, Param, param_from_dict, space_from_dict

if TYPE_CHECKING:
    import optuna

SECTION = "hyperparameters"


def attach(report: dict[str, Any], study: optuna.Study) -> None:
    """Add the short runs' findings to ``report`` (see the module docstring)."""
    stored = study.user_attrs.get(STUDY_ATTR)
    if not isinstance(stored, dict) or "plan" not in stored:
        return
    plan = TunePlan.from_dict(stored["plan"])
    trials = accuracy_trials(study, plan.id)
    rule = _rule(stored.get("rule"))
    params = _params(study, stored)
    classes = _classes(plan)
    found = ev.evidence(trials, plan, str(stored.get("full_run") or "its planned epochs"), classes)
    band = ev.chance_band(classes, plan.n_val)  # runs that learned nothing narrow nothing
    narrowed = ev.narrowed([t for t in trials if ev.learned(t, band)], params) or {}
    section: dict[str, Any] = {
        "plan": plan.to_dict(),
        "budget_s": stored.get("budget_s"),
        "spent_s": round(spent_s(trials), 1),
        "this_run": stored.get("last"),
        "runs": ev.counts(trials),
        "recommended": found,
        "per_batch": ev.per_batch(trials),
        "lr_rule": ev.rule_check(trials, rule, band),
        "narrowed_ranges": {
            name: _range(p, _original(params, name)) for name, p in narrowed.items()
        },
        "pruner": f"{plan.pruner}, reduction factor {plan.reduction_factor}, "
        + (
            "brackets that start pruning at the first check or later"
            if plan.pruner == "hyperband"
            else "from the first check"
        )
        + f" ({plan.checks_per_epoch} checks per epoch)",
        "where": "the study's trials tagged accuracy_trial: learning curves as intermediate "
        "values (advisor dashboard)",
    }
    if stored.get("space"):  # issue #36: a user model's space, read from its builder
        section["space"] = stored["space"]
    report[SECTION] = section
    rec = report.get("recommended")
    if found is None or not rec:
        return
    if rec.get("batch_size") != plan.recommended_batch:
        section["note"] = (
            f"the short runs judged batch {plan.recommended_batch}; the recommendation is now "
            f"batch {rec.get('batch_size')}: re-run with --tune to judge it"
        )
        return
    rec["hyperparameters"] = {**(rec.get("hyperparameters") or {}), **found["values"]}
    rec["hyperparameter_evidence"] = {k: v for k, v in found.items() if k != "values"}


def lines(report: dict[str, Any], short: bool = False) -> list[str]:
    """The terminal's lines for the short runs (plain text: the caller escapes them); one
    line when ``short`` (the one-screen report)."""
    section = report.get(SECTION)
    if not section:
        return []
    found = section.get("recommended")
    runs = section["runs"]
    why = found and (found.get("not_learned") or found.get("too_few") or found.get("not_repeated"))
    spent = _spent(section.get("this_run"), always=not short)
    if why:
        return [
            f"hyperparameters: {why} ({_runs(runs['runs'])}, {runs['pruned']} pruned)"
            + (f"; {spent}" if spent else "")
        ]
    if short and found:
        values = " ".join(_value(k, v) for k, v in found["values"].items())
        seeds = found["seeds"]
        spread = f"; seeds: {seeds['text']}" if seeds["count"] > 1 else ""
        epochs = found["at_epochs"]
        space = section.get("space")  # issue #36: read from a user model's builder
        searched = (
            "; searched from the builder's defaults: "
            + ", ".join(f"{k} {v}" for k, v in space["searched"].items())
            if space
            else ""
        )
        return [
            f"hyperparameters: {values} - {found['metric']} {found['value']:.3f} after "
            f"{epochs:g} epoch{'' if epochs == 1 else 's'} of {section['plan']['n_train']:,} "
            f"samples, best of {found['runs_at_batch']} short runs at batch "
            f"{found['batch_size']} ({runs['runs']} in all, {runs['pruned']} pruned){spread}; "
            f"short runs rank configurations, they do not promise the final accuracy{searched}"
            + (f"; {found['judged_instead']}" if found.get("judged_instead") else "")
            + (f"; {spent}" if spent else "")
        ]
    tally = (
        f"{runs['runs']} short runs: {runs['finished']} full length, {runs['pruned']} pruned, "
        f"{runs['stopped_at_time_budget']} stopped at the time budget, {runs['failed']} failed"
    )
    if not found:
        return [f"hyperparameters: no short run reached a check ({tally})"]
    values = " ".join(_value(k, v) for k, v in found["values"].items())
    out = [
        f"hyperparameters: {values} at batch {found['batch_size']} - {found['metric']} "
        f"{found['value']:.3f} after {found['at_epochs']:g} of {found['data']} "
        f"({found['ended']}), best of {found['runs_at_batch']} runs at that batch in {tally}; "
        f"seeds: {found['seeds']['text']}",
        f"  {found['limits']}",
    ]
    if section.get("space"):
        space = section["space"]
        searched = ", ".join(f"{k} {v}" for k, v in space["searched"].items())
        left = f"; left alone: {', '.join(space['left_alone'])}" if space["left_alone"] else ""
        out.append(f"  searched (from the builder's defaults, no space declared): {searched}{left}")
    if found.get("judged_instead"):  # issue #50: a dataset too small for the recommended batch
        out.append(f"  {found['judged_instead']}")
    left_out = section["plan"].get("left_out") or []
    if left_out:
        out.append("  batch sizes left out: " + "; ".join(left_out))
    if spent:
        out.append(f"  {spent}")
    rule = section.get("lr_rule")
    if rule:
        out.append("  lr rule: " + "; ".join(_rule_text(r) for r in rule["by_batch"]))
    if section.get("narrowed_ranges"):
        out.append(
            "  advisor submit starts from: "
            + ", ".join(f"{k} {v}" for k, v in section["narrowed_ranges"].items())
        )
    if section.get("note"):
        out.append(f"  note: {section['note']}")
    return out


def _runs(n: int) -> str:
    return f"{n} short run{'' if n == 1 else 's'}"


def _spent(last: Any, always: bool) -> str:
    """This call's use of --tune and why it stopped (issue #50); only when it stopped early
    unless ``always``: more than a tenth of the budget left."""
    if not isinstance(last, dict) or not last.get("stop"):
        return ""
    budget, left = float(last.get("budget_s") or 0.0), float(last.get("left_s") or 0.0)
    if not always and left <= 0.1 * budget:
        return ""
    used = format_duration(budget - left)
    return f"--tune {format_duration(budget)}: {used} used, {last['new_runs']} new runs; {last['stop']}"


def note_lines(report: dict[str, Any]) -> list[str]:
    """The dashboard note's paragraph (Markdown)."""
    text = lines(report)
    if not text:
        return []
    return ["", f"**Hyperparameters** ({text[0].removeprefix('hyperparameters: ')})"] + [
        f"- {line.strip()}" for line in text[1:]
    ]


def _rule_text(row: dict[str, Any]) -> str:
    own = row.get("rule_run")
    ran = f", its run ranked {own['rank']} of {own['of']}" if own and row.get("checked") else ""
    fell = f" ({row['collapsed']['text']})" if row.get("collapsed") else ""  # issue #36
    return f"batch {row['batch_size']}: {row['text']}{ran}{fell}"


def _value(name: str, value: Any) -> str:
    return f"{name}={value:.3g}" if isinstance(value, float) else f"{name}={value}"


def _rule(data: Any) -> LrRule | None:
    if not isinstance(data, dict):
        return None
    b_noise = data.get("b_noise")
    return LrRule(
        lr_ref=float(data["lr_ref"]),
        batch_ref=int(data["batch_ref"]),
        adaptive=bool(data["adaptive"]),
        b_noise=float("inf") if b_noise in (None, "inf") else float(b_noise),
        b_noise_basis=str(data.get("b_noise_basis", "")),
        optimizer=str(data.get("optimizer", "")),
    )


def _classes(plan: TunePlan) -> int | None:
    """A built-in workload's number of classes (None for a user model: not known)."""
    from advisor.search_spaces.workloads import ModelRef, get, names

    if ModelRef(plan.workload).is_user or plan.workload not in names():
        return None
    return get(plan.workload).n_classes


def _params(study: optuna.Study, stored: dict[str, Any]) -> list[Param]:
    if stored.get("space") and isinstance(stored.get("params"), list):  # read from a builder
        return [param_from_dict(p) for p in stored["params"]]
    space = study.user_attrs.get("space")
    if not isinstance(space, dict):
        return []
    return [p for p in space_from_dict(space).hyperparameters if not p.affects_runtime]


def _original(params: list[Param], name: str) -> Param | None:
    return next((p for p in params if p.name == name), None)


def _range(p: Param, original: Param | None) -> str:
    def text(q: Param) -> str:
        if isinstance(q, CategoricalParam):
            return "{" + ", ".join(map(str, q.choices)) + "}"
        return f"{q.low:.3g}..{q.high:.3g}" + (" log" if q.log else "")

    return text(p) + (f" (space: {text(original)})" if original is not None else "")


def print_lines(
    report: dict[str, Any], console: Any, indent: str = "", short: bool = False
) -> bool:
    """Print ``lines(report, short)`` on a rich console (escaped); whether there were any."""
    from rich.markup import escape

    text = lines(report, short)
    for i, line in enumerate(text):
        head, _, rest = line.partition(":") if i == 0 else ("", "", line)
        shown = f"[bold]{escape(head)}:[/]{escape(rest)}" if head else escape(rest)
        console.print(indent + shown, highlight=False)
    return bool(text)
