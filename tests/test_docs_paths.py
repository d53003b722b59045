"""Every module path and dotted name ``docs/architecture.md`` names exists, so a rename that
forgets the map fails here instead of misleading the next reader."""

from __future__ import annotations

import importlib
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
FOLDERS = ("advisor/", "probes/", "providers/", "search_spaces/", "tests/", "benchmarks/")
CODE = re.compile(r"`([^`\s]+)`")
BRACES = re.compile(r"\{([^{}]+)\}")


def _expand(text: str) -> list[str]:
    """``providers/{sagemaker,vertex}.py`` -> both paths."""
    m = BRACES.search(text)
    if not m:
        return [text]
    head, tail = text[: m.start()], text[m.end() :]
    return list(itertools.chain(*(_expand(head + part + tail) for part in m.group(1).split(","))))


def named(doc: str) -> tuple[set[str], set[str]]:
    """(paths, dotted names) in the doc's code spans and its layer diagram."""
    spans = CODE.findall(doc)
    diagram = re.search(r"```\n(.*?)```", doc, re.S)
    words = diagram.group(1).replace(",", " ").split() if diagram else []
    paths, dotted = set(), set()
    for token in [*spans, *(w for w in words if "/" in w)]:
        token = token.strip("()`,;:")
        if token.startswith(FOLDERS) and (token.endswith((".py", "/")) or "{" in token):
            paths.update(_expand(token))
        elif re.fullmatch(r"advisor(\.\w+)+", token):
            dotted.add(token)
    return paths, dotted


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute path from the longest module prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


PATHS, DOTTED = named(DOC.read_text(encoding="utf-8"))


def test_the_doc_names_modules() -> None:
    assert len(PATHS) > 60 and len(DOTTED) > 40  # the scan finds what the doc names


def test_every_path_the_doc_names_exists() -> None:
    missing = sorted(p for p in PATHS if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


@pytest.mark.parametrize("name", sorted(DOTTED))
def test_every_dotted_name_the_doc_names_resolves(name: str) -> None:
    assert resolves(name), f"docs/architecture.md names {name}, which does not exist"
