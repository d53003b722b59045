"""Issue #37: renting against owning. When machines you own (``advisor hardware add``) are
candidates, the report says, for each, whether renting beats owning for this job and by how
much: the best rented row against the owned machine's best row, each where the report's
ranking puts it (so by the study's own objective and tie rule), with both runs' cost and
time; and how the owned machine's price is made (amortisation + energy, every input)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from advisor.durations import format_duration

OWNED = "owned"  # advisor.providers.owned.OWNED


def _run(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "machine": r["machine"],
        "batch_size": r["batch_size"],
        "runtime_s": r["runtime_s"]["value"],
        "cost_usd": r["cost_usd"]["value"],
        "price_per_hour": r.get("price_per_hour"),
    }


def section(ranking: Sequence[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """One entry per owned machine (None when none is a candidate); ``ranking``: every scored
    row in the report's order."""
    owned_names = list(dict.fromkeys(r["machine"] for r in ranking if r["provider"] == OWNED))
    if not owned_names:
        return None
    rented = next(
        (
            (i, r)
            for i, r in enumerate(ranking)
            if r["feasible"] and r["provider"] not in (OWNED, "local")
        ),
        None,
    )
    out = []
    for name in owned_names:
        i, own = next((i, r) for i, r in enumerate(ranking) if r["machine"] == name)
        entry: dict[str, Any] = {
            "machine": name,
            "price_formula": own.get("price_source"),
            "owned": _run(own),
            "owned_rank": i + 1,
            "owned_feasible": own["feasible"],
        }
        if rented is None:
            entry["verdict"] = "no rented machine fits the limits: owning is the only way here"
        else:
            j, rent = rented
            entry |= {"rented": _run(rent), "rented_rank": j + 1}
            entry["renting_wins"] = j < i or not own["feasible"]
            entry["verdict"] = _verdict(entry)
        out.append(entry)
    return out


def _usd(value: float) -> str:
    """USD with cents, or two significant digits below 10 cents (0.0031), as the summary."""
    return f"{value:.2g}" if 0 < abs(value) < 0.1 else f"{value:,.2f}"


def _verdict(e: dict[str, Any]) -> str:
    own, rent = e["owned"], e["rented"]
    dc = own["cost_usd"] - rent["cost_usd"]
    dt = own["runtime_s"] - rent["runtime_s"]
    share = abs(dc) / max(own["cost_usd"], rent["cost_usd"], 1e-12)
    money = f"USD {_usd(abs(dc))} ({share:.0%}) {'cheaper' if dc > 0 else 'dearer'}"
    time = f"{format_duration(abs(dt))} {'faster' if dt > 0 else 'slower'}"
    if e["renting_wins"]:
        head = f"renting beats owning for this job: {rent['machine']} is"
    else:
        head = f"owning beats renting for this job: {rent['machine']}, the best rented run, is"
    return (
        f"{head} {money} and {time} than {own['machine']} "
        f"(rank {e['rented_rank']} vs {e['owned_rank']})"
    )


def lines(report: dict[str, Any]) -> list[str]:
    """What the rendered report says of the machines you own."""
    out = []
    for e in report.get("owned") or []:
        own = e["owned"]
        out.append(
            f"Owned {e['machine']} (batch {own['batch_size']}): "
            f"{format_duration(own['runtime_s'])}, USD {_usd(own['cost_usd'])}; {e['verdict']}."
        )
        if e.get("price_formula"):
            out.append(f"  price: {e['price_formula']}.")
    return out
