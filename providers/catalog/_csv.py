"""Read and validate catalog CSV files; every bad value names the file, line and column."""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from advisor.providers.catalog._types import AcceleratorSpec, InstanceType

from advisor.errors import AdvisorError, unknown_value_error

INSTANCE_COLUMNS = (
    "provider",
    "service",
    "instance_type",
    "region",
    "vcpus",
    "memory_gib",
    "accelerator",
    "accelerator_count",
    "accelerator_memory_gib",
    "on_demand_usd_per_h",
    "spot_usd_per_h",
    "price_date",
    "source",
)
ACCELERATOR_COLUMNS = (
    "name",
    "vendor",
    "generation",
    "fp32_tflops",
    "tf32_tflops",
    "fp16_tflops",
    "bf16_tflops",
    "memory_gib",
    "memory_bandwidth_gbs",
    "link",
    "link_gbs",
    "source",
)
# Issue #27: optional instance columns (older snapshot files lack them): how the price was
# obtained (derived from ``source`` when missing) and whether the type is still current.
INSTANCE_EXTRA_COLUMNS = ("price_basis", "spot_basis", "lifecycle")
# Optional columns (older files may lack them): what the GPU kernel model needs.
KERNEL_COLUMNS = ("sm_count", "boost_clock_mhz", "l2_mib", "tdp_w", "kernel_source")
LINKS = ("PCIe", "NVLink", "ICI")
_DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])(-\d{2})?$")
# accelerator_memory_gib must equal count x per-device memory within this relative tolerance
_MEMORY_TOLERANCE = 0.01

T = TypeVar("T")


class _RowError(ValueError):
    """A bad value in one column (the caller adds file and line)."""


def _fix(path: Path) -> str:
    return f"correct that value in {path} (or remove a broken user snapshot folder)."


def _text(value: str, column: str) -> str:
    value = value.strip()
    if not value:
        raise _RowError(f"{column} is empty")
    return value


def _int(value: str, column: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise _RowError(f"{column} {value!r} is not an integer") from None


def _float(value: str, column: str) -> float:
    try:
        number = float(value.strip())
    except ValueError:
        raise _RowError(f"{column} {value!r} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise _RowError(f"{column} {value!r} is not a finite number")
    return number


def _optional(parse: Callable[[str, str], T]) -> Callable[[str, str], T | None]:
    def inner(value: str, column: str) -> T | None:
        return None if not value.strip() else parse(value, column)

    return inner


def _date(value: str, column: str) -> str:
    value = value.strip()
    if not _DATE.match(value):
        raise _RowError(f"{column} {value!r} is not a date YYYY-MM or YYYY-MM-DD")
    return value


def _read(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """Rows of ``path`` with their line numbers; checks the header."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise AdvisorError(f"Cannot read catalog file {path} ({exc}).", _fix(path)) from exc
    try:
        return _rows(path, handle, columns)
    except UnicodeDecodeError:  # issue #18: one line naming the file and line
        data = path.read_bytes()
        try:
            data.decode("utf-8")
            line = 1
        except UnicodeDecodeError as exc:  # the offset in the whole file, not in a chunk
            line = data[: exc.start].count(b"\n") + 1
        raise AdvisorError(
            f"{path} line {line}: not UTF-8 text.", f"save it as UTF-8. {_fix(path)}"
        ) from None
    except csv.Error as exc:
        raise AdvisorError(f"{path}: not a readable CSV file ({exc}).", _fix(path)) from None


def _rows(path: Path, handle: Any, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    with handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in columns if c not in header]
        if missing:
            raise AdvisorError(
                f"{path} line 1: missing column(s) {', '.join(missing)} "
                f"(header is {', '.join(header) or 'empty'}).",
                f"use the header {','.join(columns)}.",
            )
        rows = []
        for row in reader:
            if None in row:  # more fields than the header
                raise AdvisorError(
                    f"{path} line {reader.line_num}: {len(header) + len(row[None])} fields, "
                    f"but the header has {len(header)}.",
                    "quote values that contain commas.",
                )
            if not any((v or "").strip() for v in row.values()):
                continue
            rows.append((reader.line_num, {k: (v or "") for k, v in row.items()}))
    return rows


def _wrap(path: Path, line: int, build: Callable[[], T]) -> T:
    try:
        return build()
    except (_RowError, ValueError) as exc:
        raise AdvisorError(f"{path} line {line}: {exc}.", _fix(path)) from None


def read_accelerators(path: Path) -> dict[str, AcceleratorSpec]:
    """The accelerator specs table, by name; every column validated."""
    out: dict[str, AcceleratorSpec] = {}
    for line, row in _read(path, ACCELERATOR_COLUMNS):
        spec = _wrap(path, line, functools.partial(_accelerator, row))
        if spec.name in out:
            raise AdvisorError(f"{path} line {line}: accelerator {spec.name!r} is listed twice.")
        out[spec.name] = spec
    return out


def _accelerator(row: Mapping[str, str]) -> AcceleratorSpec:
    opt = _optional(_float)
    spec = AcceleratorSpec(
        name=_text(row["name"], "name"),
        vendor=_text(row["vendor"], "vendor"),
        generation=_text(row["generation"], "generation"),
        fp32_tflops=_float(row["fp32_tflops"], "fp32_tflops"),
        tf32_tflops=opt(row["tf32_tflops"], "tf32_tflops"),
        fp16_tflops=opt(row["fp16_tflops"], "fp16_tflops"),
        bf16_tflops=opt(row["bf16_tflops"], "bf16_tflops"),
        memory_gib=_float(row["memory_gib"], "memory_gib"),
        memory_bandwidth_gbs=_float(row["memory_bandwidth_gbs"], "memory_bandwidth_gbs"),
        link=_text(row["link"], "link"),
        link_gbs=_float(row["link_gbs"], "link_gbs"),
        source=_text(row["source"], "source"),
        sm_count=_optional(_int)(row.get("sm_count", ""), "sm_count"),
        boost_clock_mhz=opt(row.get("boost_clock_mhz", ""), "boost_clock_mhz"),
        l2_mib=opt(row.get("l2_mib", ""), "l2_mib"),
        tdp_w=opt(row.get("tdp_w", ""), "tdp_w"),
        kernel_source=row.get("kernel_source", "").strip(),
    )
    kernel_figures = [getattr(spec, c) for c in KERNEL_COLUMNS[:-1]]
    if any(v is not None for v in kernel_figures):
        if any(v is None or v <= 0 for v in kernel_figures):
            raise _RowError(f"{', '.join(KERNEL_COLUMNS[:-1])} must all be given and > 0")
        if not spec.kernel_source:
            raise _RowError("kernel_source is empty (say where sm_count and the rest come from)")
    for column in ("fp32_tflops", "memory_gib", "memory_bandwidth_gbs", "link_gbs"):
        if getattr(spec, column) <= 0:
            raise _RowError(f"{column} must be > 0, but got {getattr(spec, column)}")
    if spec.link not in LINKS:
        raise _RowError(f"link {spec.link!r} is not one of {', '.join(LINKS)}")
    return spec


def read_instances(
    path: Path, provider: str, accelerators: Mapping[str, AcceleratorSpec]
) -> list[tuple[int, InstanceType]]:
    """The rows of one provider file, each validated through InstanceType, with line numbers."""
    out = []
    for line, row in _read(path, INSTANCE_COLUMNS):
        inst = _wrap(path, line, functools.partial(_instance, row))
        if inst.provider != provider:
            raise AdvisorError(
                f"{path} line {line}: provider {inst.provider!r} in the {provider} file.",
                f"move the row to {inst.provider}.csv or set provider to {provider}.",
            )
        if inst.accelerator is not None:
            spec = accelerators.get(inst.accelerator)
            if spec is None:
                err = unknown_value_error("accelerator", inst.accelerator, accelerators)
                raise AdvisorError(f"{path} line {line}: {err.problem}", err.fix)
            expected = spec.memory_gib * inst.accelerator_count
            if abs(inst.accelerator_memory_gib - expected) > _MEMORY_TOLERANCE * expected:
                raise AdvisorError(
                    f"{path} line {line}: accelerator_memory_gib {inst.accelerator_memory_gib:g} "
                    f"is not {inst.accelerator_count} x {spec.memory_gib:g} GiB ({inst.accelerator}).",
                    "give the instance's total accelerator memory.",
                )
        out.append((line, inst))
    return out


def _instance(row: Mapping[str, str]) -> InstanceType:
    accelerator = row["accelerator"].strip() or None
    return InstanceType(
        provider=_text(row["provider"], "provider"),
        service=_text(row["service"], "service"),
        instance_type=_text(row["instance_type"], "instance_type"),
        region=row["region"].strip(),
        vcpus=_int(row["vcpus"], "vcpus"),
        memory_gib=_positive(_float(row["memory_gib"], "memory_gib"), "memory_gib"),
        accelerator=accelerator,
        accelerator_count=_int(row["accelerator_count"], "accelerator_count"),
        accelerator_memory_gib=_float(row["accelerator_memory_gib"], "accelerator_memory_gib"),
        on_demand_usd_per_h=_float(row["on_demand_usd_per_h"], "on_demand_usd_per_h"),
        spot_usd_per_h=_optional(_float)(row["spot_usd_per_h"], "spot_usd_per_h"),
        price_date=_date(row["price_date"], "price_date"),
        source=_text(row["source"], "source"),
        price_basis=row.get("price_basis", "").strip(),
        spot_basis=row.get("spot_basis", "").strip(),
        lifecycle=row.get("lifecycle", "").strip() or "current",
    )


def _positive(value: float, column: str) -> float:
    if value <= 0:
        raise _RowError(f"{column} must be > 0, but got {value:g}")
    return value


def write_instances(path: Path, rows: list[InstanceType]) -> None:
    """Write rows in the catalog CSV format (the caller renames the file into place)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        columns = (*INSTANCE_COLUMNS, *INSTANCE_EXTRA_COLUMNS)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(getattr(row, c)) for c in columns])


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
