"""What an export or an import did, in words and as data.

Both display themselves in a notebook; every string that came from a file
or a reader is escaped, so a title such as `<script>` shows as text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import html
from .limits import size_label

__all__ = ["ExportReport", "ImportReport"]


def _items(title: str, lines: list[str]) -> html.Html:
    return html.bullet_list(lines, title)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in counts.items() if n)


@dataclass(frozen=True)
class ImportReport:
    """A campaign imported (or cards and knowledge added to one).

    `repaired`: values fixed on the way in; `dropped`: entries left out (a
    save point that pointed nowhere, a malformed section that only mattered
    to itself); `not_carried`: what the source format had and this workbench
    has no place for; `warnings`: what arrived but needs attention."""

    campaign_id: int
    title: str
    format: str
    counts: dict[str, int] = field(default_factory=dict)
    repaired: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    head: tuple[int | None, int] = (None, -1)
    can_undo: bool = False
    can_redo: bool = False

    @property
    def message(self) -> str:
        text = f"Imported “{self.title}” ({self.format}) as campaign {self.campaign_id}: {_counts(self.counts) or 'empty'}."
        for label, lines in (("Repaired", self.repaired), ("Dropped", self.dropped),
                             ("Not carried", self.not_carried), ("Warnings", self.warnings)):
            if lines:
                text += f" {label}: " + "; ".join(lines) + "."
        return text

    def __str__(self) -> str:
        return self.message

    def _repr_html_(self) -> str:
        head = html.fragment("<p>Imported <b>{}</b> ({}) as campaign {}: {}.</p>", self.title, self.format,
                             self.campaign_id, _counts(self.counts) or "empty")
        lists = [_items(label, lines) for label, lines in (("Repaired", self.repaired), ("Dropped", self.dropped),
                                                            ("Not carried", self.not_carried),
                                                            ("Warnings", self.warnings))]
        return html.tag("div", head + html.Html("").join(lists), cls="import-report")


@dataclass(frozen=True)
class ExportReport:
    """Where the file went, how large it is, and whether this workbench can
    import it back (the export checks its own output with the importer)."""

    path: Path
    bytes: int
    format: str
    version: int
    importable: bool
    limit_bytes: int
    counts: dict[str, int] = field(default_factory=dict)
    warning: str = ""
    machine_text_removed: int = 0

    @property
    def message(self) -> str:
        text = (f"Exported {_counts(self.counts) or 'an empty campaign'} to {self.path} "
                f"({size_label(self.bytes)}, {self.bytes:,} bytes).")
        if self.warning:
            text += " " + self.warning
        return text

    def __str__(self) -> str:
        return self.message

    def _repr_html_(self) -> str:
        ok = html.text("importable by this version") if self.importable else html.tag(
            "b", "not importable by this version")
        body = html.fragment("<p>{}: {} bytes, {}.</p>", str(self.path), html.count(self.bytes), ok)
        if self.warning:
            body += html.tag("p", self.warning)
        return html.tag("div", body, cls="export-report")
