"""What the short runs say: the best hyperparameters with their evidence, the learning-rate
rule's check, and the narrowed ranges a managed tuning job can start from.

Short runs are ranked as successive halving promotes them: the most checks reached first, then
the better metric at the last check (seed repeats aside). The recommendation is the best run at
the recommended batch size (the machine search fixed it); the evidence says the metric, at how
many epochs of how much data, out of how many runs (finished, pruned, stopped at the time
budget, failed), the spread across seeds when the best was repeated, and how far it goes.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from advisor.accuracy.collapse import backoff_text, collapsed
from advisor.accuracy.lr_rule import LrRule, agreement
from advisor.accuracy.plan import TunePlan
from advisor.accuracy.trials import AccuracyTrial, reported
from advisor.search_spaces.space import CategoricalParam, FloatParam, IntParam, Param

NARROW_TOP_SHARE = 0.25  # the ranges a tuning job starts from span the best quarter of runs
NARROW_MIN_RUNS = 3  # ... of the full-length runs, at least this many
LOG_MARGIN = 2.0  # a log range is widened by this factor each way
LINEAR_MARGIN = 0.2  # a linear range by this share of the space's width each way
MIN_RUNS = 2  # runs at a batch size that reached a check before its best reads as tuned
UNSTABLE_SPREAD = 0.1  # seeds whose values span more than 10 % of the best: not repeatable
LIMITS = (
    "Short runs rank configurations; they do not promise the final accuracy: these trained "
    "{length} at batch {batch}, where the full run trains {full}. The value is the short run's, "
    "the ranking is what carries over (docs/benchmarks.md, 'Hyperparameter search')."
)


def ranked(trials: list[AccuracyTrial]) -> list[AccuracyTrial]:
    """Runs that reached a check (seed repeats aside), best first."""
    usable = [t for t in trials if t.role != "seed" and t.ok]
    return sorted(usable, key=lambda t: (*t.rank_key(), t.number))


def chance_band(n_classes: int | None, n_val: int) -> float | None:
    """The validation accuracy a run must pass to have learned anything: chance for
    ``n_classes`` balanced classes plus twice its binomial noise on ``n_val`` samples (None:
    the number of classes is not known, as for a user model)."""
    if not n_classes or n_classes < 2 or n_val <= 0:
        return None
    chance = 1.0 / n_classes
    return chance + 2.0 * math.sqrt(chance * (1.0 - chance) / n_val)


def learned(t: AccuracyTrial, band: float | None) -> bool:
    """Whether ``t``'s last check is above the chance band (always, when no band applies)."""
    if band is None or t.metric != "val_accuracy" or t.value is None:
        return True
    return t.value > band


def best_of(trials: list[AccuracyTrial], batch: int) -> AccuracyTrial | None:
    """The best run at ``batch``, else the best at any batch size (None: no run checked)."""
    order = ranked(trials)
    at = [t for t in order if t.batch_size == batch]
    top = at or order
    return top[0] if top else None


def _spread(best: AccuracyTrial, trials: list[AccuracyTrial]) -> dict[str, Any]:
    repeats = repeats_of(best, trials)
    values = [v for t in [best, *repeats] if (v := t.value) is not None]
    if len(values) < 2:
        return {
            "count": 1,
            "text": "not measured (one seed: --tune had no time left to repeat the best run)",
        }
    sd = statistics.stdev(values)
    unstable = max(values) - min(values) > UNSTABLE_SPREAD * abs(values[0])
    return {
        "repeatable": not unstable,
        "count": len(values),
        "seeds": [best.seed, *(t.seed for t in repeats)],
        "values": [round(v, 4) for v in values],
        "mean": round(statistics.fmean(values), 4),
        "std": round(sd, 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "text": f"{statistics.fmean(values):.3f} +- {sd:.3f} over {len(values)} seeds "
        f"({min(values):.3f}-{max(values):.3f})"
        + (": it did not repeat, treat the best value as the seed's luck" if unstable else ""),
    }


def repeats_of(best: AccuracyTrial, trials: list[AccuracyTrial]) -> list[AccuracyTrial]:
    """The seed repeats of ``best`` that reached its checks."""
    return [t for t in trials if t.of == best.number and t.ok and t.checks == best.checks]


def not_repeated(
    best: AccuracyTrial,
    trials: list[AccuracyTrial],
    band: float | None,
    n_classes: int | None,
) -> str | None:
    """Why the best run's values must not be recommended although it scored best (issue #36),
    or None: its seed repeats (the best itself aside: it was chosen for its luck) do not beat
    chance (their mean within ``band``), or do not beat the recipe's own run at that batch
    size (the learning-rate rule's run, the recipe's other values) at the same checks. None as
    well when the best is not repeated (its spread then says so) or is the recipe's run."""
    repeats = repeats_of(best, trials)
    values = [v for t in repeats if (v := t.value) is not None]
    if not values or best.role == "rule":
        return None
    mean = statistics.fmean(values)
    shown = ", ".join(f"{v:.3f}" for v in values)
    head = (
        f"the best short run ({best.metric} {best.value:.3f}) did not survive its own seed "
        f"repeats ({shown})"
    )
    tail = "no value is recommended, the recipe's stay: give --tune more time"
    if band is not None and best.metric == "val_accuracy" and mean <= band:
        assert n_classes is not None
        return (
            f"{head}: their mean {mean:.3f} is within chance ({1 / n_classes:.3f} for "
            f"{n_classes} classes, up to {band:.3f} with the validation noise); {tail}"
        )
    own = [
        t for t in trials
        if t.role == "rule" and t.ok and t.batch_size == best.batch_size
        and t.checks == best.checks and t.value is not None
    ]  # fmt: skip
    if own and reported(best.metric, mean) >= reported(best.metric, own[0].value or 0.0):
        return (
            f"{head}: their mean {mean:.3f} does not beat the recipe's own run at batch "
            f"{best.batch_size} ({own[0].value:.3f}, trial {own[0].number}); {tail}"
        )
    return None


def too_few(best: AccuracyTrial, trials: list[AccuracyTrial]) -> str | None:
    """Why the best run's values must not read as tuned (issue #50): no other run at its batch
    size reached a check, so it was compared with nothing; None when one did."""
    at = [t for t in trials if t.role != "seed" and t.ok and t.batch_size == best.batch_size]
    need = MIN_RUNS
    if len(at) >= need:
        return None
    own = " (the learning-rate rule's own run)" if len(at) == 1 and at[0].role == "rule" else ""
    return (
        f"only {len(at)} short run{'' if len(at) == 1 else 's'} at batch {best.batch_size} "
        f"reached a check{own}: too few to compare configurations (at least {need}); not "
        "tuned, no value is recommended, the recipe's stay: give --tune more time"
    )


def counts(trials: list[AccuracyTrial]) -> dict[str, int]:
    """Runs by how they ended (seed repeats included in ``seeds`` only)."""
    search = [t for t in trials if t.role != "seed"]
    out = {k: sum(t.ended == k for t in search) for k in ("finished", "pruned", "failed")}
    out["stopped_at_time_budget"] = sum(t.ended == "time budget" for t in search)
    out["interrupted"] = sum(t.ended == "interrupted" for t in search)
    out["runs"] = len(search)
    out["seeds"] = sum(t.role == "seed" for t in trials)
    return out


def evidence(
    trials: list[AccuracyTrial],
    plan: TunePlan,
    full_run: str = "its planned epochs",
    n_classes: int | None = None,
) -> dict[str, Any] | None:
    """The recommended values and their evidence (None when no run reached a check). When the
    best run at the recommended batch size is not above the chance band (``chance_band``), no
    value is recommended: ``values`` is empty and ``not_learned`` says why; likewise when its
    seed repeats do not beat chance or the recipe's own run (``not_repeated`` says why), or
    when too few runs at its batch size reached a check to compare any (``too_few``)."""
    best = best_of(trials, plan.centre)
    if best is None:
        return None
    n = counts(trials)
    band = chance_band(n_classes, plan.n_val)
    out_of_chance = {}
    if not learned(best, band):
        assert band is not None and n_classes is not None
        out_of_chance = {
            "not_learned": (
                f"no short run at batch {best.batch_size} learned beyond chance: the best "
                f"{best.metric} is {best.value:.3f}, chance {1 / n_classes:.3f} for "
                f"{n_classes} classes (up to {band:.3f} with the noise of {plan.n_val} "
                "validation samples); no value is recommended, the recipe's stay: give "
                "--tune more time, or see the learning curves (advisor dashboard)"
            ),
            "chance_band": round(band, 4),
        }
    elif (few := too_few(best, trials)) is not None:
        out_of_chance = {"too_few": few}  # issue #50: one run's values are no tuning
    elif (why := not_repeated(best, trials, band, n_classes)) is not None:
        out_of_chance = {"not_repeated": why}  # issue #36: the best was a seed's luck
    return {
        "values": {} if out_of_chance else dict(best.params),
        **out_of_chance,
        "trial": best.number,
        "metric": best.metric,
        "value": round(best.value or math.nan, 4),
        "at_epochs": best.epochs,
        "batch_size": best.batch_size,
        "data": plan.length_text,
        "out_of_runs": n["runs"],
        "runs_at_batch": sum(t.batch_size == best.batch_size for t in trials if t.role != "seed"),
        "ended": best.ended,
        "runs": n,
        "seeds": _spread(best, trials),
        "ranked_by": "the most checks reached, then the metric at the last check",
        "limits": LIMITS.format(length=plan.length_text, batch=best.batch_size, full=full_run),
        **_judged_instead(plan),
    }


def _judged_instead(plan: TunePlan) -> dict[str, Any]:
    """Issue #50: the runs judged a smaller batch size than the recommended one (the dataset
    too small for it), said beside the values."""
    if not plan.judged_batch or plan.judged_batch == plan.recommended_batch:
        return {}
    return {
        "judged_instead": (
            f"judged at batch {plan.judged_batch}, not the recommended {plan.recommended_batch}: "
            f"the dataset's {plan.full_n_train:,} training samples give batch "
            f"{plan.recommended_batch} fewer steps per epoch than the {plan.checks_per_epoch} "
            "checks; values found at a smaller batch size may not carry over to it (the "
            "learning rate above all)"
        )
    }


def per_batch(trials: list[AccuracyTrial]) -> list[dict[str, Any]]:
    """The best run at each batch size (the neighbours of the recommended one included)."""
    out = []
    order = ranked(trials)
    for batch in sorted({t.batch_size for t in order}):
        top = next(t for t in order if t.batch_size == batch)
        out.append(
            {
                "batch_size": batch,
                "runs": sum(t.batch_size == batch for t in order),
                "metric": top.metric,
                "value": round(top.value or math.nan, 4),
                "at_epochs": top.epochs,
                "hyperparameters": dict(top.params),
            }
        )
    return out


def rule_check(
    trials: list[AccuracyTrial], rule: LrRule | None, band: float | None = None
) -> dict[str, Any] | None:
    """Whether the tuned learning rate agrees with the rule at each batch size, and where the
    rule's own runs ranked (None without a rule or without learning-rate runs); with the
    chance ``band``, which rule runs learned and collapsed and what the search's steps down
    from them gave (issue #36, ``advisor.accuracy.collapse``)."""
    order = ranked(trials)
    if rule is None or not any("lr" in t.params for t in order):
        return None
    rows = []
    for batch in sorted({t.batch_size for t in order}):
        at = [t for t in order if t.batch_size == batch and "lr" in t.params]
        if not at:
            continue
        row: dict[str, Any] = {"batch_size": batch, "rule_lr": round(rule.lr_at(batch), 6)}
        left = _left_the_rule(trials, batch, band)
        if left is not None:
            row["collapsed"] = {**left, "text": backoff_text(rule.lr_at(batch), left["steps"])}
        if len(at) == 1 and at[0].role == "rule":
            row.update(checked=False, text="only the rule's own run reached a check: not checked")
            rows.append(row)
            continue
        row.update(checked=True, **agreement(float(at[0].params["lr"]), rule.lr_at(batch)))
        own = [t for t in at if t.role == "rule"]
        if own:
            place = at.index(own[0]) + 1
            row["rule_run"] = {
                "trial": own[0].number,
                "value": round(own[0].value or math.nan, 4),
                "at_epochs": own[0].epochs,
                "rank": place,
                "of": len(at),
                "ended": own[0].ended,
            }
        rows.append(row)
    return {"rule": rule.to_dict(), "by_batch": rows}


def _left_the_rule(
    trials: list[AccuracyTrial], batch: int, band: float | None
) -> dict[str, Any] | None:
    """The rule run at ``batch`` that collapsed and the steps down from it (None: none)."""
    own = [t for t in trials if t.role == "rule" and t.batch_size == batch and t.ok]
    if not own or not collapsed(own[0].curve, band, own[0].metric):
        return None
    steps = [
        {
            "trial": t.number,
            "lr": float(t.params["lr"]),
            "value": round(t.value or math.nan, 4),
            "peak": round(max(v for _, v in t.curve), 4),
            "collapsed": collapsed(t.curve, band, t.metric),
            "ended": t.ended,
        }
        for t in trials
        if t.role == "backoff" and t.batch_size == batch and t.ok and "lr" in t.params
    ]
    rule_run = own[0]
    return {
        "rule_run": {
            "trial": rule_run.number,
            "peak": round(max(v for _, v in rule_run.curve), 4),
            "value": round(rule_run.value or math.nan, 4),
        },
        "steps": steps,
    }


def narrowed(trials: list[AccuracyTrial], params: list[Param]) -> dict[str, Param] | None:
    """Each hyperparameter's range over the best quarter of the full-length sampled runs (at
    least 3), widened by a margin and kept inside the space's; None with fewer than
    ``NARROW_MIN_RUNS`` of them (a pruned run's rank rests on its first checks, and the rule's
    runs hold the recipe's values, which would pull every range towards the recipe)."""
    order = [t for t in ranked(trials) if t.ended == "finished" and t.role == "search"]
    if len(order) < NARROW_MIN_RUNS:
        return None
    top = order[: max(NARROW_MIN_RUNS, math.ceil(NARROW_TOP_SHARE * len(order)))]
    out: dict[str, Param] = {}
    for p in params:
        seen = [t.params[p.name] for t in top if p.name in t.params]
        if not seen:
            continue
        out[p.name] = _narrow(p, seen)
    return out


def _narrow(p: Param, seen: list[Any]) -> Param:
    from dataclasses import replace

    if isinstance(p, CategoricalParam):
        kept = tuple(c for c in p.choices if c in seen)
        return replace(p, choices=kept) if len(kept) > 1 else p
    lo, hi = min(seen), max(seen)
    if p.log:
        lo, hi = lo / LOG_MARGIN, hi * LOG_MARGIN
    else:
        width = (p.high - p.low) * LINEAR_MARGIN
        lo, hi = lo - width, hi + width
    lo, hi = max(_sig(lo, math.floor), p.low), min(_sig(hi, math.ceil), p.high)
    if isinstance(p, IntParam):
        lo, hi = math.floor(lo), math.ceil(hi)
    if p.step is not None:  # keep Optuna's rule: high - low a multiple of step, on the grid
        lo = p.low + math.floor((lo - p.low) / p.step) * p.step
        hi = p.low + math.ceil((hi - p.low) / p.step) * p.step
    if not lo < hi:
        return p
    if isinstance(p, IntParam):
        return replace(p, low=int(lo), high=int(hi))
    assert isinstance(p, FloatParam)
    return replace(p, low=float(lo), high=float(hi))


def _sig(x: float, rounding: Any, digits: int = 3) -> float:
    """``x`` to ``digits`` significant digits, rounded by ``rounding`` (floor: down)."""
    if x == 0 or not math.isfinite(x):
        return x
    scale = 10 ** (digits - 1 - math.floor(math.log10(abs(x))))
    return float(rounding(x * scale) / scale)
