"""The trial loop of ``run_suggest``: choose a configuration, claim it, score it, write it.

Each step, under the storage lock (milliseconds): re-read what the study knows (other
processes' trials included), skip what another process is evaluating (its claim), choose the
next (machine, batch) -- a failed probe not yet recorded, else the planner's pick from the
screen, else the sampler's -- and claim it. Then, without the lock, the back end scores it
and the finished trial is written in one transaction with Ctrl-C held (``sigint_deferred``).

The sampler works on an in-memory copy of the study (``StudyState.work``), rebuilt when
another process has added trials, so each trial costs one storage transaction instead of ~25.

The claims store is injected (``advisor.study.claims.ClaimStore``): the default works with
the storage lock of one host; the service's ``--join`` workers on several hosts pass one the
database enforces, whose refused claim makes the step choose again. The CLI, the Python API
and the service's workers all run their trials here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from advisor.evaluation.contract import Backend, Evaluation, Scored
from advisor.evaluation.failures import failed_probes, first_config
from advisor.options import constraints, is_feasible, objective_values
from advisor.outcome import Stop, StopReason
from advisor.providers.catalog import MachineKey
from advisor.records import TrialRecord
from advisor.storage import transient
from advisor.storage.locks import sigint_deferred, storage_lock
from advisor.study.claims import Claims, ClaimStore
from advisor.study.planner import Planner, affordable
from advisor.study.state import Config, StudyState

if TYPE_CHECKING:
    from collections.abc import Callable

    import optuna

    from advisor.outcome import SuggestOutcome

# Sampler proposals tried when each one is being evaluated elsewhere or has already failed
# (a failed configuration fails again: its probe result is cached).
RETRIES_WHEN_BUSY = 10
_CLAIM_REFUSED = Stop(StopReason.ALL_BUSY)  # a step's claim was refused: step again


class TrialLoop:
    """Runs the trials of one ``run_suggest`` call (see the module docstring)."""

    def __init__(
        self,
        outcome: SuggestOutcome,
        backend: Backend,
        storage: Any,
        state: StudyState,
        lock_url: str | None,
        progress: Callable[[str, int, int], None] | None,
        deadline: float | None,
        claims: ClaimStore | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.o = outcome
        self.backend = backend
        self.state = state
        self.lock_url = lock_url
        self.progress = progress
        self.deadline, self.clock = deadline, clock  # --timeout, on the search's clock
        name = outcome.study.study_name
        # The claims store is injected where the storage lock does not reach (several hosts).
        self.claims = claims or Claims(storage, storage.get_study_id_from_name(name))
        # Issue #27: without runtime hyperparameters a local-back-end trial repeats its screen
        repeat = backend.trials_repeat_screen and not any(
            p.affects_runtime for p in outcome.space.hyperparameters
        )
        self.planner = (
            Planner(outcome.objective, outcome.options, outcome.screen, repeat)
            if outcome.screen
            else None
        )
        outcome.guided = self.planner is not None
        self.by_key = {c.key: c for c in outcome.candidates}
        self.all_configs = {
            (c.key, b) for c in outcome.candidates for b in outcome.space.batch_sizes
        }
        # One FAIL trial per batch size whose local probe failed in the screen.
        failed = failed_probes(outcome.screen.values())
        self.failure_queue = [first_config(outcome.candidates, b) for b in sorted(failed)]
        self.last_read = 0.0  # when the trials were last read: the first step reads them
        self.trial: optuna.trial.Trial | None = None  # asked, not yet written
        self.work: optuna.Study | None = None

    def run(self, n: int, extend: bool) -> Stop:
        """At most ``n`` trials; ``extend``: go on past the planner's stop (a re-run asked
        for more trials). Returns why it stopped. Ctrl-C: the trial in progress is written as
        FAIL (interrupted), its claim released, and KeyboardInterrupt re-raised."""
        try:  # the presence mark inside: a Ctrl-C held over its write still marks it ended
            with sigint_deferred():
                self.claims.hello()
            for i in range(n):
                if self.progress:
                    self.progress("trials", i, n)
                if self.deadline is not None and self.clock() > self.deadline:
                    return Stop(StopReason.TIMEOUT)
                for _ in range(RETRIES_WHEN_BUSY):  # a claim another host won: choose again
                    stop = self._step(extend)
                    if stop is not _CLAIM_REFUSED:
                        break
                else:
                    return Stop(StopReason.ALL_BUSY)
                if stop is not None:
                    return stop
            return Stop(StopReason.TRIALS)
        except KeyboardInterrupt:
            self._abandon()
            raise
        finally:
            with sigint_deferred():
                self.claims.hello(ended=True)

    # -- one step --------------------------------------------------------------------------

    def _step(self, extend: bool) -> Stop | None:
        o, state = self.o, self.state
        claimed: Config | None = None
        try:
            with storage_lock(self.lock_url), sigint_deferred():  # Ctrl-C waits for the claim
                # Claims first, trials second: a process writes its trial before its claim
                # lapses, so a config is seen either as claimed or as done. Alone on the
                # study (no other process at work since the last read), the trials read
                # are still current.
                busy = self.claims.others()
                if self.claims.peers_seen_at >= self.last_read:
                    self.last_read = self.claims.clock()
                    state.refresh()
                busy = {k: v for k, v in busy.items() if k not in state.done}
                left = o.probe_budget_usd - state.spent_usd - sum(busy.values())
                chosen = self._choose(_with_variants(busy), left, extend)
                if isinstance(chosen, Stop):
                    return chosen
                machine, batch, hps = chosen
                pred = o.screen.get((machine, batch))
                if pred is not None and not affordable((machine, batch), pred, state.charged, left):
                    self._write_pruned(pred, left)
                    return None
                cost = 0.0 if pred is None else pred.probe_cost_usd
                if not self.claims.claim((machine, batch), cost):  # another host's now
                    self._drop_asked()
                    return _CLAIM_REFUSED
                claimed = (machine, batch)
            ev = self.backend.evaluate(o.workload, self.by_key[machine], batch, hps)
            self._write(ev)  # the written trial overrides the claim
            claimed = None
            self.claims.done((machine, batch))
        finally:
            if claimed is not None:  # not written (Ctrl-C, an exception): free it for others
                with sigint_deferred():
                    self.claims.release(claimed)
        return None

    def _choose(
        self, busy: set[Config], left: float, extend: bool
    ) -> tuple[str, int, dict[str, Any]] | Stop:
        """(machine, batch, hyperparameters) of the next trial (asked on ``self.work``), or
        why there is none."""
        state = self.state
        while self.failure_queue:  # failed probes first: recorded once, cost nothing new
            config = self.failure_queue.pop(0)
            if config not in state.done and config not in busy:
                return self._ask(config)
        if set(self.o.space.batch_sizes) <= set(state.failures):
            return Stop(StopReason.ALL_FAILED)  # no batch size can run on this machine
        if self.planner is not None:
            nxt = self.planner.next(state.done, state.charged, left, busy)
            if not isinstance(nxt, StopReason):
                return self._ask(nxt)
            if not extend:
                return Stop(nxt)
            # Trials asked for beyond the planner's stop: the sampler explores hyperparameters
            # on the best affordable config tried least so far.
            options = [
                k
                for k in self.planner.order
                if k not in busy and affordable(k, self.o.screen[k], state.charged, left)
            ]
            if not options:
                return Stop(StopReason.PROBE_BUDGET)
            return self._ask(min(options, key=lambda k: state.tried[k]))
        elif not extend and self.all_configs <= set(state.done):
            return Stop(StopReason.ALL_EVALUATED)
        free = {  # issue #27: a back end that runs no probe on the candidates charges nothing
            k
            for k in self.all_configs
            if not self.backend.probes_run_on_candidates
            or self.by_key[k[0]].price_per_hour == 0
            or (MachineKey(k[0]).base, k[1]) in state.charged
        }
        if left <= 0 and (free <= set(state.done) and not extend):
            return Stop(StopReason.PROBE_BUDGET)
        failed = {k for k, ev in state.done.items() if not ev.ok}
        for _ in range(RETRIES_WHEN_BUSY):
            machine, batch, hps = self._ask(None)
            if (machine, batch) not in busy and (machine, batch) not in failed:
                return machine, batch, hps
            self._drop_asked()
        return Stop(StopReason.ALL_BUSY)

    def _drop_asked(self) -> None:
        """Forget the trial asked (in memory only: nothing was written)."""
        if self.work is not None and self.trial is not None:
            self.work.tell(self.trial, state=_state("FAIL"))
        self.trial = None

    def _ask(self, config: Config | None) -> tuple[str, int, dict[str, Any]]:
        from advisor.search_spaces.convert import suggest

        work = self.state.work
        assert work is not None
        if config is not None:
            work.enqueue_trial({"machine": config[0], "batch_size": config[1]})
        self.work = work
        self.trial = work.ask()
        return suggest(self.trial, self.o.space, list(self.by_key))

    # -- writing ---------------------------------------------------------------------------

    def _write(self, ev: Scored) -> None:
        """Write the finished trial in one transaction, Ctrl-C held until it is written."""
        o, state, trial, work = self.o, self.state, self.trial, self.work
        assert trial is not None and work is not None
        base = (MachineKey(ev.machine).base, ev.batch_size)
        charge = 0.0 if base in state.charged else ev.probe_cost_usd
        cand = self.by_key[ev.machine]
        record = TrialRecord.from_evaluation(
            ev,
            instance=dict(cand.instance.to_dict(), catalog_snapshot=self.backend.snapshot),
            charged_usd=charge,
            feasible=is_feasible(o.options, ev) if isinstance(ev, Evaluation) else None,
        )
        with sigint_deferred():
            # Few, grouped attributes: each one is a row (and query) in an RDB storage.
            for k, v in record.to_attrs().items():
                trial.set_user_attr(k, v)
            if isinstance(ev, Evaluation):
                for k, v in constraints(o.options, ev).items():
                    trial.set_constraint(k, v)
                frozen = work.tell(trial, objective_values(o.objective, ev))
            else:
                frozen = work.tell(trial, state=_state("FAIL"))
            transient.write(lambda: o.study.add_trial(frozen))  # kept through a short outage
            state.wrote((ev.machine, ev.batch_size), ev, charge)
            o.new_trials += 1
            self.trial = None

    def _write_pruned(self, pred: Scored, left: float) -> None:
        trial, work = self.trial, self.work
        assert trial is not None and work is not None
        trial.set_user_attr(
            "pruned_reason",
            f"its probe would cost USD {pred.probe_cost_usd:.4f}, "
            f"only USD {max(left, 0):.4f} of the probe budget is left",
        )
        frozen = work.tell(trial, state=_state("PRUNED"))
        transient.write(lambda: self.o.study.add_trial(frozen))
        self.state.wrote((pred.machine, pred.batch_size), None)
        self.trial = None

    def _abandon(self) -> None:
        """Ctrl-C: keep the interrupted trial as FAIL (no record: it is retried next run)."""
        trial, work = self.trial, self.work
        if trial is None or work is None:
            return
        with sigint_deferred():
            trial.set_user_attr("interrupted", "Ctrl-C during its evaluation; retried next run")
            frozen = work.tell(trial, state=_state("FAIL"), skip_if_finished=True)
            self.o.study.add_trial(frozen)
            self.state.wrote(("", 0), None)
            self.trial = None


def _with_variants(busy: dict[Config, float]) -> set[Config]:
    """Claimed configs with their on-demand/spot twin: both share one probe, so the twin
    waits until the probe is paid for instead of paying for it a second time."""
    out: set[Config] = set()
    for machine, batch in busy:
        base = MachineKey(machine).base
        out.update({(base, batch), (MachineKey.of(base, spot=True), batch)})
    return out


def _state(name: str) -> Any:
    import optuna

    return getattr(optuna.trial.TrialState, name)
