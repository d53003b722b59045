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
