"""Issue #14: the report's start-up section -- what each cloud service in the ranking pays
before training (provisioning, image pull or VM boot, data download) and how it bills, with
each term's status (documented or prior) and source, one note line per service.

The figures come from ``advisor.providers.overheads`` (the same terms the scorer priced each
run with, through ``advisor.providers.pricing.price_run``); nothing here prices anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisor.evaluation.workload import WorkloadInfo
    from advisor.providers.overheads import RunOverheads


def run_overheads_of(row: dict[str, Any], workload: WorkloadInfo) -> RunOverheads | None:
    """The start-up terms of a report row's machine (None when its service is unknown)."""
    from advisor.errors import AdvisorError
    from advisor.providers.overheads import overheads_for

    provider, service = row.get("provider"), row.get("service")
    if not provider or not service:
        return None
    try:
        return overheads_for(provider, service, workload.data_bytes, workload.data_basis)
    except AdvisorError:
        return None


def overheads_section(rows: list[dict[str, Any]], workload: WorkloadInfo) -> dict[str, Any]:
    """{service: {terms, billing}} for every service among ``rows`` (the local machine has
    no terms), plus how the data download was sized."""
    services: dict[str, Any] = {}
    for row in rows:
        service = row.get("service")
        if service in services:
            continue
        over = run_overheads_of(row, workload)
        if over is not None:
            services[str(service)] = over.to_dict()
    return {
        "services": services,
        "data_bytes": workload.data_bytes,
        "data_basis": workload.data_basis or None,
    }


def _secs(d: dict[str, float]) -> str:
    return f"{d['value']:.0f} s ({d['low']:.0f}-{d['high']:.0f}"


def _short(source: str) -> str:
    """A source's first clause ("prior: a; b (c)" -> "a"); the JSON keeps it whole."""
    parts = [p for p in source.removeprefix("prior: ").split("; ") if p.strip() != "prior"]
    return (parts[0] if parts else source).split(" (")[0].removeprefix("prior ")


def _term_text(t: dict[str, Any]) -> str:
    billed = "billed" if t["billed"] else "not billed"
    return f"{t['phase']} {_secs(t['seconds'])}; {billed}; {t['status']}: {_short(t['source'])})"


def _billing_text(b: dict[str, Any]) -> str:
    inc, low = b["increment_s"], b["minimum_s"]
    step = "per second" if inc <= 1 else f"in {inc:g} s steps"
    minimum = f", at least {low:g} s" if low > 0 else ""
    return f"billed {step}{minimum} ({b['status']}: {_short(b['source'])})"


def overheads_notes(section: dict[str, Any]) -> list[str]:
    """One line per service: its start-up terms (seconds with interval, billed or not,
    documented or prior, and the source's first clause) and the billing granularity; one
    line for the data download (the same on every cloud machine); where the sources are."""
    notes = []
    download = None
    for service, over in section["services"].items():
        terms = [t for t in over["terms"] if t["phase"] != "data download"]
        download = download or next(
            (t for t in over["terms"] if t["phase"] == "data download"), None
        )
        if not over["terms"]:
            continue
        notes.append(
            f"Start-up on {service}: {', '.join(map(_term_text, terms))}; "
            f"{_billing_text(over['billing'])}, once on start-up + training."
        )
    if not notes:
        return []
    if download is not None:
        notes.append(
            "Data download before training on every cloud machine: "
            f"{_secs(download['seconds'])}; billed; {download['status']}): "
            f"{download['source'].removeprefix('prior: ')}."
        )
    else:
        notes.append(
            "Data download: left out (the data size of a user model is unknown); pass "
            "--data-gb to count it."
        )
    notes.append(
        "Start-up terms are in each run's time (and their billed part in its cost): the "
        "budget and deadline judge the whole job. Full sources: the JSON report's "
        "'overheads' and providers/overheads.py."
    )
    return notes
