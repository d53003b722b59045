"""``--tune``'s step of ``advisor suggest``: plan the short runs for the recommended batch size,
seed them with the learning-rate rule, and run them in the study (``advisor.pipeline`` calls
it once the report has its recommendation).

The plan is kept in the study (attribute ``accuracy_tune``) and reused by a re-run with the
same recommended batch size, so its runs stay comparable; ``--tune TIME`` counts the time of
every short run the study holds under that plan, so the same command run again adds nothing
and a longer ``TIME`` goes on where the last one stopped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from advisor.accuracy.builder_space import builder_space
from advisor.accuracy.lr_rule import lr_rule, recipe
from advisor.accuracy.plan import SampleCost, TunePlan, plan_tuning
from advisor.accuracy.search import Progress, ShortRunSearch, Trainer
from advisor.errors import AdvisorError
from advisor.providers.catalog import MachineKey
from advisor.search_spaces.space import param_to_dict
from advisor.search_spaces.workloads import ModelRef

if TYPE_CHECKING:
    from advisor.outcome import SuggestOutcome

STUDY_ATTR = "accuracy_tune"


def tune_step(
    outcome: SuggestOutcome,
    recommended: dict[str, Any],
    epochs_rows: list[dict[str, Any]],
    budget_s: float,
    *,
    progress: Progress | None = None,
    train: Trainer | None = None,
    cost: SampleCost | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Run the short runs ``budget_s`` (``--tune``) allows for the ``recommended`` row (the
    report's epochs table gives the noise scale); return what this call did (also stored in
    the study). ``train``, ``cost`` and ``clock`` replace the real training, the measured cost
    per sample and the clock (tests)."""
    options = outcome.options
    if outcome.workload.framework != "torch":
        raise AdvisorError(
            "--tune trains its short runs with PyTorch, and this study uses "
            f"{outcome.workload.framework}.",
            "run it with --framework torch, or leave --tune out.",
        )
    params = [p for p in outcome.space.hyperparameters if not p.affects_runtime]
    derived = None
    if not params and ModelRef(outcome.workload.name).is_user:  # issue #36: its builder's
        derived = builder_space(recipe(outcome.workload.name, outcome.workload.framework))
        params = list(derived.params)
    if not params:
        raise AdvisorError(
            "--tune judges hyperparameters that do not change the run time, and the space has "
            "none"
            + (
                " (nor has the builder a keyword argument with a positive float default)."
                if derived is not None
                else "."
            ),
            "add some (lr, momentum, dropout...) to the space, or leave --tune out.",
        )
    batch = int(recommended["batch_size"])
    study = outcome.study
    started = clock()
    plan = _stored_plan(study.user_attrs.get(STUDY_ATTR), outcome.workload.name, batch)
    if plan is None:
        cost = cost or _cost(outcome, batch)
        plan = plan_tuning(
            budget_s,
            outcome.workload.name,
            batch,
            outcome.space.batch_sizes,
            outcome.workload.n_train,
            outcome.workload.n_val,
            cost,
        )
    b_noise, basis = _noise(epochs_rows, batch)
    rule = lr_rule(outcome.workload.name, b_noise, basis, outcome.workload.framework)
    runtime = {p.name for p in outcome.space.hyperparameters if p.affects_runtime}
    fixed = {k: v for k, v in (recommended.get("hyperparameters") or {}).items() if k in runtime}
    measured_s = clock() - started  # a cost measurement counts against --tune
    search = ShortRunSearch(
        study,
        plan,
        params,
        max(0.0, budget_s - measured_s),
        fixed=fixed,
        rule=rule,
        recipe=recipe(outcome.workload.name, outcome.workload.framework),
        seed=options.seed,
        threads=options.threads,
        train=train,
        clock=clock,
        progress=progress,
        chance=_chance(outcome.workload.name, plan.n_val),  # issue #36: collapsed rule runs
    )
    result = search.run()
    done = {
        "plan": plan.to_dict(),
        "rule": None if rule is None else rule.to_dict(),
        "budget_s": budget_s,
        "fixed": fixed,
        "full_run": _full_run(recommended, outcome.workload.n_train),
        "last": result.to_dict(),
        # issue #36: the space read from a user model's builder (None: the study's space)
        "space": None if derived is None else derived.to_dict(),
        "params": [param_to_dict(p) for p in params],
    }
    study.set_user_attr(STUDY_ATTR, done)
    return done


def _stored_plan(stored: Any, workload: str, batch: int) -> TunePlan | None:
    """The study's plan when it was made for this workload and recommended batch size."""
    if not isinstance(stored, dict) or not isinstance(stored.get("plan"), dict):
        return None
    try:
        plan = TunePlan.from_dict(stored["plan"])
    except (KeyError, TypeError, ValueError):
        return None
    return plan if plan.workload == workload and plan.recommended_batch == batch else None


def _cost(outcome: SuggestOutcome, batch: int) -> SampleCost:
    """This machine's cost per sample at ``batch``: its probe in the screen, else measured."""
    for (machine, b), ev in outcome.screen.items():
        phases = getattr(ev, "phases", None)
        if b != batch or MachineKey(machine).service != "local" or phases is None:
            continue
        if phases.source == "measured" and phases.t2.value > 0 and phases.v2.value > 0:
            n_val = max(1, outcome.workload.n_val)
            return SampleCost(
                phases.t2.value / batch,
                phases.v2.value / n_val,
                f"this machine's probe at batch {batch} (steady step, validation pass)",
            )
    from advisor.probes.accuracy import measure_cost

    train_s, val_s = measure_cost(
        outcome.workload.name,
        batch,
        min(256, outcome.workload.n_val or 256),
        outcome.options.threads,
    )
    return SampleCost(train_s, val_s, f"measured here at batch {batch} (4 steps, one pass)")


def _noise(rows: list[dict[str, Any]], batch: int) -> tuple[float | None, str]:
    """The noise scale the report's epochs table used at ``batch`` (None: none)."""
    for row in rows:
        if row.get("batch_size") == batch and row.get("b_noise") not in (None, "inf"):
            value = float(row["b_noise"])
            if math.isfinite(value) and value > 0:
                source = {"fit": "fitted to known epochs", "probe": "the probe's B_simple"}
                return value, source.get(str(row.get("b_noise_from")), "the epochs table")
    return None, ""


def _full_run(recommended: dict[str, Any], n_train: int) -> str:
    epochs = recommended.get("epochs")
    return f"{epochs} epochs of {n_train:,} samples" if epochs else f"epochs of {n_train:,} samples"


def _chance(workload: str, n_val: int) -> float | None:
    """The chance band of a built-in workload's validation accuracy (None: not known)."""
    from advisor.accuracy.evidence import chance_band
    from advisor.search_spaces.workloads import get, names

    if ModelRef(workload).is_user or workload not in names():
        return None
    return chance_band(get(workload).n_classes, n_val)
