"""The values parsed once where they enter: durations, model references."""

from __future__ import annotations

import pytest
from advisor.search_spaces.workloads import ModelRef

from advisor.durations import format_duration, format_span, parse_duration
from advisor.errors import AdvisorError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("3600s", 3600), ("3600", 3600),
     ("1.5h", 5400), ("2d", 172800), (" 10 min ", 600), ("1h 30m 15s", 5415)],
)  # fmt: skip
def test_durations_read_as_users_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "1h30", "-5m", "0s", "2y", "400d", "1e9", "nan"])
def test_bad_durations_say_how_to_write_one(text: str) -> None:
    with pytest.raises(ValueError, match=r"duration|longer than 0"):
        parse_duration(text)


def test_one_formatter_picks_the_unit_by_size() -> None:
    assert format_duration(42) == "42 s"
    assert format_duration(290) == "4.8 min"
    assert format_duration(8100) == "2.25 h"
    assert format_duration(300, tick=True) == "5 min" and format_duration(7200, tick=True) == "2 h"
    assert format_span(288, 312) == "4.8-5.2 min"
    assert format_duration(float("inf")) == "-"


def test_model_references_are_told_apart_once() -> None:
    user = ModelRef("examples.my_torch_model:build")
    assert user.is_user and user.module == "examples.my_torch_model" and user.function == "build"
    builtin = ModelRef("vgg-1")
    assert not builtin.is_user and builtin == "vgg-1" and ModelRef(builtin) is builtin
    for bad, what in [("pkg.mod:", "user model"), ("a b", "workload name"), (":f", "user model"),
                      ("", "workload name"), ("pkg-x.mod:f", "user model")]:  # fmt: skip
        with pytest.raises(AdvisorError, match=what):
            ModelRef(bad)
