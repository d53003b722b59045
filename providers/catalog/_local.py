"""The machine the advisor runs on, as a catalog row (probed for real, priced by the user)."""

from __future__ import annotations

import datetime as dt
import os

from advisor.providers.catalog._types import InstanceType

from advisor.errors import AdvisorError

PRICE_ENV = "ADVISOR_LOCAL_PRICE"


def local_machine() -> InstanceType:
    """This machine: provider/service/type ``local``, its CPUs and memory, no accelerator.

    Its price is 0.0 USD/h unless ``$ADVISOR_LOCAL_PRICE`` gives one (e.g. 2.85 for a GPU
    server written off over a year).
    """
    raw = os.environ.get(PRICE_ENV, "").strip()
    price = 0.0
    if raw:
        try:
            price = float(raw)
        except ValueError:
            raise AdvisorError(
                f"{PRICE_ENV}={raw!r} is not a number.", f"set {PRICE_ENV} to USD per hour."
            ) from None
        if not price >= 0 or price == float("inf"):
            raise AdvisorError(
                f"{PRICE_ENV}={raw!r} must be a finite price >= 0.",
                f"set {PRICE_ENV} to USD per hour.",
            )
    return InstanceType(
        provider="local",
        service="local",
        instance_type="local",
        vcpus=os.cpu_count() or 1,
        memory_gib=round(_memory_bytes() / 2**30, 1),
        accelerator=None,
        accelerator_count=0,
        accelerator_memory_gib=0.0,
        on_demand_usd_per_h=price,
        spot_usd_per_h=None,
        price_date=dt.date.today().isoformat(),
        source="this machine" + (f" (price from ${PRICE_ENV})" if raw else ""),
    )


def _memory_bytes() -> int:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # psutil missing or unsupported platform: fall back to sysconf
        try:
            return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            return 0
