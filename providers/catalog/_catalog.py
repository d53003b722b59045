"""The loaded catalog: typed rows of one snapshot, with lookups and filters."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from advisor.providers.catalog._types import PROVIDERS, SERVICES, AcceleratorSpec, InstanceType

from advisor.errors import AdvisorError, close_matches, unknown_value_error

CPU = "cpu"


def accelerator_aliases(name: str) -> set[str]:
    """Lower-case names a filter may use for ``name``: itself and its family.

    ``A100-80GB`` and ``V100-PCIe`` answer to ``a100`` / ``v100``; ``TPU-v5e`` to ``v5e``
    and ``tpu``.
    """
    lowered = name.lower()
    head, _, tail = lowered.partition("-")
    aliases = {lowered, head}
    if head == "tpu" and tail:
        aliases.add(tail)
    return aliases


@dataclass(frozen=True)
class Catalog:
    """All machine types of one price snapshot, plus the accelerator specs they use.

    ``snapshot`` is the snapshot name (``2021-02``, ``2026-11``, or a refresh date such as
    ``2026-11-22``). Rows are validated when the snapshot is loaded.
    """

    snapshot: str
    instances: tuple[InstanceType, ...]
    accelerators: Mapping[str, AcceleratorSpec] = field(default_factory=dict)
    # Every region's row (``instances`` holds one per key); empty means ``instances``.
    regional: tuple[InstanceType, ...] = ()
    region: str | None = None  # the region asked for, or None: each key's cheapest region
    _by_key: dict[str, InstanceType] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        seen: dict[str, InstanceType] = {}
        for inst in self.instances:
            if inst.key in seen:
                raise ValueError(f"duplicate key {inst.key!r} in snapshot {self.snapshot}")
            seen[inst.key] = inst
        if not self.regional:
            object.__setattr__(self, "regional", self.instances)
        where: set[tuple[str, str]] = set()
        for inst in self.regional:
            if (inst.key, inst.region) in where:
                raise ValueError(f"duplicate key {inst.key!r} in region {inst.region!r}")
            where.add((inst.key, inst.region))
            if inst.accelerator is not None and inst.accelerator not in self.accelerators:
                raise ValueError(f"{inst.key}: unknown accelerator {inst.accelerator!r}")
        object.__setattr__(self, "_by_key", seen)

    @classmethod
    def from_rows(
        cls,
        snapshot: str,
        rows: Sequence[InstanceType],
        accelerators: Mapping[str, AcceleratorSpec],
        region: str | None = None,
    ) -> Catalog:
        """A catalog of every region's ``rows``, working on ``region``'s or the cheapest."""
        from advisor.providers.catalog._regions import pick

        return cls(
            snapshot=snapshot,
            instances=tuple(pick(rows, region)),
            accelerators=accelerators,
            regional=tuple(rows),
            region=region,
        )

    def regions(self, name: str) -> list[InstanceType]:
        """Every region's row of machine ``name`` (any spelling ``resolve`` takes), cheapest first."""
        from advisor.providers.catalog._regions import by_key

        key = self.resolve(name).key
        return by_key(r for r in self.regional if r.key == key).get(key, [])

    def region_note(self, inst: InstanceType) -> str:
        """Which region ``inst`` is priced in and why (asked for, cheapest of N, only one)."""
        from advisor.providers.catalog._regions import note

        return note(inst, self.regional, self.region)

    def resolve(
        self, name: str, accelerator: str | None = None, services: Sequence[str] = ()
    ) -> InstanceType:
        """The row for a catalog key, a bare type, or a provider's own spelling.

        Takes ``Standard_NC6s_v3`` (Azure), ``ml.p3.2xlarge`` / ``sagemaker:p3.2xlarge``
        (SageMaker), ``n1-standard-8`` with ``accelerator="T4"`` (or ``"T4:2"``,
        ``"nvidia-tesla-t4"``; GCP), ``tpu-v2-8``; ``services`` picks among services that
        sell the same type. Unknown names raise AdvisorError with close matches.
        """
        from advisor.providers.catalog._names import resolve

        return resolve(self, name, accelerator, services)

    def matching_keys(self, names: Iterable[str]) -> tuple[str, ...]:
        """``names`` plus the catalog keys they stand for in any spelling (never raises).

        For a space's ``instance_types``: ``Standard_NC6s_v3`` adds both Azure services' keys,
        ``n1-standard-8`` every GPU-attached variant; unknown names stay as they are.
        """
        from advisor.providers.catalog._names import matching_keys

        out: list[str] = []
        for name in names:
            for key in (name, *matching_keys(self, name)):
                if key not in out:
                    out.append(key)
        return tuple(out)

    # --- lookups -----------------------------------------------------------------------
    def get(self, instance_type_or_key: str) -> InstanceType:
        """The row for ``service:type`` or a bare type when unique (``:spot`` is ignored).

        Unknown or ambiguous names raise AdvisorError naming close matches.
        """
        name = instance_type_or_key.strip()
        if name.endswith(":spot"):
            name = name[: -len(":spot")]
        if name in ("local", "local:local"):
            from advisor.providers.catalog._local import local_machine

            return local_machine()
        by_key = self._by_key
        if name in by_key:
            return by_key[name]
        lowered = {k.lower(): v for k, v in by_key.items()}
        if name.lower() in lowered:
            return lowered[name.lower()]
        found = [i for i in self.instances if i.instance_type.lower() == name.lower()]
        if len(found) == 1:
            return found[0]
        if found:
            keys = ", ".join(i.key for i in found)
            raise AdvisorError(
                f"'{name}' is sold by several services in snapshot {self.snapshot}: {keys}.",
                "name one as service:type.",
            )
        elsewhere = sorted(
            {
                r.region
                for r in self.regional
                if name.lower() in (r.key.lower(), r.instance_type.lower())
            }
        )
        if elsewhere:
            raise AdvisorError(
                f"'{name}' is not priced in region '{self.region}' in snapshot {self.snapshot} "
                f"(it is in {', '.join(elsewhere)}).",
                "pick one of those regions, or leave --region out for the cheapest.",
            )
        names = {i.instance_type for i in self.instances} | set(by_key)
        near = close_matches(name, names, n=5)
        hint = f" Close matches: {', '.join(near)}." if near else ""
        raise AdvisorError(
            f"Unknown instance type '{name}' in catalog snapshot {self.snapshot}.{hint}",
            "run `advisor catalog` to list the machine types.",
        )

    def accelerator(self, name: str) -> AcceleratorSpec:
        """The spec of accelerator ``name`` (case-insensitive)."""
        for key, spec in self.accelerators.items():
            if key.lower() == name.strip().lower():
                return spec
        raise unknown_value_error("accelerator", name, self.accelerators)

    def accelerator_names(self) -> list[str]:
        """Every value an accelerator filter accepts: names, families and ``cpu``."""
        names = set(self.accelerators) | {CPU}
        for name in self.accelerators:
            head, _, tail = name.partition("-")
            names.add(head)
            if head.lower() == "tpu" and tail:
                names.add(tail)
        return sorted(names, key=str.lower)

    # --- filters ----------------------------------------------------------------------
    def filter(
        self,
        providers: Iterable[str] = (),
        services: Iterable[str] = (),
        accelerators: Iterable[str] = (),
        min_gpus: int = 0,
        max_gpus: int | None = None,
        max_price: float | None = None,
        spot: bool = False,
    ) -> list[InstanceType]:
        """Rows matching every given filter (an empty filter does not restrict).

        ``accelerators`` match case-insensitively by name or family (``v100``, ``a100``,
        ``tpu``); ``cpu`` selects CPU-only machines. ``spot=True`` keeps machines with a spot
        price, and ``max_price`` then applies to the spot price. Unknown values raise
        AdvisorError listing the valid ones.
        """
        prov = _check("provider", providers, PROVIDERS)
        serv = _check("service", services, SERVICES)
        accs = _check("accelerator", accelerators, self.accelerator_names())
        if min_gpus < 0:
            raise AdvisorError(f"min_gpus must be >= 0, but got {min_gpus}.", "give 0 or more.")
        if max_gpus is not None and max_gpus < min_gpus:
            raise AdvisorError(
                f"max_gpus ({max_gpus}) is below min_gpus ({min_gpus}).", "raise max_gpus."
            )
        if max_price is not None and max_price <= 0:
            raise AdvisorError(f"max_price must be > 0, but got {max_price}.", "give a price.")
        out = []
        for inst in self.instances:
            if prov and inst.provider not in prov:
                continue
            if serv and inst.service not in serv:
                continue
            if accs and not _accelerator_matches(inst, accs):
                continue
            if inst.accelerator_count < min_gpus:
                continue
            if max_gpus is not None and inst.accelerator_count > max_gpus:
                continue
            if spot and inst.spot_usd_per_h is None:
                continue
            if max_price is not None and inst.price(spot) > max_price:
                continue
            out.append(inst)
        return out

    def providers(self) -> list[str]:
        """Providers that have rows in this snapshot."""
        return sorted({i.provider for i in self.instances})


def _check(kind: str, values: Iterable[str], valid: Sequence[str]) -> set[str]:
    lowered = {v.lower(): v for v in valid}
    out = set()
    for value in values:
        if value.lower() not in lowered:
            raise unknown_value_error(kind, value, valid)
        out.add(value.lower())
    return out


def _accelerator_matches(inst: InstanceType, wanted: set[str]) -> bool:
    if inst.accelerator is None:
        return CPU in wanted
    return bool(accelerator_aliases(inst.accelerator) & wanted)
