"""Options several commands take are declared once (``advisor/cli/params.py``): the same
choices and the same help in every command that has them."""

from __future__ import annotations

import re

import pytest
from advisor.probes.runner import FRAMEWORK_ENTRY
from cli_run import run

FRAMEWORK_COMMANDS = [
    ["estimate", "--model", "fcn", "--batch-size", "32"],
    ["probe", "--model", "fcn", "--batch-size", "32"],
    ["predict", "--model", "fcn", "--batch-size", "32", "--instances", "p3.2xlarge"],
    ["suggest", "--model", "fcn", "--budget", "5"],
]
STORAGE_COMMANDS = [
    ["suggest"],
    ["probe"],
    ["dashboard"],
    ["submit"],
    ["import"],
    ["calibration", "record"],
]


@pytest.mark.parametrize("args", FRAMEWORK_COMMANDS, ids=lambda a: a[0])
def test_framework_is_one_choice_everywhere(args: list[str]) -> None:
    result = run(*args, "--framework", "jax")
    assert result.code == 2, result
    choices = ", ".join(f"'{f}'" for f in FRAMEWORK_ENTRY)
    assert f"'jax' is not one of {choices}" in result.err, result.err
    assert "Traceback" not in result.err


def _option_help(command: list[str], option: str) -> str:
    """The help text of ``option`` in ``advisor COMMAND --help``, on one line."""
    text = run(*command, "--help").out
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(option + " "))
    block = [lines[start].strip().split(None, 2)[-1]]
    for line in lines[start + 1 :]:
        if not line.startswith(" " * 10) or line.strip().startswith("-"):
            break
        block.append(line.strip())
    return re.sub(r"-\s+", "-", re.sub(r"\s+", " ", " ".join(block)))  # help wraps at "-"


def test_storage_has_one_help_in_every_command() -> None:
    helps = {c[0]: _option_help(c, "--storage") for c in STORAGE_COMMANDS}
    assert len(set(helps.values())) == 1, helps
    assert "Optuna storage URL" in helps["suggest"]


def test_probe_and_estimate_take_the_same_iterations() -> None:
    for command in FRAMEWORK_COMMANDS[:2]:  # estimate, probe
        result = run(*command, "--iterations", "2")
        assert result.code == 2 and "2 is out of range: it must be >= 3" in result.err, result
    assert _option_help(["estimate"], "--iterations") == _option_help(["probe"], "--iterations")
