"""`Workbench`: one database file, its settings, its narrator, its campaigns."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select

from . import settings as settings_store
from .campaign import Campaign
from .errors import NarratorUnavailable, NotFound, WorkbenchError
from .providers import Narrator
from .settings import Settings
from .store import BranchRow, CampaignRow, Database
from .story import StoryTree

__all__ = ["Workbench"]


class Workbench:
    """Open with `Workbench.open("my.db")`; the file and schema are created if missing."""

    def __init__(self, db: Database, *, background: bool = True):
        self.db = db
        # Derived work (memories, summaries, embeddings) runs after each turn's
        # commit: in a background thread normally, inline when False, so
        # experiments are deterministic.
        self.background = background
        self._narrator: Narrator | None = None
        with db.reading() as s:
            self._settings = settings_store.load(s)

    @classmethod
    def open(cls, path: str | Path = "workbench.db", *, background: bool = True) -> "Workbench":
        return cls(Database(path), background=background)

    # ------------------------------------------------------------ settings
    @property
    def settings(self) -> Settings:
        return self._settings

    def configure(self, narrator: str | Narrator | None = None, **changes: Any) -> Settings:
        """Change settings (saved in the file). `narrator` is "local", "endpoint",
        or a narrator object to use in this process only (not saved)."""
        if narrator is not None and not isinstance(narrator, str):
            if not isinstance(narrator, Narrator):
                raise WorkbenchError(
                    "narrator must be 'local', 'endpoint', or an object with model_id, "
                    "execute(prompt) and context_window()."
                )
            self._narrator = narrator
        elif narrator is not None:
            changes["narrator"] = narrator
            self._narrator = None
        if changes:
            if {"endpoint_url", "model", "api_mode"} & set(changes):
                self._narrator = None
            with self.db.writing() as s:
                self._settings = settings_store.save(s, self._settings, changes)
        return self._settings

    @property
    def narrator(self) -> Narrator:
        if self._narrator is None:
            self._narrator = self._make_narrator()
        return self._narrator

    def _make_narrator(self) -> Narrator:
        if self._settings.narrator == "local":
            from .providers.embedded import LocalNarrator, model_path

            model_path()  # fail now, in words, if the extra is missing
            return LocalNarrator()
        raise NarratorUnavailable(
            "Endpoint narrators (Ollama, llama.cpp server, vLLM) are not wired into this "
            "version yet; use wb.configure(narrator='local') for the embedded model."
        )

    # ------------------------------------------------------------ campaigns
    def new_campaign(
        self,
        title: str,
        premise: str = "",
        protagonist: str = "",
        *,
        opening: str = "",
        ai_instructions: str = "",
        authors_note: str = "",
    ) -> Campaign:
        title = (title or "").strip()
        if not title:
            raise WorkbenchError("A campaign needs a title, e.g. new_campaign('Westhaven').")
        with self.db.writing() as s:
            row = CampaignRow(
                title=title[:200], premise=premise.strip(), protagonist=protagonist.strip()[:200],
                ai_instructions=ai_instructions.strip(), authors_note=authors_note.strip(),
                canon={}, state={},
            )
            s.add(row)
            s.flush()
            root = BranchRow(campaign_id=row.id, parent_id=None, fork_depth=-1)
            s.add(root)
            s.flush()
            row.head_branch_id, row.head_depth = root.id, -1
            if opening.strip():
                StoryTree(s, row).append("start", opening.strip(), {})
            campaign_id = row.id
        return Campaign(self, campaign_id)

    def campaigns(self) -> list[Campaign]:
        with self.db.reading() as s:
            ids = s.scalars(select(CampaignRow.id).order_by(CampaignRow.id)).all()
        return [Campaign(self, i) for i in ids]

    def campaign(self, campaign_id: int) -> Campaign:
        with self.db.reading() as s:
            if s.get(CampaignRow, campaign_id) is None:
                raise NotFound(f"There is no campaign {campaign_id} in {self.db.path}; wb.campaigns() lists them.")
        return Campaign(self, campaign_id)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Workbench":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Workbench {self.db.path}>"
