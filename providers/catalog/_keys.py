"""The key a study names a machine by: ``service:instance_type``, plus ``:xN`` on N machines
(issue #49: N joined by their network) and ``:spot`` on spot."""

from __future__ import annotations

import re

from advisor.errors import AdvisorError

SPOT_SUFFIX = ":spot"
NODES_RE = re.compile(r":x([2-9]|[1-9]\d+)$")  # ":x4": four machines (one has no suffix)


class MachineKey(str):
    """A machine key, checked once where it enters: ``"sagemaker:ml.p3.2xlarge:spot"``,
    ``"ec2:p4d.24xlarge:x4"`` (four machines of the type).

    A ``str`` (it is stored, compared and printed as one) that knows its parts: ``service``,
    ``instance_type``, ``spot``, ``nodes`` and ``base`` (the key without ``:xN`` and
    ``:spot``, the catalog's own).
    """

    __slots__ = ()

    def __new__(cls, text: str) -> MachineKey:
        if isinstance(text, MachineKey):
            return text
        body = NODES_RE.sub("", text.removesuffix(SPOT_SUFFIX))
        service, sep, itype = body.partition(":")
        if not sep or not service or not itype or ":" in itype:
            raise AdvisorError(
                f"'{text}' is not a machine key.",
                "write it as service:instance_type, e.g. sagemaker:ml.p3.2xlarge (add :xN for "
                "N machines, :spot for spot capacity).",
            )
        return super().__new__(cls, text)

    @classmethod
    def of(cls, base: str, spot: bool = False, nodes: int = 1) -> MachineKey:
        """The key of machine ``base`` (``service:instance_type``), on ``nodes`` machines,
        on spot when ``spot``."""
        many = f":x{nodes}" if nodes > 1 else ""
        return cls(str(base) + many + (SPOT_SUFFIX if spot else ""))

    @classmethod
    def named(cls, name: str, service: str) -> MachineKey:
        """``name`` as a key: a key already (``sagemaker:ml.g5.xlarge``), or an instance type
        of ``service`` (``ml.g5.xlarge``)."""
        return cls(name) if ":" in name.removesuffix(SPOT_SUFFIX) else cls(f"{service}:{name}")

    @property
    def spot(self) -> bool:
        return self.endswith(SPOT_SUFFIX)

    @property
    def nodes(self) -> int:
        """Machines of the type the key stands for (1 without ``:xN``)."""
        found = NODES_RE.search(self.removesuffix(SPOT_SUFFIX))
        return int(found.group(1)) if found else 1

    @property
    def base(self) -> MachineKey:
        """The key without ``:xN`` and ``:spot``: the catalog row's own key."""
        body = NODES_RE.sub("", self.removesuffix(SPOT_SUFFIX))
        return self if body == self else MachineKey(body)

    @property
    def service(self) -> str:
        return self.partition(":")[0]

    @property
    def instance_type(self) -> str:
        return self.base.partition(":")[2]
