"""The YAML space format: defaults load, round-trip, and errors name file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest
from advisor.search_spaces.loader import SPACES_DIR, default_space, load_space
from advisor.search_spaces.space import (
    CategoricalParam,
    FloatParam,
    IntParam,
    space_from_dict,
    space_to_dict,
)

from advisor.errors import AdvisorError


@pytest.mark.parametrize("path", sorted(SPACES_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_space_loads_and_round_trips(path: Path) -> None:
    space = load_space(path)
    assert space.workload == path.stem
    assert space.hyperparameters
    assert space_from_dict(space_to_dict(space)) == space


def test_fcn_default_space_matches_the_recipe() -> None:
    space = default_space("fcn")
    assert space.batch_sizes == (256, 512, 1024, 2048)
    lr = space.param("lr")
    assert isinstance(lr, FloatParam) and lr.log and (lr.low, lr.high) == (0.01, 0.3)
    wd = space.param("weight_decay")
    assert isinstance(wd, FloatParam) and wd.log and (wd.low, wd.high) == (1e-6, 1e-3)


def test_full_format_with_conditions_and_runtime_params() -> None:
    text = """
workload: mymodels:build
machines:
  providers: [aws, gcp]
  accelerators: [V100, cpu]
  max_gpus: 4
  max_price: 15
  spot: false
batch_sizes: [128, 256]
hyperparameters:
  optimizer: {type: categorical, choices: [sgd, adam]}
  beta1: {type: float, low: 0.8, high: 0.99, condition: {on: optimizer, values: [adam]}}
  width: {type: int, low: 16, high: 64, log: true, affects_runtime: true}
"""
    space = load_space(text)
    assert space.machines.providers == ("aws", "gcp")
    assert space.machines.max_gpus == 4 and space.machines.max_price == 15.0
    assert not space.machines.spot
    assert space.batch_sizes == (128, 256)
    assert isinstance(space.param("optimizer"), CategoricalParam)
    beta1 = space.param("beta1")
    assert beta1.condition is not None and beta1.condition.values == ("adam",)
    width = space.param("width")
    assert isinstance(width, IntParam) and width.affects_runtime and width.log
    assert space_from_dict(space_to_dict(space)) == space


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "workload: fcn\nhyperparameters:\n  lr: {type: float, low: abc, high: 1}\n",
            "line 3, key hyperparameters.lr.low: must be a number, got 'abc'",
        ),
        ("workload: fcn\nmachnes: {}\n", "line 2, key machnes: unknown key (did you mean machines"),
        (
            "workload: fcn\nbatch_sizes: [256, -1]\n",
            "line 2, key batch_sizes: must be positive integers, got -1",
        ),
        (
            "workload: fcn\nhyperparameters:\n  lr: {type: real, low: 0, high: 1}\n",
            "line 3, key hyperparameters.lr.type: must be float, int or categorical",
        ),
        (
            "workload: fcn\nhyperparameters:\n  lr:\n    type: float\n    low: 0\n    high: 1\n"
            "    log: true\n",
            "line 4, key hyperparameters.lr: a log scale needs low > 0",
        ),
        (
            "workload: fcn\nhyperparameters:\n  b: {type: float, low: 0, high: 1,"
            " condition: {on: opt, values: [adam]}}\n",
            "key hyperparameters.b.condition.on: refers to unknown parameter 'opt'",
        ),
        (
            "workload: fcn\nmachines:\n  max_price: -3\n",
            "line 3, key machines.max_price: must be > 0",
        ),
        ("workload: fcn\nbatch_sizes: [256\n", "not valid YAML"),
        ("workload: simple-cnn\n", "the space is for 'simple-cnn' but the model is 'fcn'"),
    ],
)
def test_errors_point_at_line_and_key(text: str, expected: str) -> None:
    with pytest.raises(AdvisorError) as info:
        load_space(text, "fcn")
    assert expected in str(info.value)
    assert "To fix:" in str(info.value)


def test_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    path.write_text("workload: fcn\n\nhyperparameters:\n  lr: {type: float, low: x, high: 1}\n")
    with pytest.raises(AdvisorError, match=r"space\.yaml line 4, key hyperparameters\.lr\.low"):
        load_space(path)


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(AdvisorError, match="does not exist"):
        load_space(tmp_path / "nope.yaml")
