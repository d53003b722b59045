"""The clouds the advisor knows, one record each: adding a cloud is one ``Provider`` here plus
its modules (a catalog reader and snapshot, a tuning back end and a probe job runner reached
through ``advisor.providers.backends``, and its
services' billing rule and start-up terms in ``advisor.providers.pricing`` and
``advisor.providers.overheads``; ``tests/providers/test_registry.py`` checks that every
service has them).

The records are plain data (the catalog and every back end read them); the back ends
themselves are reached through ``advisor.providers.backends``, which imports each one only when
it is used.

Each provider sells plain VMs (``vm_service``) and a managed training service
(``managed_service``), which runs both its tuning jobs and the advisor's probe jobs; a VM
row's probe job runs on the managed service's row of the same machine. ``backend`` names the
provider in ``advisor submit --provider``, in ``cloud.yaml`` and in the service's API.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.errors import unknown_value_error


@dataclass(frozen=True)
class Provider:
    """One cloud: its catalog name, services, back ends and settings."""

    name: str  # the catalog's provider column
    label: str
    vm_service: str
    managed_service: str
    backend: str  # --provider, the cloud.yaml section, the service API's provider
    backend_label: str
    options: tuple[str, ...]  # advisor submit's options of this provider
    settings: tuple[str, ...]  # cloud.yaml keys: the options plus output, image, ...
    required: tuple[str, ...]  # what a probe job cannot start without
    managed_prefix: str = ""  # the managed service's type name for a VM type ("ml.")

    @property
    def services(self) -> tuple[str, str]:
        """The managed service first (the back ends' ``services``: jobs run there)."""
        return (self.managed_service, self.vm_service)

    def managed_type(self, instance_type: str) -> str:
        """The managed service's name for a VM's instance type (``g5.xlarge`` ->
        ``ml.g5.xlarge`` on SageMaker)."""
        return self.managed_prefix + instance_type


PROVIDERS: tuple[Provider, ...] = (
    Provider(
        name="aws",
        label="AWS",
        vm_service="ec2",
        managed_service="sagemaker",
        backend="sagemaker",
        backend_label="SageMaker",
        options=("role", "region"),
        settings=("role", "region", "output", "image"),
        required=("role", "output"),
        managed_prefix="ml.",
    ),
    Provider(
        name="gcp",
        label="Google Cloud",
        vm_service="compute-engine",
        managed_service="vertex",
        backend="vertex",
        backend_label="Vertex AI",
        options=("project", "location"),
        settings=("project", "location", "output", "image"),
        required=("project", "output"),
    ),
    Provider(
        name="azure",
        label="Azure",
        vm_service="azure-vm",
        managed_service="azure-ml",
        backend="azureml",
        backend_label="Azure ML",
        options=("subscription", "resource_group", "workspace", "compute"),
        settings=(
            "subscription",
            "resource_group",
            "workspace",
            "compute",
            "image",
            "tracking_uri",
        ),
        # Without a compute cluster the job runs serverless on the machine's own VM size;
        # subscription, resource group and workspace may come from AZURE_* variables (the
        # runner's check says which is missing).
        required=(),
    ),
)
LOCAL = "local"  # this machine: a catalog provider and service of its own, no cloud
OWNED = "owned"  # issue #37: machines you own (advisor.providers.owned), priced by their cost


def get(name: str) -> Provider:
    """The provider called ``name`` (``aws``) or whose back end is (``sagemaker``); an unknown
    name lists the valid ones."""
    for p in PROVIDERS:
        if name in (p.name, p.backend):
            return p
    raise unknown_value_error("provider", name, backend_names())


def for_service(service: str) -> Provider | None:
    """The provider selling catalog ``service`` (None for this machine)."""
    return next((p for p in PROVIDERS if service in p.services), None)


def backend_names() -> tuple[str, ...]:
    """The managed back ends' names: ``sagemaker``, ``vertex``, ``azureml``."""
    return tuple(p.backend for p in PROVIDERS)


def catalog_providers() -> tuple[str, ...]:
    """The catalog's clouds: ``aws``, ``gcp``, ``azure``."""
    return tuple(p.name for p in PROVIDERS)


def services() -> tuple[str, ...]:
    """Every catalog service, this machine's included."""
    return (*(s for p in PROVIDERS for s in (p.vm_service, p.managed_service)), LOCAL, OWNED)
