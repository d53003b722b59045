"""Read a joint search space from YAML, with errors that name the file, line and key.

The format (every section optional except where noted)::

    workload: fcn                      # optional; must match --model when given
    machines:
      providers: [aws, gcp, azure]     # or services / accelerators / instance_types
      accelerators: [T4, V100, cpu]    # "cpu" selects CPU-only machines
      min_gpus: 0
      max_gpus: 8
      max_price: 40                    # USD per hour
      spot: true                       # allow spot/preemptible capacity
      on_demand: true                  # allow on-demand capacity (false: spot only)
      region: us-east-1                # price there; types not sold there are left out
      include_local: true              # probe this machine for real
    batch_sizes: [256, 512, 1024, 2048]
    hyperparameters:
      lr: {type: float, low: 0.01, high: 0.3, log: true}
      optimizer: {type: categorical, choices: [sgd, adam]}
      beta1: {type: float, low: 0.8, high: 0.99, condition: {on: optimizer, values: [adam]}}
      width: {type: int, low: 16, high: 64, affects_runtime: true}

YAML is composed (not just loaded) so every node keeps its line number. Files are read with
bounds (size, aliases, depth, tags, UTF-8: ``safe_yaml``); a condition on itself or a cycle of
conditions, and a range a built-in workload's builder would refuse (``workloads.accepted``), are
refused here, before any probe runs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from advisor.search_spaces.safe_yaml import MAX_BYTES, BoundedLoader, read_space_text
from advisor.search_spaces.space import (
    CategoricalParam,
    Condition,
    FloatParam,
    IntParam,
    JointSpace,
    MachineFilter,
    Param,
)
from advisor.search_spaces.space_rules import (
    check_accepted,
    check_conditions,
    check_runtime_values,
)

from advisor.errors import AdvisorError, close_matches

SPACES_DIR = Path(__file__).parent / "spaces"

_TOP_KEYS = ("workload", "machines", "batch_sizes", "hyperparameters")
_MACHINE_KEYS = (
    "providers",
    "services",
    "accelerators",
    "instance_types",
    "min_gpus",
    "max_gpus",
    "max_price",
    "spot",
    "on_demand",
    "include_local",
    "region",
)
_PARAM_KEYS = ("type", "low", "high", "log", "step", "choices", "condition", "affects_runtime")
# Issue #28: bounds on every size a space file can ask for, each named in its error.
MAX_BATCH_SIZES = 32  # batch sizes listed (each is one local probe)
MAX_BATCH = 2**20  # largest batch size
MAX_INT = 2**31 - 1  # integer hyperparameters (the tuning services' limit)
_FIX = "edit the space file (format: advisor.search_spaces.loader docstring, or docs/suggest.md)."


class _Reader:
    """Walks composed YAML nodes and raises errors pointing at file, line and key."""

    def __init__(self, text: str, origin: str) -> None:
        self.origin = origin
        self._loader = BoundedLoader(text, origin)

    def root(self) -> yaml.Node | None:
        try:
            return self._loader.get_single_node()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise AdvisorError(
                f"{self.origin}{where}: not valid YAML ({problem}).", "fix the YAML syntax."
            ) from exc

    def error(self, node: yaml.Node, key: str, message: str, fix: str = _FIX) -> AdvisorError:
        return AdvisorError(
            f"{self.origin} line {node.start_mark.line + 1}, key {key}: {message}.", fix
        )

    def mapping(self, node: yaml.Node, key: str, allowed: tuple[str, ...] | None) -> dict:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, key or "(top)", "must be a mapping of key: value")
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for k_node, v_node in node.value:
            # Keys are read as written (YAML 1.1 would turn a key `on` into True).
            name = str(k_node.value) if isinstance(k_node, yaml.ScalarNode) else str(k_node)
            full = f"{key}.{name}" if key else name
            if allowed is not None and name not in allowed:
                near = close_matches(name, allowed)
                hint = f" (did you mean {', '.join(near)}?)" if near else ""
                raise self.error(
                    k_node, full, f"unknown key{hint}", f"use one of: {', '.join(allowed)}."
                )
            if name in out:
                raise self.error(k_node, full, "appears twice")
            out[name] = (k_node, v_node)
        return out

    def value(self, node: yaml.Node) -> Any:
        try:
            return self._loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise self.error(node, "(value)", f"cannot read the value ({problem})") from exc

    def number(self, node: yaml.Node, key: str, integer: bool = False) -> float | int:
        v = self.value(node)
        kind = "an integer" if integer else "a number"
        if (
            isinstance(v, bool)
            or not isinstance(v, int | float)
            or (integer and isinstance(v, float))
        ):
            raise self.error(node, key, f"must be {kind}, got {v!r}")
        if not math.isfinite(v) or abs(v) > 2.0**53:
            raise self.error(node, key, f"must be finite and at most 2**53 in size, got {v!r}")
        return v

    def boolean(self, node: yaml.Node, key: str) -> bool:
        v = self.value(node)
        if not isinstance(v, bool):
            raise self.error(node, key, f"must be true or false, got {v!r}")
        return v

    def seq(self, node: yaml.Node, key: str) -> list[tuple[yaml.Node, Any]]:
        if isinstance(node, yaml.ScalarNode):  # a single value is a one-item list
            return [(node, self.value(node))]
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, key, "must be a list, e.g. [a, b]")
        return [(n, self.value(n)) for n in node.value]


def load_space(path_or_text: str | Path, workload: str | None = None) -> JointSpace:
    """Read a space from a YAML file path or YAML text.

    ``workload`` is the model the space is for (from ``--model``); the file's own ``workload``
    key, when present, must agree. Errors are AdvisorError with file, line and key.
    """
    text, origin = _read(path_or_text)
    r = _Reader(text, origin)
    root = r.root()
    if root is None:
        raise AdvisorError(f"{origin} is empty.", "write a space (see docs/suggest.md).")
    top = r.mapping(root, "", _TOP_KEYS)

    name = workload
    if "workload" in top:
        _k_node, v_node = top["workload"]
        file_workload = str(r.value(v_node))
        if workload is not None and file_workload != workload:
            raise r.error(
                v_node,
                "workload",
                f"the space is for '{file_workload}' but the model is '{workload}'",
                f"use --model {file_workload}, or change the key to '{workload}'.",
            )
        name = file_workload
    if not name:
        raise AdvisorError(
            f"{origin} does not say which workload it is for.",
            "add 'workload: NAME' to the file or pass --model NAME.",
        )

    machines = _machines(r, top["machines"][1]) if "machines" in top else MachineFilter()
    batch_sizes: tuple[int, ...] = (256, 512, 1024, 2048)
    if "batch_sizes" in top:
        items = r.seq(top["batch_sizes"][1], "batch_sizes")
        if not items:
            raise r.error(top["batch_sizes"][1], "batch_sizes", "must not be empty")
        if len(items) > MAX_BATCH_SIZES:  # issue #28: each batch size is probed here
            raise r.error(
                top["batch_sizes"][1],
                "batch_sizes",
                f"lists {len(items)} batch sizes, more than {MAX_BATCH_SIZES} (each one is "
                "probed on this machine)",
                f"list at most {MAX_BATCH_SIZES}, e.g. powers of two.",
            )
        for node, v in items:
            if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_BATCH:
                raise r.error(
                    node,
                    "batch_sizes",
                    f"must be positive integers, got {v!r} (at most {MAX_BATCH})",
                )
        batch_sizes = tuple(v for _, v in items)
    params: list[Param] = []
    if "hyperparameters" in top:
        h_node = top["hyperparameters"][1]
        entries = r.mapping(h_node, "hyperparameters", None)
        for pname, (_, p_node) in entries.items():
            params.append(_param(r, pname, p_node))
        names = set(entries)
        for p in params:
            if p.condition is not None and p.condition.on not in names:
                node = entries[p.name][1]
                raise r.error(
                    node,
                    f"hyperparameters.{p.name}.condition.on",
                    f"refers to unknown parameter '{p.condition.on}'",
                    f"use one of: {', '.join(sorted(names - {p.name}))}.",
                )
        check_conditions(r, params, entries)
        check_accepted(r, name, params, entries)
    try:
        return JointSpace(
            workload=name,
            machines=machines,
            batch_sizes=batch_sizes,
            hyperparameters=tuple(params),
        )
    except ValueError as exc:
        raise AdvisorError(f"{origin}: {exc}.", _FIX) from exc


def default_space(workload: str) -> JointSpace:
    """The space shipped for a built-in workload (``spaces/<name>.yaml``), else a plain one."""
    path = SPACES_DIR / f"{workload}.yaml"
    if path.exists():
        return load_space(path, workload)
    return JointSpace(workload=workload)


def _read(path_or_text: str | Path) -> tuple[str, str]:
    """A Path, or one line naming a .yaml/.yml or an existing file, is a file; else YAML text."""
    text = str(path_or_text)
    if isinstance(path_or_text, Path) or (
        "\n" not in text
        and (text.endswith((".yaml", ".yml")) or (len(text) < 4096 and Path(text).is_file()))
    ):
        path = Path(path_or_text)
        return read_space_text(path), str(path)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise AdvisorError(
            f"The space text is larger than {MAX_BYTES // 1024} KiB.", "give a smaller space."
        )
    return text, "space"


def _machines(r: _Reader, node: yaml.Node) -> MachineFilter:
    fields = r.mapping(node, "machines", _MACHINE_KEYS)
    kwargs: dict[str, Any] = {}
    for key, (_, v_node) in fields.items():
        full = f"machines.{key}"
        if key in ("providers", "services", "accelerators", "instance_types"):
            kwargs[key] = tuple(str(v) for _, v in r.seq(v_node, full))
        elif key in ("min_gpus", "max_gpus"):
            if key == "max_gpus" and r.value(v_node) is None:
                continue
            v = r.number(v_node, full, integer=True)
            if v < 0:
                raise r.error(v_node, full, f"must be >= 0, got {v}")
            kwargs[key] = int(v)
        elif key == "max_price":
            if r.value(v_node) is None:
                continue
            v = r.number(v_node, full)
            if v <= 0:
                raise r.error(v_node, full, f"must be > 0 (USD per hour), got {v}")
            kwargs[key] = float(v)
        elif key == "region":
            kwargs[key] = str(r.value(v_node))
        else:
            kwargs[key] = r.boolean(v_node, full)
    try:
        return MachineFilter(**kwargs)
    except ValueError as exc:
        raise r.error(node, "machines", str(exc)) from exc


def _param(r: _Reader, name: str, node: yaml.Node) -> Param:
    key = f"hyperparameters.{name}"
    fields = r.mapping(node, key, _PARAM_KEYS)
    if "type" not in fields:
        raise r.error(node, f"{key}.type", "is missing", "add type: float, int or categorical.")
    type_node = fields["type"][1]
    kind = r.value(type_node)
    if kind not in ("float", "int", "categorical"):
        raise r.error(type_node, f"{key}.type", f"must be float, int or categorical, got {kind!r}")
    condition = None
    if "condition" in fields:
        c_node = fields["condition"][1]
        cond = r.mapping(c_node, f"{key}.condition", ("on", "values"))
        if "on" not in cond or "values" not in cond:
            raise r.error(c_node, f"{key}.condition", "needs both 'on' and 'values'")
        values = tuple(v for _, v in r.seq(cond["values"][1], f"{key}.condition.values"))
        condition = Condition(str(r.value(cond["on"][1])), values)
    affects = (
        r.boolean(fields["affects_runtime"][1], f"{key}.affects_runtime")
        if "affects_runtime" in fields
        else False
    )
    try:
        if kind == "categorical":
            if "choices" not in fields:
                raise r.error(node, f"{key}.choices", "is missing for a categorical parameter")
            choices = tuple(v for _, v in r.seq(fields["choices"][1], f"{key}.choices"))
            return CategoricalParam(name, choices, condition, affects)
        for bound in ("low", "high"):
            if bound not in fields:
                raise r.error(node, f"{key}.{bound}", f"is missing for a {kind} parameter")
        integer = kind == "int"
        low = r.number(fields["low"][1], f"{key}.low", integer)
        high = r.number(fields["high"][1], f"{key}.high", integer)
        log = r.boolean(fields["log"][1], f"{key}.log") if "log" in fields else False
        step = r.number(fields["step"][1], f"{key}.step", integer) if "step" in fields else None
        if integer:
            for bound, v in (("low", low), ("high", high)):
                if abs(v) > MAX_INT:
                    raise r.error(
                        fields[bound][1],
                        f"{key}.{bound}",
                        f"must be within +-{MAX_INT:,} (a 32-bit integer), got {v:,}",
                    )
        if affects:
            check_runtime_values(r, node, key, low, high, step, integer)
        if integer:
            return IntParam(
                name,
                int(low),
                int(high),
                log,
                condition,
                affects,
                None if step is None else int(step),
            )
        return FloatParam(
            name, float(low), float(high), log, condition, affects, None if step is None else step
        )
    except ValueError as exc:
        raise r.error(node, key, str(exc).removeprefix(f"{name}: ")) from exc
