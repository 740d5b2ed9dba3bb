"""How much protocol the narrator leaves in what is stored.

Plays a campaign with memory and summary on, then counts the stored narrator
replies that the write-time cleanup would still change (the release gate is
0), and tallies which cleanup rules fired while the turns were written.
"""
from __future__ import annotations

from collections import Counter

import pandas as pd
from tqdm.auto import tqdm

from engine.narrative import count_leaks

from .retrying import until_accepted

__all__ = ["INPUTS", "play", "rules_fired", "count"]

INPUTS = ["walk to the lighthouse", "I knock on the keeper's door", '"Is anyone here?"', "climb the stairs",
          "look at the lamp", "I read the logbook", "go back down", "search the cellar", "I light a candle",
          "follow the footprints", "open the sea gate", "wait for the tide"]


def play(camp, turns: int, progress: bool = True, attempts: int = 3) -> dict:
    """Play `turns` accepted turns. A small model sometimes returns nothing but
    protocol, which the engine refuses (and writes nothing); such a turn is
    tried again, up to `attempts` times, and counted."""
    accepted, refused = [], []
    for i in tqdm(range(turns), desc="turns", disable=not progress):
        turn = until_accepted(lambda i=i: camp.act(INPUTS[i % len(INPUTS)]), attempts=attempts, refused=refused,
                              required=False)
        if turn is not None:
            accepted.append(turn)
        camp.wait_derived()
    return {"accepted": accepted, "refused": refused}


def rules_fired(camp) -> pd.DataFrame:
    """Which cleanup rules removed what, across the stored takes' records."""
    tally = Counter()
    for row in camp.records().itertuples():
        for removal in camp.turn(row.node_id).report.narrative.removals:
            tally[removal["rule"]] += 1
    return pd.DataFrame(sorted(tally.items()), columns=["rule", "removals"])


def count(source) -> dict:
    return count_leaks(source)
