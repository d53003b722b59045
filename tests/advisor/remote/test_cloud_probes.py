"""`advisor suggest --cloud-probes N` (issue #14): which machines are probed for real, the
budget, the early stop, failures and unconfigured providers, and what the report shows.

The local probes are fakes with fixed timings (a traced fingerprint: no torch) and the remote
probe is a fake prober returning what a job would (an ``advisor.remote.cache.RemoteProbe``);
the screen, the performance model, the re-screen, the
trial loop, the budget accounting and the report are the real ones. The end-to-end run
through the real job command (the local emulation) is in test_cloud_probes_cli.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from advisor.probes.result import ProbeRequest, ProbeResult
from advisor.providers.pricing import usd
from advisor.providers.probe_jobs import JobPoll, ProbeJobRunner, ProbeJobSpec
from advisor.search_spaces.loader import default_space
from advisor.search_spaces.space import MachineFilter
from perf_fixtures import with_stream_trace

import advisor.remote.cloud_prober as prober_mod
import advisor.remote.rules as rules
from advisor.errors import AdvisorError
from advisor.evaluation.contract import Evaluation
from advisor.evaluation.local import LocalBackend
from advisor.intervals import Interval
from advisor.options import SuggestOptions
from advisor.remote.cache import RemoteProbe
from advisor.report.build import build_report
from advisor.study.run import run_suggest

# issue #26: a probe made ready for prediction (its operator trace and loader time), so
# no trace is taken here (no torch import)
TRACE = {"data_s": 0.004}
MACHINES = (  # two A10G boxes, a T4, an L4 on AWS and an L4 on GCP
    "ec2:g5.xlarge",
    "ec2:g5.2xlarge",
    "ec2:g4dn.xlarge",
    "ec2:g6.xlarge",
    "compute-engine:g2-standard-4",
)


def probe_result(batch: int, step_s: float, status: str = "ok") -> ProbeResult:
    """A probe at ``batch`` whose steady iterations take ``step_s`` (plus a slower first),
    carrying a memory-bound operator trace (issue #26: GPUs are predicted from it, and rank
    by memory bandwidth: the A10G, then the T4, then the L4)."""
    ok = status == "ok"
    return with_stream_trace(
        ProbeResult(
            workload="fcn",
            framework="torch",
            batch_size=batch,
            device="cpu",
            threads=1,
            init_s=1.0 if ok else 0.0,
            iteration_s=(step_s * 5, *([step_s] * 7)) if ok else (),
            validation_s=(0.2, 0.1) if ok else (),
            validation_samples_measured=212,
            n_train=40_512,
            n_val=212,
            wall_s=3.0,
            fingerprint=dict(TRACE),
            status=status,  # type: ignore[arg-type]
            error=None if ok else "CUDA out of memory",
        )
    )


def local_probe(request: ProbeRequest) -> ProbeResult:
    return probe_result(request.batch_size, 0.1 * request.batch_size / 256)


@dataclass
class FakeProber:
    """Answers each remote probe with ``step_s[machine]`` seconds a step (a failed probe
    with ``status`` for machines in ``fail``), billed ``billed_s`` at the machine's price;
    raises the unconfigured provider's one-line error for providers in ``unconfigured``."""

    step_s: dict[str, float] = field(default_factory=dict)
    fail: dict[str, str] = field(default_factory=dict)
    unconfigured: tuple[str, ...] = ()
    billed_s: float = 70.0
    calls: list[tuple[str, int]] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)

    def __call__(self, machine: Any, batch: int, local: ProbeResult, status: Any) -> RemoteProbe:
        assert local.batch_size == batch and local.ok  # the local probe of that batch
        if machine.provider in self.unconfigured:
            raise prober_mod.ProviderUnavailable(
                "No Vertex AI project configured.", "add vertex.project to ~/.advisor/cloud.yaml"
            )
        self.calls.append((machine.key, batch))
        status("running")
        self.statuses.append(machine.key)
        failed = self.fail.get(machine.key)
        result = probe_result(batch, self.step_s.get(machine.key, 0.02), failed or "ok")
        job = {
            "job_id": f"advisor-probe-{len(self.calls)}",
            "service": "sagemaker",
            "state": "completed",
            "wall_s": self.billed_s + 90.0,
            "billed_s": self.billed_s,
            "billed_source": "BillableTimeInSeconds",
            "price_per_hour": machine.price(False),
            "cost_usd": usd(self.billed_s, machine.price(False)),
            "error": None,
        }
        return RemoteProbe(machine.key, result, job, cached=False)


@pytest.fixture
def storage(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'studies.db'}"


def run(
    storage: str,
    prober: FakeProber,
    monkeypatch: pytest.MonkeyPatch,
    remote_lookup: Any = None,
    progress: Any = None,
    machines: tuple[str, ...] = MACHINES,
    **fields: Any,
) -> Any:
    space = dataclasses.replace(
        default_space("fcn"), machines=MachineFilter(instance_types=machines, spot=False)
    )
    monkeypatch.setattr(prober_mod, "default_prober", lambda outcome, backend: prober)
    backend = LocalBackend(storage, run_probe=local_probe, remote_lookup=remote_lookup)
    # the probe jobs measure a float32 step: these checks of which machine is probed, and
    # of the measured row, are of float32 rows (--precision auto reorders T4 and A10G)
    fields.setdefault("precision", "fp32")
    options = SuggestOptions(model="fcn", space=space, storage=storage, **fields)
    return run_suggest(options, backend, progress=progress)


def probed(outcome: Any) -> list[str]:
    return [j["machine"] for j in outcome.cloud_probes]


# -- which machines --------------------------------------------------------------------------


def test_distinct_accelerator_types_first_and_the_local_machine_never(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    prober = FakeProber()
    o = run(storage, prober, monkeypatch, budget_usd=5, cloud_probes=4)
    # The screen's first tie band (issue #36: it ends in the front's widest gap) holds the
    # T4, the GCP L4 and both A10G boxes at batch 1024; the cheapest, the T4, leads. One of
    # each type comes before the second A10G box, each at its best batch size.
    order = rules.ranked(o)  # the ranking after the measurements
    assert probed(o)[:3] == ["ec2:g4dn.xlarge", "ec2:g5.xlarge", "compute-engine:g2-standard-4"]
    assert len({m for m in probed(o)}) == 4 and "local:local" not in probed(o)
    assert probed(o)[3] in ("ec2:g5.2xlarge", "ec2:g6.xlarge")
    assert all(b == 1024 for _, b in prober.calls)  # fcn's best batch on these GPUs
    assert o.cloud["stop_reason"] == "probed 4 machine(s)"
    # Each measured machine is re-screened: the measured batch from the measured phases.
    for machine, batch in prober.calls:
        ev = o.screen[(machine, batch)]
        assert ev.source == "measured (remote probe)"
        assert ev.phases is not None and ev.phases.t2.value == pytest.approx(0.02)
        assert ev.estimate["remote_probe"]["job_id"].startswith("advisor-probe-")
    assert order[0].source == "measured (remote probe)"  # a measured machine now leads
    report = build_report(o)  # each measured (machine, batch) with its place in the ranking
    placed = {(r["machine"], r["batch_size"]): r["rank"] for r in report["measured_elsewhere"]}
    assert set(placed) == set(prober.calls)
    ranking = [(r["machine"], r["batch_size"]) for r in report["ranking"]]
    assert all(ranking[rank - 1] == pair for pair, rank in placed.items() if rank <= len(ranking))


def test_already_measured_machines_are_used_not_probed_again(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = RemoteProbe(
        "ec2:g5.xlarge", probe_result(1024, 0.03), {"job_id": "old", "cost_usd": 0.02}, True
    )

    def lookup(workload: Any, machine: Any, batch: int, hps: dict[str, Any]) -> Any:
        return cached if (machine.key, batch) == ("ec2:g5.xlarge", 1024) else None

    prober = FakeProber()
    o = run(storage, prober, monkeypatch, lookup, budget_usd=5, cloud_probes=2)
    assert "ec2:g5.xlarge" not in probed(o)
    assert probed(o) == ["ec2:g4dn.xlarge", "compute-engine:g2-standard-4"]  # new types first
    assert o.screen[("ec2:g5.xlarge", 1024)].source == "measured (remote probe)"


def test_rerun_of_the_same_command_probes_nothing_new_and_charges_once(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run(storage, FakeProber(), monkeypatch, budget_usd=5, cloud_probes=2)
    again = FakeProber()
    second = run(storage, again, monkeypatch, budget_usd=5, cloud_probes=2)
    assert len(probed(first)) == 2 and again.calls == [] and second.cloud["new"] == 0
    assert probed(second) == probed(first)  # the study's jobs, reported again
    assert "already probed 2" in second.cloud["stop_reason"]
    assert second.cloud["spent_usd"] == first.cloud["spent_usd"] > 0
    assert second.probe_spent_usd == pytest.approx(first.probe_spent_usd)


# -- budget -------------------------------------------------------------------------------


def test_a_probe_that_does_not_fit_is_skipped_and_the_total_stays_within_the_budget(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.providers.catalog import load

    cat = {i.key: i for i in load(None).instances}
    g5 = cat["ec2:g5.xlarge"]
    prober = FakeProber(billed_s=70.0)
    # Enough for a cheaper machine's probe (start-up allowance included), not for the A10G's,
    # whose job runs on SageMaker at ml.g5.xlarge's price and start-up (USD 1.408/h, not
    # EC2's 1.006 with a VM's boot and image pull).
    space = default_space("fcn")
    budget = 0.05
    o = run(storage, prober, monkeypatch, budget_usd=5, probe_budget_usd=budget, cloud_probes=3)
    jobs = {j["machine"]: j for j in o.cloud_probes}
    assert jobs and "ec2:g5.xlarge" not in jobs
    job_row = cat["sagemaker:ml.g5.xlarge"]
    expected_g5 = rules.expected_cost(o.screen[("ec2:g5.xlarge", 1024)], job_row)
    vm_row = rules.expected_cost(o.screen[("ec2:g5.xlarge", 1024)], g5)
    assert expected_g5 > budget and f"{expected_g5:.4f}" != f"{vm_row:.4f}"
    # the skip names what the job would cost where it runs: SageMaker's row, not the VM's
    assert any(
        s.startswith("cloud probe of ec2:g5.xlarge b1024 skipped for the budget")
        and f"it may cost USD {expected_g5:.4f}" in s
        for s in o.cloud["skipped"]
    )
    # Charged at the billed time x the machine's price (what the job reports), once.
    for machine, job in jobs.items():
        assert job["charged_usd"] == pytest.approx(usd(70.0, cat[machine].on_demand_usd_per_h))
    spent = sum(j["charged_usd"] for j in jobs.values())
    assert o.cloud["spent_usd"] == pytest.approx(spent, abs=1e-6)
    # Issue #27: the trials charged nothing (modelled, or measured by those jobs): the probe
    # budget's spend is the jobs' billed cost alone, within --probe-budget.
    assert o.probe_spent_usd == pytest.approx(o.cloud["spent_usd"], abs=1e-6)
    assert 0 < o.probe_spent_usd <= budget + 1e-9
    assert space.batch_sizes  # the default space is the one the run used (sanity)


# -- early stop ---------------------------------------------------------------------------


def _ev(machine: str, runtime: float, low: float, cost: float = 0.01) -> Evaluation:
    return Evaluation(
        machine=machine,
        batch_size=512,
        runtime=Interval(runtime, low, runtime * 2),
        cost=Interval(cost, cost * 0.5, cost * 2),
        source="modelled",
        epochs=10,
        price_per_hour=1.0,
        spot=False,
        probe_s=5.0,
    )


def test_leader_stands_only_when_every_optimistic_bound_is_worse() -> None:
    options = SuggestOptions(model="fcn", budget_usd=5)
    leader = _ev("ec2:g5.xlarge", 10.0, 9.0)
    rivals = [_ev("ec2:g6.xlarge", 30.0, 12.0, 0.05), _ev("ec2:g4dn.xlarge", 40.0, 15.0, 0.05)]
    assert rules.leader_stands("time", options, [leader], rivals) == (leader, True)
    # One rival whose interval reaches below the leader: it could still win -> go on.
    rivals.append(_ev("ec2:g5.2xlarge", 20.0, 8.0))
    assert rules.leader_stands("time", options, [leader], rivals) == (leader, False)
    # No measured feasible candidate: nothing to stand on.
    over = _ev("ec2:g5.xlarge", 10.0, 9.0, cost=50.0)
    assert rules.leader_stands("time", options, [over], rivals[:2]) == (None, False)
    # Pareto: stands when each rival's low-end point is dominated by a measured point.
    assert rules.leader_stands("pareto", options, [leader], rivals[:2])[1] is True
    assert rules.leader_stands("pareto", options, [leader], rivals)[1] is False


def test_stops_early_when_the_measured_leader_cannot_be_overtaken(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The T4 (probed first) measures far faster than modelled: no other machine's optimistic
    # bound reaches it.
    prober = FakeProber(step_s={"ec2:g4dn.xlarge": 1e-5})
    o = run(storage, prober, monkeypatch, budget_usd=5, cloud_probes=3)
    assert probed(o) == ["ec2:g4dn.xlarge"]
    assert o.cloud["stop_reason"].startswith("the measured leader ec2:g4dn.xlarge b1024 cannot")
    # Measured slower than modelled: the others may still win, all three are probed.
    slow = FakeProber(step_s={"ec2:g4dn.xlarge": 0.05})
    o2 = run(storage.replace("studies.db", "b.db"), slow, monkeypatch, budget_usd=5, cloud_probes=3)
    assert len(probed(o2)) == 3 and o2.cloud["stop_reason"] == "probed 3 machine(s)"
    job = o2.cloud_probes[0]
    assert job["measured_step_s"] == pytest.approx(0.05)
    assert job["ratio"] == pytest.approx(0.05 / job["predicted_step_s"])


# -- failures ------------------------------------------------------------------------------


def test_a_failed_probe_is_recorded_and_the_next_machine_probed(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    prober = FakeProber(fail={"ec2:g4dn.xlarge": "oom"})
    o = run(storage, prober, monkeypatch, budget_usd=5, cloud_probes=2)
    first, second = o.cloud_probes
    assert first["machine"] == "ec2:g4dn.xlarge" and first["state"] == "completed, probe oom"
    assert first["measured"] is False and first["error"] == "CUDA out of memory"
    assert second["machine"] == "compute-engine:g2-standard-4" and second["measured"] is True
    # Out of memory on that machine at that batch: the screen says so (never recommended),
    # its other batch sizes stay modelled; the job was still paid for.
    failed = o.screen[("ec2:g4dn.xlarge", 1024)]
    assert failed.status == "failed" and failed.source == "measured (remote probe)"
    assert failed.error == "remote probe oom on ec2:g4dn.xlarge: CUDA out of memory"
    assert o.screen[("ec2:g4dn.xlarge", 512)].ok
    assert o.screen[("ec2:g4dn.xlarge", 512)].source == "modelled"
    assert first["charged_usd"] > 0
    report = build_report(o)
    assert ("ec2:g4dn.xlarge", 1024) not in {
        (r["machine"], r["batch_size"]) for r in report["ranking"]
    }
    assert report["probe_failures"] == []  # this machine's probes did not fail


def test_unconfigured_provider_is_one_line_and_the_rest_carries_on_modelled(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    prober = FakeProber(unconfigured=("gcp",))
    o = run(storage, prober, monkeypatch, budget_usd=5, cloud_probes=3)
    lines = [s for s in o.cloud["skipped"] if "gcp" in s]
    assert lines == [
        "cloud probes skipped for gcp: No Vertex AI project configured (add vertex.project to "
        "~/.advisor/cloud.yaml); carrying on modelled"
    ]
    assert "compute-engine:g2-standard-4" not in probed(o) and len(probed(o)) == 3
    assert o.screen[("compute-engine:g2-standard-4", 1024)].source == "modelled"
    report = build_report(o)
    known = {(r["machine"], r["batch_size"]): r["known"] for r in report["ranking"]}
    assert known[("compute-engine:g2-standard-4", 1024)] == "model"
    assert known[("ec2:g5.xlarge", 1024)] == "probed"
    assert known[("local:local", 256)] == "here"
    assert report["cloud_probes"]["skipped"] == o.cloud["skipped"]


def test_options_refuse_a_negative_count() -> None:
    with pytest.raises(AdvisorError, match="--cloud-probes must be a whole number >= 0"):
        SuggestOptions(model="fcn", cloud_probes=-1)


# -- the ledger: a measurement corrects the next predictions ---------------------------------


class RecordedJobRunner(ProbeJobRunner):
    """A SageMaker-like probe job that ends at once: the result file holds the request's
    probe with ``step_s`` a steady step (what the job's container would write)."""

    name = "sagemaker"
    providers = ("aws",)

    def __init__(self, step_s: float) -> None:
        super().__init__(poll_s=0.0)
        self.step_s = step_s
        self.specs: list[ProbeJobSpec] = []

    def check(self) -> None:
        pass

    def _submit(self, spec: ProbeJobSpec) -> str:
        self.specs.append(spec)
        return f"job-{len(self.specs)}"

    def _poll(self, job_id: str) -> JobPoll:
        return JobPoll("completed", 100.0, 160.0, 200.0, 40.0, "BillableTimeInSeconds")

    def _fetch(self, job_id: str, spec: ProbeJobSpec) -> str | None:
        pieces = spec.command[spec.command.index("--request") + 1 :]
        request = ProbeRequest.from_json("".join(pieces))
        return probe_result(request.batch_size, self.step_s).to_json()

    def _stop(self, job_id: str) -> None:
        pass


def test_a_remote_measurement_corrects_the_next_predictions_through_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import advisor.remote.probe
    from advisor.remote.settings import CloudSettings

    real_prober = prober_mod.default_prober
    machines = (*MACHINES, "ec2:g4dn.2xlarge")  # a second T4 machine
    before = run(
        f"sqlite:///{tmp_path / 'a.db'}", FakeProber(), monkeypatch, machines=machines,
        budget_usd=5,
    )  # fmt: skip
    storage = f"sqlite:///{tmp_path / 'b.db'}"
    predicted = before.screen[("ec2:g4dn.xlarge", 1024)].phases.t2.value
    runner = RecordedJobRunner(step_s=3.0 * predicted)  # the T4 is 3x slower than modelled
    monkeypatch.setattr(advisor.remote.probe, "runner_for", lambda *a, **k: runner)
    monkeypatch.setattr(prober_mod, "default_prober", real_prober)
    # The real default prober and advisor.remote.probe (cache, ledger), a recorded job.
    space = dataclasses.replace(
        default_space("fcn"), machines=MachineFilter(instance_types=machines, spot=False)
    )
    backend = LocalBackend(storage, run_probe=local_probe, ledger_storage=storage)
    options = SuggestOptions(model="fcn", space=space, storage=storage, budget_usd=5,
                             precision="fp32")  # as run() (the probe jobs' float32 step)  # fmt: skip
    settings = CloudSettings(image="advisor:test")  # a job needs its image, nothing else here
    o = run_suggest(dataclasses.replace(options, cloud_probes=1, cloud_settings=settings), backend)
    assert [j["machine"] for j in o.cloud_probes] == ["ec2:g4dn.xlarge"], o.cloud
    assert len(runner.specs) == 1, [(j["state"], j.get("error")) for j in o.cloud["jobs"]]
    assert o.cloud_probes[0]["ratio"] == pytest.approx(3.0, rel=0.01), str(o.cloud_probes[0])
    assert o.cloud_probes[0]["billed_s"] == 40.0  # the job's own billed time, charged
    # The measured batch uses the measurement; the other batch sizes of that machine and the
    # other T4 machine (never probed) are corrected by the ledger in the re-screen.
    for key in (("ec2:g4dn.xlarge", 512), ("ec2:g4dn.2xlarge", 1024)):
        ratio = o.screen[key].phases.t2.value / before.screen[key].phases.t2.value
        assert ratio == pytest.approx(3.0, rel=0.05), key
        assert "Calibrated x3.00" in o.screen[key].phases.note
    assert o.screen[("ec2:g5.xlarge", 1024)].phases.t2.value == pytest.approx(
        before.screen[("ec2:g5.xlarge", 1024)].phases.t2.value
    )  # another device class: untouched
    # A second prediction, later and without --cloud-probes (another study), is corrected too.
    later_backend = LocalBackend(storage, run_probe=local_probe, ledger_storage=storage)
    later = run_suggest(dataclasses.replace(options, budget_usd=4), later_backend)
    ev = later.screen[("ec2:g4dn.2xlarge", 512)]
    assert ev.phases.t2.value / before.screen[("ec2:g4dn.2xlarge", 512)].phases.t2.value == (
        pytest.approx(3.0, rel=0.05)
    )


def test_each_remote_probe_shows_a_progress_line_with_machine_state_and_time(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.cli.suggest import progress_label

    seen: list[tuple[str, int, int]] = []
    run(storage, FakeProber(), monkeypatch, None, lambda *a: seen.append(a), budget_usd=5,
        cloud_probes=2)  # fmt: skip
    lines = [(progress_label(p, t), d, t) for p, d, t in seen if p.startswith("cloud")]
    assert ("ec2:g4dn.xlarge b1024: starting the probe job (0 s)", 0, 2) in lines
    assert ("ec2:g4dn.xlarge b1024: running (0 s)", 0, 2) in lines
    assert ("ec2:g5.xlarge b1024: completed (0 s)", 1, 2) in lines
    assert lines[-1] == ("cloud probes (up to 2 machines, each a managed job)", 2, 2)


def test_without_any_cloud_settings_each_provider_is_one_line_and_all_stays_modelled(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real prober (advisor.remote.probe's runners) with no cloud.yaml: no job starts."""
    space = dataclasses.replace(
        default_space("fcn"), machines=MachineFilter(instance_types=MACHINES, spot=False)
    )
    backend = LocalBackend(storage, run_probe=local_probe)
    options = SuggestOptions(
        model="fcn", space=space, storage=storage, budget_usd=5, cloud_probes=3
    )
    o = run_suggest(options, backend)
    assert o.cloud_probes == []
    lines = o.cloud["skipped"]
    assert [line.split(":")[0] for line in lines] == [
        "cloud probes skipped for aws",
        "cloud probes skipped for gcp",
    ]
    assert all(line.endswith("; carrying on modelled") and "\n" not in line for line in lines)
    assert o.cloud["stop_reason"] == "no cloud machine left to probe"
    assert {ev.source for ev in o.screen.values()} == {"modelled", "measured"}
    assert o.probe_spent_usd <= o.probe_budget_usd
    # issue #36: the default report says why none ran (before: "0 job(s)", why only in
    # --verbose)
    from rich.console import Console

    from advisor.report.summary import render_summary

    console = Console(record=True, width=2000)  # the line in full, unwrapped
    render_summary(build_report(o), console, 5)
    text = console.export_text()
    line = next(x for x in text.splitlines() if x.startswith("cloud probes (--cloud-probes 3)"))
    assert "none ran: cloud probes skipped for aws: " in line
    assert "cloud probes skipped for gcp: " in line and "no cloud machine left to probe" in line


def test_only_one_device_machines_are_probed_a_multi_gpu_leader_stays_modelled() -> None:
    from advisor.providers.catalog import load

    cat = {i.key: i for i in load(None).instances}
    four, one = cat["ec2:g5.12xlarge"], cat["ec2:g5.xlarge"]
    assert four.accelerator_count == 4 and one.accelerator_count == 1
    order = [_ev(four.key, 10.0, 5.0), _ev(one.key, 20.0, 10.0)]
    instances = {four.key: four, one.key: one}
    pick = rules.next_machine(order, instances, set(), set())
    assert pick is not None and pick.machine == one.key  # the 4-GPU leader is not probed
    assert rules.next_machine(order, instances, {one.key}, set()) is None
