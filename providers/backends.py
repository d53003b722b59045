"""The back ends of each provider in ``advisor.providers.registry``, imported only when used
(a cloud SDK is heavy): its managed tuning back end and its probe job runner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from advisor.providers import registry

if TYPE_CHECKING:
    from advisor.providers.probe_jobs import ProbeJobRunner
    from advisor.providers.tuning import TuningBackend


def names() -> list[str]:
    return list(registry.backend_names())


def backend_class(name: str) -> type[TuningBackend]:
    """The tuning back-end class of provider ``name`` (see ``get``)."""
    return _tuning_backend(registry.get(name).backend)


def get_backend(name: str, **options: Any) -> TuningBackend:
    """An instance of back end ``name``; ``options`` go to its constructor (client, project...)."""
    return backend_class(name)(**options)


def _tuning_backend(backend: str) -> type[TuningBackend]:
    if backend == "sagemaker":
        from advisor.providers.sagemaker import SageMakerBackend

        return SageMakerBackend
    if backend == "vertex":
        from advisor.providers.vertex import VertexBackend

        return VertexBackend
    from advisor.providers.azureml import AzureMLBackend

    return AzureMLBackend


def probe_runner(name: str, cfg: Mapping[str, Any], poll_s: float) -> ProbeJobRunner:
    """The probe job runner of provider ``name``'s managed service, configured from ``cfg``
    (its ``cloud.yaml`` section)."""
    return _probe_runner(registry.get(name).backend, cfg, poll_s)


def _probe_runner(backend: str, cfg: Mapping[str, Any], poll_s: float) -> ProbeJobRunner:
    if backend == "sagemaker":
        from advisor.providers.sagemaker_probe import SageMakerProbeJobRunner

        return SageMakerProbeJobRunner(
            role=cfg.get("role"), region=cfg.get("region"), output=cfg.get("output"), poll_s=poll_s
        )
    if backend == "vertex":
        from advisor.providers.vertex_probe import VertexProbeJobRunner

        return VertexProbeJobRunner(
            project=cfg.get("project"),
            location=cfg.get("location") or "us-central1",
            output=cfg.get("output"),
            poll_s=poll_s,
        )
    from advisor.providers.azureml_probe import AzureMLProbeJobRunner

    return AzureMLProbeJobRunner(
        subscription=cfg.get("subscription"),
        resource_group=cfg.get("resource_group"),
        workspace=cfg.get("workspace"),
        compute=cfg.get("compute"),
        tracking_uri=cfg.get("tracking_uri"),
        poll_s=poll_s,
    )
