"""A row as a managed service's single training job, built with that SDK's own types, the way
the remote probes build theirs (``advisor.providers.*_probe``): a SageMaker
``CreateTrainingJob`` request (checked against botocore's service model), a Vertex AI
``CustomJob`` (``google.cloud.aiplatform_v1``), an Azure ML command job (``azure.ai.ml``).

Each is written as the file that service's own tools submit, and ``submit`` sends it:

- SageMaker: JSON for ``aws sagemaker create-training-job --cli-input-json file://FILE``;
- Vertex AI: the ``CustomJob`` as JSON, the body of ``projects.locations.customJobs.create``;
- Azure ML: the job's YAML for ``az ml job create --file FILE`` (``MLClient.jobs``' format).

The role, bucket, project, workspace and image come from ``$ADVISOR_HOME/cloud.yaml``
(``advisor.remote.settings``, as for ``advisor probe --on``); a value not set there is written
as a placeholder that the notes name, to be filled in before submitting.

Spot rows resume where each service keeps checkpoints (issue #45; ``advisor.train`` writes one
every epoch): SageMaker's ``CheckpointConfig`` (``/opt/ml/checkpoints`` synced to S3 under the
output path), Vertex AI's ``AIP_CHECKPOINT_DIR`` (``<baseOutputDirectory>/checkpoints/``,
restarts with ``restart_job_on_worker_restart``), an Azure ML output mounted read-write at a
fixed datastore path named after the job. SageMaker's run time is capped at its 28-day limit.

A row on N machines (issue #49) asks each service for N of them, and ``advisor.train`` joins
them under ``torchrun`` from what the service tells each machine (``advisor.train.launch``):
SageMaker's ``ResourceConfig.InstanceCount``; Vertex AI's workerpool0 (one replica, the head)
plus workerpool1 (N - 1 replicas, same machine and container); Azure ML's ``instance_count``
with a PyTorch distribution of one process per GPU, which Azure ML starts itself.
"""

from __future__ import annotations

import json
import logging
import math
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor._lazy import require
from advisor.errors import AdvisorError
from advisor.export.names import check_name
from advisor.export.names import job_name as make_name
from advisor.export.row import ExportRow
from advisor.providers.aws import validate_request
from advisor.providers.azureml import AzureMLBackend, azure_call, unnamed_workspace_parts
from advisor.providers.catalog import InstanceType
from advisor.providers.probe_jobs import ProbeJobSpec
from advisor.providers.sagemaker_probe import SageMakerProbeJobRunner
from advisor.providers.vertex_probe import VertexProbeJobRunner
from advisor.remote.settings import CloudSettings

MIN_LIMIT_S = 3600  # the job's time limit: twice the report's upper run time, at least 1 h
# SageMaker: "The maximum value is 28 days" (StoppingCondition.MaxRuntimeInSeconds, botocore's
# CreateTrainingJob model and the API reference); MaxWaitTimeInSeconds must be >= it.
SAGEMAKER_MAX_RUNTIME_S = 28 * 24 * 3600
SAGEMAKER_CHECKPOINTS = "/opt/ml/checkpoints"  # CheckpointConfig.LocalPath's default
# Azure ML: every workspace's default blob datastore; a fixed path survives a re-submission.
AZURE_CHECKPOINTS = "azureml://datastores/workspaceblobstore/paths/advisor-checkpoints/{name}/"
AZURE_CHECKPOINT_BINDING = "${{outputs.checkpoints}}"
PLACEHOLDERS = {
    "role": "arn:aws:iam::123456789012:role/REPLACE-WITH-SAGEMAKER-ROLE",
    "s3": "s3://REPLACE-WITH-BUCKET/advisor",
    "gs": "gs://REPLACE-WITH-BUCKET/advisor",
    "project": "REPLACE-WITH-PROJECT",
    "image": "REPLACE-WITH-ADVISOR-IMAGE",  # docker/Dockerfile, pushed to the cloud's registry
}


@dataclass(frozen=True)
class JobFile:
    """What is written: the file's text, its usual suffix, how to submit it, and the values
    still to fill in (placeholders)."""

    text: str
    suffix: str
    submit_hint: str
    fill_in: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def time_limit(row: ExportRow) -> int:
    high = row.runtime_high_s or row.runtime_s or 0.0
    return max(MIN_LIMIT_S, math.ceil(2 * high))


def job_name(row: ExportRow, stamp: str | None = None) -> str:
    """The job's name, valid for every target (``advisor.export.names``)."""
    return make_name(row.workload, row.batch_size, stamp)


def machine(row: ExportRow) -> InstanceType:
    """The row's machine as a catalog row, for the SDK builders (they read its names only:
    provider, service, instance type, accelerator; the CPU and memory figures are unused)."""
    return InstanceType(
        provider=row.provider, service=row.service, instance_type=row.instance_type,
        vcpus=1, memory_gib=0.0, accelerator=row.accelerator if row.gpus else None,
        accelerator_count=row.gpus if row.accelerator else 0, accelerator_memory_gib=0.0,
        on_demand_usd_per_h=row.price_per_hour or 0.0,
        spot_usd_per_h=(row.price_per_hour or 0.0) if row.spot else None,
        price_date="", source="the report's row", price_basis="given",
    )  # fmt: skip


def _spec(
    row: ExportRow,
    image: str,
    output: str | None,
    name: str,
    *,
    max_runtime_s: int | None = None,
    checkpoint_dir: str | None = None,
) -> ProbeJobSpec:
    return ProbeJobSpec(
        job_name=name, machine=machine(row), image=image,
        command=tuple(row.command(checkpoint_dir)),
        max_runtime_s=max_runtime_s or time_limit(row), spot=row.spot, output=output,
    )  # fmt: skip


def _setting(settings: CloudSettings, provider: str, key: str, placeholder: str) -> str:
    value = settings.providers.get(provider, {}).get(key)
    return str(value) if value else placeholder


def _image(settings: CloudSettings, provider: str) -> str:
    return (
        str(settings.providers.get(provider, {}).get("image") or settings.image or "")
        or (PLACEHOLDERS["image"])
    )


def _fill(values: dict[str, str]) -> tuple[str, ...]:
    return tuple(name for name, v in values.items() if "REPLACE-WITH" in v)


# -- SageMaker ---------------------------------------------------------------------------------
SAGEMAKER_FEATURE = "the SageMaker export"
SAGEMAKER_FIX = (
    "set role, output and image under 'sagemaker:' in $ADVISOR_HOME/cloud.yaml (the job name is "
    "made from the model)."
)


def sagemaker_runner(row: ExportRow, settings: CloudSettings) -> SageMakerProbeJobRunner:
    """The runner that builds (and sends) the request, in the row's region (the one the report
    priced; cloud.yaml's when the row has none)."""
    return SageMakerProbeJobRunner(
        role=_setting(settings, "sagemaker", "role", PLACEHOLDERS["role"]),
        region=row.region or settings.providers.get("sagemaker", {}).get("region"),
        output=_setting(settings, "sagemaker", "output", PLACEHOLDERS["s3"]),
        feature=SAGEMAKER_FEATURE, fix=SAGEMAKER_FIX,
    )  # fmt: skip


def sagemaker_request(row: ExportRow, settings: CloudSettings, name: str) -> dict[str, Any]:
    """The ``CreateTrainingJob`` request, built and validated as the probes' are; a spot row
    checkpoints to ``CheckpointConfig`` (under the output path) and may wait for capacity up
    to twice its run time, both within SageMaker's 28-day limit."""
    check_name("sagemaker", name)
    runner = sagemaker_runner(row, settings)
    runtime = min(time_limit(row), SAGEMAKER_MAX_RUNTIME_S)
    ckpt = SAGEMAKER_CHECKPOINTS if row.spot else None
    spec = _spec(row, _image(settings, "sagemaker"), runner.output, name, max_runtime_s=runtime,
                 checkpoint_dir=ckpt)  # fmt: skip
    request = runner.build_request(spec)
    request["ResourceConfig"]["InstanceCount"] = row.nodes
    request["Tags"] = [
        {"Key": "advisor:purpose", "Value": "training"},
        {"Key": "advisor:machine", "Value": row.machine},
    ]
    validate_request("CreateTrainingJob", request, SAGEMAKER_FEATURE, SAGEMAKER_FIX)
    if row.spot:
        stopping = request["StoppingCondition"]
        stopping["MaxWaitTimeInSeconds"] = max(runtime, min(2 * runtime, SAGEMAKER_MAX_RUNTIME_S))
        out = str(runner.output).rstrip("/")
        request["CheckpointConfig"] = {"S3Uri": f"{out}/{name}/checkpoints", "LocalPath": ckpt}
        validate_request("CreateTrainingJob", request, SAGEMAKER_FEATURE, SAGEMAKER_FIX)
    return request


def sagemaker_notes(row: ExportRow) -> tuple[str, ...]:
    if time_limit(row) <= SAGEMAKER_MAX_RUNTIME_S:
        return ()
    return (
        f"the job's time limit ({time_limit(row) / 86400:.1f} days: twice the report's upper run "
        "time) is above SageMaker's 28 days; MaxRuntimeInSeconds is 28 days"
        + (": submit the file again to resume from its checkpoints" if row.spot else ""),
    )


def sagemaker_file(row: ExportRow, settings: CloudSettings, name: str) -> JobFile:
    request = sagemaker_request(row, settings, name)
    values = {  # cloud.yaml's key (the request's field)
        "role (RoleArn)": request["RoleArn"],
        "output (S3OutputPath)": request["OutputDataConfig"]["S3OutputPath"],
        "image (TrainingImage)": request["AlgorithmSpecification"]["TrainingImage"],
    }
    region = row.region or "REGION"
    return JobFile(
        json.dumps(request, indent=2) + "\n", ".json",
        f"aws sagemaker create-training-job --region {region} --cli-input-json file://FILE",
        _fill(values), sagemaker_notes(row),
    )  # fmt: skip


# -- Vertex AI ---------------------------------------------------------------------------------
def vertex_runner(row: ExportRow, settings: CloudSettings) -> VertexProbeJobRunner:
    section = settings.providers.get("vertex", {})
    return VertexProbeJobRunner(
        project=_setting(settings, "vertex", "project", PLACEHOLDERS["project"]),
        location=row.region or str(section.get("location") or "us-central1"),
        output=_setting(settings, "vertex", "output", PLACEHOLDERS["gs"]),
        feature="the Vertex AI export",
    )


def vertex_job(row: ExportRow, settings: CloudSettings, name: str) -> Any:
    """The ``aiplatform_v1.CustomJob``, built as the probes' are (machine, accelerator, spot).
    Its ``baseOutputDirectory`` (``<output>/<name>``) gives ``advisor.train`` its checkpoint
    folder, ``AIP_CHECKPOINT_DIR``; on spot the whole job restarts with its worker."""
    check_name("vertex", name)
    runner = vertex_runner(row, settings)
    job = runner.job(_spec(row, _image(settings, "vertex"), runner.output, name))
    job.labels = {"advisor-purpose": "training"}
    if row.nodes > 1:  # the head is workerpool0's replica; the others, workerpool1's
        head = job.job_spec.worker_pool_specs[0]
        workers = type(head)(machine_spec=head.machine_spec, container_spec=head.container_spec,
                             replica_count=row.nodes - 1)  # fmt: skip
        job.job_spec.worker_pool_specs.append(workers)
    if row.spot:
        job.job_spec.scheduling.restart_job_on_worker_restart = True
    return job


def vertex_file(row: ExportRow, settings: CloudSettings, name: str) -> JobFile:
    job = vertex_job(row, settings, name)
    runner = vertex_runner(row, settings)
    # enum names (NVIDIA_TESLA_T4, SPOT), set fields only: the REST body a person can read
    text = type(job).to_json(
        job, use_integers_for_enums=False, including_default_value_fields=False
    )
    values = {"project": str(runner.project), "output": str(runner.output),
              "image": job.job_spec.worker_pool_specs[0].container_spec.image_uri}  # fmt: skip
    url = f"https://{runner.location}-aiplatform.googleapis.com/v1/{runner.parent}/customJobs"
    return JobFile(
        text + "\n", ".json",
        f'curl -X POST -H "Authorization: Bearer $(gcloud auth print-access-token)" '
        f'-H "Content-Type: application/json" -d @FILE {url}',
        _fill(values),
    )  # fmt: skip


# -- Azure ML ----------------------------------------------------------------------------------
def azureml_command(row: ExportRow) -> str:
    """The job's command line; a spot row checkpoints into its ``checkpoints`` output (the
    binding is left for Azure ML to replace, unquoted)."""
    args = row.command(AZURE_CHECKPOINT_BINDING if row.spot else None)
    return " ".join(a if a == AZURE_CHECKPOINT_BINDING else shlex.quote(a) for a in args)


def azureml_job(row: ExportRow, settings: CloudSettings, name: str) -> Any:
    """The Azure ML command job on serverless compute of the row's VM size and tier; a spot
    row gets a ``checkpoints`` output mounted read-write at a datastore path named after the
    job, so a restarted or re-submitted job resumes from it."""
    check_name("azureml", name)
    ml = require("azure.ai.ml", "azure", "export to Azure ML")
    entities = require("azure.ai.ml.entities", "azure", "export to Azure ML")
    # queue_settings (the spot tier) is an "experimental" class: the SDK logs that on use
    logging.getLogger("azure.ai.ml").setLevel(logging.ERROR)
    image = _image(settings, "azureml")
    environment: Any = image if image.startswith("azureml:") else entities.Environment(image=image)
    outputs = {}
    if row.spot:
        outputs["checkpoints"] = ml.Output(type="uri_folder", mode="rw_mount",
                                           path=AZURE_CHECKPOINTS.format(name=name))  # fmt: skip
    many: dict[str, Any] = {}
    if row.nodes > 1:  # Azure ML starts one process per GPU on each machine, ranks set;
        per = max(row.gpus, 1)  # LOCAL_WORLD_SIZE as torchrun sets it: the machines' split
        many = {"instance_count": row.nodes,
                "distribution": ml.PyTorchDistribution(process_count_per_instance=per),
                "environment_variables": {"LOCAL_WORLD_SIZE": str(per)}}  # fmt: skip
    return ml.command(
        name=name,
        display_name=name,
        experiment_name="advisor-training",
        command=azureml_command(row),
        outputs=outputs,
        environment=environment,
        instance_type=AzureMLBackend._map_type(row.service, row.instance_type),
        job_tier="Spot" if row.spot else "Standard",
        timeout=time_limit(row),
        tags={"advisor:purpose": "training", "advisor:machine": row.machine},
        **many,
    )


def azureml_file(row: ExportRow, settings: CloudSettings, name: str) -> JobFile:
    # ``command()`` builds a node; its ``CommandJob`` is what ``az ml job create`` reads.
    job = azureml_job(row, settings, name)._to_job()
    with tempfile.TemporaryDirectory() as tmp:  # the SDK writes its YAML to a path
        path = Path(tmp) / "job.yml"
        job.dump(path)
        text = path.read_text()
    return JobFile(
        text, ".yml",
        "az ml job create --file FILE --resource-group RG --workspace-name WS (a workspace in "
        f"{row.region or 'the region the report priced'}: serverless jobs run in its region)",
        _fill({"image": _image(settings, "azureml")}),
    )  # fmt: skip


BUILDERS = {"sagemaker": sagemaker_file, "vertex": vertex_file, "azureml": azureml_file}


def submit(target: str, row: ExportRow, settings: CloudSettings, name: str) -> str:
    """Send the job to the service; returns its id. No credentials or settings: one line."""
    _check_submit(target, row, settings, name)
    if target == "sagemaker":
        runner = sagemaker_runner(row, settings)
        runner.check()  # credentials: one line when there are none
        from advisor.providers.aws import call

        call(runner.client.create_training_job, **sagemaker_request(row, settings, name))
        return name
    if target == "vertex":
        vrunner = vertex_runner(row, settings)
        vrunner.check()
        from advisor.providers.vertex import vertex_call

        created = vertex_call(
            vrunner.client.create_custom_job, "export to Vertex AI",
            parent=vrunner.parent, custom_job=vertex_job(row, settings, name),
        )  # fmt: skip
        return str(created.name)
    job = azure_call(
        _azure_backend(settings).client.jobs.create_or_update, azureml_job(row, settings, name),
        feature="export to Azure ML",
    )  # fmt: skip
    return str(job.name)


def _azure_backend(settings: CloudSettings) -> AzureMLBackend:
    section = settings.providers.get("azureml", {})
    return AzureMLBackend(subscription=section.get("subscription"),
                          resource_group=section.get("resource_group"),
                          workspace=section.get("workspace"))  # fmt: skip


def _check_submit(target: str, row: ExportRow, settings: CloudSettings, name: str) -> None:
    """Before anything is sent: every placeholder filled in, the output where the service
    writes, the Azure ML workspace named; each a one-line error naming cloud.yaml's key."""
    section = "azureml" if target == "azureml" else target
    for key in BUILDERS[target](row, settings, name).fill_in:
        raise AdvisorError(
            f"--submit to {target} needs its {key}, which is not set.",
            f"set {key.split(' ')[0]} under '{section}:' in $ADVISOR_HOME/cloud.yaml (or submit "
            "the written file yourself after filling it in).",
        )
    scheme = {"sagemaker": "s3://", "vertex": "gs://"}.get(target)
    output = settings.providers.get(target, {}).get("output")
    if scheme and output and not str(output).startswith(scheme):
        raise AdvisorError(
            f"The {target} export writes its output and checkpoints to {scheme}, not {output!r}.",
            f"set output under '{section}:' in $ADVISOR_HOME/cloud.yaml to a {scheme}BUCKET/PATH.",
        )
    if target == "azureml":
        for what, env in unnamed_workspace_parts(_azure_backend(settings)):
            raise AdvisorError(
                f"--submit to azureml needs its Azure ML {what}, which is not set.",
                f"set {what.replace(' ', '_')} under 'azureml:' in $ADVISOR_HOME/cloud.yaml "
                f"(or {env}).",
            )
