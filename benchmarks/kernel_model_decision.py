"""The decision, not only the error: does the kernel model pick the measured fastest and
cheapest GPU, and what does choosing by it cost (issue #26)?

Groups: the ``models-e2e.csv`` rows of one model, batch and mode across GPUs (at least two
GPUs), and the 1-GPU ResNet-50 rows of the Lambda table (one group). Fastest: the lowest
predicted step time (or highest images/s) against the measured one; the file's NeuSight and
roofline figures are scored the same way on the rows where they exist. Cheapest: each GPU
priced per hour as the catalog's cheapest on-demand one-GPU machine with it (``PRICE_AS``
for the measured boards the catalog does not sell; GPUs with no such machine are left out);
regret = the measured cost of the model's pick minus the measured cost of the cheapest,
per 1,000 steps (or per million images), and as a share of the cheapest cost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Measured boards the catalog does not sell -> the catalog GPU whose price they take.
PRICE_AS = {"V100-PCIe-32GB": "V100-PCIe", "A100-40GB-PCIe": "A100-40GB"}


def one_gpu_prices(snapshot: str = "2026-11") -> dict[str, tuple[float, str]]:
    """USD per hour of the cheapest on-demand one-GPU machine per accelerator, and its key."""
    from advisor.providers.catalog import load

    best: dict[str, tuple[float, str]] = {}
    for inst in load(snapshot).instances:
        if inst.accelerator and inst.accelerator_count == 1:
            price = (inst.on_demand_usd_per_h, inst.key)
            best[inst.accelerator] = min(best.get(inst.accelerator, price), price)
    return best


def price_of(gpu: str, prices: dict[str, tuple[float, str]]) -> tuple[float, str] | None:
    return prices.get(PRICE_AS.get(gpu, gpu))


@dataclass(frozen=True)
class Choice:
    """One group's candidates: per GPU the measured and predicted seconds (lower is better)."""

    group: str
    measured: dict[str, float]
    predicted: dict[str, float]


@dataclass(frozen=True)
class DecisionScore:
    groups: int
    fastest_right: int
    cheapest_groups: int
    cheapest_right: int
    regret_usd: float  # summed over groups, per `unit`
    regret_share: float  # median over groups of regret / optimum cost
    unit: str
    cost_pairs: int = 0  # GPU pairs within priced groups
    cost_pairs_right: int = 0  # ... ordered by cost as measured


def score(
    choices: Sequence[Choice], prices: dict[str, tuple[float, str]], unit_steps: float, unit: str
) -> DecisionScore:
    """How often the predicted fastest/cheapest is the measured one, and the dollar regret."""
    fastest = sum(
        min(c.predicted, key=c.predicted.__getitem__) == min(c.measured, key=c.measured.__getitem__)
        for c in choices
    )
    right, regrets, shares, priced, pairs, pairs_right = 0, [], [], 0, 0, 0
    for c in choices:
        cost = {g: p[0] for g in c.measured if (p := price_of(g, prices))}
        if len(cost) < 2:
            continue
        priced += 1
        measured_cost = {g: c.measured[g] * cost[g] / 3600 for g in cost}
        predicted_cost = {g: c.predicted[g] * cost[g] / 3600 for g in cost}
        pick = min(predicted_cost, key=predicted_cost.__getitem__)
        best = min(measured_cost, key=measured_cost.__getitem__)
        right += pick == best
        gpus = sorted(cost)
        for i, a in enumerate(gpus):
            for b in gpus[i + 1 :]:
                pairs += 1
                pairs_right += (predicted_cost[a] < predicted_cost[b]) == (
                    measured_cost[a] < measured_cost[b]
                )
        regrets.append((measured_cost[pick] - measured_cost[best]) * unit_steps)
        shares.append(measured_cost[pick] / measured_cost[best] - 1)
    shares.sort()
    return DecisionScore(
        len(choices), int(fastest), priced, right, sum(regrets),
        shares[len(shares) // 2] if shares else 0.0, unit, pairs, pairs_right,
    )  # fmt: skip


def e2e_choices(predictions: Sequence[Any], figure: Callable[[Any], float | None]) -> list[Choice]:
    """Groups of e2e predictions (``kernel_model_e2e.E2EPrediction``) by model, batch and mode,
    with ``figure`` the predicted seconds to score (ours, or the file's NeuSight/roofline)."""
    groups: dict[tuple[str, int, str], list[Any]] = defaultdict(list)
    for p in predictions:
        groups[(p.row.model, p.row.batch, p.row.mode)].append(p)
    out = []
    for (model, batch, mode), ps in sorted(groups.items()):
        have = [p for p in ps if figure(p) is not None]
        if len(have) >= 2:
            out.append(
                Choice(
                    f"{model} b{batch} {mode}",
                    {p.row.gpu: p.row.measured_ms / 1e3 for p in have},
                    {p.row.gpu: float(figure(p)) / 1e3 for p in have},  # type: ignore[arg-type]
                )
            )
    return out


def resnet_choice(rows: Sequence[Any]) -> list[Choice]:
    """The ResNet-50 rows as one group: seconds per image, measured and predicted (the
    benchmark's workstation boards and duplicate rows of one GPU kept once, the first)."""
    seen: dict[str, Any] = {}
    for r in rows:
        seen.setdefault(r.gpu, r)
    return [
        Choice(
            "resnet50 (Lambda, 1 GPU)",
            {g: 1 / r.measured for g, r in seen.items()},
            {g: 1 / r.predicted for g, r in seen.items()},
        )
    ]
