"""Long work shows progress, and ``--tune`` uses its time (issue #50, section 2), through
`advisor suggest` as a user runs it: the replayed search and the fake short runs share one
clock the test owns (``short_runs.Clock``), so the minutes they take cost nothing here."""

from __future__ import annotations

import functools
import json
import re

import pytest
from short_runs import Clock, fake_trainer

from .conftest import Replay, run

COST_PER_SAMPLE = (1 / 2000, 1 / 6000)  # seconds per training / validation sample (the plan's)


def on_one_clock(monkeypatch: pytest.MonkeyPatch, per_check_s: float = 1.0) -> Clock:
    """The replayed search (each new probe 30 s) and the short runs (``per_check_s`` a check)
    on one clock: the command's wall time is theirs."""
    from advisor.accuracy import step
    from advisor.accuracy.plan import SampleCost
    from advisor.evaluation import replay

    clock = Clock()
    tuned = functools.partial(
        step.tune_step,
        train=fake_trainer(clock, per_check_s),
        cost=SampleCost(*COST_PER_SAMPLE, "test"),
        clock=clock,
    )
    monkeypatch.setattr(step, "tune_step", tuned)
    load = replay.backend_from_spec

    def on_clock(spec: str) -> replay.ReplayBackend:
        table = load(spec).table  # type: ignore[attr-defined]
        return replay.ReplayBackend(table, clock)  # type: ignore[arg-type]

    monkeypatch.setattr(replay, "backend_from_spec", on_clock)
    return clock


def with_lr(replay: Replay) -> None:
    """A hyperparameter for --tune to judge in the replay space."""
    replay.space.write_text(
        replay.space.read_text()
        + "hyperparameters:\n  lr: {type: float, low: 0.001, high: 0.3, log: true}\n"
    )


def seconds(text: str) -> float:
    """'55 s' -> 55, '1.1 min' -> 66."""
    value, unit = text.split()
    return float(value) * (60.0 if unit == "min" else 1.0)


def progress_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if re.match(r"\[\d+:\d\d\] ", line)]


@pytest.mark.slow  # a study and its short runs: about 10 s on the shared machine
def test_tune_uses_the_time_it_is_given_when_runs_take_longer_than_planned(
    replay: Replay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a run three times the plan's length left a reserve for two seed repeats that
    could not fit, and the search stopped with much of --tune unspent, saying nothing."""
    on_one_clock(monkeypatch, per_check_s=5.0)  # a full-length run: 80 s, planned 25 s
    with_lr(replay)
    outcome = run(*replay.args("--budget", "5", "--tune", "3m", "--json"))
    assert outcome.code == 0, outcome
    report = json.loads(outcome.out)  # stdout is the one document; progress went to stderr
    last = report["hyperparameters"]["this_run"]
    assert last["spent_now_s"] >= 180.0 - 5.5  # at most a first check's time left unused
    assert last["stop"].startswith("used its time")
    assert "a full-length short run took 1.3 min here where the plan expected 25 s" in last["stop"]
    lines = progress_lines(outcome.err)
    tune = [line for line in lines if "short training runs (--tune)" in line]
    assert tune and tune[0].endswith("estimating...")  # no rate measured yet
    # then the time left is the measured rate's: 3 min of budget spent at a second per second
    for line in tune[-5:]:
        found = re.search(
            r": ([\d.]+ (?:s|min)) of 3\.0 min; .* about ([\d.]+ (?:s|min)) left", line
        )
        assert found is not None, line
        assert seconds(found[1]) + seconds(found[2]) == pytest.approx(180.0, abs=8.0), line
    assert len(lines) <= 360 / 10 + 6  # six minutes of work: a line every ten seconds at most


@pytest.mark.slow
def test_one_short_run_does_not_read_as_tuned(
    replay: Replay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the one run's values (the learning-rate rule's own) were the recommendation."""
    import short_runs

    # the rule's learning rate at batch 512 (0.2) learns: its one run is above chance
    monkeypatch.setattr(short_runs, "accuracy", functools.partial(short_runs.accuracy, best_lr=0.2))
    on_one_clock(monkeypatch, per_check_s=11.0)  # one full-length run takes the whole 3 min
    with_lr(replay)
    outcome = run(*replay.args("--budget", "5", "--tune", "3m"))
    assert outcome.code == 0, outcome
    assert "lr=" not in outcome.out
    assert (
        "hyperparameters: only 1 short run at batch 512 reached a check (the learning-rate "
        "rule's own run): too few to compare configurations" in " ".join(outcome.out.split())
    )
    report = json.loads(run(*replay.args("--budget", "5", "--tune", "3m", "--json")).out)
    assert "lr" not in report["recommended"]["hyperparameters"]
    assert "too few" in report["recommended"]["hyperparameter_evidence"]["too_few"]


@pytest.mark.slow
def test_the_footer_says_the_whole_wall_time_and_what_took_it(
    replay: Replay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the footer said the search's time alone (38.9 s of a 127 s command)."""
    clock = on_one_clock(monkeypatch)
    with_lr(replay)
    outcome = run(*replay.args("--budget", "5", "--tune", "3m"))
    assert outcome.code == 0, outcome
    footer = " ".join(outcome.out.split())  # the report wraps its lines to the width
    whole = re.search(r", (\d+\.\d) min \(--tune 3\.0 min, search (\d+\.\d) min\) - study", footer)
    assert whole is not None, footer
    assert float(whole[1]) == pytest.approx(clock.t / 60, abs=0.05)  # the whole command
    assert float(whole[1]) == pytest.approx(3.0 + float(whole[2]), abs=0.1)
    # off a terminal the progress came as plain lines on stderr, stage by stage
    lines = progress_lines(outcome.err)
    assert any("trials (up to" in line for line in lines), outcome.err
    assert any("short training runs (--tune)" in line and "left" in line for line in lines)


@pytest.mark.slow
def test_tune_judges_the_batch_sizes_a_small_dataset_allows(
    replay: Replay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: "--tune needs at least 2,048 training samples at batch 512 ... pass a larger
    --n-train" for a model whose own dataset has 1,437 samples: a fix the user cannot apply."""
    on_one_clock(monkeypatch)
    with_lr(replay)
    args = [
        "suggest", "--model", "user_models:build_digits", "--space", str(replay.space),
        "--backend", f"replay:{replay.table}", "--budget", "5", "--tune", "3m",
    ]  # fmt: skip
    outcome = run(*args, "--json")
    assert outcome.code == 0, outcome
    report = json.loads(outcome.out)
    assert report["recommended"]["batch_size"] == 512  # the machine answer stands
    section = report["hyperparameters"]
    assert section["plan"]["batch_sizes"] == [256] and section["plan"]["judged_batch"] == 256
    assert section["plan"]["left_out"] == [
        "batch 512: one epoch with a step per check (4 checks) needs 2,048 training samples, "
        "the dataset has 1,437: the recommended batch size; the runs judge batch 256, the "
        "largest the dataset allows"
    ]
    found = report["recommended"]["hyperparameter_evidence"]
    assert found["batch_size"] == 256 and report["recommended"]["hyperparameters"]["lr"] > 0
    assert found["judged_instead"].startswith("judged at batch 256, not the recommended 512")
    text = " ".join(run(*args, "--verbose").out.split())
    assert "batch sizes left out: batch 512: one epoch with a step per check" in text


def test_a_long_search_off_a_terminal_says_what_it_does_and_what_is_left(
    replay: Replay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: off a terminal nothing at all until the report (GPT-2 Large: 4-8 minutes)."""
    on_one_clock(monkeypatch)  # each new probe of the replayed search takes 30 s
    outcome = run(*replay.args("--budget", "5", "--json"))
    assert outcome.code == 0, outcome
    assert json.loads(outcome.out)["recommended"]  # stdout: the one document
    lines = progress_lines(outcome.err)
    assert lines and lines[0].startswith("[0:30] trials (up to 60;"), outcome.err
    assert all(
        re.search(r"; [\d.]+ (s|min) in, (at most [\d.]+ (s|min) left|done)$", x) for x in lines
    )


def test_the_report_says_what_took_its_time(replay: Replay) -> None:
    first = json.loads(run(*replay.args("--budget", "5", "--json")).out)
    assert set(first["timings"]) >= {"search", "report"}
    assert first["wall_s"] == pytest.approx(sum(first["timings"].values()), abs=0.01)
