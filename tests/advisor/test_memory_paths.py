"""Issue #34: no path recommends, runs or charges a row whose step does not fit its GPU's
memory -- the one prediction path, ``advisor predict`` (CLI and Python API), the service's
``/v1/predict`` and ``advisor suggest``'s scorer, report and trial loop.

The steps are hand-built traces (``perf_fixtures.mlp_trace``) given memory terms far from any
GPU's edge: 4 GiB of parameters, as much in gradients, and 2.75 GiB of saved activations per
sample (the plan's traced step stands in as ``memory_fixtures.sized_lines``). At batch 8 a
step needs about 30 GiB per device: more than a 16 GB V100 or T4 and a 24 GB L4, less than a
40 GB A100 or an 80 GB H100; at one sample per device (8 GPUs) about 11 GiB, which fits a
V100. Expected figures are the memory model's own (``memory_fixtures.expected_bytes``: its
terms; ``device_memory.capacity_bytes``: a board's usable memory), never numbers written here.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import memory_fixtures
import pytest
from advisor.probes.result import ProbeResult
from memory_fixtures import (
    A100,
    MODEL,
    PER_SAMPLE,
    REPLICA,
    V100,
    V100X8,
    Store,
    expected_bytes,
    remember,
    sized,
    sized_probe,
)
from perf_fixtures import FakeCatalog, probe

from advisor.prediction.memory import device as device_memory
from advisor.prediction.memory.model import GIB, step_memory
from advisor.prediction.step import traces

fresh_memos = memory_fixtures.fresh_memos  # autouse: the memos forgotten around each test


# -- the one prediction path ------------------------------------------------------------------


def test_memory_per_device_follows_the_per_device_batch_with_a_full_replica() -> None:
    p, store = sized_probe(8), Store()
    one = device_memory.machine_memory(p, V100, FakeCatalog(), 8, store)
    eight = device_memory.machine_memory(p, V100X8, FakeCatalog(), 8, store)
    assert one is not None and eight is not None
    assert (one.per_device_batch, eight.per_device_batch) == (8, 1)
    assert one.fit.need_bytes == pytest.approx(expected_bytes(8, V100, FakeCatalog()))
    # the replica whole, the batch split (and NCCL's buffers on 8 GPUs)
    assert eight.fit.need_bytes == pytest.approx(expected_bytes(1, V100X8, FakeCatalog()))
    assert eight.fit.need_high_bytes == pytest.approx(
        expected_bytes(1, V100X8, FakeCatalog(), high=True)
    )
    assert one.fits is False and eight.fits is True
    usable = device_memory.capacity_bytes(V100, FakeCatalog())
    assert usable is not None and usable < 16 * GIB  # the board's 16 GB less the driver's
    assert one.text() == (
        f"does not fit: needs {one.fit.need_bytes / GIB:.1f} GiB per GPU, has {usable / GIB:.1f}"
    )
    assert (
        eight.text().endswith(f" of {usable / GIB:.1f} GiB") and "does not fit" not in eight.text()
    )
    assert "(up to " in eight.text()  # the upper estimate decides


def _untraceable(*_: Any) -> Any:
    raise ModuleNotFoundError("no module named 'elsewhere'")


def test_a_step_not_traceable_here_scales_its_activations_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(traces, "_trace", _untraceable)  # a module this process cannot import
    p = sized_probe(8, workload="elsewhere:build")
    got = device_memory.machine_memory(p, V100X8, FakeCatalog(), 8)
    assert got is not None and got.per_device_batch == 1 and "scaled" in got.memory.notes[-1]
    terms = {t.name: t.value for t in got.memory.terms}
    assert terms["parameters"] == REPLICA and terms["gradients"] == REPLICA
    assert terms["activations"] == pytest.approx(PER_SAMPLE)


def test_without_a_trace_the_memory_is_unknown_and_never_said_to_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from advisor.prediction.forecast.forecast import forecast_machine

    monkeypatch.setattr(traces, "_trace", _untraceable)
    bare = probe(batch=8, workload="elsewhere:build")
    row = forecast_machine(bare, V100, FakeCatalog(), 8, 5, 1000, 0, sweep_epochs=())
    assert row.memory is not None and row.memory.fits is None
    assert row.memory.text().startswith("memory unknown")
    assert not row.fits and row.memory_unknown  # issue #45: unknown never counts as fitting
    assert row.to_dict()["memory"]["need_gib"] is None


def test_the_largest_fitting_batch_is_found_from_one_traced_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue #45: the plan's step is traced once (at two micro-batches) and read at every
    batch: the search's batches cost no trace each."""
    from advisor.probes.operators import plan_peak

    calls: list[str] = []

    def counted(workload: str, *args: Any, **kw: Any) -> Any:
        calls.append(workload)
        return memory_fixtures.sized_lines(workload, *args, **kw)

    monkeypatch.setattr(plan_peak, "peak_lines", counted)
    store = Store()
    limit = device_memory.batch_limit(
        sized_probe(1), A100, FakeCatalog(), (1, 2, 4, 8, 16, 32, 64), store
    )
    assert limit == 8  # 8 GiB + 2.75 GiB a sample: batch 8 fits 40 GB (its upper estimate too)
    assert calls == [MODEL]
    assert device_memory.batch_limit(sized_probe(1), V100, FakeCatalog(), (8, 16), store) is None


# -- advisor predict: the Python API and the CLI ----------------------------------------------


def _predict() -> Any:
    import advisor

    remember(1)  # the 8-GPU machine's step at one sample per device
    return advisor.predict(
        MODEL, 8, machines=[A100, V100, V100X8], catalog=FakeCatalog(), probe=sized_probe(8),
        epochs=5,
    )  # fmt: skip


def test_predict_api_never_names_a_row_that_does_not_fit() -> None:
    result = _predict()
    by_key = {f.machine.key: f for f in result.rows}
    assert by_key[V100.key].fits is False and by_key[A100.key].fits is by_key[V100X8.key].fits
    assert result.cheapest is not None and result.cheapest.machine.key != V100.key
    assert result.fastest is not None and result.fastest.machine.key != V100.key
    assert result.rows[-1].machine.key == V100.key  # ranked after every row that fits
    doc = result.to_dict()
    assert doc["left_out"] == {"does not fit": [V100.key], "memory unknown": []}
    assert V100.key not in doc["normalised"]["cost"]
    rows = {r["machine"]: r for r in doc["machines"]}
    assert rows[V100.key]["fits"] is False and rows[V100.key]["memory"]["fits"] is False
    assert rows[V100.key]["memory"]["text"].startswith("does not fit: needs")
    usable = device_memory.capacity_bytes(A100, FakeCatalog())
    assert usable is not None
    assert rows[A100.key]["memory"]["text"].endswith(f"of {usable / GIB:.1f} GiB")
    assert rows[A100.key]["memory"]["per_device_batch"] == 8
    assert rows[V100X8.key]["memory"]["per_device_batch"] == 1
    assert any(n.startswith("Does not fit: 1 of 3") for n in doc["notes"])


def test_predict_cli_shows_the_memory_and_leaves_the_row_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from advisor.cli.main import cli

    machines = {m.key: m for m in (A100, V100, V100X8)}
    monkeypatch.setattr(
        "advisor.cli.predict._machines",
        lambda names, snapshot, filters: (FakeCatalog(), [machines[n] for n in names.split(",")]),
    )
    path = tmp_path / "probe.json"
    path.write_text(sized_probe(8).to_json())
    remember(1)
    args = ["predict", "--model", MODEL, "--batch-size", "8", "--epochs", "5", "--probe",
            str(path), "--instances", ",".join(machines)]  # fmt: skip
    shown = CliRunner().invoke(cli, [*args], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    usable = device_memory.capacity_bytes(A100, FakeCatalog())
    assert usable is not None
    assert "does not fit: needs" in shown.output and f"of {usable / GIB:.1f} GiB" in shown.output
    cheapest = next(line for line in shown.output.splitlines() if "Cheapest:" in line)
    assert V100.key not in cheapest
    doc = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)
    assert doc["cheapest"] != V100.key and doc["left_out"]["does not fit"] == [V100.key]


def test_predict_says_when_no_machine_fits() -> None:
    import advisor

    result = advisor.predict(
        MODEL, 8, machines=[V100], catalog=FakeCatalog(), probe=sized_probe(8), epochs=5
    )
    assert result.fastest is None and result.cheapest is None
    doc = result.to_dict()
    assert doc["fastest"] is None and doc["cheapest"] is None
    assert any(n.startswith("Does not fit: none of the 1") for n in doc["notes"])


# -- advisor suggest: the scorer, the trial loop and the report -------------------------------


def _suggest(tmp_path: Path, **fields: Any) -> tuple[dict[str, Any], str]:
    """``advisor.suggest`` over a T4, an L4 and an H100 at batch 8 and 64, with the real
    scorer (``LocalBackend``: screen, performance model, memory) on fake local probes."""
    from advisor.search_spaces.loader import load_space

    import advisor
    from advisor.evaluation.local import LocalBackend

    url = f"sqlite:///{tmp_path / 'study.db'}"
    remember(8, 64)  # steps at other batches come from here, never traced for real
    space = load_space(
        f"workload: {MODEL}\nbatch_sizes: [8, 64]\nmachines:\n  instance_types: "
        "[ec2:g4dn.xlarge, ec2:g6.xlarge, ec2:p5.4xlarge]\n",
        MODEL,
    )
    backend = LocalBackend(url, run_probe=lambda r: sized_probe(r.batch_size, t2=2.0))
    report = advisor.suggest(
        model=MODEL, space=space, n_train=1000, n_val=100, budget_usd=1e6, local=False,
        storage=url, backend=backend, **fields,
    )  # fmt: skip
    return report, url


FITTING = {("ec2:p5.4xlarge", 8)}  # 8 GiB + 2.75 GiB a sample: only the H100, only batch 8
# Issue #35: the plain plan pinned (the whole batch in one pass), as before plans were searched
PLAIN = "accumulation=1,checkpointing=none,sharding=none"


@pytest.mark.slow  # about 5 s: a study of 6 candidates x 2 batch sizes, the kernel model
def test_suggest_never_recommends_tries_or_charges_a_row_that_does_not_fit(
    tmp_path: Path,
) -> None:
    import optuna

    from advisor.records import TrialRecord

    report, url = _suggest(tmp_path, plan=PLAIN)
    rec = report["recommended"]
    assert (rec["machine"].removesuffix(":spot"), rec["batch_size"]) in FITTING
    from advisor.providers.catalog import load

    from advisor.prediction.memory.priors import usable_gib

    h100 = usable_gib(load().accelerator("H100"))[0]  # the board's 80 GB less the driver's
    assert rec["memory"].endswith(f"of {h100:.1f} GiB")
    for row in report["ranking"]:
        assert (row["machine"].removesuffix(":spot"), row["batch_size"]) in FITTING
    out = {tuple(p.rsplit(" b", 1)) for p in report["memory_left_out"]["pairs"]}
    assert {(m.removesuffix(":spot"), int(b)) for m, b in out} == {
        ("ec2:g4dn.xlarge", 8), ("ec2:g4dn.xlarge", 64), ("ec2:g6.xlarge", 8),
        ("ec2:g6.xlarge", 64), ("ec2:p5.4xlarge", 64),
    }  # fmt: skip
    assert any(n.startswith("Does not fit: ") for n in report["notes"])
    study = optuna.load_study(study_name=report["study"], storage=url)
    assert study.trials  # ... and every one of them on a pair that fits
    for t in study.get_trials(deepcopy=False):
        record = TrialRecord.from_trial(t)
        assert record is not None
        assert (record.machine.removesuffix(":spot"), record.batch_size) in FITTING, record
    assert report["probes"]["spent_usd"] == 0.0


@pytest.mark.slow  # about 6 s: as above, with a cloud probe step
def test_cloud_probes_never_run_on_a_row_that_does_not_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    import advisor.remote.cloud_prober as prober_mod

    calls: list[tuple[str, int]] = []

    def prober(machine: Any, batch: int, local: ProbeResult, status: Any) -> Any:
        calls.append((machine.key, batch))
        status("running")
        job = {"job_id": f"probe-{len(calls)}", "service": "sagemaker", "state": "completed",
               "wall_s": 160.0, "billed_s": 70.0, "billed_source": "test",
               "price_per_hour": machine.price(False), "cost_usd": 0.01, "error": None}  # fmt: skip
        return types.SimpleNamespace(
            machine=machine.key, result=sized_probe(batch, t2=0.05), job=job, cached=False,
            emulated=False,
        )  # fmt: skip

    monkeypatch.setattr(prober_mod, "default_prober", lambda outcome, backend: prober)
    report, _ = _suggest(tmp_path, cloud_probes=3, spot=False, plan=PLAIN)
    assert calls == [("ec2:p5.4xlarge", 8)]  # asked for 3: the only one that fits
    assert report["cloud_probes"]["stop_reason"] == "no cloud machine left to probe"


def test_the_host_ram_check_reads_the_same_memory_model() -> None:
    from advisor.probes.operators import local_feasibility

    from advisor.evaluation.untimed import host_memory_bytes
    from advisor.prediction.memory.model import host_terms

    trace = sized(8)
    tensors = step_memory(trace, device="cpu").bytes
    need = host_memory_bytes(trace)  # the tensors, the probe's process and its heap (stop 65)
    assert need == tensors + sum(t.value for t in host_terms(tensors)) > 1.5 * tensors
    verdict = local_feasibility(
        trace, memory_bytes=need, available_bytes=int(2 * need), cpu_flops_per_s=1e12
    )
    assert verdict.memory_bytes == int(need) and verdict.feasible
    small = local_feasibility(
        trace, memory_bytes=need, available_bytes=int(need), cpu_flops_per_s=1e12
    )
    assert not small.feasible and "a probe of the step holds about" in small.reason


def test_each_machine_type_has_its_own_batch_limit() -> None:
    from perf_fixtures import cpu_machine

    from advisor.evaluation.memory_checks import BatchLimits

    # RAM at the upper estimate (the tensors, the process and its heap's holes, measured:
    # ``priors.host_terms``): 21 GiB at batch 1, 58 GiB at batch 8
    small = dataclasses.replace(cpu_machine("m.small", 4), memory_gib=32.0)
    large = dataclasses.replace(cpu_machine("m.large", 16), memory_gib=64.0)
    limits, store = BatchLimits(), Store()
    limits.set_batches((1, 8))
    assert limits.beyond(sized_probe(8), large, FakeCatalog(), 8, store) is None  # limit 8
    over = limits.beyond(sized_probe(8), small, FakeCatalog(), 8, store)  # its own limit: 1
    assert over is not None and over[1] == 8 and over[0].text().endswith("of RAM, has 32.0")
    assert limits.beyond(sized_probe(1), small, FakeCatalog(), 1, store) is None


def test_a_cpu_machines_ram_holds_the_process_and_its_heaps_holes_beside_the_tensors() -> None:
    """Issue #45 (stop 65): advisor.train keeps freed memory in glibc's heap, and the resident
    memory grew by 1.42-1.93x the step's tensors (benchmarks/host_heap.py); the process itself
    held 321-594 MiB before its first step. A CPU row counts both, so a machine whose RAM holds
    the tensors but not the heap's holes does not fit at the upper estimate."""
    from perf_fixtures import cpu_machine

    from advisor.prediction.memory.priors import HEAP_EXTRA, PROCESS_BASE_MIB

    tensors = 2 * REPLICA + PER_SAMPLE  # batch 1: 10.75 GiB
    mib = 2.0**20
    roomy = dataclasses.replace(cpu_machine("m.roomy", 4), memory_gib=16.0)
    got = device_memory.machine_memory(sized_probe(1), roomy, FakeCatalog(), 1, Store())
    assert got is not None and got.device == "cpu"
    terms = {t.name: t for t in got.memory.terms}
    assert terms["heap_retention"].value == pytest.approx(HEAP_EXTRA[0] * tensors)
    assert terms["process_base"].high == PROCESS_BASE_MIB[2] * mib
    assert got.memory.high == pytest.approx(
        tensors * (1 + HEAP_EXTRA[2]) + PROCESS_BASE_MIB[2] * mib
    )
    assert tensors < 16 * GIB < got.memory.high  # the tensors fit, the run may not
    assert got.fits is False
