"""The short-run search: ask a configuration, train it, report every check, prune, write.

The trials are asked on an in-memory single-objective copy of the study's short runs (the
machine search does the same with its own trials, ``advisor.study.state``), with its own
sampler (TPE, seeded) and Optuna's pruner (``HyperbandPruner`` by default, or
``SuccessiveHalvingPruner``: ``docs/benchmarks.md`` argues the choice); each finished run is then
written into the study once (``study.add_trial``), with its intermediate values, the pruner's
rung attributes and its state: COMPLETE (ran its full length), PRUNED (stopped by the pruner,
or by the time budget: its record says which) or FAIL (diverged or raised; the reason kept).
Every check reports the validation error (``1 - val_accuracy``) or loss: lower is better, as
the study's direction. A study with two objectives (``--objective pareto``) stores a finished
run's value once per objective (Optuna requires one per objective); nothing in advisor reads
a short run's values as run time or cost.

All runs compete at equal epochs (the batch size is one of the searched values), in
Hyperband's brackets: successive-halving competitions that start pruning at different
checks. The batch sizes take turns, the recommended one every other run
(``TunePlan.turns``), so that the recommendation has runs of its own to rank. The learning-rate rule
is enqueued first (one run per batch size, the recipe's other values), the recommended batch
size's first: the pruner always promotes the first run of a competition (of its bracket), so
it gives a full-length run of the rule at the recommended batch size. When time is left after the
search, the best full-length configuration at the recommended batch size is trained again
with other seeds, so its spread is measured. ``--tune TIME``
counts every short run's wall time in the study, so a re-run of the same command adds nothing.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from advisor.accuracy.collapse import backoff_values, collapsed
from advisor.accuracy.evidence import best_of
from advisor.accuracy.lr_rule import LrRule
from advisor.accuracy.plan import TunePlan
from advisor.accuracy.spend import (
    BUILD_PRIOR_S,
    SEED_MARGIN,
    SearchResult,
    seed_reserve,
    stop_text,
)
from advisor.accuracy.study_copy import for_study, study_batches, with_batches
from advisor.accuracy.trials import AccuracyTrial, accuracy_trials, from_trial, reported, spent_s
from advisor.records import ACCURACY
from advisor.search_spaces.convert import active
from advisor.search_spaces.space import CategoricalParam, FloatParam, IntParam, Param

if TYPE_CHECKING:
    import optuna

    from advisor.probes.short_run import Check, ShortRunRequest, ShortRunResult

Trainer = Callable[["ShortRunRequest", Callable[["Check"], bool]], "ShortRunResult"]
Progress = Callable[[str, int, int], None]


def make_pruner(plan: TunePlan) -> optuna.pruners.BasePruner:
    """The plan's pruner: successive halving (asynchronous) from the first check, or Hyperband
    over brackets of it, both at the plan's reduction factor."""
    import optuna

    if plan.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=1, max_resource=plan.checks, reduction_factor=plan.reduction_factor
        )
    return optuna.pruners.SuccessiveHalvingPruner(
        min_resource=1, reduction_factor=plan.reduction_factor
    )


class ShortRunSearch:
    """Short runs of ``plan`` in ``study`` for up to ``budget_s`` of this machine in all."""

    def __init__(
        self,
        study: optuna.Study,
        plan: TunePlan,
        params: list[Param],
        budget_s: float,
        *,
        fixed: dict[str, Any] | None = None,
        rule: LrRule | None = None,
        recipe: dict[str, Any] | None = None,
        seed: int = 0,
        threads: int | None = None,
        train: Trainer | None = None,
        clock: Callable[[], float] = time.monotonic,
        progress: Progress | None = None,
        chance: float | None = None,
    ) -> None:
        self.study, self.plan, self.params = study, plan, params
        self.chance = chance  # issue #36: the chance band a collapsed rule run falls into
        self.budget_s, self.fixed = budget_s, dict(fixed or {})
        self.rule, self.recipe = rule, dict(recipe or {})
        self.seed, self.threads = seed, threads
        self.train = train
        self.clock, self.progress = clock, progress
        self.roles: deque[str] = deque()
        self.batch_choices = plan.study_batch_choices  # the study's batch_size distribution
        self.first_check_s: float | None = None  # measured: build + the first check
        self.full_run_s: float | None = None  # measured: a full-length run
        self.result, self.deadline = SearchResult(budget_s, 0.0), clock() + budget_s

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> SearchResult:
        """Run until the budget is spent (Ctrl-C: the run in progress is written as FAIL)."""
        before = accuracy_trials(self.study, self.plan.id)
        result = SearchResult(self.budget_s, spent_s(before))
        self.batch_choices = study_batches(self.study, self.plan)
        self._learn_costs(before)
        start = self.clock()
        deadline = start + self.budget_s - result.spent_before_s
        work = self._work_study()
        self._enqueue_rule(work, before)
        self.result, self.deadline = result, deadline
        self._report()
        turns, turn = self.plan.turns(), sum(t.role == "search" for t in before)
        while True:  # issue #50: what the seeds leave goes to more search runs
            ran = result.new
            while deadline - self.clock() - self._reserve(deadline) > self._min_run_s():
                if not self.roles:  # the rule's runs first, then the batch sizes' turns
                    work.enqueue_trial({"batch_size": turns[turn % len(turns)]})
                    turn += 1
                self._one(work, result, deadline, role=None, seed=0, of=None)
            self._seed_repeats(work, result, deadline)
            if result.new == ran:
                break
        result.spent_s = self.clock() - start
        result.left_s = max(0.0, deadline - self.clock())
        best = self._best()
        pending = self.full_run_s and best is not None and self._pending_seeds(best)
        seed_s = SEED_MARGIN * self.full_run_s if pending and self.full_run_s else None
        result.stop = stop_text(result, self._min_run_s(), seed_s, self.full_run_s, self.plan)
        return result

    def _seed_repeats(self, work: optuna.Study, result: SearchResult, deadline: float) -> None:
        """The best run's seed repeats still to run, while each fits in what is left."""
        best = self._best()
        if best is None or self.roles:
            return
        for s in self._pending_seeds(best):
            full = self.full_run_s or self.plan.estimated_run_s
            if deadline - self.clock() < SEED_MARGIN * full:
                break
            work.enqueue_trial({"batch_size": best.batch_size, **best.params})
            self._one(work, result, deadline, role="seed", seed=s, of=best.number)

    def _pending_seeds(self, best: AccuracyTrial) -> list[int]:
        done = {t.seed for t in accuracy_trials(self.study, self.plan.id) if t.of == best.number}
        return [s for s in range(1, self.plan.replicates + 1) if s not in done]

    def _best(self) -> AccuracyTrial | None:
        """The run to repeat with other seeds: the best at the recommended batch size, when
        it ran its full length."""
        best = best_of(accuracy_trials(self.study, self.plan.id), self.plan.centre)
        if best is None or best.ended != "finished":
            return None
        return best if best.batch_size == self.plan.centre else None

    def _reserve(self, deadline: float) -> float:
        """Time kept for the seeds of the best, once a run at the recommended batch size has
        reached full length (the measured length of the longest full-length run): as many
        repeats as still fit in what is left, none when none fits, and none while runs are
        queued (the rule's, its steps down), which go first (issue #50: a reserve for repeats
        that could not run then ended the search with half of --tune unspent)."""
        best = self._best()
        if self.full_run_s is None or best is None or self.roles:  # queued runs go first
            return 0.0
        pending = len(self._pending_seeds(best))
        return seed_reserve(self.full_run_s, pending, deadline - self.clock())

    def _min_run_s(self) -> float:
        """What a run costs to its first check (measured once one has)."""
        if self.first_check_s is not None:
            return self.first_check_s
        return BUILD_PRIOR_S + self.plan.estimated_run_s / self.plan.checks

    def _learn_costs(self, trials: list[Any]) -> None:
        for t in trials:
            if t.ended == "finished" and t.role != "seed":
                self.full_run_s = max(self.full_run_s or 0.0, t.wall_s)

    # -- one run -----------------------------------------------------------------------------

    def _one(
        self, work: optuna.Study, result: SearchResult, deadline: float, *, role: str | None,
        seed: int, of: int | None,
    ) -> None:  # fmt: skip
        trial = work.ask()
        role = role or (self.roles.popleft() if self.roles else "search")
        batch = int(trial.suggest_categorical("batch_size", list(self.plan.batch_sizes)))
        hps = suggest_params(trial, self.params)
        record: dict[str, Any] = {
            "plan": self.plan.id, "role": role, "seed": seed, "batch_size": batch,
            "n_train": self.plan.n_train, "n_val": self.plan.n_val, "curve": [],
        }  # fmt: skip
        if of is not None:
            record["of"] = of
        state, value = "FAIL", None
        started = self.clock()
        try:
            # a search run stops where the seeds' reserve begins; a seed repeat may use it
            search_run = role != "seed"
            stop_at = (
                (lambda: deadline - self._reserve(deadline)) if search_run else (lambda: deadline)
            )
            run, ended = self._train(trial, batch, hps, seed, search_run, stop_at, record)
            record.update(ended=ended, build_s=round(run.build_s, 3), error=run.error)
            if run.checks:
                value = reported(run.checks[-1].metric, run.checks[-1].value)
            state = {"finished": "COMPLETE", "failed": "FAIL"}.get(ended, "PRUNED")
        except KeyboardInterrupt:
            record.update(ended="interrupted", error="Ctrl-C during the run")
            self._write(work, trial, record, "FAIL", None, started)
            raise
        except Exception as exc:  # the builder refused a value, out of memory...
            record.update(ended="failed", error=f"{type(exc).__name__}: {exc}"[:300])
        self._write(work, trial, record, state, value, started)
        if role in ("rule", "backoff"):  # issue #36: leave the rule's region when it collapses
            self._back_off(work, record, batch, hps)
        result.new += 1
        result.endings[record["ended"]] += 1
        if record["ended"] == "finished" and role != "seed":
            self.full_run_s = max(self.full_run_s or 0.0, record["wall_s"])
        self._report()

    def _report(self) -> None:
        """Issue #50: the budget spent so far, at the start, every check and every run."""
        if self.progress:
            result = self.result
            spent = self.budget_s - max(0.0, self.deadline - self.clock())
            self.progress(
                f"tune:short training runs (--tune): {result.new} new, "
                f"{result.endings['pruned']} pruned",
                int(min(spent, self.budget_s)),
                int(self.budget_s),
            )

    def _train(
        self, trial: optuna.Trial, batch: int, hps: dict[str, Any], seed: int, prune: bool,
        stop_at: Callable[[], float], record: dict[str, Any],
    ) -> tuple[ShortRunResult, str]:  # fmt: skip
        from advisor.probes.short_run import ShortRunRequest

        train = self.train
        if train is None:
            from advisor.probes.accuracy import short_run

            train = short_run
        ending = ["finished"]
        last = [self.clock()]
        opened = last[0]

        def on_check(check: Check) -> bool:
            now = self.clock()
            if check.index == 1:
                self.first_check_s = min(self.first_check_s or now - opened, now - opened)
            step_s, last[0] = now - last[0], now
            trial.report(reported(check.metric, check.value), check.index)
            record["metric"] = check.metric
            record["curve"].append([check.epochs, round(check.value, 6)])
            self._report()
            if prune and trial.should_prune():
                ending[0] = "pruned"
                return False
            if now + step_s > stop_at():
                ending[0] = "time budget"
                return False
            return True

        request = ShortRunRequest(
            workload=self.plan.workload,
            batch_size=batch,
            hyperparameters={**self.fixed, **hps},
            n_train=self.plan.n_train,
            n_val=self.plan.n_val,
            epochs=self.plan.epochs,
            checks_per_epoch=self.plan.checks_per_epoch,
            seed=seed,
            threads=self.threads,
        )
        run = train(request, on_check)
        if run.ended == "failed":
            return run, "failed"
        return run, ending[0] if run.ended == "stopped" else "finished"

    def _write(
        self, work: optuna.Study, trial: optuna.Trial, record: dict[str, Any], state: str,
        value: float | None, started: float,
    ) -> None:  # fmt: skip
        import optuna

        from advisor.storage.locks import sigint_deferred

        record["wall_s"] = round(self.clock() - started, 3)
        record.setdefault("metric", "val_accuracy")
        with sigint_deferred():
            trial.set_user_attr(ACCURACY, record)
            ts = getattr(optuna.trial.TrialState, state)
            if ts == optuna.trial.TrialState.COMPLETE:
                frozen = work.tell(trial, value)
            else:
                frozen = work.tell(trial, state=ts)
            frozen = with_batches(frozen, self.batch_choices)
            self.study.add_trial(for_study(frozen, len(self.study.directions)))

    # -- the in-memory copy and the rule's runs ------------------------------------------

    def _work_study(self) -> optuna.Study:
        import warnings

        import optuna

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(multivariate=True, seed=self.seed)
        work = optuna.create_study(
            study_name=self.study.study_name, sampler=sampler, pruner=make_pruner(self.plan)
        )
        mine = [
            t
            for t in self.study.get_trials(deepcopy=False)
            if t.state.is_finished() and (a := from_trial(t)) is not None and a.plan == self.plan.id
        ]
        work.add_trials([with_batches(for_study(t, 1), self.plan.batch_sizes) for t in mine])
        return work

    def _enqueue_rule(self, work: optuna.Study, before: list[Any]) -> None:
        """One run per batch size at the rule's learning rate (the recipe's other values),
        unless the study has it already."""
        if self.rule is None or not any(p.name == "lr" for p in self.params):
            return
        have = {t.batch_size for t in before if t.role == "rule"}
        first = sorted(self.plan.batch_sizes, key=lambda b: b != self.plan.centre)
        for batch in first:  # the recommended batch size first
            if batch in have:
                continue
            values: dict[str, Any] = {"batch_size": batch}
            for p in self.params:
                want = self.rule.lr_at(batch) if p.name == "lr" else self.recipe.get(p.name)
                value = None if want is None else _clamp(p, want)
                if value is not None:  # else sampled (a recipe value the space does not offer)
                    values[p.name] = value
            work.enqueue_trial(values, skip_if_exists=False)
            self.roles.append("rule")

    def _back_off(
        self, work: optuna.Study, record: dict[str, Any], batch: int, hps: dict[str, Any]
    ) -> None:
        """Issue #36: a rule run (or a step down from it) that learned and collapsed to chance
        gets the next step down at the same batch size (``advisor.accuracy.collapse``)."""
        if not collapsed(record["curve"], self.chance, str(record.get("metric"))):
            return
        lr = next((p for p in self.params if p.name == "lr"), None)
        done = sum(
            t.role == "backoff" and t.batch_size == batch
            for t in accuracy_trials(self.study, self.plan.id)
        )
        low = float(lr.low) if isinstance(lr, FloatParam | IntParam) else 0.0
        values = backoff_values({**hps}, low, done)
        if values is not None:
            work.enqueue_trial({"batch_size": batch, **values}, skip_if_exists=False)
            self.roles.append("backoff")  # asked after the rule runs already queued


def suggest_params(trial: optuna.Trial, params: list[Param]) -> dict[str, Any]:
    """Sample ``params`` define-by-run in the space's order, conditions honoured."""
    out: dict[str, Any] = {}
    for p in params:
        if not active(p, out):
            continue
        if isinstance(p, FloatParam):
            out[p.name] = trial.suggest_float(p.name, p.low, p.high, log=p.log, step=p.step)
        elif isinstance(p, IntParam):
            out[p.name] = trial.suggest_int(p.name, p.low, p.high, log=p.log, step=p.step or 1)
        else:
            out[p.name] = trial.suggest_categorical(p.name, p.choices)
    return out


def _clamp(p: Param, value: Any) -> Any:
    """``value`` inside ``p``'s range (a categorical keeps a value it offers, else None)."""
    if isinstance(p, CategoricalParam):
        return value if value in p.choices else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    clamped = min(max(value, p.low), p.high)
    return round(clamped) if isinstance(p, IntParam) else float(clamped)
