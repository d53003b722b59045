"""`advisor workloads`: the catalogue of built-in workloads, through the CLI."""

from __future__ import annotations

import json

from advisor.search_spaces.workloads import all_workloads
from click.testing import CliRunner

from advisor.cli.main import cli, main

EXPECTED = {"fcn", "simple-cnn", "resnet50", "vgg-1", "vgg-2", "googlenet", "lstm"}


def test_json_lists_every_reference_workload_in_both_frameworks() -> None:
    result = CliRunner().invoke(cli, ["workloads", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert set(rows) == EXPECTED
    for row in rows.values():
        assert row["frameworks"] == ["torch", "keras"]
        assert row["parameters"] > 0
        assert row["n_train"] > row["n_val"] > 0
        assert row["recipe"] and row["data"]


def test_json_reports_published_sizes_and_shapes() -> None:
    rows = {
        r["name"]: r for r in json.loads(CliRunner().invoke(cli, ["workloads", "--json"]).output)
    }
    assert (rows["resnet50"]["n_train"], rows["resnet50"]["n_val"]) == (50_000, 10_000)
    assert rows["resnet50"]["input_shape"] == [3, 32, 32]
    assert rows["vgg-2"]["input_shape"] == [3, 64, 64]
    assert rows["googlenet"]["input_shape"] == [3, 224, 224]
    assert (rows["googlenet"]["n_train"], rows["googlenet"]["n_val"]) == (5_216, 624)
    # Penn Treebank: 929,589 / 73,760 tokens in sequences of 35
    assert (rows["lstm"]["n_train"], rows["lstm"]["n_val"]) == (929_589 // 35, 73_760 // 35)
    assert rows["lstm"]["classes"] == 10_000


def test_one_workload_shows_its_recipe() -> None:
    result = CliRunner().invoke(cli, ["workloads", "googlenet", "--json"])
    row = json.loads(result.output)
    assert row["name"] == "googlenet"
    assert "Adam" in row["recipe"] and "1e-4" in row["recipe"]


def test_table_names_every_workload() -> None:
    result = CliRunner().invoke(cli, ["workloads"])
    assert result.exit_code == 0
    for name in EXPECTED:
        assert name in result.output


def test_unknown_workload_is_one_line_exit_2(capsys) -> None:  # type: ignore[no-untyped-def]
    try:
        main(["workloads", "resnet51"])
    except SystemExit as exc:
        assert exc.code == 2
    err = capsys.readouterr().err
    assert "resnet50" in err and len(err.strip().splitlines()) == 1


def test_registry_records_a_parameter_count_for_every_workload() -> None:
    assert all(w.parameters for w in all_workloads())
