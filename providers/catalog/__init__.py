"""The instance catalog: dated CSV snapshots of machine types, prices and accelerator specs.

``load()`` returns the newest snapshot (shipped ``2021-02`` and ``2026-11``, plus any made by
``advisor catalog refresh`` under ADVISOR_HOME); ``load("2021-02")`` reproduces the published
studies' prices. Rows are validated on load. Refreshing lives in
``advisor.providers.catalog.refresh`` (imported only when used); turning SkyPilot's catalog
files into a snapshot in ``advisor.providers.catalog.skypilot``. ``Catalog.resolve`` takes the
providers' own machine names; ``load(region=...)`` picks a region (default: each machine's
cheapest); ``stale_warning`` says when prices are over 30 days old or estimates. Each row says
how its price was obtained (``price_basis``, ``spot_basis``: read-out, estimate, given) and
whether the type is current (``lifecycle``; issue #27).
"""

from advisor.providers.catalog._catalog import Catalog, accelerator_aliases
from advisor.providers.catalog._keys import SPOT_SUFFIX, MachineKey
from advisor.providers.catalog._local import local_machine
from advisor.providers.catalog._staleness import MAX_AGE_DAYS, stale_warning
from advisor.providers.catalog._store import load, snapshot_dir, snapshots
from advisor.providers.catalog._types import AcceleratorSpec, InstanceType, basis_of

__all__ = [
    "MAX_AGE_DAYS",
    "SPOT_SUFFIX",
    "AcceleratorSpec",
    "Catalog",
    "InstanceType",
    "MachineKey",
    "accelerator_aliases",
    "basis_of",
    "load",
    "local_machine",
    "snapshot_dir",
    "snapshots",
    "stale_warning",
]
