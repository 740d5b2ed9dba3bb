"""The house: every package imports only from the layers below it, and no
import cycle remains, at module or package level.

Imports are read with `ast`, those inside functions included (a deferred
import is still a dependency); only `if TYPE_CHECKING:` blocks are set aside.
Each failure names file:line. The control cases build a small tree with an
upward import and a cycle, which the same checks must flag.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Bottom up. A package may import its own layer (when that makes no cycle)
# and any layer below; never one above.
LAYERS: list[tuple[str, ...]] = [
    ("engine.errors", "engine.html", "engine.display"),
    ("engine.store",),
    ("engine.story",),
    ("engine.budget",),
    ("engine.providers", "engine.context", "engine.vectors"),
    ("engine.search",),
    ("engine.settings", "engine.memory", "engine.knowledge", "engine.cards", "engine.narrative"),
    ("engine.turns", "engine.media"),
    ("engine.bundle", "engine.interop"),
    ("engine.views", "engine.campaign", "engine.workbench", "engine"),
    ("widgets", "experiments"),
]
# Clients of the search layer on one floor: they share `engine.search`, never
# each other's modules.
SIBLINGS = (("engine.memory", "engine.knowledge"),)
# Each of these reads one other tool's format; what they share lives beside
# them (detect, ledger, worldinfo, transcript), never in another reader.
READERS = ("engine.interop.aidungeon", "engine.interop.koboldai", "engine.interop.novelai",
           "engine.interop.sillytavern", "engine.interop.charcard", "engine.interop.risuai")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Imports that are no dependency of the module: under `if TYPE_CHECKING:`,
    and a script's `if __name__ == "__main__":` block (run as a script the
    module is `__main__`, so its imports close no cycle with it)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ("TYPE_CHECKING" in ast.unparse(node.test)
                                         or ast.unparse(node.test) in ("__name__ == '__main__'",)):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def imports_of(path: Path, root: Path, known: set[str]) -> list[tuple[str, int]]:
    """(module imported, line) for every import in the file, resolved to the
    most specific module of the tree that it names."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.append((full if full in known else target, node.lineno))
    return [(m, line) for m, line in found if m.split(".")[0] in {n.split(".")[0] for n in known}]


def layer_of(module: str, layers=LAYERS) -> int | None:
    best, rank = -1, None
    for index, names in enumerate(layers):
        for owner in names:
            if (module == owner or module.startswith(owner + ".")) and len(owner) > best:
                best, rank = len(owner), index
    return rank


def package_of(module: str, layers=LAYERS) -> str:
    owners = [o for names in layers for o in names if module == o or module.startswith(o + ".")]
    return max(owners, key=len) if owners else module


def graph(root: Path, packages: tuple[str, ...]) -> dict[str, list[tuple[str, int, str]]]:
    """{module: [(imported module, line, file)]} over the given top-level packages."""
    files = {module_name(p, root): p for top in packages for p in (root / top).rglob("*.py")}
    known = set(files)
    return {name: [(m, line, str(path.relative_to(root))) for m, line in imports_of(path, root, known) if m != name]
            for name, path in files.items()}


def upward_imports(edges, layers=LAYERS) -> list[str]:
    out = []
    for module, targets in edges.items():
        mine = layer_of(module, layers)
        for target, line, file in targets:
            theirs = layer_of(target, layers)
            if mine is not None and theirs is not None and theirs > mine:
                out.append(f"{file}:{line}: {module} (layer {mine}) imports {target} (layer {theirs})")
    return sorted(out)


def _cycles(nodes: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(nodes[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in nodes:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(nodes[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def cycles(edges, layers=LAYERS) -> list[str]:
    """Module cycles, then package cycles, each with one import that closes it (file:line)."""
    out = []
    modules = {m: {t for t, _, _ in targets} for m, targets in edges.items()}
    packages: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], str] = {}
    for m, targets in edges.items():
        for t, line, file in targets:
            a, b = package_of(m, layers), package_of(t, layers)
            if a != b and not (a.startswith(b + ".") or b.startswith(a + ".")):
                packages[a].add(b)
                where.setdefault((a, b), f"{file}:{line}")
    for comp in _cycles(modules):
        sample = next(f"{file}:{line}" for m in comp for t, line, file in edges[m] if t in comp)
        out.append(f"module cycle {' <-> '.join(comp)} (e.g. {sample})")
    for comp in _cycles({p: packages[p] for p in set(packages) | {t for ts in packages.values() for t in ts}}):
        sample = next(where[(a, b)] for a in comp for b in comp if (a, b) in where)
        out.append(f"package cycle {' <-> '.join(comp)} (e.g. {sample})")
    return out


@pytest.fixture(scope="module")
def edges():
    return graph(ROOT, ("engine", "widgets", "experiments"))


def test_every_engine_package_has_a_layer(edges):
    unplaced = sorted({package_of(m) for m in edges if layer_of(m) is None})
    assert unplaced == [], f"give these a layer in LAYERS (and ARCHITECTURE.md): {unplaced}"


def test_no_import_goes_up_a_layer(edges):
    assert upward_imports(edges) == []


def test_no_import_cycle_at_module_or_package_level(edges):
    assert cycles(edges) == []


def test_no_reader_of_another_tool_imports_another_reader(edges):
    crossings = [f"{file}:{line}: {m} imports {t}" for m, targets in edges.items() if m in READERS
                 for t, line, file in targets if package_of(t) == "engine.interop" and t in READERS]
    assert crossings == []


def sibling_imports(edges, siblings=SIBLINGS) -> list[str]:
    out = []
    for pair in siblings:
        for a in pair:
            for b in pair:
                if a == b:
                    continue
                out += [f"{file}:{line}: {m} imports {t}" for m, targets in edges.items() if package_of(m) == a
                        for t, line, file in targets if package_of(t) == b]
    return sorted(out)


def test_memory_and_knowledge_share_the_search_layer_not_each_other(edges):
    assert sibling_imports(edges) == []


def test_no_migration_imports_live_engine_code(edges):
    """A migration may use the store's own modules and its frozen copies, nothing above."""
    live = [f"{file}:{line}: {m} imports {t}" for m, targets in edges.items() if m.startswith("engine.store")
            for t, line, file in targets if not (t.startswith("engine.store") or t == "engine.errors")]
    assert live == []


# ------------------------------------------------------------------ the control: the checks must bite
@pytest.fixture
def bad_tree(tmp_path):
    pkg = tmp_path / "engine"
    for name, body in {
        "__init__.py": "",
        "store/__init__.py": "",
        "store/models.py": "def helper():\n    from ..turns.record import X  # upward, hidden in a function\n",
        "turns/__init__.py": "",
        "turns/record.py": "from ..store.models import helper\nX = 1\n",
        "story/__init__.py": "",
        "story/tree.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..turns.record import X\n",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(body)
    return tmp_path


def test_the_control_flags_an_upward_import_inside_a_function(bad_tree):
    found = upward_imports(graph(bad_tree, ("engine",)))
    assert found == ["engine/store/models.py:2: engine.store.models (layer 1) imports engine.turns.record (layer 7)"]


def test_the_control_flags_the_cycle_it_makes(bad_tree):
    found = cycles(graph(bad_tree, ("engine",)))
    assert any(f.startswith("module cycle engine.store.models <-> engine.turns.record") for f in found)
    assert any(f.startswith("package cycle engine.store <-> engine.turns") for f in found)


def test_the_control_sets_type_checking_imports_aside(bad_tree):
    edges = graph(bad_tree, ("engine",))
    assert edges["engine.story.tree"] == []


def test_the_control_flags_siblings_reaching_into_each_other(tmp_path):
    pkg = tmp_path / "engine"
    for name, body in {"__init__.py": "", "search/__init__.py": "", "search/stopwords.py": "WORDS = ()\n",
                       "memory/__init__.py": "", "knowledge/__init__.py": "", "knowledge/stopwords.py": "WORDS = ()\n",
                       "memory/guard.py": "from ..search.stopwords import WORDS\nfrom ..knowledge.stopwords import WORDS\n"
                       }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(body)
    found = sibling_imports(graph(tmp_path, ("engine",)))
    assert found == ["engine/memory/guard.py:2: engine.memory.guard imports engine.knowledge.stopwords"]
