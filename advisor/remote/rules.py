"""What ``advisor suggest --cloud-probes`` decides with (issue #14; the step itself is
``advisor.remote.cloud_probes``): the study's record of probe jobs and their spend, the ranking, which
machine to probe next, what its probe may cost, and whether the measured leader stands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.evaluation.contract import Evaluation
from advisor.evaluation.ranking import Point, rank
from advisor.options import is_feasible
from advisor.providers.catalog import MachineKey
from advisor.providers.pricing import BillingRule, usd

if TYPE_CHECKING:
    from advisor.outcome import SuggestOutcome
    from advisor.providers.catalog import InstanceType

STUDY_ATTR = "cloud_probes"  # the study's record: {"jobs": [one dict per probe job]}
Config = tuple[str, int]


# -- the study's record (read by advisor.study.state) ---------------------------------------


def recorded_jobs(user_attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """The probe jobs a study has recorded (any earlier run)."""
    value = user_attrs.get(STUDY_ATTR) or {}
    jobs = value.get("jobs") if isinstance(value, dict) else None
    return [j for j in jobs or [] if isinstance(j, dict)]


def recorded_spend(user_attrs: dict[str, Any]) -> tuple[float, set[Config]]:
    """What a study's cloud probes cost (USD, charged once) and the (machine, batch) pairs
    they measured: a trial there pays no probe again."""
    jobs = recorded_jobs(user_attrs)
    spent = sum(float(j.get("charged_usd") or 0.0) for j in jobs)
    measured = {(str(j["machine"]), int(j["batch_size"])) for j in jobs if j.get("measured")}
    return spent, measured


# -- choosing ---------------------------------------------------------------------------------


def accelerator_type(instance: InstanceType) -> str:
    """The accelerator a machine is "of" for the variety rule (``cpu`` without one)."""
    return (instance.accelerator or "cpu").lower()


def ranked(outcome: SuggestOutcome) -> list[Evaluation]:
    """The screened candidates that finished, best first by the report's rule."""
    evs = [ev for ev in outcome.screen.values() if isinstance(ev, Evaluation)]
    points = [
        Point(ev.runtime.value, ev.cost.value, is_feasible(outcome.options, ev), ev)
        for ev in sorted(evs, key=lambda e: (e.machine, e.batch_size))
    ]
    return [p.ref for p in rank(points, outcome.objective)]


def next_machine(
    order: list[Evaluation],
    instances: dict[str, InstanceType],
    exclude: set[str],
    types_done: set[str],
) -> Evaluation | None:
    """The best-ranked candidate on a cloud machine not in ``exclude`` (instance keys), a
    machine of an accelerator type not in ``types_done`` first; None when none is left.
    Only machines with at most one accelerator: a probe times one device at the full batch,
    so it measures a one-device machine; a multi-device machine's run stays modelled, corrected
    for its device class by the ledger entry the one-device measurement writes."""
    fallback = None
    for ev in order:
        inst = instances[MachineKey(ev.machine).base]
        if inst.provider == "local" or inst.key in exclude or inst.accelerator_count > 1:
            continue
        if accelerator_type(inst) not in types_done:
            return ev
        fallback = fallback or ev
    return fallback


def expected_cost(ev: Evaluation, instance: InstanceType) -> float:
    """USD a probe job of ``ev`` may cost: its predicted probe time plus the service's billed
    start-up (upper bound of the prior), billing rule applied, at the on-demand price."""
    from advisor.intervals import Interval
    from advisor.providers.overheads import run_overheads

    try:
        billed = run_overheads(instance).billed_run(Interval.exact(ev.probe_s)).high
    except AdvisorError:  # a service without overhead figures: the probe's own time
        billed = ev.probe_s
    return usd(billed, instance.price(False))


def _objective_value(objective: str, ev: Evaluation, optimistic: bool) -> float:
    assert ev.runtime is not None and ev.cost is not None
    iv = ev.cost if objective == "cost" else ev.runtime
    if not optimistic:
        return iv.value
    over = ev.estimate.get("overheads") or {}
    if not over.get("training_s"):
        return iv.low
    # Issue #14: the start-up is a per-service prior that no probe measures (its error is
    # shared by every machine of the service), so a rival's optimistic bound takes the
    # training's low end with the start-up at its expected value.
    train_low = float(over["training_s"]["low"])
    terms = over.get("terms") or []
    if objective != "cost":
        return sum(float(t["seconds"]["value"]) for t in terms) + train_low
    b = over["billing"]
    rule = BillingRule(float(b["increment_s"]), float(b["minimum_s"]), str(b["source"]))
    billed = sum(float(t["seconds"]["value"]) for t in terms if t["billed"]) + train_low
    return usd(rule.billed(billed), ev.price_per_hour)


def leader_stands(
    objective: str, options: Any, measured: list[Evaluation], unprobed: list[Evaluation]
) -> tuple[Evaluation | None, bool]:
    """The measured leader (best feasible measured candidate; None without one) and whether
    no unprobed candidate can overtake it: each one's optimistic bound (interval low end,
    optimistically feasible) is worse than the leader's value; for a Pareto search each
    one's low-end point is dominated by (or equal to) a measured point."""
    best = [e for e in measured if e.ok and is_feasible(options, e)]
    if not best:
        return None, False
    rivals = [e for e in unprobed if e.ok and is_feasible(options, e, optimistic=True)]
    if objective == "pareto":
        pts = [(e.runtime.value, e.cost.value) for e in best]
        leader = min(best, key=lambda e: e.runtime.value * e.cost.value)

        def beaten(e: Evaluation) -> bool:
            lo = (_objective_value("time", e, True), _objective_value("cost", e, True))
            return any(p[0] <= lo[0] and p[1] <= lo[1] for p in pts)

        return leader, all(beaten(e) for e in rivals)
    leader = min(best, key=lambda e: _objective_value(objective, e, False))
    value = _objective_value(objective, leader, False)
    return leader, all(_objective_value(objective, e, True) > value for e in rivals)
