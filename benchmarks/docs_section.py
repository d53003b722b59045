"""Replace (or append) one benchmark's section of docs/benchmarks.md; print a benchmark's
result text and write it where asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def write_section(section: str, text: str, docs: Path = DOCS) -> None:
    """Put ``text`` under the heading ``section`` (up to the next ``## `` heading), or append
    the section when the file has none."""
    doc = docs.read_text()
    block = f"{section}\n\n{text}\n"
    if section in doc:
        head, _, rest = doc.partition(section)
        nxt = rest.find("\n## ")
        doc = head + block + (rest[nxt:] if nxt >= 0 else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + block
    docs.write_text(doc)


def publish(
    section: str,
    text: str,
    write_docs: bool,
    rows: Any = None,
    json_path: Path | None = None,
    docs: Path = DOCS,
) -> None:
    """Print ``text``; write ``rows`` as JSON to ``json_path`` when given; put ``text`` under
    ``section`` of ``docs`` when ``write_docs``."""
    print(text)
    if json_path is not None:
        json_path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    if write_docs:
        write_section(section, text, docs)
