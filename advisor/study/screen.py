"""The screen: every (machine, batch) pair of the study predicted cheaply, before any trial,
in two passes (issue #46: the plan search only where a row could still win).

1. Every pair under its plain plans (the whole per-GPU batch in one pass, at each precision
   the search may take). A row whose plain plan fits is final: no other plan is faster in
   the model (``forecast.plan_search``), so its plans are not searched anyway.
2. The pairs whose plain plans do not fit, fastest first by their bound: the fastest plan
   each may take, its memory not traced (``best_forecast(mode="bound")``), a lower bound on
   the row's time and so its cost. Each is searched for the fastest plan that fits, unless a
   row already found to fit is faster *and* cheaper than that bound: then whatever plan fits
   it, the pair is beaten on both time and cost, so it cannot be the fastest, the cheapest,
   on the Pareto front or in a tie (``evaluation.ranking``: a tie is among rows no other
   beats on both), and its plans' memory (seconds of fake-tensor tracing each for a deep
   model) is never traced. It keeps its first pass's does-not-fit row, which says why. While
   a pair's search has found no plan that fits, it stops where the fastest plan left is
   beaten so (``Outpaced``, for each offer of the machine: on demand and spot share one
   search; issue #48): the same row, saying its search stopped there.

A back end that does not predict under training plans (``Backend.plans``) is screened once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from advisor.durations import format_duration
from advisor.evaluation.contract import Backend, Evaluation, FailedEvaluation, Scored
from advisor.evaluation.memory_checks import UNSEARCHED
from advisor.evaluation.workload import WorkloadInfo
from advisor.intervals import Interval
from advisor.outcome import Stop, StopReason
from advisor.prediction.step.traces import per_device_batch
from advisor.progress import ScreenProgress

if TYPE_CHECKING:
    from advisor.evaluation.candidates import Candidate
    from advisor.outcome import SuggestOutcome

Progress = Callable[[str, int, int], None]
Pair = tuple["Candidate", int]


class Front:
    """The rows found to fit that no other found row beats on both time and cost."""

    def __init__(self, rows: Iterable[Scored] = ()) -> None:
        self.rows: list[Evaluation] = []
        for row in rows:
            self.add(row)

    def add(self, row: Scored | None) -> None:
        """Keep ``row`` when it is scored (it fits) and no kept row beats it on both."""
        if not isinstance(row, Evaluation) or self.beater(row) is not None:
            return
        self.rows = [r for r in self.rows if not _beats(row, r)] + [row]

    def beater(self, bound: Evaluation) -> Evaluation | None:
        """A kept row faster and cheaper than ``bound``, else None."""
        return next((r for r in self.rows if _beats(r, bound)), None)


def _beats(a: Evaluation, b: Evaluation) -> bool:
    return a.runtime.value < b.runtime.value and a.cost.value < b.cost.value


class Outpaced:
    """``best_forecast``'s ``outpaced`` for one machine at one batch: whether a run of a given
    on-demand training time there is beaten on time and cost by a row of ``front``, priced for
    each of the machine's ``offers`` (its on-demand and spot twins share one search); when it
    is, ``cut`` keeps each offer's (bound, beater)."""

    def __init__(self, front: Front, backend: Backend, workload: WorkloadInfo,
                 offers: list[Candidate], batch: int, epochs: int) -> None:  # fmt: skip
        self.front, self.backend, self.workload = front, backend, workload
        self.offers, self.batch, self.epochs = offers, batch, epochs
        self.cut: dict[str, tuple[Evaluation, Evaluation]] = {}

    def __call__(self, training: Interval) -> bool:
        found: dict[str, tuple[Evaluation, Evaluation]] = {}
        for offer in self.offers:
            bound = self.backend.priced(offer, self.batch, training, self.epochs, self.workload)
            if not isinstance(bound, Evaluation) or (by := self.front.beater(bound)) is None:
                return False
            found[offer.key] = (bound, by)
        self.cut = found
        return True


def screen_pairs(
    outcome: SuggestOutcome,
    backend: Backend,
    progress: Progress | None,
    deadline: float | None,
    clock: Callable[[], float],
) -> Stop | None:
    """Predict every (machine, batch) cheaply into ``outcome.screen`` (the module's two
    passes); a stop when --timeout ran out meanwhile (the partial screen is kept), else None."""
    if not outcome.options.screen:
        return None
    pairs = [(c, b) for b in outcome.space.batch_sizes for c in outcome.candidates]
    mode = "plain" if backend.plans else "search"
    stop = _first_pass(outcome, backend, pairs, mode, progress, deadline, clock)
    if stop is not None or mode == "search" or not outcome.screen:
        return stop
    return _second_pass(outcome, backend, pairs, progress, deadline, clock)


def _first_pass(
    outcome: SuggestOutcome,
    backend: Backend,
    pairs: list[Pair],
    mode: str,
    progress: Progress | None,
    deadline: float | None,
    clock: Callable[[], float],
) -> Stop | None:
    # issue #50: counted where the time goes (``advisor.progress.ScreenProgress``)
    gpus = [(c.instance.accelerator, c.instance.accelerator_count * c.nodes, b) for c, b in pairs]
    told = ScreenProgress(progress or (lambda *_: None), gpus)
    ahead = getattr(backend, "trace_ahead", None)  # issue #48: a deep model's steps at each
    if ahead is not None and told.total:  # per-GPU batch (this machine's probes' too) at once
        per_gpu = {per_device_batch(b, n) for acc, n, b in gpus if acc}
        ahead(outcome.workload, sorted(per_gpu | set(outcome.space.batch_sizes)),
              lambda n: told.before(0, None, f"its step at {n} batch sizes, traced side by side"))  # fmt: skip
    prefetch = getattr(backend, "prefetch", None)  # issue #28: the probes in one process
    if prefetch is not None:
        told.before(0, None, "what this machine can probe")  # its step traced per batch size
        prefetch(outcome.workload, outcome.space.batch_sizes)
    for i, (cand, batch) in enumerate(pairs):
        told.before(i, batch)
        if deadline is not None and clock() > deadline:
            outcome.guided = bool(outcome.screen)
            return Stop(StopReason.SCREEN_TIMEOUT)
        pred = backend.screen(outcome.workload, cand, batch, {}, mode)
        if pred is None:
            outcome.screen = {}
            break
        outcome.screen[(cand.key, batch)] = pred
        told.after(i)
    told.before(len(pairs), None)
    return None


def _second_pass(
    outcome: SuggestOutcome,
    backend: Backend,
    pairs: list[Pair],
    progress: Progress | None,
    deadline: float | None,
    clock: Callable[[], float],
) -> Stop | None:
    say = progress or (lambda *_: None)
    pending = [(c, b) for c, b in pairs if _unsearched(outcome.screen.get((c.key, b)))]
    bounds: dict[tuple[str, int], Scored | None] = {}
    for i, (cand, batch) in enumerate(pending):
        say(f"screen:bounding the plans of {len(pending):,} pairs whose plain plan does not fit",
            i, len(pending))  # fmt: skip
        if deadline is not None and clock() > deadline:
            outcome.guided = bool(outcome.screen)
            return Stop(StopReason.SCREEN_TIMEOUT)
        bounds[(cand.key, batch)] = backend.screen(outcome.workload, cand, batch, {}, "bound")

    fastest: dict[tuple[str, int, int], float] = {}  # a machine's offers at a batch
    for (cand, batch), ev in zip(pending, bounds.values(), strict=True):
        twins = (cand.instance.key, cand.nodes, batch)
        t = ev.runtime.value if isinstance(ev, Evaluation) else float("inf")
        fastest[twins] = min(t, fastest.get(twins, t))

    def order(pair: Pair) -> tuple[float, bool]:
        """Fastest bound first, a spot offer beside its on-demand twin (one search for both)."""
        return fastest[(pair[0].instance.key, pair[0].nodes, pair[1])], pair[0].spot

    front = Front(outcome.screen.values())
    skipped, stopped = 0, 0
    cut: dict[tuple[str, int], tuple[Evaluation, Evaluation]] = {}  # offers stopped, by pair
    for i, (cand, batch) in enumerate(sorted(pending, key=order)):
        say(f"plans:searching the plans of {len(pending):,} pairs whose plain plan does not "
            f"fit ({skipped:,} beaten on time and cost before their search, {stopped:,} "
            "during it)", i, len(pending))  # fmt: skip
        if deadline is not None and clock() > deadline:
            outcome.guided = bool(outcome.screen)
            return Stop(StopReason.SCREEN_TIMEOUT)
        key, bound = (cand.key, batch), bounds[(cand.key, batch)]
        if key in cut:  # its twin's search stopped for both
            outcome.screen[key] = beaten(outcome.screen[key], *cut[key], during=True)
            stopped += 1
            continue
        if isinstance(bound, Evaluation) and (by := front.beater(bound)) is not None:
            outcome.screen[key] = beaten(outcome.screen[key], bound, by)
            skipped += 1
            continue
        offers = [c for c, b in pending if b == batch and c.instance.key == cand.instance.key
                  and c.nodes == cand.nodes]  # fmt: skip
        epochs = bound.epochs if isinstance(bound, Evaluation) else outcome.screen[key].epochs
        stop = Outpaced(front, backend, outcome.workload, offers, batch, epochs)
        pred = backend.screen(outcome.workload, cand, batch, {}, outpaced=stop)
        if stop.cut:
            cut.update({(k, batch): found for k, found in stop.cut.items()})
            outcome.screen[key] = beaten(outcome.screen[key], *cut[key], during=True)
            stopped += 1
        elif pred is not None:
            outcome.screen[key] = pred
            front.add(pred)
    say("plans:searching the plans", len(pending), len(pending))
    return None


def _unsearched(row: Scored | None) -> bool:
    return isinstance(row, FailedEvaluation) and bool(row.estimate.get(UNSEARCHED))


def beaten(row: Scored, bound: Evaluation, by: Evaluation, during: bool = False) -> Scored:
    """The first pass's does-not-fit ``row``, saying why its other plans were not traced
    (``during``: why its plan search stopped before any plan fitted)."""
    if not isinstance(row, FailedEvaluation):
        return row
    what = ("its search stopped, no plan fitting yet: even the fastest plan left"
            if during else "no other plan traced: even its fastest")  # fmt: skip
    why = (
        f"{row.error} (its plain plans; {what}, at least "
        f"{format_duration(bound.runtime.value)} and USD {bound.cost.value:.2f}, is slower and "
        f"dearer than {by.machine} at batch {by.batch_size}, "
        f"{format_duration(by.runtime.value)} and USD {by.cost.value:.2f}, which fits)"
    )
    beaten_by = {"machine": by.machine, "batch_size": by.batch_size, "during_search": during}
    bounds = {"runtime_s": bound.runtime.value, "cost_usd": bound.cost.value}
    return replace(row, error=why, estimate={**row.estimate, "beaten_by": beaten_by,
                                             "bound": bounds})  # fmt: skip
