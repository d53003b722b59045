"""A probe as a SageMaker training job (issue #14): ``CreateTrainingJob`` through boto3.

The job runs the advisor's image with the probe command as ``ContainerEntrypoint`` /
``ContainerArguments`` on one instance of the machine (``ec2:g5.xlarge`` runs as
``ml.g5.xlarge``), within ``StoppingCondition.MaxRuntimeInSeconds`` (spot: managed spot
training, waiting at most twice that). The container writes the result file into
``/opt/ml/model`` (``SM_MODEL_DIR``), which SageMaker uploads as
``<output>/<job>/output/model.tar.gz``; ``_fetch`` reads the file out of that archive.
``DescribeTrainingJob`` gives the job's times and its own billed seconds
(``BillableTimeInSeconds``). The request is checked against botocore's service model
(lengths, patterns, enums) before it leaves the machine.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import time
from collections.abc import Callable
from typing import Any, ClassVar

from advisor.providers.aws import boto3_client, call, validate_request
from advisor.providers.catalog import InstanceType
from advisor.providers.probe_jobs import RESULT_FILE, JobPoll, ProbeJobRunner, ProbeJobSpec

from advisor._lazy import require
from advisor.errors import AdvisorError

MAX_ARCHIVE_BYTES = 64 * 2**20  # a probe's model.tar.gz holds one small JSON file
_STATE = {"InProgress": "running", "Completed": "completed", "Failed": "failed",
          "Stopping": "running", "Stopped": "stopped"}  # fmt: skip
_ENTRY_WORDS = 3  # "python -m advisor.probes.job_entry": the entrypoint; the rest are arguments


class SageMakerProbeJobRunner(ProbeJobRunner):
    """Probe jobs as SageMaker training jobs. ``client``/``s3``/``sts``: boto3 clients (built
    from the environment when not given); ``role``: the execution role ARN; ``output``: the
    ``s3://`` prefix the jobs' files go to."""

    name: ClassVar[str] = "sagemaker"
    providers: ClassVar[tuple[str, ...]] = ("aws",)

    def __init__(
        self,
        client: Any = None,
        s3: Any = None,
        role: str | None = None,
        region: str | None = None,
        output: str | None = None,
        volume_gb: int = 30,
        poll_s: float = 15.0,
        sts: Any = None,
        clock: Callable[[], float] = time.time,
        feature: str = "SageMaker probe jobs",
        fix: str = "pass --role, --output and --image (or set them under 'sagemaker:' in "
        "cloud.yaml).",
    ) -> None:
        super().__init__(poll_s=poll_s, clock=clock)
        self._client, self._s3, self._sts = client, s3, sts
        self.role, self.region, self.output, self.volume_gb = role, region, output, volume_gb
        # What the jobs are for, in errors ("SageMaker probe jobs", "the SageMaker export"),
        # and the fix an invalid request's error names.
        self.feature, self.fix = feature, fix

    def can_run(self, machine: InstanceType) -> bool:
        return machine.service in ("sagemaker", "ec2")

    @staticmethod
    def instance_type(machine: InstanceType) -> str:
        """SageMaker's name for the machine (``ec2:g5.xlarge`` -> ``ml.g5.xlarge``)."""
        itype = machine.instance_type
        return itype if itype.startswith("ml.") else f"ml.{itype}"

    # -- clients ---------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = boto3_client("sagemaker", self.region)
        return self._client

    @property
    def s3(self) -> Any:
        if self._s3 is None:
            self._s3 = boto3_client("s3", self.region)
        return self._s3

    def check(self) -> None:
        if not self.role:
            raise AdvisorError(
                f"{self.feature[0].upper()}{self.feature[1:]} need an execution role.",
                "pass --role arn:aws:iam::<account>:role/<SageMakerExecutionRole> "
                "(or sagemaker: role: in cloud.yaml).",
            )
        if not (self.output or "").startswith("s3://"):
            raise AdvisorError(
                f"{self.feature[0].upper()}{self.feature[1:]} need an s3:// output location, "
                f"got {self.output!r}.",
                "pass --output s3://<bucket>/<prefix> (or sagemaker: output: in cloud.yaml).",
            )
        if self._sts is None:
            self._sts = boto3_client("sts", self.region)
        call(self._sts.get_caller_identity)  # no or refused credentials: one line

    # -- the request -----------------------------------------------------------------------
    def build_request(self, spec: ProbeJobSpec) -> dict[str, Any]:
        """The ``CreateTrainingJob`` request for ``spec``, checked against botocore's model."""
        stopping: dict[str, Any] = {"MaxRuntimeInSeconds": spec.max_runtime_s}
        if spec.spot:  # spot capacity may come late: wait up to twice the run
            stopping["MaxWaitTimeInSeconds"] = 2 * spec.max_runtime_s
        request: dict[str, Any] = {
            "TrainingJobName": spec.job_name,
            "AlgorithmSpecification": {
                "TrainingImage": spec.image,
                "TrainingInputMode": "File",
                "ContainerEntrypoint": list(spec.command[:_ENTRY_WORDS]),
            },
            "RoleArn": self.role or "",
            "OutputDataConfig": {"S3OutputPath": spec.output or self.output or ""},
            "ResourceConfig": {
                "InstanceType": self.instance_type(spec.machine),
                "InstanceCount": 1,
                "VolumeSizeInGB": self.volume_gb,
            },
            "StoppingCondition": stopping,
            "EnableManagedSpotTraining": spec.spot,
            "Tags": [
                {"Key": "advisor:purpose", "Value": "probe"},
                {"Key": "advisor:machine", "Value": spec.machine.key},
            ],
        }
        arguments = list(spec.command[_ENTRY_WORDS:])
        if arguments:
            request["AlgorithmSpecification"]["ContainerArguments"] = arguments
        if spec.env:
            request["Environment"] = dict(spec.env)
        validate_request("CreateTrainingJob", request, self.feature, self.fix)
        return request

    # -- the hooks -------------------------------------------------------------------------
    def _submit(self, spec: ProbeJobSpec) -> str:
        call(self.client.create_training_job, **self.build_request(spec))
        return spec.job_name

    def _poll(self, job_id: str) -> JobPoll:
        job = call(self.client.describe_training_job, TrainingJobName=job_id)
        state = _STATE.get(job.get("TrainingJobStatus", ""), "running")
        started = _ts(job.get("TrainingStartTime"))
        if state == "running" and started is None:
            state = "pending"  # provisioning, pulling the image
        billed = job.get("BillableTimeInSeconds")
        message = job.get("FailureReason")
        if state == "stopped" and not message:
            message = f"stopped ({job.get('SecondaryStatus', 'Stopped')})"
        return JobPoll(
            state,
            created_at=_ts(job.get("CreationTime")),
            started_at=started,
            ended_at=_ts(job.get("TrainingEndTime")),
            billed_s=None if billed is None else float(billed),
            billed_source="BillableTimeInSeconds" if billed is not None else "",
            message=message,
        )

    def _fetch(self, job_id: str, spec: ProbeJobSpec) -> str | None:
        bucket, key = _split_s3(f"{(spec.output or self.output or '').rstrip('/')}/{job_id}")
        key = f"{key}/output/model.tar.gz".lstrip("/")
        botocore_exc = require("botocore.exceptions", "aws", "SageMaker probes")
        try:
            body = call(self.s3.get_object, Bucket=bucket, Key=key)["Body"]
        except AdvisorError as exc:
            cause = exc.__cause__
            if isinstance(cause, botocore_exc.ClientError) and cause.response.get("Error", {}).get(
                "Code"
            ) in ("NoSuchKey", "404"):
                return None
            raise
        return read_result(body.read(MAX_ARCHIVE_BYTES + 1))

    def _stop(self, job_id: str) -> None:
        with contextlib.suppress(AdvisorError):  # best effort: it may have ended meanwhile
            call(self.client.stop_training_job, TrainingJobName=job_id)


def read_result(archive: bytes) -> str | None:
    """The text of ``RESULT_FILE`` inside a ``model.tar.gz`` (None when it is not there)."""
    if len(archive) > MAX_ARCHIVE_BYTES:
        raise AdvisorError(
            f"The probe job's model.tar.gz is over {MAX_ARCHIVE_BYTES // 2**20} MiB.",
            "check what the job writes to /opt/ml/model (only the result file belongs there).",
        )
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.rsplit("/", 1)[-1] == RESULT_FILE:
                    handle = tar.extractfile(member)
                    return None if handle is None else handle.read().decode("utf-8")
    except (tarfile.TarError, UnicodeDecodeError, EOFError) as exc:
        raise AdvisorError(
            f"The probe job's model.tar.gz cannot be read: {exc}.", "run the probe again."
        ) from exc
    return None


def _split_s3(uri: str) -> tuple[str, str]:
    path = uri.removeprefix("s3://")
    bucket, _, key = path.partition("/")
    return bucket, key


def _ts(value: Any) -> float | None:
    """A boto3 datetime (or epoch number) as unix seconds."""
    if value is None:
        return None
    return float(value.timestamp()) if hasattr(value, "timestamp") else float(value)
