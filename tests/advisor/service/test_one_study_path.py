"""Issue #33: the CLI, the Python API and the service's workers share one study set-up
(``advisor.study.run.open_study``) and one trial loop (``TrialLoop``, its claims store
injected). One study driven in turn by the Python API (the CLI's path), a `--join` worker's
path (the database-enforced claims) and a queued job's path (``advisor.service.api.suggest``)."""

from __future__ import annotations

import json
from typing import Any

import optuna
import pytest

import advisor
from advisor.evaluation.replay import ReplayTable
from advisor.service import api, db, trials

REQUEST = {"model": "fcn", "budget_usd": 50, "study_name": "shared", "sampler": "random"}


def _study(url: str) -> optuna.Study:
    return optuna.load_study(study_name="shared", storage=api.optuna_storage(url))


@pytest.mark.slow  # three runs of a study (about 6 s)
def test_one_study_through_the_api_a_join_worker_and_a_job(sqlite_url: str, replay: str) -> None:
    from advisor.evaluation.replay import ReplayBackend

    table = ReplayTable.load(replay.removeprefix("replay:"))
    api.prepare_storage(sqlite_url)
    first = advisor.suggest(
        **REQUEST, screen=False, trials=3, storage=sqlite_url, backend=ReplayBackend(table)
    )
    assert first["trials"]["new"] == 3
    attrs = dict(_study(sqlite_url).user_attrs)

    seen: list[str] = []

    def recording(storage: Any, study: Any) -> trials.TableClaims:
        store = trials.TableClaims(sqlite_url, storage, study, 60.0)
        real_claim = store.claim

        def claim(config: tuple[str, int], usd: float) -> bool:
            seen.append(f"{config[0]}|{config[1]}")
            return real_claim(config, usd)

        store.claim = claim  # type: ignore[method-assign]
        return store

    request = {**REQUEST, "screen": False, "trials": 3}
    outcome = api.join_study(request, sqlite_url, recording, seed_offset=1, backend=replay)
    assert outcome.new_trials == 3 and outcome.resumed  # the same study, resumed
    assert len(seen) == 3  # through the injected claims store

    job = {**REQUEST, "screen": False, "trials": 2, "seed": 2}
    report = api.suggest(job, sqlite_url, backend=replay)
    assert report["trials"] == {**report["trials"], "total": 8, "new": 2}

    study = _study(sqlite_url)
    assert study.user_attrs["backend"] == attrs["backend"]  # one set-up: the same question
    runs = ("last_run", "recommendation")  # what each run writes; the rest is the question
    assert {k: v for k, v in study.user_attrs.items() if k not in runs} == {
        k: v for k, v in attrs.items() if k not in runs
    }
    done = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished()]
    assert len(done) == 8 and len({json.dumps(t.params, sort_keys=True) for t in done}) == 8
    keys = {frozenset(t.user_attrs) for t in done if t.state.name == "COMPLETE"}
    assert len(keys) == 1  # every path wrote the same trial record
    with db.engine_for(sqlite_url).connect() as conn:  # the worker dropped its claims
        assert conn.execute(db.probe_claims.select()).first() is None


def test_a_claim_another_worker_holds_is_refused_and_a_stale_one_taken_over(
    sqlite_url: str,
) -> None:
    api.prepare_storage(sqlite_url)
    storage = api.optuna_storage(sqlite_url)
    study = optuna.create_study(study_name="claims", storage=storage)
    a = trials.TableClaims(sqlite_url, storage, study, 60.0)
    b = trials.TableClaims(sqlite_url, storage, study, 60.0)
    b.me = "other-host:1"
    assert a.claim(("ec2:p3.2xlarge", 256), 0.5)
    assert not b.claim(("ec2:p3.2xlarge", 256), 0.5)  # the database refuses a second claim
    assert b.others() == {("ec2:p3.2xlarge", 256): 0.5}
    assert a.others() == {}  # its own claim is not another's
    assert b.claim(("ec2:p3.2xlarge", 512), 0.0)
    assert a.others() == {("ec2:p3.2xlarge", 512): 0.0}
    b.stale_s = -1.0  # every claim now counts as abandoned
    assert b.claim(("ec2:p3.2xlarge", 256), 0.5)  # taken over (b's 512 dropped: one each)
    assert a.others() == {("ec2:p3.2xlarge", 256): 0.5}
    b.done(("ec2:p3.2xlarge", 256))
    assert a.others() == {}
