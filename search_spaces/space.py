"""Python objects for a joint search space: machines x batch sizes x hyperparameters.

Values validate on construction. The YAML reader (``load_space``) and the converters to
Optuna distributions, scikit-optimize dimensions and managed-service parameter specs live in
sibling modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

N = TypeVar("N", int, float)


@dataclass(frozen=True)
class Condition:
    """The parameter is active only when parameter ``on`` takes one of ``values``."""

    on: str
    values: tuple[Any, ...]


def _check_range(p: _Range[Any]) -> None:
    """``low < high``, ``low > 0`` on a log scale, and Optuna's rule for ``step``: positive,
    not with ``log``, and ``high - low`` a multiple."""
    if not p.low < p.high:
        raise ValueError(f"{p.name}: low < high must hold, but got low={p.low}, high={p.high}")
    if p.log and p.low <= 0:
        raise ValueError(f"{p.name}: a log scale needs low > 0, but got low={p.low}")
    if p.step is None:
        return
    if not p.step > 0:
        raise ValueError(f"{p.name}: step must be > 0, but got step={p.step}")
    if p.log and p.step != 1:
        raise ValueError(f"{p.name}: step and log cannot both be set (as in Optuna)")
    n = (p.high - p.low) / p.step
    if abs(n - round(n)) > 1e-9 * max(1.0, abs(n)):
        high = p.low + int(n) * p.step
        raise ValueError(
            f"{p.name}: high - low must be a multiple of step {p.step:g}, but got low={p.low:g}, "
            f"high={p.high:g} (a high of {high:g} would be)"
        )


@dataclass(frozen=True)
class _Range(Generic[N]):
    """A numeric parameter from ``low`` to ``high`` (validated by ``_check_range``)."""

    name: str
    low: N
    high: N
    log: bool = False
    condition: Condition | None = None
    affects_runtime: bool = False  # True: part of the probe cache key (e.g. a layer width)
    step: N | None = None  # Optuna's step (None: continuous for a float, 1 for an int)

    def __post_init__(self) -> None:
        _check_range(self)


@dataclass(frozen=True)
class FloatParam(_Range[float]):
    """A float parameter."""


@dataclass(frozen=True)
class IntParam(_Range[int]):
    """An integer parameter."""


@dataclass(frozen=True)
class CategoricalParam:
    name: str
    choices: tuple[Any, ...]
    condition: Condition | None = None
    affects_runtime: bool = False

    def __post_init__(self) -> None:
        if len(self.choices) == 0:
            raise ValueError(f"{self.name}: choices must not be empty")
        if len(set(map(repr, self.choices))) != len(self.choices):
            raise ValueError(f"{self.name}: choices must be distinct, but got {self.choices}")


Param = FloatParam | IntParam | CategoricalParam


@dataclass(frozen=True)
class MachineFilter:
    """Which catalog machines are candidates (all fields optional; empty means no limit)."""

    providers: tuple[str, ...] = ()
    services: tuple[str, ...] = ()
    accelerators: tuple[str, ...] = ()  # accelerator names; "cpu" selects CPU-only machines
    instance_types: tuple[str, ...] = ()
    min_gpus: int = 0
    max_gpus: int | None = None
    max_price: float | None = None  # USD per hour
    spot: bool = True  # whether spot/preemptible capacity may be chosen
    include_local: bool = True  # the machine the advisor runs on, probed for real
    on_demand: bool = True  # issue #28: whether on-demand capacity may be chosen (--spot: no)
    region: str | None = None  # issue #28: price in this region; types not sold there left out

    def __post_init__(self) -> None:
        if self.min_gpus < 0:
            raise ValueError(f"min_gpus must be >= 0, but got {self.min_gpus}")
        if self.max_gpus is not None and self.max_gpus < self.min_gpus:
            raise ValueError(
                f"min_gpus <= max_gpus must hold, but got {self.min_gpus} > {self.max_gpus}"
            )
        if self.max_price is not None and self.max_price <= 0:
            raise ValueError(f"max_price must be > 0, but got {self.max_price}")
        if not (self.spot or self.on_demand):
            raise ValueError("spot and on_demand cannot both be false: no capacity is left")
        if self.region is not None and not self.region.strip():
            raise ValueError("region must not be empty")


@dataclass(frozen=True)
class JointSpace:
    """One search space over machine, batch size and training hyperparameters."""

    workload: str
    machines: MachineFilter = field(default_factory=MachineFilter)
    batch_sizes: tuple[int, ...] = (256, 512, 1024, 2048)
    hyperparameters: tuple[Param, ...] = ()

    def __post_init__(self) -> None:
        if not self.batch_sizes or any(b <= 0 for b in self.batch_sizes):
            raise ValueError(f"batch_sizes must be positive integers, but got {self.batch_sizes}")
        names = [p.name for p in self.hyperparameters]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"hyperparameter names must be unique, repeated: {sorted(dupes)}")
        reserved = {"machine", "batch_size", "spot"} & set(names)
        if reserved:
            raise ValueError(f"hyperparameter names {sorted(reserved)} are reserved")
        on = {p.name: p.condition.on for p in self.hyperparameters if p.condition is not None}
        for p in self.hyperparameters:
            if p.condition is not None and p.condition.on not in names:
                raise ValueError(f"{p.name}: condition on unknown parameter {p.condition.on!r}")
        for start in on:  # a condition on itself, or a cycle of conditions, never activates
            seen = [start]
            while seen[-1] in on and on[seen[-1]] not in seen:
                seen.append(on[seen[-1]])
            if seen[-1] in on:
                raise ValueError(f"{start}: the conditions form a cycle ({' -> '.join(seen)})")

    def param(self, name: str) -> Param:
        for p in self.hyperparameters:
            if p.name == name:
                return p
        raise KeyError(name)


def _param_to_dict(p: Param) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name}
    if isinstance(p, CategoricalParam):
        out.update(type="categorical", choices=list(p.choices))
    else:
        out.update(
            type="float" if isinstance(p, FloatParam) else "int", low=p.low, high=p.high, log=p.log
        )
        if p.step is not None:  # issue #28: Optuna's step
            out["step"] = p.step
    if p.condition is not None:
        out["condition"] = {"on": p.condition.on, "values": list(p.condition.values)}
    if p.affects_runtime:
        out["affects_runtime"] = True
    return out


# The numeric parameter types by name: the class and the number type of its bounds and step.
_NUMERIC: dict[str, tuple[Any, type]] = {"float": (FloatParam, float), "int": (IntParam, int)}


def _param_from_dict(data: dict[str, Any]) -> Param:
    cond = data.get("condition")
    condition = Condition(cond["on"], tuple(cond["values"])) if cond else None
    common: dict[str, Any] = {
        "condition": condition,
        "affects_runtime": bool(data.get("affects_runtime", False)),
    }
    kind = data.get("type")
    if kind == "categorical":
        return CategoricalParam(data["name"], tuple(data["choices"]), **common)
    if kind in _NUMERIC:
        cls, num = _NUMERIC[kind]
        step = data.get("step")
        low, high, log = num(data["low"]), num(data["high"]), bool(data.get("log"))
        step = None if step is None else num(step)
        return cls(data["name"], low, high, log, step=step, **common)
    raise ValueError(f"parameter type must be float, int or categorical, but got {kind!r}")


def space_to_dict(space: JointSpace) -> dict[str, Any]:
    """The space as plain JSON-able data (the inverse of ``space_from_dict``)."""
    m = space.machines
    return {
        "workload": space.workload,
        "machines": {
            "providers": list(m.providers),
            "services": list(m.services),
            "accelerators": list(m.accelerators),
            "instance_types": list(m.instance_types),
            "min_gpus": m.min_gpus,
            "max_gpus": m.max_gpus,
            "max_price": m.max_price,
            "spot": m.spot,
            "include_local": m.include_local,
            # issue #28, written only when set: older studies' names (their hash) stay
            **({} if m.on_demand else {"on_demand": False}),
            **({} if m.region is None else {"region": m.region}),
        },
        "batch_sizes": list(space.batch_sizes),
        "hyperparameters": [_param_to_dict(p) for p in space.hyperparameters],
    }


def space_from_dict(data: dict[str, Any]) -> JointSpace:
    """Rebuild a space from ``space_to_dict`` output (raises ValueError on bad values)."""
    m = dict(data.get("machines") or {})
    for key in ("providers", "services", "accelerators", "instance_types"):
        m[key] = tuple(m.get(key) or ())
    return JointSpace(
        workload=data["workload"],
        machines=MachineFilter(**m),
        batch_sizes=tuple(int(b) for b in data.get("batch_sizes", (256, 512, 1024, 2048))),
        hyperparameters=tuple(_param_from_dict(p) for p in data.get("hyperparameters", ())),
    )


# One parameter to and from its dict (a space's ``hyperparameters`` entries), for the callers
# that store parameters apart from a space (issue #36: the space read from a builder).
param_to_dict = _param_to_dict
param_from_dict = _param_from_dict
