"""The search runs on an injected clock: the replay back end's simulated one moves on by each
recorded probe's ``probe_s``, so ``--timeout`` stops at the same trial on every run."""

from __future__ import annotations

import math
from dataclasses import replace

import optuna
import pytest
from advisor.search_spaces.loader import default_space

from advisor.evaluation.replay import ReplayBackend, ReplayClock, ReplayTable
from advisor.options import SuggestOptions
from advisor.outcome import StopReason, SuggestOutcome
from advisor.study.claims import Claims
from advisor.study.run import run_suggest

SPACE = replace(default_space("fcn"), batch_sizes=(256, 512))


def _search(
    table: ReplayTable, timeout_s: float | None, screen: bool
) -> tuple[SuggestOutcome, float]:
    clock = ReplayClock()
    backend = ReplayBackend(table, clock=clock)
    opts = SuggestOptions(
        model="fcn", space=SPACE, budget_usd=50.0, timeout_s=timeout_s, screen=screen, trials=40
    )
    outcome = run_suggest(opts, backend=backend, storage=optuna.storages.InMemoryStorage())
    return outcome, clock()


@pytest.mark.parametrize(("screen", "timeout_s"), [(False, 100.0), (True, 20.0)])
def test_timeout_stops_at_the_first_trial_begun_past_it(
    table: ReplayTable, screen: bool, timeout_s: float
) -> None:
    assert {e.probe_s for e in table.entries} == {30.0}  # each new probe moves 30 s on
    outcome, now = _search(table, timeout_s, screen)
    assert outcome.stop is not None and outcome.stop.reason is StopReason.TIMEOUT
    # New probes begin at 0, 30, 60, ... s; the first one to begin past the timeout is not
    # run: ceil(timeout / 30) probes, and the clock stands at their 30 s each.
    n = math.ceil(timeout_s / 30.0)
    assert now == n * 30.0 == outcome.wall_s
    configs = [_config(t) for t in outcome.study.get_trials(deepcopy=False)]
    assert len(set(configs)) == n
    assert configs[-1] not in configs[:-1]  # the last trial is the one that ran the n-th probe
    # the same command, run again, stops at the same trial with the same trials
    again, _ = _search(table, timeout_s, screen)
    assert [_config(t) for t in again.study.get_trials(deepcopy=False)] == configs


def test_the_stop_rule_is_reproduced_on_the_replay_clock(table: ReplayTable) -> None:
    # With the screen the planner knows the fastest run within budget after its first trial
    # (a replayed trial repeats its screen) and stops: one probe, 30 s, no timeout involved.
    outcome, now = _search(table, None, screen=True)
    assert outcome.stop is not None and outcome.stop.reason is StopReason.CONVERGED
    assert now == 30.0 and len(outcome.study.get_trials(deepcopy=False)) == 1


def _config(trial: optuna.trial.FrozenTrial) -> tuple[str, int]:
    return trial.params["machine"].removesuffix(":spot"), trial.params["batch_size"]


def test_claims_age_on_their_clock() -> None:
    storage = optuna.storages.InMemoryStorage()
    sid = optuna.create_study(storage=storage, study_name="s")._study_id
    now = [1000.0]
    mine, other = Claims(storage, sid, clock=lambda: now[0]), Claims(storage, sid)
    other.owner = "another-host:1"  # a process elsewhere: its claim holds until it is stale
    other.clock = lambda: now[0]
    other.claim(("ec2:g5.xlarge", 256), 0.5)
    assert mine.others() == {("ec2:g5.xlarge", 256): 0.5}
    now[0] += 900.0  # STALE_S: still held
    assert mine.others() == {("ec2:g5.xlarge", 256): 0.5}
    now[0] += 1.0
    assert mine.others() == {}
