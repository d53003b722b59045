"""Property-based tests (Hypothesis) over the CLI's options and the space format.

The invariant, for every generated input: exit 0, or exit 2 with one line ("Error: ...") and
no traceback (``conftest.check``). Each invocation stays cheap: `advisor suggest` runs on the
replay back end with an in-memory storage, commands that would train (probe, estimate,
predict) get an unknown model so that valid numbers end in a fast one-line error, and
`dashboard` gets a storage that cannot exist. The example budget is fixed and derandomized,
so CI runs the same inputs every time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from advisor.search_spaces.loader import load_space
from advisor.search_spaces.space import JointSpace
from cli_run import SUBMIT_DRY_RUN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.errors import AdvisorError

# allow_subnormal=False: the torch probe runner, run in-process by earlier tests, calls
# torch.set_flush_denormal(True) for the whole process, and Hypothesis refuses to draw
# subnormal floats then; they are no part of what is tried here anyway.
FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,  # the same inputs on every run and machine (no saved failures replayed)
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MEMORY = "sqlite:///:memory:"

# Text a user might type where a number is expected, valid or not.
VALID_TEXT = st.one_of(  # values every numeric option takes: the runs that must exit 0
    st.integers(1, 64).map(str),
    st.sampled_from(["1", "2", "3", "10", "60", "0.5", "5m", "2h", "3600s", "90m"]),
)
NUMBER_TEXT = st.one_of(
    VALID_TEXT,
    VALID_TEXT,
    st.integers(-(10**20), 10**20).map(str),
    st.integers(0, 3000).map(str),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False).map(repr),
    st.floats(0.001, 100.0, allow_subnormal=False).map(lambda v: f"{v:.3f}"),
    st.sampled_from(
        [
            "nan",
            "NaN",
            "-nan",
            "inf",
            "-inf",
            "1e400",
            "-0",
            "0",
            "",
            " ",
            "0x10",
            "1_000",
            "1e-400",
            "3.",
            ".5",
            "+7",
            "--1",
            "2h",
            "90m",
            "0s",
            "1e9d",
            "1.5h",
            "4294967296",
        ]
    ),
    st.text(max_size=8).filter(lambda s: "\x00" not in s),
)

SUGGEST_NUMERIC = (
    "--budget",
    "--deadline",
    "--probe-budget",
    "--epochs",
    "--seed",
    "--trials",
    "--timeout",
    "--probe-iterations",
    "--threads",
    "--n-train",
    "--n-val",
    "--top",
)
Commands = dict[str, tuple[tuple[str, ...], tuple[str, ...]]]


def _cases(
    commands: Commands, values: st.SearchStrategy[str], max_size: int
) -> st.SearchStrategy[tuple[str, list[tuple[str, str]]]]:
    """A command of ``commands`` and 1 to ``max_size`` (option, value) pairs of its options
    (the option "" where it has none)."""
    return st.sampled_from(sorted(commands)).flatmap(
        lambda c: st.tuples(
            st.just(c),
            st.lists(
                st.tuples(st.sampled_from(commands[c][1] or ("",)), values),
                min_size=1,
                max_size=max_size,
            ),
        )
    )


OTHER_COMMANDS: Commands = {
    # command -> (fixed arguments that end fast, numeric options to fuzz)
    "catalog": (("catalog", "--json"), ("--min-gpus", "--max-gpus", "--max-price")),
    "probe": (
        ("probe", "--model", "nosuch-model", "--batch-size", "8"),
        (
            "--batch-size",
            "--iterations",
            "--threads",
            "--timeout",
            "--seed",
            "--validation-batches",
        ),
    ),
    "estimate": (
        ("estimate", "--model", "nosuch-model", "--batch-size", "8"),
        (
            "--batch-size",
            "--iterations",
            "--threads",
            "--epochs",
            "--n-train",
            "--n-val",
            "--price",
        ),
    ),
    "predict": (
        ("predict", "--model", "nosuch-model", "-b", "8", "-i", "p3.2xlarge"),
        ("--batch-size", "--epochs", "--threads"),
    ),
    "submit": (
        (*SUBMIT_DRY_RUN, "--batch-size", "64"),
        ("--batch-size", "--epochs", "--max-trials", "--parallel", "--max-runtime"),
    ),
    "dashboard": (
        ("dashboard", "--storage", "sqlite:////nonexistent-advisor-dir/studies.db"),
        ("--port",),
    ),
}


@pytest.mark.slow
@FUZZ
@given(st.lists(st.tuples(st.sampled_from(SUGGEST_NUMERIC), NUMBER_TEXT), min_size=1, max_size=2))
def test_suggest_numeric_options(cli: Any, options: list[tuple[str, str]]) -> None:
    args = [
        "suggest",
        "--model",
        "fcn",
        "--space",
        str(cli.space),
        "--storage",
        MEMORY,
        "--json",
        "--trials",
        "3",
    ]
    args += [f"{name}={value}" for name, value in options]
    cli.run_checked(*args)


@pytest.mark.slow
@settings(FUZZ, max_examples=60)
@given(_cases(OTHER_COMMANDS, NUMBER_TEXT, max_size=3))
def test_other_commands_numeric_options(cli: Any, case: tuple[str, list[tuple[str, str]]]) -> None:
    command, options = case
    args = [*OTHER_COMMANDS[command][0], *(f"{name}={value}" for name, value in options)]
    cli.run_checked(*args)


WORDS = st.one_of(
    st.sampled_from(
        [
            "fcn",
            "lstm",
            "aws",
            "gcp",
            "azure",
            "ec2",
            "all",
            "V100",
            "a100",
            "cpu",
            "2021-02",
            "2026-11",
            "p3.2xlarge",
            "ml.p3.2xlarge",
            "ec2:p3.2xlarge",
            "n1-standard-8",
            "lr",
            "lr,dropout",
            "val_accuracy",
            "s3://bucket/out",
            "my-job",
            "img:1",
            "json:loads",
            "a.b:c",
            ":",
            "..",
            "../x",
            " ",
        ]
    ),
    st.text(max_size=12).filter(lambda s: "\x00" not in s),
)
STRING_OPTIONS: Commands = {
    "suggest": (
        (
            "suggest",
            "--space",
            "{space}",
            "--storage",
            MEMORY,
            "--json",
            "--trials",
            "3",
            "--n-train",
            "100",
        ),
        ("--model", "--snapshot", "--study-name"),
    ),
    "catalog": (("catalog", "--json"), ("--provider", "--service", "--accelerator", "--snapshot")),
    "submit": (
        (*SUBMIT_DRY_RUN, "--batch-size", "64"),
        ("--instance", "--model", "--job-name", "--output", "--metric", "--tune", "--image"),
    ),
    "workloads": (("workloads", "--json"), ()),
}


@pytest.mark.slow
@settings(FUZZ, max_examples=60)
@given(_cases(STRING_OPTIONS, WORDS, max_size=2))
def test_string_options(cli: Any, case: tuple[str, list[tuple[str, str]]]) -> None:
    command, options = case
    fixed = [a.replace("{space}", str(cli.space)) for a in STRING_OPTIONS[command][0]]
    if command == "workloads":  # the argument NAME
        args = [*fixed, options[0][1]]
    else:
        args = [*fixed, *(f"{name}={value}" for name, value in options)]
    cli.run_checked(*args)


# --- the space format -------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False),
    st.floats(0.0, 1.0, allow_subnormal=False),
    st.text(max_size=6),
    st.sampled_from(["float", "int", "categorical", "sgd", "adam", "adamm", "fcn", "lr", "x"]),
)
ANY = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
BOUND = st.one_of(st.floats(-1.0, 3.0, allow_subnormal=False), st.integers(-5, 300), SCALARS)
PARAM = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["float", "int", "categorical"]) | SCALARS,
        "low": BOUND,
        "high": BOUND,
        "log": st.booleans() | SCALARS,
        "choices": st.lists(SCALARS | st.sampled_from(["sgd", "adam", "momentum"]), max_size=4)
        | SCALARS,
        "condition": st.fixed_dictionaries(
            {},
            optional={
                "on": st.sampled_from(["lr", "dropout", "optimizer", "nosuch"]) | SCALARS,
                "values": st.lists(SCALARS | st.just("sgd"), max_size=3) | SCALARS,
            },
        )
        | SCALARS,
        "affects_runtime": st.booleans() | SCALARS,
        "unknown_key": SCALARS,
    },
)
HP_NAMES = st.sampled_from(
    ["lr", "dropout", "momentum", "weight_decay", "optimizer", "beta1", "machine", "batch_size"]
) | st.text(max_size=5)
MACHINES = st.fixed_dictionaries(
    {},
    optional={
        "providers": st.lists(st.sampled_from(["aws", "gcp", "local", "nosuch"]), max_size=2)
        | SCALARS,
        "accelerators": st.lists(st.sampled_from(["V100", "K80", "cpu", "v1OO"]), max_size=2)
        | SCALARS,
        "instance_types": st.lists(
            st.sampled_from(["p3.2xlarge", "p3.2xlarg", "ec2:p2.xlarge"]), max_size=2
        )
        | SCALARS,
        "min_gpus": BOUND,
        "max_gpus": BOUND,
        "max_price": BOUND,
        "spot": st.booleans() | SCALARS,
        "include_local": st.booleans() | SCALARS,
    },
)
DOCUMENT = st.fixed_dictionaries(
    {},
    optional={
        "workload": st.sampled_from(["fcn", "lstm", "nosuch"]) | SCALARS,
        "machines": MACHINES | ANY,
        "batch_sizes": st.lists(st.sampled_from([256, 512]) | st.integers(-5, 10**12), max_size=3)
        | ANY,
        "hyperparameters": st.dictionaries(HP_NAMES, PARAM | ANY, max_size=4) | ANY,
        "extra": ANY,
    },
)
TRICKS = st.sampled_from(
    [
        "",
        "&a x",
        "*a",
        "!!python/object/apply:os.system [echo]",
        "!custom x",
        "\t",
        "---\n",
        "[" * 40,
        "{a: *b}",
        "? [a]\n: b",
        "%TAG ! tag:x,2000:\n---",
        "\x85",
        "\ufeff",
    ]
)


def _yaml(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)


FLOAT_PARAM = st.fixed_dictionaries(
    {
        "type": st.just("float"),
        "low": st.floats(-1.0, 3.0, allow_subnormal=False),
        "high": st.floats(-1.0, 3.0, allow_subnormal=False),
    },
    optional={"log": st.booleans()},
)
WELL_FORMED = st.fixed_dictionaries(  # the right shape, values in and out of what fcn takes
    {
        "workload": st.just("fcn"),
        "batch_sizes": st.lists(st.sampled_from([256, 512]), min_size=1, max_size=2, unique=True),
        "hyperparameters": st.dictionaries(
            st.sampled_from(["lr", "dropout", "momentum", "weight_decay", "beta1"]),
            FLOAT_PARAM,
            max_size=3,
        ),
    },
    optional={
        "machines": st.fixed_dictionaries(
            {},
            optional={
                "accelerators": st.lists(
                    st.sampled_from(["V100", "K80", "cpu"]), min_size=1, max_size=2
                ),
                "max_price": st.floats(0.1, 50.0, allow_subnormal=False),
                "spot": st.booleans(),
            },
        )
    },
)
SPACE_TEXT = st.one_of(
    st.builds(_yaml, WELL_FORMED),
    st.builds(_yaml, WELL_FORMED),
    st.builds(_yaml, DOCUMENT),
    st.builds(
        lambda d, t, at: (lambda s: s[:at] + t + s[at:])(_yaml(d)),
        DOCUMENT,
        TRICKS,
        st.integers(0, 200),
    ),
    st.text(max_size=60),
)
SPACE_FILE = st.one_of(
    SPACE_TEXT.map(lambda s: s.encode("utf-8", "surrogatepass")), st.binary(max_size=60)
)


@pytest.mark.slow
@settings(FUZZ, max_examples=40)
@given(SPACE_FILE)
def test_space_files_through_suggest(cli: Any, tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzzed.yaml"
    path.write_bytes(data)
    cli.run_checked(
        "suggest",
        "--model",
        "fcn",
        "--space",
        str(path),
        "--storage",
        MEMORY,
        "--json",
        "--trials",
        "3",
    )


@settings(FUZZ, max_examples=200)
@given(SPACE_TEXT)
def test_space_text_loads_or_says_why_in_one_line(cli: Any, text: str) -> None:
    """The Python API: a JointSpace, or an AdvisorError of one line naming the space."""
    try:
        space = load_space(text, "fcn")
    except AdvisorError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(("space", "Space", "The space"))
        cli.log(["load_space", text], 2)
        return
    assert isinstance(space, JointSpace) and space.workload == "fcn"
    cli.log(["load_space", text], 0)
