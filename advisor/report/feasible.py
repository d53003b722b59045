"""Whether the study has an answer to print, or one line saying why not: nothing fits the
budget or deadline (with the cheapest or fastest option seen and the limit that would fit),
nothing could be evaluated, or --timeout ran out before the first trial (issue #28)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.durations import format_duration
from advisor.errors import AdvisorError
from advisor.evaluation.contract import Evaluation
from advisor.records import TrialRecord
from advisor.report.memory import left_out as memory_left_out
from advisor.study.selection import feasible_trials

if TYPE_CHECKING:
    from advisor.outcome import SuggestOutcome


def check_feasible(outcome: SuggestOutcome) -> None:
    """Raise "no candidate fits" with the cheapest/fastest option seen and how to fix it."""
    if feasible_trials(outcome.study):
        return
    _check_timed_out(outcome)  # issue #28: --timeout before any trial is not "nothing fits"
    opts = outcome.options
    evs: list[Evaluation] = []
    for t in outcome.study.get_trials(deepcopy=False):
        rec = TrialRecord.from_trial(t)
        ev = None if rec is None else rec.to_evaluation()
        if isinstance(ev, Evaluation):
            evs.append(ev)
    kind = "estimated"
    if not evs:
        evs = [e for e in outcome.screen.values() if isinstance(e, Evaluation)]
        kind = "predicted"
    if not evs and (out := memory_left_out(outcome)) is not None:  # issue #34
        raise AdvisorError(
            f"No machine can hold a step of {outcome.workload.name} in its memory at the "
            f"batch sizes searched. {out['text'].removeprefix('Does not fit: ')}.",
            "search smaller batch sizes (a space file with smaller batch_sizes), or allow "
            "more or larger GPUs (e.g. --gpus A100:8, --gpus H100).",
        )
    if not evs:
        raise AdvisorError(
            "No candidate could be evaluated (every probe failed or was unaffordable).",
            "check the probe errors with `advisor probe`, or raise --probe-budget.",
        )
    if opts.budget_usd is None and opts.deadline_s is None:  # issue #18: no limit, no trial
        raise AdvisorError(
            f"No trial finished: the search stopped ({outcome.stop_reason or 'no reason given'}) "
            f"with USD {outcome.probe_spent_usd:.2f} of a USD {outcome.probe_budget_usd:g} "
            "probe budget spent.",
            "raise --probe-budget (or --trials / --timeout).",
        )
    limits = []
    fixes = []
    if opts.budget_usd is not None:
        cheapest = min(evs, key=lambda e: e.cost.value)
        limits.append(f"a budget of USD {opts.budget_usd:g}")
        fixes.append(f"raise --budget to at least {_ceil(cheapest.cost.value)}")
        best, what = cheapest, "cheapest"
    if opts.deadline_s is not None:
        fastest = min(evs, key=lambda e: e.runtime.value)
        limits.append(f"a deadline of {format_duration(opts.deadline_s)}")
        fixes.append(f"extend --deadline to at least {format_duration(fastest.runtime.value)}")
        if opts.budget_usd is None:
            best, what = fastest, "fastest"
    raise AdvisorError(
        f"No candidate fits {' and '.join(limits)}. The {what} option is {best.machine} at batch "
        f"{best.batch_size}: USD {best.cost.value:.2f} ({best.cost.low:.2f}-{best.cost.high:.2f}) "
        f"in {format_duration(best.runtime.value)}, {kind}.",
        " or ".join(fixes) + ".",
    )


def _check_timed_out(outcome: SuggestOutcome) -> None:
    """--timeout ran out before a trial finished: say so, and how long to give, instead of
    judging the budget by a partial screen."""
    import optuna

    stop = outcome.stop
    if stop is None or not stop.reason.timed_out:
        return
    done = outcome.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if done:
        return
    pairs = len(outcome.candidates) * len(outcome.space.batch_sizes)
    where = (
        f"while screening ({len(outcome.screen)} of {pairs} machine x batch pairs screened, "
        f"{outcome.new_probes} new local probe(s))"
        if stop.reason.name == "SCREEN_TIMEOUT"
        else "before the first trial finished"
    )
    timeout = outcome.options.timeout_s or 0.0
    given = format_duration(timeout) if timeout >= 10 else f"{timeout:g} s"
    raise AdvisorError(
        f"--timeout {given} ran out {where}, so nothing is recommended yet.",
        f"re-run the same command (the probes taken are kept, so it goes on from here) or "
        f"give a longer --timeout (this run took {format_duration(outcome.wall_s)}).",
    )


def _ceil(x: float) -> str:
    import math

    return f"{math.ceil(x * 100) / 100:.2f}"
