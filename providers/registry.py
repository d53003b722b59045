"""Managed tuning back ends by name: ``sagemaker``, ``vertex``, ``azureml``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.errors import unknown_value_error

if TYPE_CHECKING:
    from advisor.providers.tuning import TuningBackend

BACKENDS = ("sagemaker", "vertex", "azureml")


def names() -> list[str]:
    return list(BACKENDS)


def backend_class(name: str) -> type[TuningBackend]:
    """The back-end class called ``name`` (its module imported only now); an unknown name
    lists the valid ones."""
    if name == "sagemaker":
        from advisor.providers.sagemaker import SageMakerBackend

        return SageMakerBackend
    if name == "vertex":
        from advisor.providers.vertex import VertexBackend

        return VertexBackend
    if name == "azureml":
        from advisor.providers.azureml import AzureMLBackend

        return AzureMLBackend
    raise unknown_value_error("provider", name, BACKENDS)


def get_backend(name: str, **options: Any) -> TuningBackend:
    """An instance of back end ``name``; ``options`` go to its constructor (client, project...)."""
    return backend_class(name)(**options)
