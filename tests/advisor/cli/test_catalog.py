"""`advisor catalog` through the real CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner, Result

from advisor.cli.main import cli


def run(*args: str) -> tuple[int, str, str]:
    """Run `advisor ...` in a subprocess (one-line errors and exit codes come from main())."""
    proc = subprocess.run(
        [sys.executable, "-m", "advisor.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, proc.stdout, proc.stderr


AWS_V100_2021 = ("--provider", "aws", "--accelerator", "V100", "--snapshot", "2021-02")


def _catalog(*args: str) -> Result:
    """``advisor catalog ARGS`` in this process (click's runner)."""
    return CliRunner().invoke(cli, ["catalog", *args])


def test_done_when_v100_2021_rows() -> None:
    result = _catalog(*AWS_V100_2021)
    assert result.exit_code == 0, result.output
    body = [ln for ln in result.output.splitlines() if ln.startswith("│")]
    assert [ln.split("│")[3].strip() for ln in body] == ["p3.2xlarge", "p3.8xlarge", "p3.16xlarge"]
    assert [ln.split("│")[8].strip() for ln in body] == ["3.06", "12.24", "24.48"]
    assert "3 more rows on managed training services (sagemaker)" in result.output


def test_service_all_adds_the_managed_services() -> None:
    result = _catalog(*AWS_V100_2021, "--service", "all")
    body = [ln for ln in result.output.splitlines() if ln.startswith("│")]
    assert [ln.split("│")[2].strip() for ln in body] == ["ec2"] * 3 + ["sagemaker"] * 3
    assert [ln.split("│")[8].strip() for ln in body][3:] == ["3.8", "14.7", "28.15"]


def test_json_output_is_a_list_of_rows() -> None:
    # the accelerator in lower case: names are matched without case
    args = ("--provider", "aws", "--accelerator", "v100", "--snapshot", "2021-02", "--json")
    result = _catalog(*args, "--service", "all")
    rows = json.loads(result.stdout)
    prices = {r["key"]: r["on_demand_usd_per_h"] for r in rows}
    assert prices["ec2:p3.8xlarge"] == 12.24 and prices["sagemaker:ml.p3.16xlarge"] == 28.15
    assert set(rows[0]) >= {
        "provider",
        "service",
        "instance_type",
        "accelerator",
        "spot_usd_per_h",
        "source",
    }


def test_spot_filter_and_comma_lists() -> None:
    result = _catalog(
        "--provider", "gcp,azure", "--accelerator", "T4", "--spot", "--max-price", "0.2", "--json"
    )
    rows = json.loads(result.stdout)
    assert rows and all(r["spot_usd_per_h"] <= 0.2 and r["accelerator"] == "T4" for r in rows)
    assert {r["provider"] for r in rows} <= {"gcp", "azure"}


def test_unknown_filter_value_is_one_line_exit_2() -> None:
    code, out, err = run("catalog", "--accelerator", "V1OO")
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert (
        err.startswith("Error: Unknown accelerator 'V1OO'.")
        and "use one of:" in err
        and "V100" in err
    )
    code, _, err = run("catalog", "--snapshot", "1999-01")
    assert code == 2 and "Unknown snapshot '1999-01'" in err and "2021-02" in err


def test_accelerators_and_snapshots_subcommands() -> None:
    result = _catalog("accelerators", "--json")
    specs = {s["name"]: s for s in json.loads(result.output)}
    assert specs["H200"]["memory_bandwidth_gbs"] == 4800
    table = _catalog("accelerators")
    assert "TPU-v6e" in table.output and "NVLink" in table.output
    snaps = json.loads(_catalog("snapshots", "--json").output)
    assert [s["snapshot"] for s in snaps][:2] == ["2021-02", "2026-11"]


def test_catalog_command_imports_no_heavy_module() -> None:
    code = (
        "import sys\n"
        "from advisor.cli.main import main\n"
        "try:\n    main(['catalog', '--json'])\nexcept SystemExit:\n    pass\n"
        "heavy = ['boto3', 'botocore', 'torch', 'tensorflow', 'google.cloud.aiplatform', 'azure.ai.ml', 'optuna']\n"
        "print('LOADED:' + ','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines()[-1] == "LOADED:"
