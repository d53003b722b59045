"""Issue #28: a study that stopped keeps its answer; the same command answers from it (the CLI
does not even import Optuna for it), and recomputes as soon as anything the answer was
computed from changes: a new trial, another probe, a measured run in the ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna

from advisor.config import default_storage_url
from advisor.evaluation.local import LocalBackend
from advisor.evaluation.probe_cache import ProbeCache, probe_cache_key
from advisor.options import SuggestOptions, workload_info
from advisor.pipeline import suggest
from advisor.study.answer_cache import answer_for

from ..cli.conftest import run
from ..storage.suggest_with_fake_probes import probe


def _first_run() -> tuple[SuggestOptions, dict[str, Any]]:
    options = SuggestOptions(model="fcn", budget_usd=5)
    report = suggest(options, backend=LocalBackend(default_storage_url(), run_probe=probe))
    return options, report


def test_the_same_command_answers_from_the_kept_answer(_advisor_home: Path) -> None:
    options, first = _first_run()
    assert answer_for(options) is not None  # the study stopped on its own: kept
    again = run("suggest", "--model", "fcn", "--budget", "5", "--json")
    assert again.code == 0, again
    report = json.loads(again.out)
    assert report["answered_from"] == "kept answer (every input unchanged)"
    assert report["resumed"] and report["trials"]["new"] == 0
    assert report["recommended"] == first["recommended"]
    assert report["ranking"] == first["ranking"]


def test_a_changed_input_is_recomputed_not_answered_from_the_kept_answer(
    _advisor_home: Path,
) -> None:
    options, _ = _first_run()
    assert answer_for(options) is not None
    cache = ProbeCache(default_storage_url())  # another probe of this workload, e.g. retaken
    key = probe_cache_key(workload_info(options), 384, 2, 8, {})
    from advisor.probes.result import ProbeRequest

    cache.put(key, probe(ProbeRequest(workload="fcn", batch_size=384)))
    assert answer_for(options) is None
    _first_run()  # computed again, and kept again
    assert answer_for(options) is not None
    study = optuna.load_study(
        study_name=json.loads(run("suggest", "--model", "fcn", "--budget", "5", "--json").out)[
            "study"
        ],
        storage=default_storage_url(),
    )
    study.add_trial(optuna.trial.create_trial(value=1.0))  # one more trial in the study
    assert answer_for(options) is None
    assert answer_for(SuggestOptions(model="fcn", budget_usd=5, trials=3)) is None


def test_a_busy_machines_answer_is_kept_while_it_is_busy_and_recomputed_when_quiet(
    _advisor_home: Path, monkeypatch: Any
) -> None:
    """Issue #36: re-running the same command re-screened (11-13 s) whenever its probes had
    been contended, though a machine still busy retakes nothing; it now answers from the
    kept answer then, and recomputes once the machine is quiet (the probes are retaken)."""
    import dataclasses

    import advisor.evaluation.contention as contention

    def busy_probe(request: Any) -> Any:
        done = probe(request)
        busy = {"others_cores": 1.9, "cores": 2.0}
        return dataclasses.replace(done, fingerprint={**done.fingerprint, "contention": busy})

    options = SuggestOptions(model="fcn", budget_usd=5)
    first = suggest(options, backend=LocalBackend(default_storage_url(), run_probe=busy_probe))
    assert first["contention_notes"] and first["tie_share"] == 0.25  # the busy band
    monkeypatch.setattr(contention, "quiet_now", lambda *a, **k: False)
    again = run("suggest", "--model", "fcn", "--budget", "5", "--json")
    assert again.code == 0, again
    report = json.loads(again.out)
    assert (
        report["answered_from"].startswith("kept answer")
        and "still busy" in report["answered_from"]
    )
    assert report["recommended"] == first["recommended"]
    monkeypatch.setattr(contention, "quiet_now", lambda *a, **k: True)
    assert answer_for(options) is None  # quiet now: the run retakes the busy probes
