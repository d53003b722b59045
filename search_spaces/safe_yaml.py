"""Reading untrusted YAML with bounds: size, aliases, nesting depth, tags and encoding.

``read_space_text`` reads a space file (at most ``MAX_BYTES``, UTF-8, a ``.yaml``/``.yml`` name);
``BoundedLoader`` is PyYAML's safe loader that refuses, while composing and so before anything
is built, more than ``MAX_ALIASES`` alias uses, nesting deeper than ``MAX_DEPTH``, a document
that would expand (aliases followed) past ``MAX_EXPANDED`` characters or refer to itself, and any tag
outside YAML's standard scalar and collection tags (``!!python/object`` and friends). A
497-byte "billion laughs" file is refused in microseconds instead of growing a study database.
Every refusal is an ``AdvisorError`` naming the file and line.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from advisor.errors import AdvisorError

MAX_BYTES = 256 * 1024  # a space is a few hundred bytes; shipped ones are under 1 KiB
MAX_ALIASES = 100
MAX_DEPTH = 32
MAX_EXPANDED = 1_000_000  # characters of the document once aliases are followed
SAFE_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}"
    for t in ("str", "int", "float", "bool", "null", "seq", "map", "merge", "timestamp", "set")
)
_FIX = "simplify the space file: plain mappings, lists and scalars (see docs/suggest.md)."


class BoundedLoader(yaml.SafeLoader):
    """A SafeLoader whose composer counts aliases and depth and checks tags and expansion."""

    def __init__(self, stream: str, origin: str) -> None:
        self.origin = origin
        try:
            super().__init__(stream)
        except yaml.reader.ReaderError as exc:  # control characters PyYAML will not read
            line = stream[: exc.position].count("\n") + 1
            raise AdvisorError(
                f"{origin} line {line}: the character #x{exc.character:04x} is not allowed in "
                "YAML.",
                "remove it (a space file is plain text).",
            ) from exc
        self._aliases = 0
        self._depth = 0

    def _refuse(self, problem: str, mark: yaml.Mark | None) -> AdvisorError:
        where = f" line {mark.line + 1}" if mark is not None else ""
        return AdvisorError(f"{self.origin}{where}: {problem}.", _FIX)

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise self._refuse(
                    f"more than {MAX_ALIASES} YAML aliases (*name)", self.peek_event().start_mark
                )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise self._refuse(
                    f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark
                )
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is not None and node.tag not in SAFE_TAGS:
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise self._refuse(f"the YAML tag {tag} is not allowed", node.start_mark)
        return node

    def fetch_flow_collection_start(self, TokenClass: type) -> None:
        # the scanner's cost grows with the square of the flow depth: stop before composing
        if self.flow_level >= MAX_DEPTH:
            raise self._refuse(f"nested deeper than {MAX_DEPTH} levels", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def compose_document(self) -> yaml.Node | None:
        node: yaml.Node | None = super().compose_document()
        if node is not None:
            _expanded_size(node, self)
        return node


def _expanded_size(root: yaml.Node, loader: BoundedLoader) -> int:
    """Characters of the document with aliases followed; refuses cycles and large expansions."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise loader._refuse("a YAML alias refers to itself", node.start_mark)
        active.add(key)
        total = 1 + (len(node.value) if isinstance(node, yaml.ScalarNode) else 0)
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        active.discard(key)
        if total > MAX_EXPANDED:
            raise loader._refuse(
                f"the document expands to more than {MAX_EXPANDED:,} characters (YAML aliases)",
                node.start_mark,
            )
        sizes[key] = total
        return total

    return size(root)


def read_space_text(path: Path) -> str:
    """The text of a space file: bounded size, UTF-8, a .yaml or .yml name, a regular file."""
    if not path.exists():
        raise AdvisorError(f"Space file {path} does not exist.", "check the path given to --space.")
    if not path.is_file():
        raise AdvisorError(f"Space file {path} is not a file.", "give the path of a .yaml file.")
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise AdvisorError(
            f"Space file {path} does not end in .yaml or .yml.",
            f"rename it to {path.stem}.yaml (a space file is YAML).",
        )
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise AdvisorError(f"Cannot read space file {path}: {exc.strerror}.", "check it.") from exc
    if len(data) > MAX_BYTES:
        raise AdvisorError(
            f"Space file {path} is larger than {MAX_BYTES // 1024} KiB.",
            "a space is a few lines of YAML; check that this is the right file.",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise AdvisorError(
            f"{path} line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x}).",
            "save the file as UTF-8.",
        ) from exc
