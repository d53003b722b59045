"""Issue #36: "Re-run when the machine is quiet: they are then retaken" holds once the study
has converged: the busy machine's probe is retaken, and the rows scored from it (the trials
the converged study keeps) give way to the new measurement. Before, five quiet re-runs kept
the contended probe's times (and its note) in the report."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.search_spaces.loader import default_space
from advisor.search_spaces.space import MachineFilter
from perf_fixtures import with_stream_trace

import advisor.evaluation.contention as contention_mod
from advisor.evaluation.local import LocalBackend
from advisor.options import SuggestOptions
from advisor.pipeline import suggest

BUSY = {"others_cores": 1.0, "cores": 2.0}  # a neighbour kept one of two cores busy


def _probe(batch: int, step_s: float, busy: bool) -> ProbeResult:
    fingerprint: dict[str, Any] = {"data_s": 0.004}
    if busy:
        fingerprint["contention"] = dict(BUSY)
    return with_stream_trace(
        ProbeResult(
            workload="fcn", framework="torch", batch_size=batch, device="cpu", threads=1,
            init_s=1.0, iteration_s=(step_s * 5, *([step_s] * 7)), validation_s=(0.2, 0.1),
            validation_samples_measured=212, n_train=40_512, n_val=212, wall_s=3.0,
            fingerprint=fingerprint,
        )
    )  # fmt: skip


def _times(report: dict[str, Any], service: str | None = None) -> dict[tuple[str, int], float]:
    """Every scored (machine, batch)'s time (``report["points"]``: machine, batch, spot,
    service, feasible, [time], [cost], known), of one ``service`` when given."""
    return {(p[0], p[1]): p[5][0] for p in report["points"] if service in (None, p[3])}


@pytest.mark.slow  # four studies on the local back end (fake probes): about 10 s here
def test_a_quiet_rerun_of_a_converged_study_retakes_the_busy_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = dataclasses.replace(
        default_space("fcn"),
        batch_sizes=(256, 512),
        machines=MachineFilter(instance_types=("ec2:c5.2xlarge", "ec2:c5.4xlarge"), spot=False),
    )
    options = SuggestOptions(
        model="fcn", space=space, storage=f"sqlite:///{tmp_path / 's.db'}", budget_usd=5
    )
    taken: list[tuple[int, bool]] = []

    def backend(busy: bool) -> LocalBackend:
        def run_probe(request: ProbeRequest) -> ProbeResult:
            taken.append((request.batch_size, busy))
            step = 0.1 * request.batch_size / 256 * (2.0 if busy else 1.0)  # busy: 2x slower
            return _probe(request.batch_size, step, busy)

        return LocalBackend(options.storage, run_probe=run_probe)

    first = suggest(options, backend=backend(busy=True))
    assert first["contention_notes"] and "they are then retaken" in first["contention_notes"][0]
    assert first["stop_reason"] == "converged" or "converged" in first["stop_reason"]
    slow = _times(first, "local")
    assert taken == [(256, True), (512, True)]

    monkeypatch.setattr(contention_mod, "quiet_now", lambda *a, **k: True)  # the machine is quiet
    second = suggest(options, backend=backend(busy=False))
    assert taken[2:] == [(256, False), (512, False)]  # retaken, each once
    assert second["resumed"] and second["trials"]["new"] == 0  # the study had converged
    assert second["contention_notes"] == []
    fast = _times(second, "local")
    assert fast.keys() == slow.keys() and len(fast) == 2
    for pair, seconds in fast.items():  # this machine's rows from the quiet probes
        assert seconds < 0.8 * slow[pair], (pair, seconds, slow[pair])
    # every row, the trials the converged study kept included, as a new study gives them
    # from the same (quiet) probes, which the back end's probe cache holds
    fresh = suggest(
        dataclasses.replace(options, storage=f"sqlite:///{tmp_path / 'fresh.db'}"),
        backend=backend(busy=False),
    )
    assert _times(second) == pytest.approx(_times(fresh))

    third = suggest(options, backend=backend(busy=False))  # quiet probes are kept
    assert len(taken) == 4 and _times(third) == _times(second)


def test_prefetch_leaves_a_single_busy_probe_to_be_retaken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One contended probe among the screen's: ``prefetch`` (one child process for two or
    more) leaves it to ``LocalBackend.probe``, which retakes it (before: marked judged by
    ``prefetch`` and then reused)."""
    import advisor.probes.runner as runner

    from advisor.evaluation.probe_cache import probe_cache_key
    from advisor.options import workload_info

    workload = workload_info(SuggestOptions(model="fcn"))
    backend = LocalBackend(f"sqlite:///{tmp_path / 's.db'}")
    key = {
        b: probe_cache_key(workload, b, backend.threads, backend.iterations, {}, False)
        for b in (256, 512)
    }
    backend.cache.put(key[256], _probe(256, 0.2, busy=True))
    backend.cache.put(key[512], _probe(512, 0.2, busy=False))
    monkeypatch.setattr(contention_mod, "quiet_now", lambda *a, **k: True)
    taken: list[int] = []

    def run_probe(request: ProbeRequest, **_: Any) -> ProbeResult:  # excuse_cpu_wait
        taken.append(request.batch_size)
        return _probe(request.batch_size, 0.1, busy=False)

    monkeypatch.setattr(runner, "run_probe", run_probe)
    monkeypatch.setattr(runner, "run_probes", lambda *a, **k: pytest.fail("one probe only"))
    backend.prefetch(workload, (256, 512))
    probe, new = backend.probe(workload, 256, {})
    assert taken == [256] and new and probe.fingerprint.get("contention") is None
    assert backend.probe(workload, 256, {}) == (probe, False)  # once per run
    assert backend.probe(workload, 512, {})[0].iteration_s[-1] == pytest.approx(0.2)
    assert taken == [256]


def test_prefetch_retakes_several_busy_probes_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every screen probe contended (the issue's run: batch sizes 256-2048): ``prefetch``
    retakes them in one child process (before: its check under the probe locks asked
    ``_retake`` again, heard "judged already" and dropped them all, so they were reused)."""
    import advisor.probes.runner as runner

    from advisor.evaluation.probe_cache import probe_cache_key
    from advisor.options import workload_info

    workload = workload_info(SuggestOptions(model="fcn"))
    backend = LocalBackend(f"sqlite:///{tmp_path / 's.db'}")
    for b in (256, 512):
        key = probe_cache_key(workload, b, backend.threads, backend.iterations, {}, False)
        backend.cache.put(key, _probe(b, 0.2, busy=True))
    monkeypatch.setattr(contention_mod, "quiet_now", lambda *a, **k: True)
    batches: list[list[int]] = []

    def run_probes(requests: list[ProbeRequest], on_result: Any = None, **_: Any) -> list[Any]:
        batches.append([r.batch_size for r in requests])
        out = [_probe(r.batch_size, 0.1, busy=False) for r in requests]
        for i, result in enumerate(out):
            on_result(i, result)
        return out

    monkeypatch.setattr(runner, "run_probes", run_probes)
    monkeypatch.setattr(runner, "run_probe", lambda *a, **k: pytest.fail("taken in one process"))
    backend.prefetch(workload, (256, 512))
    assert batches == [[256, 512]]
    for b in (256, 512):
        probe, new = backend.probe(workload, b, {})
        assert new and probe.fingerprint.get("contention") is None
