"""Machine names as users write them: catalog keys, bare types and each provider's own spelling.

``Standard_NC6s_v3`` (Azure's ARM size) is the catalog's ``NC6s_v3``; ``ml.p3.2xlarge`` is
SageMaker's row and ``sagemaker:p3.2xlarge`` means it too; a GCP VM with attached GPUs is
written as the VM type plus an accelerator (``n1-standard-8`` with ``T4``, ``T4:2``, ``2xT4``
or Google's ``nvidia-tesla-t4``), which the catalog spells ``n1-standard-8+1xT4``; SkyPilot's
``tpu-v2-8`` is the catalog's ``v2-8``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol

from advisor.providers.catalog._types import SERVICES, InstanceType

from advisor.errors import AdvisorError, close_matches


class Catalog(Protocol):
    """What resolving a name needs of a catalog: its rows and its snapshot's name."""

    @property
    def instances(self) -> Sequence[InstanceType]: ...

    @property
    def snapshot(self) -> str: ...


_COUNT = re.compile(r"^(?:(?P<pre>\d+)\s*x\s*)?(?P<name>.+?)(?::(?P<post>\d+))?$", re.IGNORECASE)


def _norm(accelerator: str) -> str:
    """``nvidia-tesla-a100`` / ``NVIDIA_TESLA_A100`` / ``A100`` -> ``a100``."""
    text = accelerator.lower().replace("nvidia", "").replace("tesla", "")
    return re.sub(r"[^a-z0-9]", "", text)


def _accelerator_spec(text: str) -> tuple[str, int | None]:
    """``"T4:2"``, ``"2xT4"``, ``"nvidia-tesla-t4"`` -> (normalised name, count or None)."""
    match = _COUNT.match(text.strip())
    if match is None:  # pragma: no cover - the pattern matches any non-empty text
        return _norm(text), None
    count = match["pre"] or match["post"]
    return _norm(match["name"]), int(count) if count else None


def _accelerator_matches(row: InstanceType, wanted: str, count: int | None) -> bool:
    if row.accelerator is None:
        return False
    have = _norm(row.accelerator)
    if not (have == wanted or have.startswith(wanted) or wanted.startswith(have)):
        return False
    return count is None or row.accelerator_count == count


def _type_matches(row: InstanceType, spellings: set[str]) -> bool:
    """The row's type is one of ``spellings``, or is one of them with accelerators attached."""
    full = row.instance_type.lower()
    return full in spellings or ("+" in full and full.split("+")[0] in spellings)


def _spellings(itype: str, services: set[str]) -> list[set[str]]:
    """Lower-case catalog types a spelling may stand for: the exact one first, then the rest."""
    lowered = itype.lower()
    rest = set()
    for prefix in ("standard_", "ml.", "tpu-"):
        if lowered.startswith(prefix):
            rest.add(lowered[len(prefix) :])
    if services == {"sagemaker"}:
        rest.add(f"ml.{lowered}")
    return [{lowered}, rest - {lowered}]


def _split(name: str) -> tuple[str, str]:
    """``"vertex:n1-standard-8:spot"`` -> ("vertex", "n1-standard-8"); no service -> ""."""
    text = name.strip()
    if text.lower().endswith(":spot"):
        text = text[: -len(":spot")]
    head, sep, tail = text.partition(":")
    if sep and head.lower() in SERVICES:
        return head.lower(), tail.strip()
    return "", text


def _find(
    catalog: Catalog, name: str, accelerator: str | None, services: Sequence[str]
) -> tuple[list[InstanceType], list[InstanceType], set[str]]:
    """(matching rows of the first spelling tier that has any, rows searched, spellings)."""
    service, itype = _split(name)
    wanted_services = {service} if service else {s.lower() for s in services}
    rows = [r for r in catalog.instances if not wanted_services or r.service in wanted_services]
    tiers = _spellings(itype, wanted_services)
    for spellings in tiers:
        if accelerator:
            acc, count = _accelerator_spec(accelerator)
            found = [
                r
                for r in rows
                if _type_matches(r, spellings) and _accelerator_matches(r, acc, count)
            ]
        else:
            found = [r for r in rows if r.instance_type.lower() in spellings]
        if found:
            return found, rows, tiers[0] | tiers[1]
    if not accelerator and "+" in itype:  # "n1-standard-8+T4": the VM and its accelerator inline
        base, _, inline = itype.partition("+")
        prefix = f"{service}:" if service else ""
        found, _, _ = _find(catalog, prefix + base, inline, services)
        if found:
            return found, rows, tiers[0] | tiers[1]
    return [], rows, tiers[0] | tiers[1]


def _variants(rows: Iterable[InstanceType], spellings: set[str]) -> list[str]:
    """Keys of the GPU-attached variants of a bare VM type (``n1-standard-8`` -> ``...+1xT4``)."""
    return sorted({r.key for r in rows if "+" in r.instance_type and _type_matches(r, spellings)})


def resolve(
    catalog: Catalog, name: str, accelerator: str | None = None, services: Sequence[str] = ()
) -> InstanceType:
    """The one row ``name`` (and ``accelerator``) stand for; see the module docstring."""
    service, itype = _split(name)
    if itype.lower() == "local" and service in ("", "local"):
        from advisor.providers.catalog._local import local_machine

        return local_machine()
    found, rows, spellings = _find(catalog, name, accelerator, services)
    if len(found) == 1:
        return found[0]
    if found:
        _ambiguous(catalog, name, accelerator, found)
    _unknown(catalog, name, accelerator, rows, spellings)
    raise AssertionError("unreachable")  # pragma: no cover


def matching_keys(catalog: Catalog, name: str) -> list[str]:
    """Catalog keys a space's ``instance_types`` entry stands for (none when unknown).

    Unlike ``resolve`` this never raises: a name sold by two services matches both, a bare
    GCP VM type (``n1-standard-8``) matches each of its GPU-attached variants.
    """
    found, rows, spellings = _find(catalog, name, None, ())
    return [r.key for r in found] or _variants(rows, spellings)


def _ambiguous(
    catalog: Catalog, name: str, accelerator: str | None, found: list[InstanceType]
) -> None:
    keys = ", ".join(r.key for r in found)
    services = {r.service for r in found}
    if len(services) > 1 and len({r.instance_type for r in found}) == 1:
        raise AdvisorError(
            f"'{name}' is sold by several services in snapshot {catalog.snapshot}: {keys}.",
            "name one as service:type.",
        )
    what = f"'{name}' with accelerator '{accelerator}'" if accelerator else f"'{name}'"
    raise AdvisorError(
        f"{what} matches several machine types in snapshot {catalog.snapshot}: {keys}.",
        "give the accelerator count too (e.g. --accelerator T4:2) or a catalog key.",
    )


def _unknown(
    catalog: Catalog,
    name: str,
    accelerator: str | None,
    rows: Iterable[InstanceType],
    spellings: set[str],
) -> None:
    rows = list(rows)
    variants = sorted(
        {
            r.key
            for r in rows
            if r.instance_type.split("+")[0].lower() in spellings and "+" in r.instance_type
        }
    )
    if variants and not accelerator:
        raise AdvisorError(
            f"'{name}' is sold only with attached accelerators in snapshot {catalog.snapshot}: "
            f"{', '.join(variants)}.",
            "name the accelerator (e.g. --accelerator T4, or T4:2 for two) or one of those keys.",
        )
    names = {r.instance_type for r in rows} | {r.key for r in rows}
    names |= {f"Standard_{r.instance_type}" for r in rows if r.provider == "azure"}
    near = close_matches(name.strip(), names, n=5)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    with_acc = f" with accelerator '{accelerator}'" if accelerator else ""
    raise AdvisorError(
        f"Unknown instance type '{name}'{with_acc} in catalog snapshot {catalog.snapshot}.{hint}",
        "run `advisor catalog` to list the machine types (catalog keys and the providers' own "
        "names such as Standard_NC6s_v3 or ml.p3.2xlarge both work).",
    )
