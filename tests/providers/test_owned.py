"""Issue #37: machines you own -- stored in ADVISOR_HOME, priced per hour of use by
amortisation + energy (formula and inputs kept with the row), candidates of the local back
end, a board without a spec record refused naming the known ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from advisor.providers import catalog
from advisor.providers.owned import OwnedMachine, load_owned, parse_gpus, parse_lifetime
from cli_run import run

from advisor.errors import AdvisorError


def test_the_price_is_amortisation_plus_energy() -> None:
    m = OwnedMachine("rig", "A10G", 4, 9000.0, parse_lifetime("3y"), 1800.0, 0.30, 0.5)
    hours_used = 3 * 365.25 * 24 * 0.5
    assert m.usd_per_hour == pytest.approx(9000 / hours_used + 1.8 * 0.30)
    row = m.instance(catalog.load().accelerators)
    assert (row.key, row.accelerator, row.accelerator_count) == ("owned:rig", "A10G", 4)
    assert row.price_basis == "owned" and row.on_demand_usd_per_h == m.usd_per_hour
    for part in ("USD 9,000", "3 y", "0.5 used", "1.8 kW", "USD 0.3/kWh"):
        assert part in row.source


def test_parsers() -> None:
    assert parse_gpus("4xA100-80GB") == ("A100-80GB", 4) and parse_gpus("T4") == ("T4", 1)
    assert parse_lifetime("36mo") == pytest.approx(parse_lifetime("3y"))
    for bad in ("", "0xT4", "4xT4 2xL4"):
        with pytest.raises(AdvisorError, match="COUNTxBOARD"):
            parse_gpus(bad)
    with pytest.raises(AdvisorError, match="--lifetime"):
        parse_lifetime("3 years")


def test_add_list_remove(tmp_path: Path) -> None:
    added = run(
        "hardware", "add", "rig", "--gpus", "4xa10g", "--purchase-usd", "9000",
        "--lifetime", "3y", "--power-w", "1800", "--usd-per-kwh", "0.30",
    )  # fmt: skip
    assert added.code == 0, added
    (m,) = load_owned()
    assert (m.name, m.board, m.count, m.utilisation) == ("rig", "A10G", 4, 0.5)
    listed = run("hardware", "list")
    assert "owned:rig: 4 x A10G" in listed.out and "per hour of use" in listed.out
    assert run("hardware", "remove", "rig").code == 0 and load_owned() == []


def test_the_issues_example_board_is_known() -> None:
    """``--gpus 4xRTX4090`` (the issue's example) has a spec record: the Ada whitepaper's."""
    result = run(
        "hardware", "add", "rig", "--gpus", "4xRTX4090", "--purchase-usd", "9000",
        "--lifetime", "3y", "--power-w", "1800", "--usd-per-kwh", "0.30",
    )  # fmt: skip
    assert result.code == 0, result
    (m,) = load_owned()
    row = m.instance(catalog.load().accelerators)
    assert (row.accelerator, row.accelerator_count, row.accelerator_memory_gib) == (
        "RTX4090",
        4,
        96,
    )


def test_an_unknown_board_names_the_known_ones() -> None:
    result = run(
        "hardware", "add", "rig", "--gpus", "4xRTX2070", "--purchase-usd", "9000",
        "--lifetime", "3y", "--power-w", "1800", "--usd-per-kwh", "0.30",
    )  # fmt: skip
    lines = [x for x in result.err.splitlines() if x.strip()]
    assert result.code == 2 and len(lines) == 1
    assert "RTX2070" in lines[0] and "RTX4090" in lines[0] and "accelerators.csv" in lines[0]
    assert load_owned() == []


def test_an_owned_machine_is_a_candidate_of_the_local_back_end(tmp_path: Path) -> None:
    from advisor.search_spaces.loader import load_space

    from advisor.evaluation.local import LocalBackend

    assert run(
        "hardware", "add", "rig", "--gpus", "2xL4", "--purchase-usd", "6000",
        "--lifetime", "3y", "--power-w", "300", "--usd-per-kwh", "0.3",
    ).code == 0  # fmt: skip
    backend = LocalBackend(f"sqlite:///{tmp_path / 's.db'}")
    space = load_space("workload: fcn\nbatch_sizes: [256]\n")
    keys = {c.key: c for c in backend.candidates(space)}
    assert "owned:rig" in keys and keys["owned:rig"].instance.accelerator == "L4"
    filtered = load_space("workload: fcn\nbatch_sizes: [256]\nmachines:\n  accelerators: [T4]\n")
    assert "owned:rig" not in {c.key for c in backend.candidates(filtered)}
