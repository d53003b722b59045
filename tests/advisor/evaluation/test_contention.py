"""A probe timed on a busy machine is flagged, in one line (issue #28)."""

from __future__ import annotations

from advisor.evaluation.contention import contention, notes, slowdown_bound


def _probe(others: float | None, cores: int = 2) -> dict:
    found = {} if others is None else {"others_cores": others, "cores": cores}
    return {"fingerprint": {"contention": found}}


def test_a_probe_is_contended_from_a_quarter_of_the_cores_and_half_a_core() -> None:
    assert contention(_probe(0.4)) is None  # under half a core
    assert contention(_probe(0.5)) == {"others_cores": 0.5, "cores": 2.0}
    assert contention(_probe(1.5, cores=8)) is None  # under a quarter of 8 cores
    assert contention(_probe(None)) is None  # not measured (another OS, an older probe)


def test_the_slowdown_bound_is_the_cores_over_the_free_cores() -> None:
    assert slowdown_bound({"others_cores": 1.0, "cores": 2.0}) == 2.0
    assert slowdown_bound({"others_cores": 2.0, "cores": 2.0}) == 10.0  # capped


def test_the_contended_probes_are_named_in_one_line() -> None:
    lines = notes([(1024, _probe(0.8)), (256, _probe(0.7)), (512, _probe(0.1))])
    assert len(lines) == 1
    assert "batch sizes 256, 1024" in lines[0]
    assert "0.7-0.8 of 2 cores" in lines[0]
    assert "1.7x too slow" in lines[0]  # 2 / (2 - 0.8)
    assert notes([(512, _probe(0.1))]) == []
