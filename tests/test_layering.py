"""Dependencies point one way, with no circles and no hidden imports.

An equivalent of import-linter's "layers" and "independence" contracts (its graph builder does
not follow this project's package-dir mapping, where ``advisor.probes`` lives in ``probes/``):
every ``import`` in the shipped source folders, including the lazy ones inside functions and
those under ``TYPE_CHECKING``, is read with :mod:`ast` and checked against the layer of the
module that makes it. A module may import from its own layer or a lower one, never a private
name (``_x``) or private module of another package; the modules' imports form no circle; and
no module loads one of the project's own modules by name (``importlib.import_module``,
``__import__``), which would hide a dependency from these checks.
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
# Highest first; a module belongs to the layer of its longest matching prefix.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("front ends", ("advisor.cli", "advisor.service")),
    # shipped_traces: the built-in workloads' traces taken through the pipeline, to ship
    ("python api", ("advisor", "advisor.pipeline", "advisor.shipped_traces")),
    ("stages", ("advisor.report", "advisor.tuning", "advisor.train", "advisor.export")),
    ("study", ("advisor.study", "advisor.accuracy")),  # accuracy: --tune's short runs
    ("remote probes", ("advisor.remote",)),
    ("values", ("advisor.options", "advisor.records", "advisor.outcome")),
    ("evaluation", ("advisor.evaluation",)),
    ("storage", ("advisor.storage",)),
    # the prediction room, by concept (issue #46): one machine's run on top; a step's time and
    # its memory side by side (neither imports the other: test below); the traced step and the
    # plan's rewrite of it; the kernel model, the iteration and epochs models and the memo
    ("prediction: forecast", ("advisor.prediction.forecast",)),
    ("prediction: time and memory", ("advisor.prediction.timing", "advisor.prediction.memory")),
    ("prediction: the traced step", ("advisor.prediction.step",)),
    (
        "prediction: ground",
        ("advisor.prediction", "advisor.prediction.kernels", "advisor.prediction.run"),
    ),
    ("probes", ("advisor.probes",)),
    ("providers", ("advisor.providers",)),
    ("search spaces", ("advisor.search_spaces",)),
    (
        "base",
        (
            "advisor.errors",
            "advisor.config",
            "advisor._lazy",
            "advisor.durations",
            "advisor.intervals",
            "advisor.progress",  # issue #50: stages, measured rates, plain lines
        ),
    ),
]
ORDER = [name for name, _ in LAYERS]


def layer_of(module: str) -> str:
    """The layer a dotted module name belongs to (its longest matching prefix)."""
    best, best_len = None, -1
    for name, prefixes in LAYERS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = name, len(p)
    top = ("advisor", "advisor.pipeline", "advisor.shipped_traces")
    if best is None or (best == "python api" and module not in top):
        raise ValueError(f"{module} is in no layer: add it to LAYERS")
    return best


def module_name(path: Path) -> str:
    """``advisor/prediction/timing/model.py`` -> ``advisor.prediction.timing.model``."""
    rel = path.relative_to(ROOT)
    package = FOLDERS[rel.parts[0]]
    parts = list(rel.with_suffix("").parts[1:])
    if parts and parts[-1] in ("__init__", "__main__"):
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


def targets(module: str, names: list[str], known: set[str]) -> list[str]:
    """The modules an import statement depends on: ``from advisor.x import y`` is module
    ``advisor.x.y`` when that is a module, else ``advisor.x``."""
    subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in known]
    if module == "advisor" and names:  # `from advisor import x`: a module or a public name
        return [s if s in known else "advisor" for s in (f"advisor.{n}" for n in names)]
    return subs if subs and len(subs) == len(names) else [module, *subs]


def violations(path: Path) -> list[str]:
    """The layering and privacy rules ``path`` breaks, one line each."""
    me = module_name(path)
    mine = ORDER.index(layer_of(me))
    my_package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for line, target, names in imports(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        # `from advisor import x`: x is a module or a name of the API layer
        ts = [f"advisor.{n}" for n in names] if target == "advisor" and names else [target]
        for t in ts:
            theirs = ORDER.index(layer_of(t if t in MODULES or t == "advisor" else "advisor"))
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


MODULES = {module_name(p) for p in source_files()}


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (every import, lazy or not)."""
    graph: dict[str, set[str]] = {}
    for path in source_files():
        me = module_name(path)
        deps = graph.setdefault(me, set())
        for _, target, names in imports(path):
            deps.update(t for t in targets(target, names, MODULES) if t in MODULES and t != me)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_in_a_layer() -> None:
    for path in source_files():
        layer_of(module_name(path))


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_dependencies_point_one_way(folder: str) -> None:
    found = [
        v for p in source_files() if p.relative_to(ROOT).parts[0] == folder for v in violations(p)
    ]
    assert not found, "layering broken:\n" + "\n".join(found)


def test_no_import_circles() -> None:
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_time_and_memory_stand_side_by_side() -> None:
    """Issue #46: a step's time and its memory are read from the same traced step beneath
    them, and neither imports the other (what both need is in the step layer or below)."""
    graph = import_graph()
    sides = ("advisor.prediction.timing", "advisor.prediction.memory")
    found = [
        f"{m} imports {d}"
        for m, deps in graph.items()
        for d in deps
        for a, b in (sides, sides[::-1])
        if (m == a or m.startswith(a + ".")) and (d == b or d.startswith(b + "."))
    ]
    assert not found, "\n".join(found)


def test_no_module_is_loaded_by_name() -> None:
    found = []
    for path in source_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("import_module", "__import__"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    # The legitimate uses: a user's own module:function (workload builders), and optional
    # third-party packages (``advisor._lazy.require``: torch, the cloud SDKs), never ours.
    allowed = {"search_spaces/workloads/_registry.py", "advisor/_lazy.py"}
    found = [f for f in found if f.split(":")[0] not in allowed]
    for path in source_files():
        text = path.read_text(encoding="utf-8")
        if 'require("advisor' in text or "require('advisor" in text:
            found.append(f"{path.relative_to(ROOT)}: require() of the project's own module")
    assert not found, "modules loaded by name (hidden dependencies):\n" + "\n".join(found)


def test_the_checks_catch_an_upward_import_a_private_one_and_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    bad = ROOT / "providers" / "_layering_probe_tmp.py"
    bad.write_text(
        "from advisor.study.run import run_suggest\nfrom advisor.probes.runner import _classify\n"
    )
    try:
        found = violations(bad)
    finally:
        bad.unlink()
    assert any("imports advisor.study.run (study)" in v for v in found)
    assert any("private names ['_classify']" in v for v in found)
