"""What the short runs say (advisor.accuracy.evidence): ranking, evidence, the rule's check,
the narrowed ranges."""

from __future__ import annotations

import math

import pytest
from advisor.search_spaces.space import CategoricalParam, FloatParam

from advisor.accuracy.evidence import (
    best_of,
    chance_band,
    evidence,
    learned,
    narrowed,
    ranked,
    rule_check,
)
from advisor.accuracy.lr_rule import LrRule
from advisor.accuracy.plan import TunePlan
from advisor.accuracy.trials import AccuracyTrial

PLAN = TunePlan("fcn", (32, 64, 128), 64, 1024, 512, 2, 40512)
RULE = LrRule(0.1, 256, False, math.inf, "", "momentum")  # linear: lr(64) = 0.025


def run(number: int, batch: int, lr: float, curve: list[float], **kw: object) -> AccuracyTrial:
    points = tuple((i / 4, v) for i, v in enumerate(curve, 1))
    ended = kw.pop("ended", "finished" if len(curve) == PLAN.checks else "pruned")
    return AccuracyTrial(
        number=number, plan=PLAN.id, role=str(kw.pop("role", "search")),
        seed=int(kw.pop("seed", 0)), batch_size=batch, params={"lr": lr, "opt": kw.pop("opt", "a")},
        metric="val_accuracy", curve=points, ended=str(ended), wall_s=1.0,
        of=kw.pop("of", None),  # type: ignore[arg-type]
    )  # fmt: skip


TRIALS = [
    run(0, 64, 0.025, [0.6] * 8, role="rule"),
    run(1, 64, 0.05, [0.6, 0.7, 0.75, 0.8, 0.82, 0.84, 0.85, 0.86]),
    run(2, 64, 0.3, [0.5]),  # pruned at the first check
    run(3, 128, 0.08, [0.6, 0.7, 0.8, 0.85, 0.86, 0.87, 0.88, 0.9]),
    run(4, 64, 0.04, [0.55, 0.6, 0.61], opt="b"),
    run(5, 64, 0.05, [0.61, 0.7, 0.76, 0.8, 0.83, 0.85, 0.86, 0.88], role="seed", seed=1, of=1),
    run(6, 32, 0.01, [], ended="failed"),
]


def test_runs_rank_by_checks_reached_then_value_seeds_and_failures_aside() -> None:
    assert [t.number for t in ranked(TRIALS)] == [3, 1, 0, 4, 2]


def test_the_recommendation_is_the_best_at_the_recommended_batch() -> None:
    best = best_of(TRIALS, 64)
    assert best is not None and best.number == 1  # trial 3 is better, at batch 128
    assert best_of(TRIALS, 256) is not None and best_of(TRIALS, 256).number == 3  # type: ignore[union-attr]


def test_evidence_names_metric_epochs_runs_and_seeds() -> None:
    found = evidence(TRIALS, PLAN, "14 epochs of 40,512 samples")
    assert found is not None
    assert found["values"] == {"lr": 0.05, "opt": "a"}
    assert (found["metric"], found["value"], found["at_epochs"]) == ("val_accuracy", 0.86, 2.0)
    assert found["out_of_runs"] == 6
    runs = found["runs"]
    assert (runs["finished"], runs["pruned"], runs["failed"], runs["seeds"]) == (3, 2, 1, 1)
    assert found["seeds"]["count"] == 2 and found["seeds"]["values"] == [0.86, 0.88]
    assert found["seeds"]["std"] == pytest.approx(0.0141, abs=1e-4)
    assert "do not promise the final accuracy" in found["limits"]
    assert "14 epochs of 40,512 samples" in found["limits"]


def test_one_seed_says_the_spread_was_not_measured() -> None:
    found = evidence(TRIALS[:5], PLAN)
    assert found is not None and found["seeds"]["count"] == 1
    assert "not measured" in found["seeds"]["text"]


def test_the_rule_is_checked_against_the_best_learning_rate_per_batch() -> None:
    check = rule_check(TRIALS, RULE)
    assert check is not None
    by = {r["batch_size"]: r for r in check["by_batch"]}
    assert by[64]["checked"] and by[64]["ratio"] == pytest.approx(2.0) and by[64]["agrees"]
    assert by[64]["rule_run"]["rank"] == 2 and by[64]["rule_run"]["of"] == 4
    assert by[128]["tuned_lr"] == 0.08 and by[128]["rule_lr"] == pytest.approx(0.05)
    assert by[128]["ratio"] == pytest.approx(1.6) and by[128]["agrees"]
    far = LrRule(1.0, 256, False, math.inf, "", "momentum")  # lr(64) = 0.25, 5x the best
    row = next(r for r in rule_check(TRIALS, far)["by_batch"] if r["batch_size"] == 64)  # type: ignore[index]
    assert row["ratio"] == pytest.approx(0.2) and not row["agrees"]
    assert "disagrees" in row["text"]


def test_ranges_narrow_to_the_best_runs_inside_the_space() -> None:
    space = [FloatParam("lr", 0.01, 0.3, log=True), CategoricalParam("opt", ("a", "b", "c"))]
    assert narrowed(TRIALS, space) is None  # two sampled runs at full length (and the rule's)
    more = [*TRIALS, run(9, 64, 0.025, [0.6, 0.7, 0.75, 0.8, 0.81, 0.82, 0.83, 0.84])]
    found = narrowed(more, space)
    assert found is not None
    lr = found["lr"]
    assert isinstance(lr, FloatParam) and lr.log
    assert 0.01 <= lr.low <= 0.025 / 1.5 + 1e-9 and 0.08 * 1.5 - 1e-9 <= lr.high <= 0.3
    assert found["opt"] == CategoricalParam("opt", ("a",)) or found["opt"] == space[1]
    assert narrowed(TRIALS[:2], space) is None  # fewer than three ranked runs


def test_seeds_that_disagree_are_flagged() -> None:
    unlucky = [
        *TRIALS[:5],
        run(7, 64, 0.05, [0.5] * 8, role="seed", seed=1, of=1),
        run(8, 64, 0.05, [0.52] * 8, role="seed", seed=2, of=1),
    ]
    found = evidence(unlucky, PLAN)
    assert found is not None and not found["seeds"]["repeatable"]
    assert "did not repeat" in found["seeds"]["text"]
    steady = evidence(TRIALS, PLAN)
    assert steady is not None and steady["seeds"]["repeatable"]


def test_only_full_length_runs_narrow_a_range() -> None:
    space = [FloatParam("lr", 0.01, 0.3, log=True)]
    pruned_only = [run(i, 64, 0.02 + 0.01 * i, [0.6, 0.7]) for i in range(6)]
    assert narrowed(pruned_only, space) is None


def test_runs_at_chance_recommend_nothing() -> None:
    # PLAN validates on 512 samples: for 2 classes chance is 0.5, the band up to 0.544.
    assert chance_band(2, 512) == pytest.approx(0.5 + 2 * math.sqrt(0.25 / 512))
    assert chance_band(None, 512) is None  # a user model: the classes are not known
    collapsed = [
        run(0, 64, 0.2, [0.84, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]),
        run(1, 64, 0.1, [0.85, 0.5, 0.52, 0.5, 0.5, 0.5, 0.5, 0.53]),
        run(2, 128, 0.07, [0.5, 0.6, 0.7, 0.75, 0.76, 0.77, 0.77, 0.77]),
    ]
    found = evidence(collapsed, PLAN, "14 epochs", n_classes=2)
    assert found is not None and found["values"] == {}
    assert "no short run at batch 64 learned beyond chance" in found["not_learned"]
    assert found["chance_band"] == pytest.approx(0.5442, abs=1e-4)
    learned_somewhere = evidence(collapsed, PLAN, "14 epochs", n_classes=None)
    assert learned_somewhere is not None and learned_somewhere["values"] == {"lr": 0.1, "opt": "a"}
    assert learned(collapsed[2], chance_band(2, 512)) and not learned(collapsed[0], 0.544)


def test_a_best_run_whose_seed_repeats_sit_at_chance_recommends_nothing() -> None:
    # issue #36: a best at 0.665 whose repeats score 0.500 and 0.495 (2 classes)
    lucky = [
        run(0, 64, 0.025, [0.55] * 8, role="rule"),
        run(1, 64, 0.05, [0.6, 0.62, 0.64, 0.65, 0.66, 0.66, 0.665, 0.665]),
        run(2, 64, 0.05, [0.5] * 8, role="seed", seed=1, of=1),
        run(3, 64, 0.05, [0.495] * 8, role="seed", seed=2, of=1),
    ]
    found = evidence(lucky, PLAN, "14 epochs", n_classes=2)
    assert found is not None and found["values"] == {}
    assert "did not survive its own seed repeats (0.500, 0.495)" in found["not_repeated"]
    assert "within chance (0.500 for 2 classes" in found["not_repeated"]
    assert "not_learned" not in found  # the best itself is above chance


def test_a_best_run_whose_repeats_do_not_beat_the_recipe_recommends_nothing() -> None:
    # a user model (classes unknown): the recipe's own run is the bar
    trials = [
        run(0, 64, 0.025, [0.75] * 8, role="rule"),
        run(1, 64, 0.05, [0.8] * 8),
        run(2, 64, 0.05, [0.70] * 8, role="seed", seed=1, of=1),
        run(3, 64, 0.05, [0.72] * 8, role="seed", seed=2, of=1),
    ]
    found = evidence(trials, PLAN, n_classes=None)
    assert found is not None and found["values"] == {}
    assert (
        "does not beat the recipe's own run at batch 64 (0.750, trial 0)" in (found["not_repeated"])
    )
    # repeats that hold up keep the recommendation
    held = [*trials[:2], run(2, 64, 0.05, [0.79] * 8, role="seed", seed=1, of=1)]
    kept = evidence(held, PLAN, n_classes=None)
    assert kept is not None and kept["values"] == {"lr": 0.05, "opt": "a"}
    assert "not_repeated" not in kept
    # without repeats nothing is judged (the spread says one seed)
    alone = evidence(trials[:2], PLAN, n_classes=None)
    assert alone is not None and alone["values"] and alone["seeds"]["count"] == 1
