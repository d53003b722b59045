"""Issue #50, section 5: machines you own cannot be corrupted. Kept hostile inputs beside
``test_bad_inputs.py``: a hand-edited ``hardware.json`` and ``advisor hardware add`` values,
each refused where it enters with one line naming the file (or flag), the field and the fix,
through ``hardware list``, ``add``, ``remove`` and ``suggest`` alike; and eight ``advisor
hardware add`` processes at once on one home keep all eight machines.

Before: five tracebacks (a count of "four", 0 or -4 in suggest; 200,000 nested brackets), six
wrong successes ("0 x RTX4090", a billion GPUs slower than four, "USD inf (nan%) cheaper"),
``--gpus 1000000000xH100`` accepted at the price and power of four, a 400-digit count a
traceback, and 5-7 of eight machines kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

RIG = {"name": "rig", "board": "RTX4090", "count": 4, "purchase_usd": 9000.0,
       "lifetime_h": 26298.0, "power_w": 1800.0, "usd_per_kwh": 0.3, "utilisation": 0.5,
       "vcpus": None, "memory_gib": None}  # fmt: skip
ADD = ("--purchase-usd", "9000", "--lifetime", "3y", "--power-w", "1800", "--usd-per-kwh", "0.3")


def _file(home: Path, text: str | bytes) -> Path:
    path = home / "hardware.json"
    home.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _machines(*fields: dict[str, Any]) -> str:
    return json.dumps({"machines": [{**RIG, **f} for f in fields]})


def _raw_rig(field: str, literal: str) -> str:
    """The rig with ``field`` written as the JSON ``literal`` (NaN, 400 digits, ...)."""
    body = _machines({field: "@@"})
    return body.replace('"@@"', literal)


# (hardware.json's text, words its one-line error holds)
HAND_EDITED: list[tuple[str | bytes, str]] = [
    (_machines({"count": "four"}), "machines[0] ('rig'): count must be an integer from 1 to 16"),
    (_machines({"count": 0}), "count must be an integer from 1 to 16"),
    (_machines({"count": -4}), "count must be an integer from 1 to 16"),
    (_machines({"count": 1_000_000_000}), "but got 1000000000"),
    (_machines({"count": 4.0}), "count must be an integer"),
    (_machines({"count": True}), "count must be an integer"),
    (_raw_rig("count", "9" * 400), "but got a 400-digit integer"),
    (_raw_rig("count", "9" * 5000), "is not JSON"),  # over Python's 4,300 digits
    (_machines({"purchase_usd": 0, "power_w": 0}), "purchase_usd must be a number above 0"),
    (_machines({"purchase_usd": 1e308}), "purchase_usd must be a number above 0 and at most"),
    (_raw_rig("purchase_usd", "Infinity"), "but got inf"),
    (_raw_rig("power_w", "NaN"), "power_w must be a number above 0"),
    (_raw_rig("lifetime_h", "1e400"), "lifetime_h must be a number from 1 to 438,300"),
    (_machines({"purchase_usd": "9000"}), "but got '9000'"),
    (_machines({"utilisation": 0}), "utilisation must be a number from 0.01 to 1"),
    (_machines({"usd_per_kwh": -0.3}), "usd_per_kwh must be a number from 0 to 100"),
    (_machines({"vcpus": 0}), "vcpus must be an integer from 1 to 4,096"),
    (_machines({"memory_gib": 1e9}), "memory_gib must be a number from 1 to 65,536"),
    (_machines({"name": 5}), "machines[0]: name must be a plain name"),
    (_machines({"name": "../../etc"}), "name must be a plain name"),
    (_machines({"board": ["RTX4090"]}), "board must be a GPU board name"),
    (json.dumps({"machines": [{k: v for k, v in RIG.items() if k != "count"}]}), "has no count"),
    (_machines({"colour": "red"}), "has unknown field(s) colour"),
    (json.dumps({"machines": ["rig"]}), "machines[0] must be an object"),
    (json.dumps({"machines": [RIG, RIG]}), "machines[1] repeats the name 'rig'"),
    (json.dumps({"machines": {"rig": RIG}}), "machines must be a list of at most 256"),
    (json.dumps({"machines": [{**RIG, "name": f"m{i}"} for i in range(257)]}), "at most 256"),
    (json.dumps([RIG]), 'is not {"machines": [...]}'),
    (json.dumps({"machines": [], "extra": 1}), 'is not {"machines": [...]}'),
    ("[" * 200_000 + "]" * 200_000, "nests deeper than 8 levels"),
    ('{"machines": [' + "{" * 50, "nests deeper than 8 levels"),
    ('{"machines": [', "is not JSON"),
    ("", "is not JSON"),
    (b"\xff\xfe{}", "is not UTF-8 text"),
    ("x" * (2**20 + 1), "is over 1 MiB"),
]


@pytest.mark.parametrize(("text", "words"), HAND_EDITED)
def test_a_hand_edited_hardware_file_is_one_line_everywhere(
    cli: Any, _advisor_home: Path, text: str | bytes, words: str
) -> None:
    path = _file(_advisor_home, text)
    before = path.read_bytes()
    for args in (
        ("hardware", "list"),
        ("hardware", "add", "other", "--gpus", "2xL4", *ADD),
        ("hardware", "remove", "rig"),
        ("suggest", "--model", "fcn", "--budget", "5"),
    ):
        outcome = cli.run_checked(*args)
        assert outcome.code == 2, (args, outcome)
        line = outcome.err.strip()
        assert str(path) in line and words in line and "To fix: " in line, (args, line)
    assert path.read_bytes() == before  # never overwritten by a command that refused it


def test_a_hardware_file_that_is_no_regular_file_is_one_line_at_once(
    cli: Any, _advisor_home: Path
) -> None:
    _advisor_home.mkdir(parents=True, exist_ok=True)
    fifo = _advisor_home / "hardware.json"
    os.mkfifo(fifo)  # nobody writes into it: a plain open would wait for ever
    started = time.monotonic()
    line = cli.run_checked("hardware", "list").err.strip()
    assert "is not a regular file" in line and time.monotonic() - started < 10
    fifo.unlink()
    fifo.mkdir()
    assert "is not a regular file" in cli.run_checked("hardware", "list").err


def test_hardware_add_with_advisor_home_a_file_is_one_line(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home-file"
    home.write_text("x")
    monkeypatch.setenv("ADVISOR_HOME", str(home))
    for args in (("hardware", "add", "rig", "--gpus", "4xL4", *ADD), ("hardware", "list")):
        assert cli.run_checked(*args).code == 2


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--gpus", "1000000000xH100", "count of COUNTxBOARD must be an integer from 1 to 16"),
        ("--gpus", "9" * 400 + "xH100", "count of COUNTxBOARD must be an integer from 1 to 16"),
        ("--gpus", "9" * 5000 + "xH100", "count of COUNTxBOARD must be an integer from 1 to 16"),
        ("--gpus", "0xRTX4090", "count of COUNTxBOARD must be an integer from 1 to 16"),
        ("--gpus", "17xH100", "count of COUNTxBOARD must be an integer from 1 to 16"),
        ("--purchase-usd", "0", "--purchase-usd for 'big' must be a number above 0"),
        ("--purchase-usd", "1e308", "--purchase-usd for 'big' must be a number above 0"),
        ("--power-w", "0", "--power-w for 'big' must be a number above 0"),
        ("--power-w", "1e9", "at most 100,000"),
        ("--utilisation", "1e-300", "--utilisation for 'big' must be a number from 0.01 to 1"),
        ("--lifetime", "1000000y", "--lifetime for 'big' must be a number from 1 to 438,300"),
        ("--vcpus", "100000", "--vcpus for 'big' must be an integer from 1 to 4,096"),
        ("--memory-gib", "1e9", "--memory-gib for 'big' must be a number from 1 to 65,536"),
    ],
)
def test_hardware_add_refuses_what_no_machine_has(
    cli: Any, _advisor_home: Path, flag: str, value: str, words: str
) -> None:
    args = {"--gpus": "4xH100", **dict(zip(ADD[::2], ADD[1::2], strict=True)), flag: value}
    outcome = cli.run_checked("hardware", "add", "big", *(x for kv in args.items() for x in kv))
    assert outcome.code == 2 and words in outcome.err, outcome
    assert not (_advisor_home / "hardware.json").exists()


def test_the_bounds_themselves_are_accepted(cli: Any, _advisor_home: Path) -> None:
    added = cli.run_checked(
        "hardware", "add", "edge", "--gpus", "16xH100", "--purchase-usd", "1e9",
        "--lifetime", "50y", "--power-w", "100000", "--usd-per-kwh", "0",
        "--utilisation", "0.01", "--vcpus", "4096", "--memory-gib", "65536",
    )  # fmt: skip
    assert added.code == 0, added
    listed = cli.run_checked("hardware", "list").out
    assert "owned:edge: 16 x H100" in listed and "inf" not in listed and "nan" not in listed


@pytest.mark.slow  # eight real processes at once (about 10 s on two cores)
def test_eight_adds_at_once_keep_eight_machines(_advisor_home: Path) -> None:
    # 200 machines there already: each read-modify-write takes a few milliseconds, as a
    # team's file would, so that unserialised writers overlap (before: 5-7 of 8 kept)
    kept = [{**RIG, "name": f"old{i:03d}"} for i in range(200)]
    _file(_advisor_home, json.dumps({"machines": kept}))

    def add(name: str) -> list[str]:
        cmd = [sys.executable, "-m", "advisor.cli.main", "hardware", "add", name]
        return [*cmd, "--gpus", "4xRTX4090", *ADD]

    procs = [
        subprocess.Popen(add(f"rig{i}"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(8)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "saved in" in out, err
    data = json.loads((_advisor_home / "hardware.json").read_text())
    names = sorted(m["name"] for m in data["machines"])
    assert names == [m["name"] for m in kept] + [f"rig{i}" for i in range(8)]
    assert not list(_advisor_home.glob(".hardware.json.*"))  # no temporary file left
