"""Issue #26: a model too big or too slow for this machine is traced without running it, and
`advisor predict` says so: GPT-2 Large (774 M parameters) at batch 1 on an L4 and an H100."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from click.testing import CliRunner

from advisor.cli.main import cli


def _no_probe(*_: Any, **__: Any) -> Any:
    raise AssertionError("a probe ran for a model this machine cannot time")


@pytest.mark.slow
def test_gpt2_large_is_predicted_from_its_trace_without_a_local_timing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("advisor.cli.probe_view.run_with_progress", _no_probe)
    monkeypatch.setattr("advisor.probes.runner.run_probe", _no_probe)
    args = ["predict", "--model", "examples.transformers:gpt2_large", "--batch-size", "1",
            "--instances", "ec2:g6.xlarge,ec2:p5.4xlarge"]  # fmt: skip
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "traced without a local timing" in text
    assert "GPU and TPU rows read the operator trace only" in text
    assert "spec extrapolation for H100, L4" in text
    # under the default bf16 plan the float32 optimizer step of 774M parameters leads at
    # batch 1; the products' backward is among the top three
    assert re.search(r"Dominated by \(share of device time\): H100: [^;]*backward linear", text)
    doc = CliRunner().invoke(cli, [*args, "--json"])
    rows = {r["machine"]: r for r in json.loads(doc.stdout)["machines"]}
    h100, l4 = rows["ec2:p5.4xlarge"]["prediction"], rows["ec2:g6.xlarge"]["prediction"]
    assert h100["phases"]["t2"]["value"] < l4["phases"]["t2"]["value"]
    assert h100["breakdown"]["launches"] > 1000  # 36 transformer blocks, forward and backward
