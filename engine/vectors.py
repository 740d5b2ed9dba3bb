"""Stored vectors, and the one cache that serves every kind of them.

Vectors are stored as little-endian float32 bytes. In memory they are kept
*unit-normalised*, so a cosine is one dot product, and compared with einsum:
a matrix-vector `@` goes to multi-threaded OpenBLAS, whose sleeping threads
took 10-14 ms to wake on a loaded 2-core machine, against 0.25 ms for einsum
on 4,000 x 384 (measured for knowledge retrieval).

Why one cache for memories and passages: both are the same thing (a
campaign's unit vectors of one model, read from one file) and compete for the
same memory, so one LRU bound has to hold both, one lock has to guard both,
and a keying mistake (a stale file, a missed invalidation) has to be fixed in
one place, not in two caches that drift apart. Two caches had two bounds that
added up, two keying rules (by path for memories, which a recreated file can
fool) and two copies of the numerics.

Keys are `(database token, campaign, kind, model)`, made by `CACHE.key`. The
token is per open database, never its path: a file deleted and made again at
the same path starts its ids from 1, and must not meet the old file's vectors
(memory ids as much as passage ids). `drop` also matches a database by path,
so a writer that knows only the path invalidates every open copy of the file.

An entry is a `Held`: row ids, their unit vectors as one matrix (row for row),
and the signature it was read under. It is reused while the caller's
signature matches; otherwise it is rebuilt, reading only the rows it does not
hold. Passages sign with (count, newest id) of their rows (see
`engine.search.vectors`: their rows are only inserted or deleted). Memories
sign with the ids asked for, so an unchanged bank costs one comparison and no
re-stacking; their vectors are rewritten in place, so their one writer
(`engine.memory.bank.set_vector`) drops the row with `drop`.

Query vectors live here too, in `QUERIES` (a `TextVectors`), and not in
`CACHE`, because they are keyed differently: a scene's query parts belong to
no database and no campaign, and a model's vector for an exact text never
changes, so they need no token, signature or drop, only a bound. They are
kept because a turn's query is mostly the previous turn's: its story
paragraphs were in the last query too, and embedding them again with
all-mpnet-base-v2 was most of a turn's retrieval time (one 41-token forward
pass ~90-150 ms on the idle 2-core machine, against ~25-30 ms for the whole
first stage). Same module, so vector caching still has one owner.
"""
from __future__ import annotations

import os
import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "as_query",
    "CACHE", "CACHED_ENTRIES", "IN_FLIGHT_WAIT", "QUERIES", "QUERY_TEXTS", "Held", "TextVectors", "Token",
    "VectorCache", "cosines", "extended", "pack", "refreshed", "unit", "unpack",
]

# A notebook rarely has more than a few campaigns open, each with a memory
# bank and a library: 16 entries of 4,000 x 768 float32 are ~200 MB at worst.
CACHED_ENTRIES = 16
# Query texts held by `QUERIES`. A turn asks at most 8 query parts of the
# first model (engine.search.query.QUERY_PARTS) and 2 of the second
# (the search tuning's stage_parts), memory recall at most 5 of the first
# (memory.recall.query_parts, mostly the same texts), and the next turn's are
# prepared beside them: about 20-25 per open campaign, so 256 keeps ten
# campaigns' turns, at most 256 x 768 float32 = 0.8 MB.
QUERY_TEXTS = 256
# How long a caller waits for a text another thread is embedding right now
# (the next turn's parts prepared in the background) before embedding it
# itself. Twice the slowest single query embedding measured (all-mpnet-base-v2,
# 4.6 s on a loaded 2-core machine): embedding the same text twice at once
# only makes both wait for the same cores.
IN_FLIGHT_WAIT = 10.0


def pack(vector) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def unpack(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


def unit(matrix) -> np.ndarray:
    """Rows scaled to length 1 (zero rows stay zero), so a dot product is a cosine."""
    matrix = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def as_query(embedder) -> Callable[[Sequence[str]], np.ndarray]:
    """How `embedder` embeds a query: its `embed_query` when it has one (a
    model trained with separate query and document prompts), else `embed`."""
    return getattr(embedder, "embed_query", None) or embedder.embed


def cosines(matrix_unit: np.ndarray, query) -> np.ndarray:
    """Raw cosine of every row of a unit matrix against `query` (any length).
    Raw on purpose: knowledge admission compares it with a measured absolute floor.

    einsum, not `@`: a matrix-vector product goes to multi-threaded OpenBLAS,
    whose sleeping threads took 10-14 ms to wake on a loaded 2-core machine
    (measured); einsum stays on the calling thread at 0.25 ms for 4,000 x 384.
    """
    if matrix_unit.size == 0:
        return np.zeros(len(matrix_unit), dtype=np.float32)
    return np.einsum("ij,j->i", matrix_unit, unit(query)[0])


@dataclass(frozen=True)
class Token:
    """One open database: its path (absolute, and as it was given), for
    `drop`, and an id no other opening shares."""

    path: str
    uid: str
    given: str = ""


class Held:
    """Stored row ids and their unit vectors, row for row, with the signature
    they were read under. Never changed once cached: a change is a new entry."""

    def __init__(self, ids: Sequence[int], vectors: np.ndarray, signature=(), *, _store: _Store | None = None,
                 _rows: dict[int, int] | None = None):
        self.ids = tuple(ids)
        self.vectors = vectors
        self.signature = signature
        self._rows: dict[int, int] | None = _rows
        self._store = _store  # the buffer `vectors` is the head of, when grown by `extended`
        self._source = None  # the list `VectorCache.grown` read the ids from, how many, and those without a vector
        self._count: int | None = None
        self._missing: tuple = ()

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def rows(self) -> dict[int, int]:
        """{row id: its row in `vectors`}, built once per entry, not per turn."""
        if self._rows is None:
            self._rows = {int(i): n for n, i in enumerate(self.ids)}
        return self._rows

    def __contains__(self, row_id) -> bool:
        return int(row_id) in self.rows

    def __getitem__(self, row_id) -> np.ndarray:
        return self.vectors[self.rows[int(row_id)]]

    def without(self, row_id: int) -> Held | None:
        """This entry less one row, to be re-read (None: drop the whole entry)."""
        row = self.rows.get(int(row_id))
        if row is None:
            return self
        return Held(self.ids[:row] + self.ids[row + 1:], np.delete(self.vectors, row, axis=0), None)


class _Store:
    """A matrix with room to grow, whose first `filled` rows are in use: an
    entry grown at its tail writes the new rows into the room and takes a
    longer view of the same buffer, so no row is copied again. The rows an
    earlier entry sees are never written after, so it stays as it was; a
    second entry grown from one that is no longer the longest copies
    instead (a fork that takes another path from an older entry)."""

    def __init__(self, rows: np.ndarray, room: int):
        room = max(room, len(rows))
        self.data = np.empty((room, rows.shape[1]), dtype=np.float32)
        self.data[:len(rows)] = rows
        self.filled = len(rows)
        self.lock = threading.Lock()


def extended(held: Held | None, ids: Sequence[int], load: Callable[[list[int]], dict[int, bytes]],
             signature=(), what: str = "", advice: str = "") -> Held:
    """`refreshed` as a Held, for ids that usually grow at the tail (a story's
    lines): the new rows are written into spare room after the ones held,
    half as much again when it is full, and the row map is copied and added to rather
    than made again. Stacking a copy of the whole matrix each turn took
    2 ms at 2,000 lines and ~68 ms at 20,000 (a fresh 30 MB each time, on
    the 2-core machine); rebuilding the row map ~2 ms at 20,000."""
    n = 0 if held is None else len(held.ids)
    if not n or len(ids) <= n or tuple(ids[:n]) != held.ids:
        return Held(*refreshed(held, ids, load, what, advice), signature)
    return _appended(held, ids[n:], load, signature, what, advice)


def _appended(held: Held, rest: Sequence[int], load: Callable[[list[int]], dict[int, bytes]], signature=(),
              what: str = "", advice: str = "") -> Held:
    """`held` with the rows of `rest` (ids after its own) that have a vector added at its tail."""
    n = len(held.ids)
    rest = list(rest)
    if not rest:
        return Held(held.ids, held.vectors, signature, _store=held._store, _rows=held._rows)
    found = {i: unpack(blob) for i, blob in load(rest).items() if blob}
    fresh = [i for i in rest if i in found]
    if not fresh:
        return Held(held.ids, held.vectors, signature, _store=held._store, _rows=held._rows)
    widths = {v.shape[0] for v in found.values()} | {held.vectors.shape[1]}
    if len(widths) > 1:
        raise ValueError(f"Stored vectors{' for ' + what if what else ''} have mixed widths {sorted(widths)}"
                         f"{'; ' + advice if advice else ''}.")
    rows = unit(np.stack([found[i] for i in fresh]))
    k, store, grown = len(rows), held._store, False
    if store is not None:
        with store.lock:
            if store.filled == n and n + k <= len(store.data):
                store.data[n:n + k] = rows
                store.filled, grown = n + k, True
    if not grown:  # half as much room again as is used: amortised, at most a third of the buffer idle
        store = _Store(held.vectors, n + k + max(k, (n + k) // 2))
        store.data[n:n + k] = rows
        store.filled = n + k
    mapping = dict(held.rows)
    mapping.update((int(i), n + j) for j, i in enumerate(fresh))
    return Held(held.ids + tuple(fresh), store.data[:n + k], signature, _store=store, _rows=mapping)


def refreshed(held: Held | None, ids: Sequence[int], load: Callable[[list[int]], dict[int, bytes]],
              what: str = "", advice: str = "") -> tuple[tuple[int, ...], np.ndarray]:
    """(the ids that have a vector, in the order asked; their unit matrix).
    Rows `held` has are copied from it; `load(missing ids) -> {id: blob}` reads
    the rest, and ids without a blob are left out."""
    n = 0 if held is None else len(held.ids)
    if n and len(ids) > n and tuple(ids[:n]) == held.ids:
        # The rows held, and more after them: a story's lines as the path
        # grows. Stacked on, not copied row by row (20 ms a turn for the
        # 2,000 lines of a 1,000-turn story).
        rest = list(ids[n:])
        found = {i: unpack(blob) for i, blob in load(rest).items() if blob}
        fresh = [i for i in rest if i in found]
        if not fresh:
            return held.ids, held.vectors
        widths = {v.shape[0] for v in found.values()} | {held.vectors.shape[1]}
        if len(widths) > 1:
            raise ValueError(f"Stored vectors{' for ' + what if what else ''} have mixed widths {sorted(widths)}"
                             f"{'; ' + advice if advice else ''}.")
        return held.ids + tuple(fresh), np.vstack([held.vectors, unit(np.stack([found[i] for i in fresh]))])
    rows = {} if held is None else held.rows
    missing = [i for i in ids if i not in rows]
    found = {i: unpack(blob) for i, blob in load(missing).items() if blob} if missing else {}
    kept = tuple(i for i in ids if i in rows or i in found)
    widths = {v.shape[0] for v in found.values()}
    if held is not None and len(found) < len(kept):
        widths.add(held.vectors.shape[1])
    if len(widths) > 1:  # one model, one width; anything else is a corrupt row
        raise ValueError(f"Stored vectors{' for ' + what if what else ''} have mixed widths {sorted(widths)}"
                         f"{'; ' + advice if advice else ''}.")
    if held is not None and not found and kept == held.ids:
        return kept, held.vectors
    vectors = np.empty((len(kept), widths.pop() if widths else 0), dtype=np.float32)
    taken = [(n, rows[i]) for n, i in enumerate(kept) if i in rows]
    if taken:
        to, of = (list(side) for side in zip(*taken, strict=True))
        vectors[to] = held.vectors[of]
    if found:
        fresh = [(n, i) for n, i in enumerate(kept) if i not in rows]
        vectors[[n for n, _ in fresh]] = unit(np.stack([found[i] for _, i in fresh]))
    return kept, vectors


def _normpath(path) -> str:
    return os.path.abspath(os.fspath(path))


class VectorCache:
    """{(database token, campaign, kind, model): Held}, least recently used out."""

    def __init__(self, size: int = CACHED_ENTRIES):
        self.size = size
        self._data: OrderedDict[tuple, Held] = OrderedDict()
        self._tokens: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # Drops counted per (campaign, kind), and for wider drops in all: an
        # entry built while a drop reached its kind is served, not kept.
        self._drops: dict[tuple, int] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ keys
    def token(self, source) -> Token:
        """The token of the open database behind `source`: a Database (its
        reading and writing engines share one token), a Session, or an Engine."""
        if hasattr(source, "engines"):
            engines = tuple(source.engines)
        elif hasattr(source, "get_bind"):
            engines = (source.get_bind(),)
        else:
            engines = (source,)
        with self._lock:
            token = next((t for e in engines if (t := self._tokens.get(e)) is not None), None)
            if token is None:
                url = getattr(engines[0], "url", None)
                path = getattr(url, "database", None) or getattr(source, "path", None)
                token = Token(_normpath(path) if path else "", uuid.uuid4().hex, os.fspath(path) if path else "")
            for engine in engines:
                self._tokens.setdefault(engine, token)
        return token

    def key(self, source, campaign_id: int, kind: str, model: str) -> tuple:
        return self.token(source), campaign_id, kind, model

    # ------------------------------------------------------------ entries
    def entry(self, key: tuple, signature, build: Callable[[Held | None], Held]) -> Held:
        """The entry under `key` if it was read under `signature`; otherwise
        `build(held entry or None)`, stored and returned."""
        with self._lock:
            held = self._data.get(key)
            if held is not None:
                self._data.move_to_end(key)
            drops = self._drop_count(key)
        if held is not None and held.signature == signature:
            return held
        made = build(held)
        with self._lock:
            if self._drop_count(key) == drops:  # else a writer dropped rows meanwhile: serve, don't keep
                self._data[key] = made
                self._data.move_to_end(key)
                while len(self._data) > self.size:
                    self._data.popitem(last=False)
        return made

    def get(self, key: tuple, wanted: Iterable[int], load: Callable[[list[int]], dict[int, bytes]]) -> Held:
        """Unit vectors of `wanted` (those that have one) as one matrix;
        `load(missing ids) -> {id: blob}` reads the ones not held. Ids not
        wanted any more leave the entry, so it never outgrows what is in play;
        the same ids as last time return the same entry, nothing re-stacked."""
        wanted = tuple(wanted)
        return self.entry(key, wanted, lambda held: extended(held, wanted, load, wanted))

    def grown(self, key: tuple, ids: list[int], count: int, load: Callable[[list[int]], dict[int, bytes]]) -> Held:
        """`get` for the first `count` of `ids`, a list that is only ever
        appended to (a story's lines as it is played): the entry is signed
        with the list itself and the count, so a turn neither copies nor
        compares the whole list, and an entry read from a shorter stretch of
        the same list reads only the ids after it. Ids that had no vector
        yet are asked for again each time (a story being embedded, newest
        first, after an import); when one has arrived the entry is read
        again in order. Any other list is read as `get` reads it."""
        signature = (id(ids), count)

        def build(held: Held | None) -> Held:
            same = held is not None and held._source is ids and held._count is not None and held._count <= count
            if same and held._missing and load(list(held._missing)):
                same = False  # a vector arrived for a line read before: read the whole path again, in order
            if same:
                rest = ids[held._count:count]
                made = _appended(held, rest, load, signature)
                made._missing = held._missing + tuple(i for i in rest if i not in made.rows)
            else:
                made = extended(held, tuple(ids[:count]), load, signature)
                made._missing = tuple(i for i in ids[:count] if i not in made.rows) if len(made) < count else ()
            made._source, made._count = ids, count  # the list kept, so its id is no other list's meanwhile
            if made._missing:
                made.signature = (id(ids), count, "missing")  # never matched: look again next time
            return made

        return self.entry(key, signature, build)

    def drop(self, key_prefix: tuple, row_id: int | None = None) -> None:
        """Forget entries under `key_prefix` (or only `row_id` in them). Its
        first item is a Token, or a path: every open copy of that file."""
        with self._lock:
            scope = tuple(key_prefix[1:3]) if len(key_prefix) >= 3 else ()
            self._drops[scope] = self._drops.get(scope, 0) + 1
            for key in [k for k in self._data if _under(k, key_prefix)]:
                smaller = None if row_id is None else self._data[key].without(row_id)
                if smaller is None:
                    del self._data[key]
                else:
                    self._data[key] = smaller

    def clear(self) -> None:
        with self._lock:
            self._drops[()] = self._drops.get((), 0) + 1
            self._data.clear()

    def _drop_count(self, key: tuple) -> tuple[int, int]:
        return self._drops.get((), 0), self._drops.get(tuple(key[1:3]), 0)

    def keys(self) -> list[tuple]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _under(key: tuple, prefix: tuple) -> bool:
    if not prefix or len(key) < len(prefix) or key[1:len(prefix)] != prefix[1:]:
        return False
    first, wanted = key[0], prefix[0]
    if first == wanted:
        return True
    return (isinstance(first, Token) and isinstance(wanted, str | os.PathLike)
            and (first.given == os.fspath(wanted) or first.path == _normpath(wanted)))


CACHE = VectorCache()


class TextVectors:
    """{(model id, exact text): the embedder's row for it}, least recently used
    out, for query texts (see the module docstring). Rows are kept as the
    embedder returned them (not unit-scaled), so a caller gets exactly what
    `embedder.embed` would have given, and read-only, so no caller can change
    a row another will be served.

    Keyed like stored vectors, by the embedder's `model_id`: two embedders
    under one id are taken to give one vector per text, the promise stored
    passage vectors already rest on."""

    def __init__(self, size: int = QUERY_TEXTS, wait: float = IN_FLIGHT_WAIT):
        self.size = size
        self.wait = wait
        self._data: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._busy: dict[tuple[str, str], threading.Event] = {}  # texts being embedded now, by some thread
        self._lock = threading.Lock()

    def embed(self, embedder, texts: Sequence[str]) -> np.ndarray:
        """`embedder`'s query vectors of `texts`, with each text not held
        embedded once and kept. A text another thread is embedding at this
        moment is waited for (up to `wait` seconds) instead of being embedded
        a second time. A model trained with a query prompt (EmbeddingGemma)
        offers `embed_query`; it is used here, since everything this cache
        holds is a query; `embed` is the same for a model without one."""
        texts = list(texts)
        run = as_query(embedder)
        if not texts:
            return run(texts)
        model = embedder.model_id
        rows: dict[str, np.ndarray] = {}
        mine: list[str] = []
        theirs: list[tuple[str, threading.Event]] = []
        with self._lock:
            for text in dict.fromkeys(texts):
                key = (model, text)
                held = self._data.get(key)
                if held is not None:
                    self._data.move_to_end(key)
                    rows[text] = held
                elif key in self._busy:
                    theirs.append((text, self._busy[key]))
                else:
                    self._busy[key] = threading.Event()
                    mine.append(text)
        try:
            if mine:
                rows.update(self._made(model, mine, run(mine)))
        finally:
            with self._lock:
                for text in mine:
                    self._busy.pop((model, text)).set()
        if theirs:
            for _, event in theirs:
                event.wait(self.wait)
            with self._lock:
                for text, _ in theirs:
                    held = self._data.get((model, text))
                    if held is not None:
                        rows[text] = held
            late = [text for text, _ in theirs if text not in rows]  # it failed, or is still running
            if late:
                rows.update(self._made(model, late, run(late)))
        return np.stack([rows[text] for text in texts])

    def _made(self, model: str, texts: list[str], vectors) -> dict[str, np.ndarray]:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise ValueError(f"The embedder “{model}” returned {len(vectors)} vector(s) for {len(texts)} text(s).")
        out = {}
        with self._lock:
            for text, row in zip(texts, vectors, strict=True):
                row = row.copy()
                row.setflags(write=False)
                out[text] = self._data[(model, text)] = row
                self._data.move_to_end((model, text))
            while len(self._data) > self.size:
                self._data.popitem(last=False)
        return out

    def held(self, model: str, text: str) -> bool:
        with self._lock:
            return (model, text) in self._data

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


QUERIES = TextVectors()
