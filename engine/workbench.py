"""`Workbench`: one database file, its settings, its narrator, its campaigns."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select

from . import interop
from . import settings as settings_store
from .budget import standing
from .bundle import facade
from .campaign import Campaign, Services
from .errors import NotAllowed, NotFound, WorkbenchError
from .providers import Narrator
from .providers import window as windows
from .providers.connection import ConnectionReport, check_connection
from .providers.embedded import LocalNarrator, check_gguf
from .providers.embedders import Embedder, LlamaEmbedder, MiniLMEmbedder, OpenAIEmbedder
from .providers.openai import OpenAINarrator
from .settings import Settings
from .store import BranchRow, CampaignRow, Database
from .story import StoryTree
from .turns.after import derived_runner

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
        self._embedder: Embedder | None = None
        with db.reading() as s:
            self._settings = settings_store.load(s)
        self._derived = derived_runner(db, narrator=lambda: self.narrator, embedder=self.embedder_or_none,
                                       settings=lambda: self._settings, background=lambda: self.background)

    @classmethod
    def open(cls, path: str | Path = "workbench.db", *, background: bool = True) -> Workbench:
        return cls(Database(path), background=background)

    # ------------------------------------------------------------ settings
    @property
    def settings(self) -> Settings:
        return self._settings

    def configure(self, narrator: str | Narrator | None = None, *, endpoint: str | None = None,
                  embedder: str | Embedder | None = None, **changes: Any) -> Settings:
        """Change settings (saved in the file).

        `narrator` is "local", "endpoint", or a narrator object used in this
        process only (not saved); `endpoint=` sets the URL and selects it.
        `embedder` is "local", "endpoint", "none" or an embedder object."""
        if endpoint is not None:
            changes["endpoint_url"] = endpoint
            if narrator is None:
                narrator = "endpoint"
        if embedder is not None and not isinstance(embedder, str):
            if not isinstance(embedder, Embedder):
                raise WorkbenchError("embedder must be 'local', 'endpoint', 'none' or an object with model_id and embed(texts).")
            self._embedder = embedder
        elif embedder is not None:
            changes["embedder"] = embedder
            self._embedder = None
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
        _check_model_files(changes)
        if changes:
            with self.db.writing() as s:
                new = settings_store.save(s, self._settings, changes)
            moved = {k for k in changes if getattr(new, k) != getattr(self._settings, k)}
            self._settings = new
            if moved & {"endpoint_url", "model", "api_mode", "timeout_seconds", "context_window_override"}:
                windows.cache_clear()
                if isinstance(self._narrator, OpenAINarrator):
                    self._narrator = None
            if moved & {"endpoint_url", "embedding_model", "embedding_model_path"}:
                self._embedder = None
            if moved & {"model_path", "n_ctx", "embedded_cache_reuse"} and isinstance(self._narrator, LocalNarrator):
                self._narrator = None
        return self._settings

    @property
    def narrator(self) -> Narrator:
        if self._narrator is None:
            self._narrator = self._make_narrator()
        return self._narrator

    def _make_narrator(self) -> Narrator:
        if self._settings.narrator == "local":
            # Checks the file (or the bundled one) now, in words; loads nothing.
            return LocalNarrator(n_ctx=self._settings.n_ctx, model_path=self._settings.model_path or None,
                                 db=self.db, cache_reuse=self._settings.embedded_cache_reuse)
        s = self._settings
        return OpenAINarrator(s.endpoint_url, s.model, api_mode=s.api_mode, timeout=s.timeout_seconds,
                              declared_window=s.context_window_override, db=self.db)

    @property
    def embedder(self) -> Embedder | None:
        """What embeds memories and knowledge; None when embeddings are off."""
        if self._embedder is None and self._settings.embedder != "none":
            if self._settings.embedder == "local":
                self._embedder = MiniLMEmbedder()
            elif self._settings.embedder == "gguf":
                self._embedder = LlamaEmbedder(self._settings.embedding_model_path)
            else:
                self._embedder = OpenAIEmbedder(self._settings.endpoint_url, self._settings.embedding_model)
        return self._embedder

    def embedder_or_none(self) -> Embedder | None:
        try:
            return self.embedder
        except WorkbenchError:
            return None

    def after_turn(self, campaign_id: int) -> None:
        """Derived work after a turn's commit: inline when opened with
        background=False (deterministic experiments), else in a thread."""
        self._derived(campaign_id)

    @property
    def _services(self) -> Services:
        """What a campaign plays with, handed to it (it never calls back here)."""
        return Services(self.db, narrator=lambda: self.narrator, settings=lambda: self._settings,
                        embedder=self.embedder_or_none, after_turn=self._derived,
                        background=self.background, owner=self)

    def test_connection(self) -> ConnectionReport:
        """Reachability, the models offered, the window found and how, and a
        warning in words when the budget is capped or could not be checked."""
        try:
            narrator = self.narrator
        except WorkbenchError as exc:
            return ConnectionReport(self._settings.narrator, self._settings.endpoint_url, self._settings.model,
                                    False, budget=self._settings.context_budget, detail=str(exc))
        if self._settings.narrator == "endpoint" and not isinstance(narrator, OpenAINarrator):
            return check_connection(self._settings)
        return check_connection(self._settings, narrator, getattr(narrator, "client", None))

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
        for name, text in (("premise", premise), ("protagonist", protagonist), ("ai_instructions", ai_instructions),
                           ("authors_note", authors_note)):
            standing.check(name, text, NotAllowed, "No campaign was made.")  # every prompt carries them whole
        with self.db.writing() as s:
            row = CampaignRow(
                title=title[:200], premise=premise.strip(), protagonist=protagonist.strip(),
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
        return Campaign(self._services, campaign_id)

    def campaigns(self) -> list[Campaign]:
        with self.db.reading() as s:
            ids = s.scalars(select(CampaignRow.id).order_by(CampaignRow.id)).all()
        return [Campaign(self._services, i) for i in ids]

    def campaign(self, campaign_id: int) -> Campaign:
        with self.db.reading() as s:
            if s.get(CampaignRow, campaign_id) is None:
                raise NotFound(f"There is no campaign {campaign_id} in {self.db.path}; wb.campaigns() lists them.")
        return Campaign(self._services, campaign_id)

    # ------------------------------------------------------------ moving and backups
    def import_campaign(self, path_or_dict):
        """A campaign bundle (ours, any version, or the reference app's); validated
        whole before anything is written."""
        return facade.import_campaign(self.db, path_or_dict, embedder=self.embedder_or_none())

    def import_ai_dungeon(self, path_or_dict, **options):
        return interop.import_ai_dungeon(self.db, path_or_dict, **options, embedder=self.embedder_or_none())

    def import_sillytavern(self, path_or_dict, **options):
        return interop.import_sillytavern(self.db, path_or_dict, **options, embedder=self.embedder_or_none())

    def import_file(self, path_or_data, **options):
        """Any supported file from another tool (character card JSON/PNG/.charx,
        SillyTavern World Info, NovelAI lorebook, KoboldAI save, AI Dungeon
        scenario, adventure or cards, or a bundle), recognised by its own
        markers; the report's `format` says which was chosen."""
        return interop.import_file(self.db, path_or_data, **options, embedder=self.embedder_or_none())

    def backup(self):
        """A verified copy of the whole database beside it, in backups/."""
        return facade.backup(self.db)

    def backups(self):
        """The backups, newest first."""
        return facade.backups(self.db)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Workbench:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Workbench {self.db.path}>"


def _check_model_files(changes: dict) -> None:
    """A missing or non-GGUF file is refused before it is saved, in words."""
    for key, what in (("model_path", "model"), ("embedding_model_path", "embedding model")):
        if isinstance(changes.get(key), str) and changes[key]:
            check_gguf(changes[key], what)
