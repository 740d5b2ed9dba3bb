"""Make the migration test's file with an older release of the workbench.

    git worktree add /tmp/old15 e5c6a8b
    .venv/bin/python tests/store/make_release_file.py /tmp/old15 /tmp/release.db
    gzip -9 -c /tmp/release.db > tests/store/data/release_v5_300_turns.db.gz

It plays tests/store/scenario.py (300 narrations at a 2,048-token budget) with
the older engine; only the facade is used, so the same script plays both.
"""
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path[:0] = [sys.argv[1], str(here.parent), str(here)]

import scenario  # noqa: E402
from narrators import BagOfWordsEmbedder, RecordingStoryNarrator  # noqa: E402

import engine  # noqa: E402
from engine import Workbench  # noqa: E402

assert engine.__file__.startswith(sys.argv[1]), engine.__file__
wb = Workbench.open(sys.argv[2], background=False)
wb.configure(narrator=RecordingStoryNarrator(), embedder=BagOfWordsEmbedder(), context_budget=2048,
             max_output_tokens=120)
camp = wb.new_campaign("Westhaven", premise="A port town under quarantine.", protagonist="Aldric",
                       opening="The bells have not rung for three days.", authors_note="Keep it tense.")
scenario.play(camp, 300)
wb.close()
