"""The managed-tuning page's examples work as written: every `advisor submit ... --dry-run`
command in docs/tuning.md builds its request (the study it names made as `suggest` leaves it)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from repo_paths import ROOT

from advisor.cli.main import cli

pytestmark = pytest.mark.slow  # imports each cloud SDK

TUNING_DOC = ROOT / "docs" / "tuning.md"


def _section() -> str:
    """The page from building the image to following the job (before the remote probes)."""
    text = TUNING_DOC.read_text()
    start = text.index("## 1. Build the image")
    return text[start : text.index("\n## Remote probes", start)]


def _commands(prefix: str) -> list[list[str]]:
    joined = re.sub(r"\\\n\s*", " ", _section())
    return [shlex.split(line.split("#")[0]) for line in joined.splitlines()
            if line.startswith(prefix)]  # fmt: skip


def test_the_section_shows_build_push_and_submit_for_each_cloud() -> None:
    section = _section()
    assert "docker build -f docker/Dockerfile" in section
    for registry in ("dkr.ecr.us-east-1.amazonaws.com", "us-docker.pkg.dev", "azurecr.io"):
        assert "docker push " in section and registry in section
    providers = {c[c.index("--provider") + 1] for c in _commands("advisor submit")}
    assert providers == {"sagemaker", "vertex", "azureml"}


def test_every_dry_run_example_builds_its_request(
    storage: str, study_factory: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    from advisor.config import default_storage_url

    study_factory(default_storage_url(), name="fcn-demo", machine="sagemaker:ml.g6e.xlarge")
    commands = [c for c in _commands("advisor submit") if "--dry-run" in c]
    assert len(commands) == 3
    for command in commands:
        result = CliRunner().invoke(cli, command[1:])
        assert result.exit_code == 0, (command, result.output)
        request = json.loads(result.stdout)
        text = json.dumps(request)
        image = command[command.index("--image") + 1]
        assert image in text or command[command.index("--provider") + 1] == "azureml"
        assert "cuda" in text  # every example runs on a GPU machine
