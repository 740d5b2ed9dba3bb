"""What an export or an import did, in words and as data.

Both display themselves in a notebook; every string that came from a file
or a reader is escaped, so a title such as `<script>` shows as text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from .limits import size_label

__all__ = ["ExportReport", "ImportReport"]


def _items(title: str, lines: list[str]) -> str:
    if not lines:
        return ""
    return f"<p><b>{escape(title)}</b></p><ul>" + "".join(f"<li>{escape(x)}</li>" for x in lines) + "</ul>"


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
        head = (f"<p>Imported <b>{escape(self.title)}</b> ({escape(self.format)}) as campaign {self.campaign_id}: "
                f"{escape(_counts(self.counts) or 'empty')}.</p>")
        return ("<div class='import-report'>" + head + _items("Repaired", self.repaired)
                + _items("Dropped", self.dropped) + _items("Not carried", self.not_carried)
                + _items("Warnings", self.warnings) + "</div>")


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
        ok = "importable by this version" if self.importable else "<b>not importable by this version</b>"
        return (f"<div class='export-report'><p>{escape(str(self.path))}: {self.bytes:,} bytes, {ok}.</p>"
                + (f"<p>{escape(self.warning)}</p>" if self.warning else "") + "</div>")
