"""Managed tuning back ends by name: ``sagemaker``, ``vertex``, ``azureml``."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from advisor.errors import unknown_value_error

if TYPE_CHECKING:
    from advisor.providers.tuning import TuningBackend

# name -> "module:class"; modules are imported only when the back end is used.
BACKENDS: dict[str, str] = {
    "sagemaker": "advisor.providers.sagemaker:SageMakerBackend",
    "vertex": "advisor.providers.vertex:VertexBackend",
    "azureml": "advisor.providers.azureml:AzureMLBackend",
}


def names() -> list[str]:
    return list(BACKENDS)


def backend_class(name: str) -> type[TuningBackend]:
    """The back-end class called ``name``; an unknown name lists the valid ones."""
    if name not in BACKENDS:
        raise unknown_value_error("provider", name, BACKENDS)
    module_name, _, attr = BACKENDS[name].partition(":")
    cls: type[TuningBackend] = getattr(import_module(module_name), attr)
    return cls


def get_backend(name: str, **options: Any) -> TuningBackend:
    """An instance of back end ``name``; ``options`` go to its constructor (client, project...)."""
    return backend_class(name)(**options)
