"""Copy the measured GPU kernel latencies into the repository, trimmed and gzipped.

The source is the NeuSight artefact's measurement tables (see
``benchmarks/data/gpu-kernels/README.md``). Kept per row: the operator's shape columns,
``Latency`` (ms, rounded to 6 significant digits) and ``Device``; the library's launch-shape
columns (warps/blocks per SM, grid, block) are dropped. ``devices/*.json``,
``models-e2e.csv`` and the licence are copied unchanged (the model configs are in
``examples/model_configs``).

    python benchmarks/kernel_data_copy.py SOURCE_DIR   # the artefact's gpu-kernels folder
"""

from __future__ import annotations

import argparse
import csv
import gzip
import shutil
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "gpu-kernels"
LAUNCH_COLUMNS = ("Warps per SM", "Blocks per SM", "Grid x", "Grid y", "Grid z")
LAUNCH_COLUMNS += ("Block x", "Block y", "Block z")


def trim_table(src: Path, dst: Path) -> int:
    """Write ``src`` to ``dst`` (gzip) without the launch-shape columns; rows written."""
    with src.open(newline="") as fh:
        reader = csv.DictReader(fh)
        keep = [c for c in reader.fieldnames or () if c not in LAUNCH_COLUMNS]
        rows = list(reader)
    dst.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(dst, "wt", newline="", compresslevel=9) as out:
        writer = csv.DictWriter(out, fieldnames=keep, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            row["Latency"] = f"{float(row['Latency']):.6g}"
            writer.writerow(row)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the artefact's gpu-kernels folder")
    args = parser.parse_args(argv)
    src: Path = args.source
    for split in ("train", "test"):
        for table in sorted((src / split).glob("*.csv")):
            n = trim_table(table, OUT / split / f"{table.stem}.csv.gz")
            print(f"{split}/{table.stem}: {n} rows")
    for folder in ("devices",):
        (OUT / folder).mkdir(parents=True, exist_ok=True)
        for f in sorted((src / folder).glob("*.json")):
            shutil.copyfile(f, OUT / folder / f.name)
    shutil.copyfile(src / "models-e2e.csv", OUT / "models-e2e.csv")
    shutil.copyfile(src / "LICENSE-NeuSight.txt", OUT / "LICENSE-NeuSight.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
