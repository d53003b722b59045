"""`advisor workloads`: list the built-in workloads (frameworks, shapes, sizes, recipes)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape

from advisor import config
from advisor.cli import console as output
from advisor.search_spaces.workloads import Workload, all_workloads, get

_CACHE = "workload_parameters.json"


def describe(workload: Workload, parameters: int | None) -> dict[str, Any]:
    """A JSON-ready description of ``workload``."""
    return {
        "name": workload.name,
        "task": workload.task,
        "frameworks": list(workload.frameworks),
        "input_shape": list(workload.input_shape),
        "classes": workload.n_classes,
        "parameters": parameters,
        "n_train": workload.n_train,
        "n_val": workload.n_val,
        "default_batch_sizes": list(workload.default_batch_sizes),
        "default_epochs": workload.default_epochs,
        "epochs_to_stabilise": {str(b): e for b, e in workload.epochs_to_stabilise.items()},
        "data": workload.data,
        "recipe": workload.recipe,
        "builders": dict(workload.builders),
        "hyperparameters": hyperparameters(workload),  # issue #28
    }


def hyperparameters(workload: Workload) -> list[dict[str, Any]]:
    """The hyperparameters the builders take (their signatures): default, the values the
    builder accepts, and the range the workload's default space searches (if any)."""
    from advisor.search_spaces.loader import default_space
    from advisor.search_spaces.workloads.accepted import accepted
    from advisor.search_spaces.workloads.hyperparameters import workload_params

    rules = accepted(workload.name)
    space = {p.name: p for p in default_space(workload.name).hyperparameters}
    out = []
    for name, default in workload_params(workload.name).params.items():
        p = space.get(name)
        searched = None
        if p is not None:
            searched = (
                "{" + ", ".join(map(str, p.choices)) + "}"
                if hasattr(p, "choices")
                else f"{p.low:g}..{p.high:g}{' log' if getattr(p, 'log', False) else ''}"
            )
        out.append(
            {
                "name": name,
                "default": default,
                "accepts": rules[name].describe() if name in rules else None,
                "default_space": searched,
            }
        )
    return out


def _parameters(workload: Workload, count: bool) -> int | None:
    """The recorded count; else a cached one; else (with ``count``) build the model once."""
    if workload.parameters is not None:
        return workload.parameters
    path = config.home() / _CACHE
    cache: dict[str, int] = json.loads(path.read_text()) if path.exists() else {}
    if workload.name in cache or not count:
        return cache.get(workload.name)
    from advisor.search_spaces.workloads.counting import count_parameters

    cache[workload.name] = count_parameters(workload)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cache, indent=1, sort_keys=True))
    return cache[workload.name]


def _hyperparameter_table(rows: list[dict[str, Any]], name: str) -> Any:
    from rich.table import Table

    table = Table(
        title=f"Hyperparameters {name} takes (a space file may search these; others are refused)",
        title_justify="left",
    )
    for column in ("name", "default", "accepts", "default space searches"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            escape(repr(row["default"])),
            escape(row["accepts"] or "-"),
            escape(row["default_space"] or "- (fixed at the default)"),
        )
    return table


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape)


@click.command("workloads")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--count",
    is_flag=True,
    help="Build models whose parameter count is not recorded to count them (slow, cached).",
)
def workloads(name: str | None, as_json: bool, count: bool) -> None:
    """List the built-in workloads, or show one (NAME) with its data and recipe.

    Parameter counts are the trainable parameters of the default network, the same in every
    framework. n_train/n_val are the published dataset sizes the advisor extrapolates to;
    probes generate only the few batches they time. A user model is given instead as an
    import path module:function (see `advisor probe --help`).
    """
    chosen = [get(name)] if name else all_workloads()
    rows = [describe(w, _parameters(w, count)) for w in chosen]
    if as_json:
        click.echo(json.dumps(rows if not name else rows[0], indent=2))
        return
    from rich.markup import escape
    from rich.table import Table

    console = output.console()
    if name:
        for key, value in rows[0].items():
            if key != "hyperparameters":
                console.print(f"[bold]{key}[/bold]: {escape(str(value))}", highlight=False)
        console.print(_hyperparameter_table(rows[0]["hyperparameters"], chosen[0].name))
        return
    table = Table(title="Built-in workloads (advisor workloads NAME for data and recipe)")
    for column in ("name", "frameworks", "input", "classes", "parameters", "train", "val"):
        table.add_column(
            column, justify="right" if column not in ("name", "frameworks") else "left"
        )
    for w, row in zip(chosen, rows, strict=True):
        params = row["parameters"]
        table.add_row(
            w.name,
            "/".join(w.frameworks),
            _shape(w.input_shape),
            str(w.n_classes),
            f"{params:,}" if params is not None else "-",
            f"{w.n_train:,}",
            f"{w.n_val:,}",
        )
    console.print(table)
    if any(row["parameters"] is None for row in rows):
        console.print("parameters -: not recorded; --count builds the model to count them.")
