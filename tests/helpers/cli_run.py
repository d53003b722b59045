"""``advisor ARGS`` run in this process, its exit code and output captured."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from advisor.cli.main import main

# A SageMaker submit that only writes its request (--dry-run): cheap, and valid as it stands.
SUBMIT_DRY_RUN = (
    "submit",
    "--provider",
    "sagemaker",
    "--dry-run",
    "--instance",
    "ml.p3.2xlarge",
    "--model",
    "fcn",
)


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def run(*args: str) -> Outcome:
    """``advisor ARGS`` in this process, stdout and stderr captured; a traceback escapes."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Outcome(code, out.getvalue(), err.getvalue())
