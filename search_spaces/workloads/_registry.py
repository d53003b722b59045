"""The workload description and the registry of built-in workloads."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, cast

from advisor.errors import AdvisorError, unknown_value_error


@dataclass(frozen=True)
class Workload:
    """A reference training workload: model, data, recipe and the sizes used to extrapolate.

    ``builders`` maps a framework name ("torch", "keras") to an import path ``module:function``
    of a builder. A builder is called as ``builder(batch_size=..., n_train=..., n_val=...,
    seed=..., **hyperparameters)`` and returns that framework's training setup (see
    ``advisor.search_spaces.workloads.setups``: ``TorchSetup`` and ``KerasSetup``).
    ``n_train``/``n_val`` are the real published dataset sizes used for extrapolation;
    the probe generates only as many samples as it needs.
    ``epochs_to_stabilise`` maps batch size to the epochs the model needs (docs/method.md 2.3).
    ``parameters`` is the trainable parameter count of the default network (the same in
    every framework; tests check it against the built models), None when not recorded.
    """

    name: str
    task: str
    input_shape: tuple[int, ...]
    n_classes: int
    n_train: int
    n_val: int
    builders: dict[str, str]
    recipe: str
    data: str
    default_batch_sizes: tuple[int, ...] = (256, 512, 1024, 2048)
    epochs_to_stabilise: dict[int, int] = field(default_factory=dict)
    default_epochs: int = 10
    parameters: int | None = None

    def epochs_for(self, batch_size: int) -> int:
        """Epochs to stabilise at this batch size: the known value, else the nearest known
        batch size's value, else ``default_epochs``."""
        if batch_size in self.epochs_to_stabilise:
            return self.epochs_to_stabilise[batch_size]
        if not self.epochs_to_stabilise:
            return self.default_epochs
        nearest = min(self.epochs_to_stabilise, key=lambda b: abs(b - batch_size))
        return self.epochs_to_stabilise[nearest]

    def data_bytes(self, n_train: int | None = None, n_val: int | None = None) -> float:
        """Bytes of the dataset a cloud job downloads (issue #14): ``n_train + n_val``
        samples (the published sizes by default) of the input as fp32 tensors, labels left
        out. A size model, not a measured file: the real files may be compressed or not."""
        n = (self.n_train if n_train is None else n_train) + (
            self.n_val if n_val is None else n_val
        )
        return 4.0 * math.prod(self.input_shape) * n

    @property
    def frameworks(self) -> tuple[str, ...]:
        return tuple(self.builders)

    def builder(self, framework: str) -> Callable[..., Any]:
        """Import and return this workload's builder for ``framework``."""
        if framework not in self.builders:
            raise AdvisorError(
                f"Workload '{self.name}' has no {framework} version.",
                f"use --framework {' or '.join(self.builders)}.",
            )
        return load_callable(self.builders[framework])


_REGISTRY: dict[str, Workload] = {}


def register(workload: Workload) -> Workload:
    """Add a workload to the registry (names are unique)."""
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} is already registered")
    _REGISTRY[workload.name] = workload
    return workload


def get(name: str) -> Workload:
    """Return the built-in workload called ``name``, or a one-line error listing the valid ones."""
    _ensure_builtins()
    if name not in _REGISTRY:
        raise unknown_value_error("model", name, _REGISTRY)
    return _REGISTRY[name]


def names() -> list[str]:
    _ensure_builtins()
    return sorted(_REGISTRY)


def all_workloads() -> list[Workload]:
    _ensure_builtins()
    return [_REGISTRY[n] for n in sorted(_REGISTRY)]


def load_callable(path: str) -> Callable[..., Any]:
    """Import ``module:function`` and return the function, with a clear error if it fails;
    an ``hf:`` model's builder (``advisor.search_spaces.hf``) for an ``hf:`` reference."""
    if path.startswith("hf:"):
        from advisor.search_spaces.hf import builder, parse

        parse(path)
        return cast(Callable[..., Any], builder(path))
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise AdvisorError(
            f"'{path}' is not an import path.",
            "write it as module:function, e.g. mypkg.models:build.",
        )
    try:
        module = import_module(module_name)
    except ImportError as exc:
        raise import_error(module_name, exc) from exc
    try:
        fn = getattr(module, attr)
    except AttributeError as exc:
        raise AdvisorError(
            f"Module '{module_name}' has no attribute '{attr}'.", "check the function name."
        ) from exc
    if not callable(fn):
        raise AdvisorError(f"'{path}' is not callable.", "point at a function.")
    return fn


# A missing package -> the extra that installs it (pyproject's optional dependencies).
EXTRAS = {"torch": "torch", "tensorflow": "tensorflow", "keras": "tensorflow", "sklearn": "torch",
          "transformers": "finetune", "peft": "finetune"}  # fmt: skip


def import_error(module_name: str, exc: ImportError) -> AdvisorError:
    """The one line for a module that does not import: the module itself is not found (a
    typo, or its folder is not on PYTHONPATH), or it needs a package that is not installed
    (named, with the extra that installs it when it is one of the frameworks)."""
    missing = getattr(exc, "name", None)
    parts = module_name.split(".")
    if isinstance(exc, ModuleNotFoundError) and missing in {
        ".".join(parts[: i + 1]) for i in range(len(parts))
    }:
        of = "" if missing == module_name else f" (for '{module_name}')"
        return AdvisorError(
            f"No module named '{missing}'{of}.",
            f"check the name, and run from the folder that holds {parts[0]} (or add that "
            "folder to PYTHONPATH).",
        )
    if isinstance(exc, ModuleNotFoundError) and missing:
        top = missing.split(".")[0]
        extra = EXTRAS.get(top)
        how = f"pip install 'advisor[{extra}]'" if extra else f"install the package {top}"
        if top in ("keras", "tensorflow"):
            return AdvisorError(
                f"'{module_name}' needs TensorFlow (Keras), which is not installed.",
                f"{how}, or use --framework torch.",
            )
        return AdvisorError(
            f"'{module_name}' needs '{missing}', which is not installed.", f"{how}."
        )
    return AdvisorError(
        f"Cannot import '{module_name}': {type(exc).__name__}: {exc}.",
        "fix the error the module raises on import (run python -c 'import "
        f"{module_name}' to see it).",
    )


def _ensure_builtins() -> None:
    # Importing the catalogue module registers the built-ins (cheap: no framework imports).
    import_module("advisor.search_spaces.workloads.builtin")
