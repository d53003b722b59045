"""Replace (or append) one benchmark's section of docs/benchmarks.md."""

from __future__ import annotations

from pathlib import Path

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
