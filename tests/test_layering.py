"""Dependencies point one way: CLI -> Python API (advisor/) -> probes -> providers -> search_spaces.

An equivalent of an import-linter "layers" contract (import-linter's graph builder does not
follow this project's package-dir mapping, where ``advisor.probes`` lives in ``probes/``): every
``import`` in the shipped source folders, including the lazy ones inside functions, is read
with :mod:`ast` and checked against the layer of the module that makes it. A module may import
from its own layer or a lower one, and never a private name (``_x``) or private module of another
package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {  # folder -> the package it imports as (pyproject's package-dir)
    "advisor": "advisor",
    "probes": "advisor.probes",
    "providers": "advisor.providers",
    "search_spaces": "advisor.search_spaces",
}
# Highest first. A module belongs to the first layer whose prefix matches its name.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("front ends", ("advisor.cli", "advisor.service")),
    ("base", ("advisor.errors", "advisor.config", "advisor._lazy")),
    ("probes", ("advisor.probes",)),
    ("providers", ("advisor.providers",)),
    ("search spaces", ("advisor.search_spaces",)),
    ("python api", ("advisor",)),
]
ORDER = ["front ends", "python api", "probes", "providers", "search spaces", "base"]


def layer_of(module: str) -> str:
    """The layer a dotted module name belongs to."""
    for name, prefixes in LAYERS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return name
    raise ValueError(f"{module} is in no layer")


def module_name(path: Path) -> str:
    """``probes/perf/model.py`` -> ``advisor.probes.perf.model``."""
    rel = path.relative_to(ROOT)
    package = FOLDERS[rel.parts[0]]
    parts = list(rel.with_suffix("").parts[1:])
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, imported names) for every advisor import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names if a.name.startswith("advisor")]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and (node.module == "advisor" or node.module.startswith("advisor."))
        ):
            found.append((node.lineno, node.module, [a.name for a in node.names]))
    return found


def owner(module: str) -> str:
    """The package that owns ``module``'s private names: the prefix before a ``_private`` part."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_"):
            return ".".join(parts[:i])
    return ".".join(parts[:-1]) if len(parts) > 1 else module


def violations(path: Path) -> list[str]:
    """The layering and privacy rules ``path`` breaks, one line each."""
    me = module_name(path)
    mine = ORDER.index(layer_of(me))
    my_package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for line, target, names in imports(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        # `from advisor import x`: x is a module or a name of the API layer
        targets = [f"advisor.{n}" for n in names] if target == "advisor" and names else [target]
        for t in targets:
            theirs = ORDER.index(layer_of(t))
            if theirs < mine:
                found.append(f"{where}: {layer_of(me)} module {me} imports {t} ({layer_of(t)})")
            private_module = any(p.startswith("_") for p in t.split(".")[1:])
            if private_module and not (my_package + ".").startswith(owner(t) + "."):
                found.append(f"{where}: {me} imports the private module {t}")
        private_names = [n for n in names if n.startswith("_") and not n.startswith("__")]
        if private_names and target != my_package and target != me:
            found.append(f"{where}: {me} imports private names {private_names} of {target}")
    return found


def source_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_every_module_is_in_a_layer() -> None:
    for path in source_files():
        layer_of(module_name(path))


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_dependencies_point_one_way(folder: str) -> None:
    found = [
        v for p in source_files() if p.relative_to(ROOT).parts[0] == folder for v in violations(p)
    ]
    assert not found, "layering broken:\n" + "\n".join(found)


def test_the_check_catches_an_upward_and_a_private_import(tmp_path: Path) -> None:
    bad = ROOT / "providers" / "_layering_probe_tmp.py"
    bad.write_text(
        "from advisor.study import run_suggest\nfrom advisor.probes.runner import _classify\n"
    )
    try:
        found = violations(bad)
    finally:
        bad.unlink()
    assert any("imports advisor.study (python api)" in v for v in found)
    assert any("private names ['_classify']" in v for v in found)
