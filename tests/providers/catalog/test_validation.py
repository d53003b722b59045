"""Bad catalog data fails on load with the file, the line and the column."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from advisor.providers.catalog import load, snapshots

from advisor.errors import AdvisorError

CopySnapshot = Callable[[str, str], Path]


def _edit(path: Path, line: int, old: str, new: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    assert old in lines[line - 1], lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path.write_text("".join(lines))


def test_user_snapshot_is_found_and_newest(copy_snapshot: CopySnapshot) -> None:
    copy_snapshot("2026-11", "2099-01")
    assert snapshots()[-1] == "2099-01"
    assert load().snapshot == "2099-01"


def test_bad_integer_names_file_line_and_column(copy_snapshot: CopySnapshot) -> None:
    folder = copy_snapshot("2026-11", "2099-01")
    lines = (folder / "aws.csv").read_text().splitlines()
    line = 1 + next(i for i, text in enumerate(lines) if text.startswith("aws,ec2,p3.2xlarge,"))
    _edit(folder / "aws.csv", line, ",us-east-1,8,", ",us-east-1,x,")
    with pytest.raises(AdvisorError) as err:
        load("2099-01")
    message = str(err.value)
    assert f"{folder / 'aws.csv'} line {line}: vcpus 'x' is not an integer" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("file", "line", "old", "new", "error"),
    [
        ("azure.csv", 3, ",1.80,", ",1.8O,", "on_demand_usd_per_h '1.8O' is not a number"),
        ("azure.csv", 2, ",2021-02,", ",Feb 2021,", "price_date 'Feb 2021' is not a date"),
        # a GPU count without an accelerator name breaks InstanceType's own check
        ("aws.csv", 5, ",V100,1,16,", ",,1,16,", "accelerator and accelerator_count must agree"),
        (
            "gcp.csv",
            3,
            ",V100,1,16,",
            ",V101,1,16,",
            "Unknown accelerator 'V101'. Did you mean V100",
        ),
        ("gcp.csv", 3, ",V100,1,16,", ",V100,1,32,", "accelerator_memory_gib 32 is not 1 x 16 GiB"),
        ("azure.csv", 2, "azure,azure-vm,", "aws,azure-vm,", "provider 'aws' in the azure file"),
    ],
)
def test_a_bad_cell_is_reported_with_file_and_line(
    copy_snapshot: CopySnapshot, file: str, line: int, old: str, new: str, error: str
) -> None:
    folder = copy_snapshot("2021-02", "2099-01")
    _edit(folder / file, line, old, new)
    with pytest.raises(AdvisorError, match=rf"{file} line {line}: {error}"):
        load("2099-01")


def test_duplicate_key_names_both_lines(copy_snapshot: CopySnapshot) -> None:
    folder = copy_snapshot("2021-02", "2099-01")
    path = folder / "aws.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines, lines[4]]))
    with pytest.raises(
        AdvisorError,
        match=r"aws.csv line 14: ec2:p3.2xlarge in region 'us-east-1' is listed twice "
        r"\(first at aws.csv line 5\)",
    ):
        load("2099-01")


def test_missing_column(copy_snapshot: CopySnapshot) -> None:
    folder = copy_snapshot("2021-02", "2099-01")
    path = folder / "gcp.csv"
    path.write_text(path.read_text().replace("spot_usd_per_h,", "spot,", 1))
    with pytest.raises(AdvisorError, match=r"gcp.csv line 1: missing column\(s\) spot_usd_per_h"):
        load("2099-01")


def test_bad_accelerator_spec_row(copy_snapshot: CopySnapshot) -> None:
    from advisor.providers.catalog._store import DATA_DIR

    folder = copy_snapshot("2021-02", "2099-01")
    text = (DATA_DIR / "accelerators.csv").read_text()
    (folder / "accelerators.csv").write_text(
        text.replace("V100,NVIDIA,Volta,15.7,", "V100,NVIDIA,Volta,fast,", 1)
    )
    with pytest.raises(
        AdvisorError, match=r"accelerators.csv line 4: fp32_tflops 'fast' is not a number"
    ):
        load("2099-01")
