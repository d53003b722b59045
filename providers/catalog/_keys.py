"""The key a study names a machine by: ``service:instance_type``, plus ``:spot`` on spot."""

from __future__ import annotations

from advisor.errors import AdvisorError

SPOT_SUFFIX = ":spot"


class MachineKey(str):
    """A machine key, checked once where it enters: ``"sagemaker:ml.p3.2xlarge:spot"``.

    A ``str`` (it is stored, compared and printed as one) that knows its parts: ``service``,
    ``instance_type``, ``spot`` and ``base`` (the key without ``:spot``, the catalog's own).
    """

    __slots__ = ()

    def __new__(cls, text: str) -> MachineKey:
        if isinstance(text, MachineKey):
            return text
        body = text.removesuffix(SPOT_SUFFIX)
        service, sep, itype = body.partition(":")
        if not sep or not service or not itype or ":" in itype:
            raise AdvisorError(
                f"'{text}' is not a machine key.",
                "write it as service:instance_type, e.g. sagemaker:ml.p3.2xlarge (add :spot "
                "for spot capacity).",
            )
        return super().__new__(cls, text)

    @classmethod
    def of(cls, base: str, spot: bool = False) -> MachineKey:
        """The key of machine ``base`` (``service:instance_type``), on spot when ``spot``."""
        return cls(str(base) + (SPOT_SUFFIX if spot else ""))

    @classmethod
    def named(cls, name: str, service: str) -> MachineKey:
        """``name`` as a key: a key already (``sagemaker:ml.g5.xlarge``), or an instance type
        of ``service`` (``ml.g5.xlarge``)."""
        return cls(name) if ":" in name.removesuffix(SPOT_SUFFIX) else cls(f"{service}:{name}")

    @property
    def spot(self) -> bool:
        return self.endswith(SPOT_SUFFIX)

    @property
    def base(self) -> MachineKey:
        """The key without ``:spot``: the catalog row's own key."""
        return MachineKey(self.removesuffix(SPOT_SUFFIX)) if self.spot else self

    @property
    def service(self) -> str:
        return self.partition(":")[0]

    @property
    def instance_type(self) -> str:
        return self.base.partition(":")[2]
