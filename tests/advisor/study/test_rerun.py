"""Re-running the same command gives the same answer and says it resumed; --trials N adds
trials on purpose; probes on this machine cost nothing against the probe budget."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
from advisor.search_spaces.loader import default_space
from replay_tables import small_table

from advisor.cli.main import main
from advisor.evaluation.replay import ReplayBackend
from advisor.options import SuggestOptions
from advisor.study.run import run_suggest

SPACE = replace(default_space("fcn"), batch_sizes=(256, 512))


def _cli(capsys: pytest.CaptureFixture[str], table_file: Path, *args: str) -> dict[str, Any]:
    with pytest.raises(SystemExit) as done:
        main(["suggest", "--backend", f"replay:{table_file}", "--json", *args])
        raise SystemExit(0)
    assert done.value.code in (0, None)
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_same_command_same_answer_then_trials_adds(
    capsys: pytest.CaptureFixture[str], table_file: Path, tmp_path: Path
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("workload: fcn\nbatch_sizes: [256, 512]\n")
    args = ("--model", "fcn", "--budget", "5", "--space", str(space))
    first = _cli(capsys, table_file, *args)
    assert not first["resumed"] and first["trials"]["new"] > 0
    second = _cli(capsys, table_file, *args)
    assert second["resumed"] and second["study"] == first["study"]
    assert second["trials"]["new"] == 0 and second["probes"]["new"] == 0
    assert second["trials"]["total"] == first["trials"]["total"]
    assert second["stop_reason"].startswith("resumed: the study had already stopped")
    assert "--trials N adds N" in second["stop_reason"]
    assert second["recommended"] == first["recommended"]
    assert second["probes"]["spent_usd"] == first["probes"]["spent_usd"]
    third = _cli(capsys, table_file, *args, "--trials", "3")
    assert third["trials"]["total"] == first["trials"]["total"] + 3  # added on purpose
    assert third["resumed"] and not third["stop_reason"].startswith("resumed")


def test_a_run_cut_short_by_timeout_is_continued_by_the_same_command(tmp_path: Path) -> None:
    table = replace(small_table(), delay_s=0.2)  # each evaluation takes 0.2 s
    url = f"sqlite:///{tmp_path / 's.db'}"
    opts = SuggestOptions(  # the Pareto front needs several trials
        model="fcn", space=SPACE, storage=url, objective="pareto", timeout_s=0.6
    )
    first = run_suggest(opts, backend=ReplayBackend(table))
    assert first.stop_reason.startswith("timeout")
    second = run_suggest(replace(opts, timeout_s=None), backend=ReplayBackend(table))
    assert second.resumed and second.new_trials > 0  # not finished: the re-run goes on
    assert second.stop_reason == "converged"


def test_probes_on_this_machine_cost_nothing_against_the_probe_budget(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    opts = SuggestOptions(
        model="fcn", space=SPACE, storage=url, budget_usd=5.0, probe_budget_usd=0.0
    )
    first = run_suggest(opts, backend=ReplayBackend(small_table()))
    done = first.study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert {t.params["machine"] for t in done} == {"local:local"}  # free; the cloud is not
    assert first.probe_spent_usd == 0.0 and first.stop_reason == "probe budget spent"
    n_first = len(first.study.trials)
    more = run_suggest(replace(opts, trials=3), backend=ReplayBackend(small_table()))
    added = more.study.trials[n_first:]
    assert len(added) == 3  # --trials adds them although the budget is spent
    evaluated = [t for t in added if t.state == optuna.trial.TrialState.COMPLETE]
    assert evaluated and all(t.params["machine"] == "local:local" for t in evaluated)
    assert more.probe_spent_usd == 0.0
