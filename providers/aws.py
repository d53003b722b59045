"""AWS plumbing for the SageMaker back end: checking a request against botocore's service
model (enums, lengths, patterns, which botocore's client does not check), building clients,
and turning botocore errors into one-line ``AdvisorError``s."""

from __future__ import annotations

import re
from typing import Any

from advisor._lazy import require
from advisor.errors import AdvisorError

# -- validation against botocore's service model ------------------------------------------------


def validate_request(
    operation: str,
    request: dict[str, Any],
    feature: str = "SageMaker tuning",
    fix: str = "change the values named (e.g. --instance, --job-name, --role).",
) -> None:
    """Check enums, lengths, patterns and numeric ranges of ``request`` against the SageMaker
    API model (botocore checks only types and required keys). Raises ``AdvisorError`` (with
    ``fix``; ``feature`` names what needed botocore when it is missing)."""
    botocore_session = require("botocore.session", "aws", feature)
    model = botocore_session.get_session().get_service_model("sagemaker")
    shape = model.operation_model(operation).input_shape
    problems: list[str] = []
    _walk(shape, request, operation, problems)
    if problems:
        raise AdvisorError(
            f"SageMaker would reject this request: {'; '.join(problems[:3])}.",
            fix,
        )


def _walk(shape: Any, value: Any, path: str, problems: list[str]) -> None:
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        for key, item in value.items():
            if key in shape.members:
                _walk(shape.members[key], item, f"{path}.{key}", problems)
    elif kind == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            _walk(shape.member, item, f"{path}[{i}]", problems)
    elif kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            _walk(shape.key, key, f"{path}<key>", problems)
            _walk(shape.value, item, f"{path}.{key}", problems)
    elif kind == "string" and isinstance(value, str):
        meta = shape.metadata
        enum = getattr(shape, "enum", None) or meta.get("enum")
        if enum and value not in enum:
            near = [e for e in enum if value.split(".")[-1] in e][:3]
            hint = f" (e.g. {', '.join(near)})" if near else ""
            problems.append(f"{path}={value!r} is not a valid value{hint}")
        if "min" in meta and len(value) < meta["min"]:
            problems.append(f"{path} is shorter than {meta['min']} characters")
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{path}={value!r} is longer than {meta['max']} characters")
        pattern = meta.get("pattern")
        if pattern:
            try:
                compiled = re.compile(pattern)
            except re.error:  # Java-only classes such as \p{L}
                compiled = None
            if compiled is not None and not compiled.fullmatch(value):
                problems.append(f"{path}={value!r} does not match {pattern}")
    elif kind in ("integer", "long") and isinstance(value, int):
        meta = shape.metadata
        if "min" in meta and value < meta["min"]:
            problems.append(f"{path}={value} is below the minimum {meta['min']}")
        if "max" in meta and value > meta["max"]:
            problems.append(f"{path}={value} is above the maximum {meta['max']}")


# -- clients and errors -------------------------------------------------------------------------


def boto3_client(service: str, region: str | None) -> Any:
    boto3 = require("boto3", "aws", "SageMaker tuning")
    botocore_exc = require("botocore.exceptions", "aws", "SageMaker tuning")
    try:
        return boto3.client(service, region_name=region)
    except botocore_exc.NoRegionError as exc:
        raise AdvisorError(
            "No AWS region is set.", "pass --region or set AWS_DEFAULT_REGION."
        ) from exc
    except botocore_exc.ProfileNotFound as exc:
        raise AdvisorError(f"{exc}.", "set AWS_PROFILE to a profile in ~/.aws/config.") from exc


def call(fn: Any, **kwargs: Any) -> Any:
    """Call a boto3 method; credential and service errors become one-line AdvisorErrors."""
    botocore_exc = require("botocore.exceptions", "aws", "SageMaker tuning")
    try:
        return fn(**kwargs)
    except (botocore_exc.NoCredentialsError, botocore_exc.PartialCredentialsError) as exc:
        raise AdvisorError(
            "No AWS credentials found.",
            "run `aws configure` or `aws sso login`, or set AWS_PROFILE.",
        ) from exc
    except botocore_exc.ClientError as exc:
        raise aws_error(exc) from exc
    except botocore_exc.EndpointConnectionError as exc:
        raise AdvisorError(
            f"Cannot reach AWS ({exc.kwargs.get('endpoint_url')}).",
            "check the network connection and --region.",
        ) from exc


def aws_error(exc: Any) -> AdvisorError:
    err = exc.response.get("Error", {})
    code, message = err.get("Code", "Error"), err.get("Message", str(exc))
    if code in (
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
    ):
        return AdvisorError(
            f"AWS refused the credentials ({code}).", "refresh them (`aws sso login`)."
        )
    return AdvisorError(f"SageMaker: {code}: {message}", "check the job name and values.")
