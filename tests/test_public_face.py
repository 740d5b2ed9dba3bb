"""Research code uses the engine's public face only.

`experiments/` and the notebooks import names the engine exports, never a
name starting with `_`, never reach a private attribute of an engine or
experiments module (`retrieval._search`, `ev._stage`) and never set an
engine constant at run time (tuning is a value: `engine.search.Tuning`),
in a subscript too (`stages.FUSIONS[pair] = ...`): an experiment that
reaches inside silently measures something else after a refactor. Read with
`ast`, imports inside functions included; notebooks' code cells too. The
control case writes a small experiment that reaches in, which must be flagged.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = ("engine", "experiments")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def reaches(source: str, where: str) -> list[str]:
    """'where:line: what' for every private name of the engine or the
    experiments that `source` imports or reaches as an attribute."""
    tree = ast.parse(source)
    bound: set[str] = set()  # local names bound to our modules or objects
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            ours = node.level > 0 or module.split(".")[0] in OWN
            if not ours:
                continue
            if any(_private(part) for part in module.split(".")):
                out.append(f"{where}:{node.lineno}: imports from {module}")
            for alias in node.names:
                if _private(alias.name):
                    out.append(f"{where}:{node.lineno}: imports {module}.{alias.name}")
                bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in OWN:
                    bound.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                out.append(f"{where}:{node.lineno}: reaches {ast.unparse(node)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in bound:
            out.append(f"{where}:{node.lineno}: sets an attribute of {node.args[0].id} at run time")
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            targets = [t.value if isinstance(t, ast.Subscript) else t for t in targets]
            targets = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id in bound and (target.attr.isupper() or _private(target.attr)):
                    out.append(f"{where}:{node.lineno}: sets {ast.unparse(target)} at run time")
    return sorted(out, key=lambda hit: (int(hit.split(":")[1]), hit))


def notebook_source(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    # IPython magics and shell lines are not Python
    return "\n".join(line for cell in code for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))


def test_experiments_use_the_public_face_only():
    found = [hit for path in sorted((ROOT / "experiments").glob("*.py"))
             for hit in reaches(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert found == []


def test_notebooks_use_the_public_face_only():
    found = [hit for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
             for hit in reaches(notebook_source(path), str(path.relative_to(ROOT)))]
    assert found == []


def test_the_control_flags_reaching_in():
    source = ("from engine.knowledge import retrieval\nfrom engine.search.lexical import _porter\n"
              "def f(db):\n    from . import retrieval_eval as ev\n    ev._stage(db)\n"
              "    setattr(retrieval, 'CUT', 0)\n    retrieval.CUT = 0\n    return retrieval._search(db)\n")
    assert reaches(source, "x.py") == ["x.py:2: imports engine.search.lexical._porter",
                                       "x.py:5: reaches ev._stage", "x.py:6: sets an attribute of retrieval at run time",
                                       "x.py:7: sets retrieval.CUT at run time", "x.py:8: reaches retrieval._search"]
