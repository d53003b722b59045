"""Every module path and dotted name ``docs/architecture.md`` names exists, so a rename that
forgets the map fails here instead of misleading the next reader."""

from __future__ import annotations

import ast
import importlib
import importlib.util
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


def _top_level_names(origin: str) -> set[str]:
    """Names a module's source defines or imports at its top level, and its ``__all__``
    (read with ``ast``: importing every module the doc names would load the frameworks)."""
    tree = ast.parse(Path(origin).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                names.update(ast.literal_eval(node.value))  # type: ignore[arg-type]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or a name defined at the top of its longest module
    prefix (a deeper attribute is looked up by importing that module). Packages are walked
    down from the top, so no module is imported just to find its children."""
    parts = name.split(".")
    for cut in range(1, len(parts) + 1):
        spec = importlib.util.find_spec(".".join(parts[:cut]))
        if spec is None:
            return False
        rest = parts[cut:]
        if not rest:
            return True
        if spec.submodule_search_locations is not None and (
            importlib.util.find_spec(".".join(parts[: cut + 1])) is not None
        ):
            continue  # a package whose child is the next part
        if spec.origin is None or rest[0] not in _top_level_names(spec.origin):
            return False
        if len(rest) == 1:
            return True
        obj: object = importlib.import_module(".".join(parts[:cut]))
        for attr in rest:
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
