"""`import advisor` and `advisor --help` must stay light: no framework or cloud SDK imported."""

from __future__ import annotations

import subprocess
import sys

HEAVY = [
    "torch",
    "tensorflow",
    "keras",
    "boto3",
    "botocore",
    "sagemaker",
    "google.cloud.aiplatform",
    "azure.ai.ml",
    "skopt",
    "optuna_dashboard",
    "matplotlib",
]

CHECK = """
import sys
{stmt}
heavy = {heavy!r}
loaded = [m for m in heavy if m in sys.modules]
print("LOADED:" + ",".join(loaded))
"""


def _loaded_after(stmt: str) -> list[str]:
    code = CHECK.format(stmt=stmt, heavy=HEAVY)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    line = [ln for ln in out.splitlines() if ln.startswith("LOADED:")][-1]
    return [m for m in line.removeprefix("LOADED:").split(",") if m]


def test_import_advisor_imports_no_heavy_module() -> None:
    assert _loaded_after("import advisor") == []


def test_help_imports_no_heavy_module() -> None:
    stmt = (
        "from advisor.cli.main import cli\n"
        "try:\n    cli.main(args=['--help'], prog_name='advisor')\nexcept SystemExit:\n    pass"
    )
    assert _loaded_after(stmt) == []
