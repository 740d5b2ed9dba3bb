"""The README stays a page read in one sitting, and the documentation's links hold.

A newcomer should meet what the workbench is, the two commands and a first
example before anything else, and find every engine package on the map; a
moved module or a renamed page must not leave a dead link behind. Each check
has a control: a small made-up page it must flag.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

MAX_README_BYTES = 15 * 1024   # about ten minutes of reading (issue 26)
FIRST_EXAMPLE_BY_LINE = 80

# [text](target) and [text](target "title"); images too. Not inside code.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(text: str) -> str:
    """The text with fenced code blocks and inline code blanked (lines kept)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken_links(page: Path) -> list[str]:
    """Every relative link of the page whose file (or heading anchor) does not exist."""
    bad = []
    for lineno, line in enumerate(prose(page.read_text(encoding="utf-8")).splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):   # http:, mailto:...
                continue
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / unquote(file_part)).resolve() if file_part else page
            where = f"{page.name}:{lineno}: {target}"
            if not dest.exists():
                bad.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{where} (no heading with that anchor)")
    return bad


def first_python_example(text: str) -> int | None:
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip() == "```python":
            return lineno
    return None


def engine_parts(engine: Path) -> list[str]:
    """`engine/<package>/` for each package, `engine/<module>.py` for each top-level module."""
    packages = [f"engine/{p.name}/" for p in engine.iterdir() if (p / "__init__.py").is_file()]
    modules = [f"engine/{p.name}" for p in engine.glob("*.py") if p.name != "__init__.py"]
    return sorted(packages + modules)


def unnamed(readme_text: str, engine: Path) -> list[str]:
    return [part for part in engine_parts(engine) if part not in readme_text]


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


# ------------------------------------------------------------------ the README


def test_readme_is_read_in_one_sitting():
    size = len(README.read_bytes())
    assert size <= MAX_README_BYTES, (
        f"README.md is {size:,} bytes, over {MAX_README_BYTES:,}: move detail to a page in docs/ and link it")


def test_readme_has_a_python_example_early():
    line = first_python_example(README.read_text(encoding="utf-8"))
    assert line is not None and line <= FIRST_EXAMPLE_BY_LINE, (
        f"the README's first ```python example starts at line {line}; it must start by line {FIRST_EXAMPLE_BY_LINE}")


def test_readme_names_every_engine_package():
    missing = unnamed(README.read_text(encoding="utf-8"), ROOT / "engine")
    assert missing == [], f"name these in the README's map of the folders: {missing}"


def test_readme_names_the_folders():
    text = README.read_text(encoding="utf-8")
    folders = ["widgets/", "notebooks/", "experiments/", "evidence/", "tests/", "scripts/", "docs/"]
    assert [f for f in folders if f"`{f}`" not in text] == []


# ------------------------------------------------------------------ links


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_readme_links_every_docs_page():
    text = README.read_text(encoding="utf-8")
    linked = {unquote(t.partition("#")[0]) for t in LINK.findall(prose(text))}
    unlinked = [p.name for p in sorted(DOCS.glob("*.md")) if f"docs/{p.name}" not in linked]
    assert unlinked == [], f"link these from the README's documentation table: {unlinked}"


# ------------------------------------------------------------------ controls


def test_control_broken_links_are_flagged(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("# A page\n\n## Set-up: what is built\n", encoding="utf-8")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n\n"
        "[fine](there.md) [fine anchor](there.md#set-up-what-is-built) [web](https://example.org/x)\n"
        "[gone](missing.md) [bad anchor](there.md#nowhere)\n"
        "```\n[in code](ignored.md)\n```\n"
        "`[inline](ignored.md)` [self](#page)\n",
        encoding="utf-8")
    found = broken_links(page)
    assert [f.split(": ", 1)[1] for f in found] == [
        "missing.md (no such file)", "there.md#nowhere (no heading with that anchor)"]


def test_control_a_missing_package_and_a_late_example_are_flagged(tmp_path):
    engine = tmp_path / "engine"
    for name in ("story", "budget"):
        (engine / name).mkdir(parents=True)
        (engine / name / "__init__.py").write_text("", encoding="utf-8")
    (engine / "frozen").mkdir()          # no __init__.py: not a package
    (engine / "errors.py").write_text("", encoding="utf-8")
    (engine / "__init__.py").write_text("", encoding="utf-8")
    assert unnamed("`engine/story/` and `engine/errors.py`", engine) == ["engine/budget/"]
    late = "# Title\n" + "text\n" * 90 + "```python\nprint(1)\n```\n"
    assert first_python_example(late) == 92


def test_slug_matches_github():
    assert slug(" Set-up: what is built, and what to do") == "set-up-what-is-built-and-what-to-do"
    assert slug(" Turn records: `camp.records()`") == "turn-records-camprecords"
    assert slug(" What is in `evidence/`") == "what-is-in-evidence"
    assert slug(" Other tools' files") == "other-tools-files"
