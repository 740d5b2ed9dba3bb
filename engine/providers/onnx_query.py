"""A sentence-transformers model's encoder, exported to ONNX, for a turn's query.

Why: a turn waits on the second model's pass over the player's new line, and
over a short line the same graph runs in well under half the time in ONNX
Runtime (a fixed cost per operator that a short input does not amortise is the
likely reason: on long passages the two are close). Measured on a 2-core Intel Xeon
(AVX-512), one thread, medians of 15, all-mpnet-base-v2 through
sentence-transformers against the same graph in ONNX Runtime: a 16-character
line 134 ms against 60 ms, a 59-character line 173 against 63, a
239-character one 274 against 194. On a batch of long passages the gain is
10 % (5.7 s against 5.1 s for eight passages of 384 word pieces), so passages
stay on PyTorch and only queries come here.

The vectors are the model's: tokenising, pooling and normalising stay
sentence-transformers' own modules, only the transformer's forward pass runs
in ONNX Runtime, and an export is kept only if it reproduces PyTorch's vectors
on `PROBES` within `TOLERANCE` (measured: 1.5e-7). So stored passage vectors
and calibrated floors stay valid and nothing is re-embedded.

optimum-onnx, the library sentence-transformers' own `backend="onnx"` uses,
pins transformers below 4.58 (0.1.0, December 2026; this workbench runs 5.x),
so the export is torch's own exporter and the session ONNX Runtime's, here.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np

from ..errors import ModelMismatch

__all__ = ["PROBES", "QUERY_FILE", "TOLERANCE", "encode", "export", "exported", "load", "open_session"]

log = logging.getLogger(__name__)

QUERY_FILE = "query.onnx"
_STAMP = "query.onnx.json"
# The largest difference allowed between a vector from the export and from
# PyTorch. float32 through the same graph differs by ~1e-7; a wrong graph
# (a traced branch that does not generalise) differs by far more.
TOLERANCE = 1e-4
# Lines of the lengths a query has, alone and padded together in one batch,
# and one past the model's window (cut to it), so the export is checked on
# every shape a turn can give it.
PROBES = (
    "We sail at dawn.",
    "I draw my sword and step towards the old lighthouse keeper.",
    "The dragon's breath fills the hall with fire, and Mira shouts for everyone to take cover behind the "
    "pillars while the bard keeps singing about a goat who became king of the northern mountains.",
    " ".join(["The caravan crossed the salt flats under a white sky"] * 60),
)


def _stamp(folder: Path) -> Path:
    return folder / _STAMP


def _features(model, texts) -> dict:
    """The model's own tokenising (sentence-transformers 6 renamed `tokenize` to `preprocess`)."""
    return (getattr(model, "preprocess", None) or model.tokenize)(list(texts))


def encode(model, session, texts: list[str]) -> np.ndarray:
    """`model.encode(texts)` with the transformer's pass run by `session`:
    one padded batch, so callers group texts of alike length first."""
    import torch

    features = _features(model, texts)
    feeds = {"input_ids": features["input_ids"].numpy(), "attention_mask": features["attention_mask"].numpy()}
    hidden = session.run(None, feeds)[0]
    features["token_embeddings"] = torch.from_numpy(hidden)
    with torch.inference_mode():
        for module in list(model)[1:]:  # pooling and normalising, sentence-transformers' own
            features = module(features)
    return features["sentence_embedding"].numpy().astype(np.float32)


def _session(path: Path, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # warnings about unused initialisers are the exporter's, not the user's
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def open_session(path: Path, threads: int, fallback: str):
    """An ONNX Runtime session over a checked file, or None with the reason
    logged (onnxruntime missing, or a file it cannot read); `fallback` says
    what runs instead ("queries run through PyTorch")."""
    try:
        return _session(path, threads)
    except ImportError:
        log.info("onnxruntime is not installed: %s.", fallback)
    except Exception as exc:  # onnxruntime raises its own classes for a file it cannot read
        log.warning("ONNX Runtime could not load %s (%s): %s.", path, exc, fallback)
    return None


def _largest_difference(model, session) -> float:
    worst = 0.0
    for batch in [[p] for p in PROBES] + [list(PROBES[:3])]:
        expected = model.encode(batch, convert_to_numpy=True, show_progress_bar=False)
        worst = max(worst, float(np.abs(encode(model, session, batch) - expected).max()))
    return worst


def export(model, folder: Path, weights_sha256: str) -> Path:
    """Export `model`'s transformer to `folder`/query.onnx and keep it only if
    it gives PyTorch's vectors on `PROBES`. About 10 s and 450 MB of disk for
    all-mpnet-base-v2; written beside the file and moved into place, so a
    failed export leaves nothing behind."""
    import torch

    transformer = model[0].auto_model.eval()

    class _Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = transformer

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    sample = _features(model, PROBES[:2])
    axes = {"batch": 0, "tokens": 1}
    dynamic = {name: {i: a for a, i in axes.items()} for name in ("input_ids", "attention_mask", "hidden")}
    target = folder / QUERY_FILE
    with tempfile.TemporaryDirectory(dir=folder, prefix=".onnx-") as work:
        draft = Path(work) / QUERY_FILE
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on branches; the check below decides
            torch.onnx.export(_Encoder().eval(), (sample["input_ids"], sample["attention_mask"]), str(draft),
                              input_names=["input_ids", "attention_mask"], output_names=["hidden"],
                              dynamic_axes=dynamic, opset_version=17, dynamo=False)
        worst = _largest_difference(model, _session(draft, 1))
        if worst > TOLERANCE:
            raise ModelMismatch(
                f"The ONNX export of {folder.name} does not reproduce its vectors (largest difference {worst:.2g}, "
                f"allowed {TOLERANCE:g}); queries stay on PyTorch.")
        os.replace(draft, target)
    _stamp(folder).write_text(json.dumps({
        "weights_sha256": weights_sha256, "bytes": target.stat().st_size, "largest_difference": worst,
        "exported_by": f"torch {torch.__version__}"}, indent=1) + "\n", encoding="utf-8")
    return target


def exported(folder: Path, weights_sha256: str) -> bool:
    """Whether `folder` holds an export checked against these weights (its
    stamp and size; nothing loaded, so a status can ask)."""
    try:
        recorded = json.loads(_stamp(folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    target = folder / QUERY_FILE
    return recorded.get("weights_sha256") == weights_sha256 and target.is_file() \
        and target.stat().st_size == recorded.get("bytes")


def load(folder: Path, weights_sha256: str, threads: int = 1):
    """An ONNX Runtime session over `folder`'s export, or None (with the
    reason logged) when there is none for these weights, onnxruntime is not
    installed, or the file is not the one the stamp describes: the caller
    then runs the query through PyTorch, slower, same vectors."""
    target = folder / QUERY_FILE
    if not _stamp(folder).is_file():
        log.info("No checked ONNX export of %s: queries run through PyTorch (python -m engine.providers.query_exports "
                 "makes one).", folder.name)
        return None
    if not exported(folder, weights_sha256):
        log.warning("The ONNX export in %s is not the one checked against these weights: queries run through "
                    "PyTorch. Delete %s and run python -m engine.providers.query_exports.", folder, target.name)
        return None
    return open_session(target, threads, "queries run through PyTorch")

