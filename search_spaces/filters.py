"""Machine filters in the words SkyPilot users know: ``--gpus A100:1``, ``--cloud aws``,
``--region us-east-1``, ``--spot`` / ``--no-spot``, ``--local`` / ``--no-local``.

They narrow a space's ``MachineFilter`` (a flag given wins over the space file's key):

- ``gpus``: ``NAME[:COUNT]`` as ``sky launch --gpus`` takes it; the count defaults to 1, as
  in SkyPilot, and selects machines with exactly that many accelerators; ``NAME`` may be an
  accelerator family (``A100`` also matches ``A100-80GB``) or ``cpu``.
- ``cloud``: a catalog provider (``aws``, ``gcp``, ``azure``), as ``sky launch --cloud``;
  this machine is then left out unless ``local`` is True.
- ``region``: a catalog region; machines not sold there are left out, the others priced there.
- ``spot``: True keeps spot capacity only (``sky launch --use-spot``), False on demand only,
  None both.
- ``local``: whether this machine is a candidate (probed for real).

Names are checked where the catalog is known (an unknown accelerator, cloud or region is a
one-line error listing the valid ones).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Protocol

from advisor.search_spaces.space import JointSpace, MachineFilter

from advisor.errors import AdvisorError

MAX_GPUS = 1024  # the most accelerators one filter may ask for
_GPUS = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9_.+-]{0,63})\s*(?::\s*(\d{1,5})\s*)?")


def parse_gpus(text: str) -> tuple[str, int]:
    """``"A100:1"`` -> ``("A100", 1)``; ``"T4"`` -> ``("T4", 1)`` (SkyPilot's default count)."""
    match = _GPUS.fullmatch(text)
    count = int(match[2]) if match and match[2] else 1
    if not match or not 1 <= count <= MAX_GPUS:
        raise AdvisorError(
            f"--gpus '{text}' is not an accelerator with a count from 1 to {MAX_GPUS}.",
            "write it as SkyPilot does: NAME[:COUNT], e.g. --gpus A100:1 or --gpus V100:4 "
            "(`advisor catalog` lists the accelerators).",
        )
    return match[1], count


def narrow(
    machines: MachineFilter,
    gpus: str | None = None,
    cloud: str | None = None,
    region: str | None = None,
    spot: bool | None = None,
    local: bool | None = None,
) -> MachineFilter:
    """``machines`` with the given filters applied (None: keep the space's setting)."""
    out = machines
    if gpus is not None:
        name, count = parse_gpus(gpus)
        if name.lower() == "cpu":
            out = replace(out, accelerators=("cpu",), min_gpus=0, max_gpus=0)
        else:  # this machine has no such accelerator
            out = replace(
                out, accelerators=(name,), min_gpus=count, max_gpus=count, include_local=False
            )
    if cloud is not None:  # one cloud: this machine only when --local asks for it too
        out = replace(out, providers=(cloud.strip().lower(),), include_local=False)
    if region is not None:
        out = replace(out, region=region.strip())
    if spot is not None:
        out = replace(out, spot=spot, on_demand=not spot)
    if local is not None:
        out = replace(out, include_local=local)
    return out


class Filters(Protocol):
    """The filter fields of ``SuggestOptions`` (None: not given)."""

    gpus: str | None
    cloud: str | None
    region: str | None
    spot: bool | None
    local: bool | None


def machine_filter(options: Filters, space: JointSpace) -> JointSpace:
    """``space`` with the options' machine filters applied (``--gpus``, ``--cloud``,
    ``--region``, ``--spot``/``--no-spot``, ``--local``/``--no-local``)."""
    machines = narrow(
        space.machines, options.gpus, options.cloud, options.region, options.spot, options.local
    )
    return space if machines == space.machines else replace(space, machines=machines)
