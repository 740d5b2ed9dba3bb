"""`Library`: a campaign's imported knowledge, managed from a notebook.

Each method opens its own short session, so a Library object can live in a
notebook for hours beside other processes using the same file. Imports are
one transaction (source, passages and index together, or nothing); embedding
follows in its own transactions, so a slow or failing embedder never costs an
import.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from sqlalchemy import func, select

from .. import html
from ..errors import NotFound
from ..search import stage_vectors
from ..search.calibration import calibrated_models, floor_for, uncalibrated_note
from ..search.classes import CANON, CLASS_LABELS
from ..search.results import EmbeddingPass
from ..search.second_stage import admission_floor, fusion_for, stage_for, uncalibrated_stage_note
from ..search.stage_vectors import StagePass
from ..search.tuning import DEFAULT, Tuning
from ..store import CampaignRow, Database
from ..store.knowledge_tables import KnowledgeEmbeddingRow, KnowledgePassageRow, KnowledgeSourceRow
from ..store.models import utcnow
from .chunking import CHUNKING_VERSION
from .embedding import catch_up, clear_vectors, pending_count
from .importer import add_source, build_passages
from .intake import MAX_SOURCE_BYTES, check_class, refuse_size, safe_filename
from .refusals import KnowledgeRefused
from .retrieval import Selection, retrieve

__all__ = ["EMBED_AT_IMPORT", "Library", "Status"]

_DETAIL_LIMIT = 2000
# Passages embedded before `add` returns; the rest is derived work. Measured
# with MiniLM on this 2-core machine while other jobs shared it: ~3,000
# passages (the 1.5 MB rules reference and a novel) took about 15 minutes,
# so a 16 MB source (~16,000 passages) must not hold `add` for its whole length.
EMBED_AT_IMPORT = 4096


@dataclass(frozen=True)
class Status:
    """The library's health in words (`str(status)`) and as data (`status.data`)."""

    words: str
    data: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.words

    def _repr_html_(self) -> str:
        return html.tag("p", self.words)


class Library:
    """Import, inspect and manage the knowledge sources of one campaign."""

    def __init__(self, db: Database, campaign_id: int, embedder_getter: Callable[[], object | None] | None = None,
                 *, progress: bool = True, settings: Callable[[], object] | None = None, background: bool = False,
                 second_stage: object | None = None):
        """`settings` (a getter of the workbench's Settings) chooses the second
        stage (`second_stage`: "auto", "embedded", ...), or `second_stage`
        gives one outright; with neither, the first stage alone. With
        `background`, its passage vectors are computed in a thread after
        each import; without, by `embed_second_stage`."""
        self.db = db
        self.campaign_id = campaign_id
        self._embedder_getter = embedder_getter or (lambda: None)
        self.progress = progress
        self._settings = settings
        self._stage = second_stage
        self.background = background

    # ------------------------------------------------------------ plumbing
    @property
    def embedder(self):
        return self._embedder_getter()

    @property
    def second_stage(self):
        """The second stage this library's retrieval uses, or None (first stage only)."""
        if self._stage is not None or self._settings is None:
            return self._stage
        embedder, _ = self._loaded()
        return stage_for(self._settings(), getattr(embedder, "model_id", None), background=self.background)

    def _loaded(self) -> tuple[object | None, str]:
        """(embedder or None, why it could not be loaded): imports, listings
        and status must keep working when the embedder cannot be loaded."""
        try:
            return self.embedder, ""
        except Exception as exc:
            return None, f"The embedder could not be loaded ({type(exc).__name__}: {exc}); retrieval is lexical only."

    def _model(self) -> tuple[str, str]:
        embedder, error = self._loaded()
        return (embedder.model_id if embedder is not None else ""), error

    def _check_campaign(self, session) -> None:
        if session.get(CampaignRow, self.campaign_id) is None:
            raise NotFound(f"Campaign {self.campaign_id} does not exist in {self.db.path}.")

    def _source(self, session, source_id: int) -> KnowledgeSourceRow:
        row = session.get(KnowledgeSourceRow, source_id)
        if row is None or row.campaign_id != self.campaign_id:
            raise NotFound(f"Knowledge source {source_id} is not in campaign {self.campaign_id}.")
        return row

    def _change(self, source_id: int, **values) -> dict:
        with self.db.writing() as s:
            row = self._source(s, source_id)
            for name, value in values.items():
                setattr(row, name, value)
            if row.classification != CANON:  # only Canon may skip relevance
                row.always_include = False
            row.updated_at = utcnow()
        return self._summary(source_id)

    def _embed(self, limit: int | None = None) -> EmbeddingPass | None:
        embedder, error = self._loaded()
        if error:  # the import already committed; say why nothing was embedded
            return EmbeddingPass("", 0, 0, error)
        if embedder is None:
            return None
        if limit == 0:  # catch_up reads 0 as "no limit"; here it means "not now"
            with self.db.reading() as s:
                waiting = pending_count(s, self.campaign_id, embedder.model_id)
            return EmbeddingPass(embedder.model_id, 0, waiting)
        return catch_up(self.db, self.campaign_id, embedder, limit=limit, progress=self.progress)

    # ------------------------------------------------------------ import
    def add(self, path_or_name: str | Path, data: bytes | str | None = None, *, classification: str = "reference",
            title: str | None = None, notes: str = "", visibility: str = "normal", always_include: bool = False,
            allow_duplicate: bool = False, embed_now: int | None = None) -> dict:
        """Import a .txt or .md file: from a path, or `data` under a name.

        Refusals raise KnowledgeRefused and write nothing. Text that is not
        UTF-8 is read in the encoding detection finds (the summary's
        "encoding"), or refused when detection is unsure. Embedding follows
        the import when an embedder is configured; its outcome is in
        the returned summary's "embedding" entry, in words. `embed_now` caps
        how many passages are embedded before returning (default
        EMBED_AT_IMPORT; 0: none); the rest is derived work, done by
        `embed_pending` or in the background after the next turns.
        """
        name = str(path_or_name)
        if data is None:
            path = Path(path_or_name)
            if not path.is_file():
                raise KnowledgeRefused(f"“{path}” is not a file that can be read.")
            size = path.stat().st_size
            if size > MAX_SOURCE_BYTES:  # refuse before reading a large file
                raise refuse_size(safe_filename(path.name), size)
            raw, name = path.read_bytes(), path.name
        else:
            raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        found: dict = {}
        with self.db.writing() as s:
            self._check_campaign(s)
            source = add_source(s, self.campaign_id, name, raw, classification=classification, title=title,
                                notes=notes, visibility=visibility, always_include=always_include,
                                allow_duplicate=allow_duplicate, progress=self.progress, found=found)
            source_id = source.id
        outcome = self._embed(EMBED_AT_IMPORT if embed_now is None else max(0, int(embed_now)))
        self._second_in_background()
        summary = self._summary(source_id)
        summary["encoding"] = found.get("encoding", "utf-8")
        summary["embedding"] = outcome.words if outcome else "No embedder is configured: lexical search only."
        return summary

    # ------------------------------------------------------------ reading
    def _frame(self, source_id: int | None = None) -> pd.DataFrame:
        S, P, E = KnowledgeSourceRow, KnowledgePassageRow, KnowledgeEmbeddingRow  # noqa: N806
        model, _ = self._model()
        passages = (select(P.source_id, func.count().label("n"), func.sum(P.token_count).label("t"))
                    .group_by(P.source_id).subquery())
        embedded = (select(P.source_id, func.count().label("n")).join(E, E.passage_id == P.id)
                    .where(E.model == model).group_by(P.source_id).subquery())
        query = (
            select(S.id, S.title, S.original_filename, S.classification, S.enabled, S.visibility,
                   S.always_include, func.coalesce(passages.c.n, 0), func.coalesce(passages.c.t, 0),
                   func.coalesce(embedded.c.n, 0), S.index_state, S.embed_state, S.byte_size, S.imported_at,
                   S.notes, S.content_hash, S.index_detail, S.embed_detail)
            .outerjoin(passages, passages.c.source_id == S.id).outerjoin(embedded, embedded.c.source_id == S.id)
            .where(S.campaign_id == self.campaign_id).order_by(S.id)
        )
        if source_id is not None:
            query = query.where(S.id == source_id)
        columns = ["id", "title", "file", "class", "enabled", "visibility", "always_include", "passages",
                   "tokens", "embedded", "index_state", "embed_state", "bytes", "imported_at", "notes",
                   "content_hash", "index_detail", "embed_detail"]
        with self.db.reading() as s:
            rows = [tuple(r) for r in s.execute(query)]
        return pd.DataFrame(rows, columns=columns).set_index("id")

    def _summary(self, source_id: int) -> dict:
        frame = self._frame(source_id)
        if frame.empty:
            raise NotFound(f"Knowledge source {source_id} is not in campaign {self.campaign_id}.")
        row = frame.iloc[0].to_dict()
        row = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
        return {"id": int(source_id), **row}

    def list(self) -> pd.DataFrame:
        """One row per source: class, state, passages, tokens, vectors (for the
        current embedder's model)."""
        return self._frame()

    def passages(self, source_id: int) -> pd.DataFrame:
        """The passages of one source, in order, with their heading trail."""
        P, E = KnowledgePassageRow, KnowledgeEmbeddingRow  # noqa: N806
        with self.db.reading() as s:
            self._source(s, source_id)
            rows = s.execute(
                select(P.id, P.position + 1, P.heading, P.token_count, P.text, P.content_hash, E.model)
                .outerjoin(E, E.passage_id == P.id).where(P.source_id == source_id).order_by(P.position)
            ).all()
        return pd.DataFrame([tuple(r) for r in rows],
                            columns=["passage_id", "passage", "heading", "tokens", "text", "content_hash", "embedded_with"])

    # ------------------------------------------------------------ changes
    def reclassify(self, source_id: int, classification: str) -> dict:
        """A new class, read at the next retrieval; leaving Canon clears always-include."""
        return self._change(source_id, classification=check_class(classification))

    def enable(self, source_id: int) -> dict:
        return self._change(source_id, enabled=True)

    def disable(self, source_id: int) -> dict:
        """Out of retrieval and framing; nothing is deleted."""
        return self._change(source_id, enabled=False)

    def hide(self, source_id: int) -> dict:
        """Narrator-only: still shown to the narrator, marked as unknown to the protagonist."""
        return self._change(source_id, visibility="hidden")

    def show(self, source_id: int) -> dict:
        return self._change(source_id, visibility="normal")

    def always_include(self, source_id: int, on: bool = True) -> dict:
        """Canon only: its passages go into every prompt, within their budget."""
        with self.db.reading() as s:
            cls = self._source(s, source_id).classification
        if on and cls != CANON:
            raise KnowledgeRefused(
                f"Only Canon can be always in force, and source {source_id} is "
                f"{CLASS_LABELS.get(cls, cls)}. Reclassify it as Canon first."
            )
        return self._change(source_id, always_include=bool(on))

    def delete(self, source_id: int) -> None:
        """The source, its passages, index rows and vectors. Turn records keep
        the text they were shown, so past turns still explain themselves."""
        with self.db.writing() as s:
            s.delete(self._source(s, source_id))

    def reindex(self, source_id: int | None = None, *, semantic: bool = False) -> dict:
        """Rebuild passages (all sources, or one) from the stored text; with
        `semantic`, also drop and recompute every vector. A failing source is
        marked failed with the reason and the others go on."""
        with self.db.reading() as s:
            ids = [source_id] if source_id is not None else list(s.scalars(
                select(KnowledgeSourceRow.id).where(KnowledgeSourceRow.campaign_id == self.campaign_id)))
            if source_id is not None:
                self._source(s, source_id)
        rebuilt, passages, failed = 0, 0, []
        for sid in ids:
            try:
                with self.db.writing() as s:
                    passages += build_passages(s, self._source(s, sid), progress=self.progress)
                rebuilt += 1
            except Exception as exc:  # recorded on the source, reported, and the rest go on
                detail = f"{type(exc).__name__}: {exc}"[:_DETAIL_LIMIT]
                with self.db.writing() as s:
                    row = self._source(s, sid)
                    row.index_state, row.index_detail = "failed", detail
                failed.append({"id": sid, "detail": detail})
        if semantic:
            clear_vectors(self.db, self.campaign_id, None if source_id is None else [source_id])
        outcome = self._embed()
        return {"sources": rebuilt, "passages": passages, "failed": failed, "semantic": semantic,
                "embedded": outcome.embedded if outcome else 0,
                "embedding": outcome.words if outcome else "No embedder is configured: lexical search only."}

    def embed_pending(self, limit: int | None = None) -> EmbeddingPass | None:
        """Embed what is pending now (None: no embedder configured)."""
        return self._embed(limit)

    def embed_second_stage(self, limit: int | None = None) -> StagePass | None:
        """Compute the second stage's passage vectors now, in this thread,
        with progress (None: no second stage, or one that stores none)."""
        stage = self.second_stage
        if stage is None or not stage.needs_vectors:
            return None
        return stage_vectors.catch_up(self.db, self.campaign_id, stage.embedder, limit=limit, progress=self.progress)

    def _second_in_background(self) -> None:
        """After an import: the second stage's vectors in a thread (never in the way)."""
        stage = self.second_stage
        if self.background and stage is not None and stage.needs_vectors:
            stage_vectors.start(self.db, self.campaign_id, stage.embedder, progress=self.progress)

    # ------------------------------------------------------------ retrieval
    def retrieve(self, query_text: str, *, budget_tokens: int, context_tokens: int | None = None,
                 exclude: Collection[int] = (), standing: Iterable[str] = (), tuning: Tuning | None = None
                 ) -> Selection:
        """What a turn with this scene would be given (a dry run: writes
        nothing), with the settings' search tuning unless `tuning` is given."""
        return retrieve(self.db, self.campaign_id, query_text, embedder=self.embedder, budget_tokens=budget_tokens,
                        context_tokens=context_tokens, exclude=exclude, standing=standing,
                        second_stage=self.second_stage, tuning=tuning or self.tuning)

    @property
    def tuning(self) -> Tuning:
        """The search tuning the settings hold (the defaults without settings)."""
        return getattr(self._settings(), "tuning", DEFAULT) if self._settings is not None else DEFAULT

    # ------------------------------------------------------------ status
    def status(self) -> Status:
        model, load_error = self._model()
        floor = floor_for(model) if model else None
        frame = self.list()
        with self.db.reading() as s:
            pending = pending_count(s, self.campaign_id, model) if model else 0
        enabled = frame[frame["enabled"]] if not frame.empty else frame
        data = {
            "sources": len(frame), "enabled_sources": len(enabled),
            "passages": int(enabled["passages"].sum()) if len(enabled) else 0,
            "embedding_model": model, "semantic_calibrated": floor is not None,
            "semantic_enabled": bool(model) and floor is not None, "semantic_floor": floor,
            "calibrated_models": calibrated_models(), "pending_embeddings": pending,
            "failed_index": _failures(frame, "index_state", "index_detail"),
            "failed_embedding": _failures(frame, "embed_state", "embed_detail"),
            "stale_chunking": self._stale(),
        }
        data["semantic_note"] = load_error or _semantic_note(model, floor)
        data.update(self._second_status(model))
        return Status(_status_words(data), data)

    def _second_status(self, first_model: str | None = None) -> dict:
        """How far the second stage has got, in data (see `_status_words`)."""
        try:
            stage = self.second_stage
        except Exception as exc:  # a stage that cannot be built is reported, not raised
            return {"second_stage": "", "second_stage_note": f"The second stage could not be set up ({exc})."}
        if stage is None:
            return {"second_stage": "", "second_stage_note": "No second stage: the first stage alone judges."}
        fusion = fusion_for(first_model, stage.model_id, self.tuning)
        floor = floor_for(stage.model_id, self.tuning)
        data = {"second_stage": stage.model_id,
                "second_stage_floor": admission_floor(stage.model_id, fusion, self.tuning),
                "second_stage_fused": fusion is not None, "second_stage_note": "",
                "second_stage_vectors": stage.needs_vectors}
        ready = getattr(getattr(stage, "embedder", None), "query_export_ready", None)
        if ready is not None:  # a local model: is a turn's query on the fast path (engine.providers.onnx_query)?
            data["second_stage_queries"] = "ONNX Runtime" if ready() else "PyTorch"
        if floor is None:
            data["second_stage_note"] = uncalibrated_stage_note(stage.model_id)
        if stage.needs_vectors:
            with self.db.reading() as s:
                done, total = stage_vectors.coverage(s, self.campaign_id, stage.model_id)
            data.update(second_stage_ready=done, second_stage_total=total,
                        second_stage_running=stage_vectors.running(self.db, self.campaign_id, stage.model_id),
                        second_stage_error=stage_vectors.last_error(self.db, self.campaign_id, stage.model_id))
        return data

    def _stale(self) -> list[dict]:
        """Sources chunked by an older chunker (their passages are the old
        size and shape until `reindex`)."""
        S = KnowledgeSourceRow  # noqa: N806
        with self.db.reading() as s:
            rows = s.execute(select(S.id, S.title).where(S.campaign_id == self.campaign_id,
                                                         S.chunking_version < CHUNKING_VERSION)).all()
        return [{"id": int(i), "title": t} for i, t in rows]

    def _repr_html_(self) -> str:
        frame = self.list()
        status = self.status()
        if frame.empty:
            return html.tag("div", html.tag("p", status.words))
        shown = frame[["title", "file", "class", "enabled", "visibility", "always_include", "passages", "tokens",
                       "embedded", "index_state", "embed_state"]]
        # Every cell through engine.html (bidi overrides and NUL in imported
        # titles and names are shown, not obeyed); the id column kept.
        return html.tag("div", html.tag("p", status.words) + html.frame(shown.reset_index()))


def _failures(frame: pd.DataFrame, state: str, detail: str) -> list[dict]:
    if frame.empty:
        return []
    bad = frame[frame[state] == "failed"]
    return [{"id": int(i), "title": r["title"], "detail": r[detail]} for i, r in bad.iterrows()]


def _semantic_note(model: str, floor: float | None) -> str:
    if not model:
        return "No embedder is configured, so retrieval is lexical only."
    return uncalibrated_note(model) if floor is None else ""


def _status_words(d: dict) -> str:
    if not d["sources"]:
        text = "The library is empty."
    else:
        text = (f"{d['sources']} source(s), {d['enabled_sources']} enabled, {d['passages']} passage(s) "
                "searchable.")
    if d["semantic_enabled"]:
        text += f" Semantic search with {d['embedding_model']} (floor {d['semantic_floor']})"
        text += f"; {d['pending_embeddings']} passage(s) waiting to be embedded." if d["pending_embeddings"] \
            else "; every passage is embedded."
    else:
        text += " " + d["semantic_note"]
    text += " " + _second_words(d)
    for f in d["failed_index"]:
        text += f" Indexing “{f['title']}” failed: {f['detail']}."
    for f in d["failed_embedding"]:
        text += f" Embedding “{f['title']}” failed: {f['detail']}."
    if d.get("stale_chunking"):
        text += (f" {len(d['stale_chunking'])} source(s) were split by an older version of the chunker (larger "
                 "passages than the budget can always show); run reindex() to split them again.")
    return text


def _second_words(d: dict) -> str:
    """The second stage in words: which model, how far its vectors have got."""
    if not d.get("second_stage") or d.get("second_stage_floor") is None:
        return d.get("second_stage_note", "")
    fused = "fused with the first stage's evidence, " if d.get("second_stage_fused") else ""
    head = f"Second stage: {d['second_stage']} ({fused}floor {d['second_stage_floor']})"
    if not d.get("second_stage_vectors"):
        return head + ", scoring each turn's candidates on the server."
    if d.get("second_stage_queries") == "PyTorch":
        head += (", queries through PyTorch (slower; python -m engine.providers.query_exports puts them on ONNX "
                 "Runtime)")
    elif d.get("second_stage_queries"):
        head += f", queries through {d['second_stage_queries']}"
    done, total = d["second_stage_ready"], d["second_stage_total"]
    if done >= total:
        return head + f", all {total} passage vectors ready."
    state = "being computed in the background" if d.get("second_stage_running") else "waiting to be computed"
    error = f" It last stopped on: {d['second_stage_error']}." if d.get("second_stage_error") else ""
    return (head + f", {done} of {total} passage vectors ready ({state}); a turn whose candidates are not "
            f"all ready uses the first stage alone.{error}")
