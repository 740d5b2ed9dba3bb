"""Import fuzzing at a volume that finds rare paths, with every outcome counted.

The fast fuzzer (tests/security/test_import_fuzz.py) runs a few hundred
examples per format; a session that ran ten times that with fresh seeds found
3 bundles in 10,000 that hung the import for ever (a branch without an id
became its own parent). This file runs that volume on every `make bench`:
10,000 mutants of real campaign bundles (a rich played campaign in this
workbench's format and the reference app's v3 file) and 3,000 of each other
tool's file (real published files from tests/data/interop where there are
any), each input under a 10 s alarm so a hang is counted, not waited on.

Every input ends in one of:

- refused: a WorkbenchError with a sentence, and every table's row count
  unchanged (checked by counting, not trusted);
- imported: then its next prompt must build at the default window (no
  ContextOverflow: the protected fields were cut to their bounds) and the
  story must read back;
- a failure: a crash (any other exception), a hang (past 10 s), a partial
  write (a refusal that left rows), a refusal without a sentence, or an
  import that cannot play. Failures are saved beside the run and named.

The figures (inputs, refused, imported, crashes, hangs, partial writes...)
go into evidence/benchmarks.json through pytest-benchmark's extra_info.
`make test` runs benchmarks once with --benchmark-disable, and then this file
runs a fast sample of each suite (the same code, fewer inputs);
`FUZZ_FRACTION=0.1` runs a stated fraction of the full volume instead.
"""
from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bundle"))

from guard import Hang, within  # noqa: E402
from hostile import (  # noqa: E402
    CHARACTER_CARD,
    KOBOLD_SAVE,
    NOVELAI_LOREBOOK,
    SCENARIO,
    WORLD_INFO,
    build_rich,
    census,
    configure,
    v3,
)
from test_import_fuzz import BYTE_SNIPPETS, HOSTILE, _mutated, _places  # noqa: E402

from engine import ContextOverflow, Workbench, WorkbenchError, interop  # noqa: E402
from engine.budget import standing  # noqa: E402

pytestmark = pytest.mark.benchmark

DATA = Path(__file__).resolve().parents[1] / "data" / "interop"
HANG_SECONDS = 10.0
# The full volume (make bench), and the sample `make test` keeps.
BUNDLES, PER_IMPORTER = 10_000, 3_000
SAMPLE_BUNDLES, SAMPLE_PER_IMPORTER = 200, 60
# A fresh target database every so many inputs: counting every table's rows
# before and after each input stays cheap, as it would not in a file holding
# thousands of imported campaigns.
ROTATE = 250
SEED = 44
# Besides the fast fuzzer's hostile values: text past every bound (prose, and
# rare CJK that costs ~3.9 tokens a character), so imports that land are
# held to the promise that they can play.
LONG = ["The tide turns at dusk. " * 2500, "".join(chr(0x20000 + i % 4000) for i in range(20_000))]
VALUES = [*HOSTILE, *LONG]


def volume(full: int, sample: int, benchmark) -> int:
    fraction = os.environ.get("FUZZ_FRACTION")
    if fraction:
        return max(1, round(full * float(fraction)))
    return full if benchmark.enabled else sample


def _raw(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


# ------------------------------------------------------------------ mutants
class Mutator:
    """Seeded mutants of a few documents: structured (a hostile value set at,
    or a key deleted from, or a value wrapped in a list at, one to three
    random places of the tree) or byte-level (snippets written over, or runs
    deleted from, the serialised file). The same seed gives the same inputs."""

    def __init__(self, documents: list, seed: str):
        self.documents = [json.loads(json.dumps(d)) for d in documents]
        self.places = [list(_places(d)) for d in self.documents]
        self.serialised = [json.dumps(d).encode() for d in self.documents]
        self.rng = random.Random(seed)

    def __call__(self) -> bytes:
        which = self.rng.randrange(len(self.documents))
        return self._structured(which) if self.rng.random() < 0.5 else self._bytes(which)

    def _structured(self, which: int) -> bytes:
        rng, document = self.rng, self.documents[which]
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(self.places[which])
            action = rng.choice(["set", "set", "delete", "wrap"])
            try:
                document = _mutated(document, path, action, rng.choice(VALUES))
            except (KeyError, IndexError, TypeError):
                continue  # an earlier mutation removed this place
        return json.dumps(document).encode()

    def _bytes(self, which: int) -> bytes:
        rng, raw = self.rng, bytearray(self.serialised[which])
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(raw))
            if rng.random() < 0.5:
                snippet = rng.choice(BYTE_SNIPPETS)
                raw[at:at + len(snippet)] = snippet
            else:
                del raw[at:at + rng.randint(1, 64)]
        return bytes(raw)


# ------------------------------------------------------------------ one run
@dataclass
class Tally:
    suite: str
    inputs: int = 0
    refused: int = 0
    imported: int = 0
    crashes: int = 0
    hangs: int = 0
    partial_writes: int = 0
    unworded: int = 0  # a refusal without a sentence
    unplayable: int = 0  # imported, but its next prompt does not fit the default window
    slowest_s: float = 0.0
    seconds: float = 0.0
    failures: list = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.crashes + self.hangs + self.partial_writes + self.unworded + self.unplayable

    def record(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k != "failures"}
        out["failures"] = self.failures[:20]
        return out


class Target:
    """A workbench to import into, replaced every ROTATE inputs."""

    def __init__(self, folder: Path):
        self.folder, self.n, self.wb = folder, 0, None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        if self.wb is not None:
            self.wb.close()

    def get(self) -> Workbench:
        if self.wb is None or self.n % ROTATE == 0:
            if self.wb is not None:
                self.wb.close()
            self.wb = Workbench.open(self.folder / f"target-{self.n // ROTATE}.db", background=False)
            configure(self.wb)
            assert self.wb.settings.context_budget == standing.DEFAULT_WINDOW
        self.n += 1
        return self.wb


def run(suite: str, mutants: Callable[[], bytes], count: int, attempt: Callable[[Workbench, bytes], Any],
        folder: Path) -> Tally:
    """Feed `count` mutants to `attempt(workbench, raw)` (returns an import
    report) and sort each outcome; failures are written to `folder`."""
    tally = Tally(suite)
    started = time.perf_counter()
    with Target(folder) as target:
        for i in range(count):
            raw = mutants()
            wb = target.get()
            tally.inputs += 1
            found = _one(wb, raw, attempt, tally)
            if found is not None:
                kind, detail = found
                path = folder / f"{suite.replace(' ', '-')}-{i}-{kind}.bin"
                path.write_bytes(raw)
                path.with_suffix(".txt").write_text(detail, encoding="utf-8", errors="backslashreplace")
                tally.failures.append(f"{path} ({detail.strip().splitlines()[-1][:200] if detail.strip() else kind})")
    tally.seconds = round(time.perf_counter() - started, 1)
    return tally


def _one(wb: Workbench, raw: bytes, attempt, tally: Tally) -> tuple[str, str] | None:
    """One input's outcome counted in `tally`; (the failure's kind, what was
    raised), or None."""
    before = census(wb.db.path)
    started = time.perf_counter()
    try:
        report, _ = within(HANG_SECONDS, lambda: attempt(wb, raw))
    except Hang:
        tally.hangs += 1
        return "hang", traceback.format_exc()
    except WorkbenchError as refused:
        tally.slowest_s = max(tally.slowest_s, time.perf_counter() - started)
        if census(wb.db.path) != before:
            tally.partial_writes += 1
            return "partial-write", str(refused)
        message = str(refused).strip()
        if len(message) < 20 or not message.endswith((".", ")")):
            tally.unworded += 1
            return "unworded", message
        tally.refused += 1
        return None
    except Exception:  # noqa: BLE001 - counted: any other exception is the finding
        tally.crashes += 1
        return "crash", traceback.format_exc()
    tally.slowest_s = max(tally.slowest_s, time.perf_counter() - started)
    tally.imported += 1
    camp = wb.campaign(report.campaign_id)
    try:
        within(HANG_SECONDS, lambda: (camp.history(), camp.context("I look around.")))
    except ContextOverflow as overflow:
        tally.unplayable += 1
        return "unplayable", str(overflow)
    except Hang:
        tally.hangs += 1
        return "hang-after-import", traceback.format_exc()
    except Exception:  # noqa: BLE001 - counted
        tally.crashes += 1
        return "crash-after-import", traceback.format_exc()
    return None


def check(benchmark, tally: Tally) -> None:
    benchmark.extra_info.update(tally.record())
    assert tally.inputs and tally.refused and tally.imported, tally.record()  # both paths were exercised
    assert tally.failed == 0, tally.record()


# ------------------------------------------------------------------ the suites
@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> list:
    folder = tmp_path_factory.mktemp("fuzz-volume-source")
    wb = Workbench.open(folder / "source.db", background=False)
    report = build_rich(wb).export(folder / "rich.json")
    wb.close()
    return [json.loads(report.path.read_bytes()), v3()]


def test_campaign_bundles_at_volume(benchmark, bundles, tmp_path):
    count = volume(BUNDLES, SAMPLE_BUNDLES, benchmark)
    tally = benchmark.pedantic(lambda: run("campaign bundle", Mutator(bundles, f"bundle:{SEED}"), count,
                                           lambda wb, raw: wb.import_campaign(raw), tmp_path),
                               rounds=1, iterations=1)
    check(benchmark, tally)


IMPORTERS = {
    # AI Dungeon publishes no scenario file we can keep; the shape its export writes, with an adventure's actions.
    "AI Dungeon scenario": (lambda: [SCENARIO, {**SCENARIO, "actions": [
        {"type": "start", "text": "The forge is cold."}, {"type": "do", "text": "> You light it."},
        {"type": "continue", "text": "Sparks climb the flue."}]}],
        lambda wb, raw: interop.import_ai_dungeon(wb.db, raw)),
    "AI Dungeon cards": (lambda: [_raw("aidungeon-worldinfo-towns.json"), SCENARIO["storyCards"]],
                         lambda wb, raw: interop.import_ai_dungeon(wb.db, raw)),
    "SillyTavern World Info": (lambda: [_raw("sillytavern-eldoria-2023.json"),
                                        _raw("sillytavern-eldoria-2024.json"), WORLD_INFO],
                               lambda wb, raw: interop.import_sillytavern(wb.db, raw)),
    "character card": (lambda: [_raw("v2-seraphina.json"), CHARACTER_CARD],
                       lambda wb, raw: interop.import_file(wb.db, raw)),
    "KoboldAI save": (lambda: [_raw("koboldai-half-life-2.json"), KOBOLD_SAVE],
                      lambda wb, raw: interop.import_file(wb.db, raw)),
    "NovelAI lorebook": (lambda: [_raw("novelai-test-with-keys.lorebook"), NOVELAI_LOREBOOK],
                         lambda wb, raw: interop.import_file(wb.db, raw)),
    "RisuAI lorebook": (lambda: [{"type": "risu", "ver": 1, "data": _raw("risuai-airisu-lorebook.json")}],
                        lambda wb, raw: interop.import_file(wb.db, raw)),
}


@pytest.mark.parametrize("importer", list(IMPORTERS))
def test_other_tools_files_at_volume(benchmark, importer, tmp_path):
    documents, attempt = IMPORTERS[importer]
    count = volume(PER_IMPORTER, SAMPLE_PER_IMPORTER, benchmark)
    tally = benchmark.pedantic(lambda: run(importer, Mutator(documents(), f"{importer}:{SEED}"), count, attempt,
                                           tmp_path), rounds=1, iterations=1)
    check(benchmark, tally)
