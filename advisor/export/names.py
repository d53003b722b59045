"""Issue #45: names the clouds constrain, valid from any model reference.

A model reference is a built-in name or ``module.path:function`` -- dots, colons, underscores,
any length, any Unicode (``examples.transformers:gpt2_large``, ``paquete.módulo:construir``).
Every exported job name is made from it by one rule, the strictest of the targets': lowercase
ASCII letters and digits joined by single dashes, starting with a letter, at most 63
characters. That satisfies each target's own rule, which ``check_name`` checks again:

- SageMaker ``TrainingJobName``: ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`` (botocore's service
  model of ``CreateTrainingJob``; its Stubber does not check patterns, ``validate_request``
  does);
- SkyPilot task names: ``[a-zA-Z0-9]+(?:[._-]{1,2}[a-zA-Z0-9]+)*`` (``sky/task.py``), and a
  managed job's cluster is named from it: ``[a-zA-Z]([-_.a-zA-Z0-9]*[a-zA-Z0-9])?``
  (``sky/skylet/constants.py``);
- Vertex AI ``CustomJob.display_name``: up to 128 UTF-8 characters (``aiplatform_v1``);
- Azure ML job names: letters, digits, ``-`` and ``_``, starting with a letter or digit, at
  most 255 characters (what the export checks; the slug is far inside it);
- the SkyPilot checkpoint bucket: 3 to 63 lowercase letters, digits and dashes, starting and
  ending with a letter or digit (the subset S3's, Cloud Storage's and Azure Blob containers'
  naming rules share).

A name whose slug dropped characters (dots, Unicode) or was cut to fit keeps a short hash of
the whole reference, so two long references that share a prefix still get two names.
"""

from __future__ import annotations

import hashlib
import re
import time
import unicodedata

from advisor.errors import AdvisorError

MAX_NAME = 63  # SageMaker's TrainingJobName limit, the smallest of the targets'
STAMP = "%Y%m%d-%H%M%S"  # UTC, 15 characters
RULES: dict[str, tuple[re.Pattern[str], ...]] = {
    "sagemaker": (re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"),),
    "skypilot": (
        re.compile(r"[a-zA-Z0-9]+(?:[._-]{1,2}[a-zA-Z0-9]+)*"),
        re.compile(r"[a-zA-Z]([-_.a-zA-Z0-9]*[a-zA-Z0-9])?"),
    ),
    "azureml": (re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]{0,254}"),),
    "vertex": (re.compile(r".{1,128}", re.DOTALL),),
}
WHAT = {
    "sagemaker": "1-63 ASCII letters, digits and dashes, starting and ending with a letter or "
    "digit (SageMaker's TrainingJobName)",
    "skypilot": "ASCII letters and digits joined by single '-', '_' or '.', starting with a "
    "letter (SkyPilot's task and cluster names)",
    "azureml": "1-255 ASCII letters, digits, '-' and '_', starting with a letter or digit "
    "(Azure ML job names)",
    "vertex": "1-128 characters (Vertex AI's display name)",
}
BUCKET = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")


def slug(text: str) -> str:
    """``text`` as lowercase ASCII letters and digits joined by single dashes (accents
    dropped, other characters turned into dashes); "" when nothing is left."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:6]


def job_name(workload: str, batch_size: int, stamp: str | None = None) -> str:
    """``advisor-<workload>-b<batch>-<UTC stamp>``, valid for every target, at most 63
    characters; the workload's part keeps a hash of the reference when it had to change."""
    stamp = stamp or time.strftime(STAMP, time.gmtime())
    tail = f"-b{int(batch_size)}-{slug(stamp) or 'x'}"
    room = MAX_NAME - len("advisor-") - len(tail)
    part = slug(workload) or "model"
    if part != workload or len(part) > room:  # changed or cut: keep the reference's hash
        keep = max(room - 7, 1)
        part = f"{part[:keep].strip('-') or 'm'}-{_short_hash(workload)}"
    return f"advisor-{part}{tail}"[:MAX_NAME].strip("-")


def bucket_name(name: str) -> str:
    """A checkpoint bucket's name for job ``name``: ``advisor-ckpt-...``, 3-63 characters."""
    rest = slug(name).removeprefix("advisor-")
    full = f"advisor-ckpt-{rest}" if rest else "advisor-ckpt"
    if len(full) > MAX_NAME:
        full = f"{full[: MAX_NAME - 7].rstrip('-')}-{_short_hash(name)}"
    return full


def check_name(target: str, name: str) -> str:
    """``name`` if the target takes it as a job name; else a one-line error naming the rule."""
    rules = RULES.get(target, ())
    if not all(rule.fullmatch(name) for rule in rules):
        raise AdvisorError(
            f"{name!r} is not a valid {target} job name.",
            f"use {WHAT[target]}, or leave the name out (one is made from the model).",
        )
    return name


def check_bucket(name: str) -> str:
    if not BUCKET.fullmatch(name) or "--" in name:
        raise AdvisorError(
            f"{name!r} is not a valid bucket name.",
            "use 3-63 lowercase letters, digits and single dashes, starting and ending with a "
            "letter or digit.",
        )
    return name
