import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from knowledge_doubles import TopicEmbedder  # noqa: E402

from engine.knowledge import Library  # noqa: E402
from engine.search import calibration
from engine.store import CampaignRow, Database  # noqa: E402

# Measured for the test double with calibrate() in test_calibration.py:
# its targeted and off-topic populations separate around this value.
TOPIC_FLOOR = 0.6

ABBEY = ("# The Old Abbey\n\nThe Old Abbey lies five miles north of Westhaven.\n"
         "The abbey crypt bears a symbol shaped like a broken circle, cut into the keystone above the crypt stair.\n")
TAVERN = ("# Medieval Taverns\n\nMedieval taverns commonly used timber framing, stone hearths, benches, "
          "shared tables, candles, and oil lamps.\n")
OSSUARY = ("# The Ossuary\n\nBones were stacked in the undercroft below the chancel, sorted and shelved by "
           "the brothers who kept the sanctuary.\n")
SHIP = ("# The Grey Gull\n\nThe Grey Gull is a three-masted freighter out of Port Callow, crewed by eleven "
        "and captained by Oren Vask.\n")
SURGERY = ("# Field Surgery\n\nA surgeon sterilised the cannula and checked the infusion pump before the "
           "anaesthetist began.\n")
TIDE_SCENE = ("The harbourmaster checks the tide tables against the container tonnage due on the morning "
              "berth and reschedules the second crane shift.")
KILN_SCENE = "The kiln was held at cone six for a two-hour soak while the glaze matured."
CRYPT_SCENE = "Aldric descends into the crypt beneath the ruined monastery and studies the carved emblem."


@pytest.fixture
def db(tmp_path):
    database = Database(tmp_path / "knowledge.db")
    yield database
    database.close()


def new_campaign(db, protagonist="Aldric", title="Westhaven") -> int:
    with db.writing() as s:
        row = CampaignRow(title=title, protagonist=protagonist)
        s.add(row)
        s.flush()
        return row.id


@pytest.fixture
def campaign(db):
    return new_campaign(db)


@pytest.fixture
def topic():
    return TopicEmbedder()


@pytest.fixture
def calibrated(monkeypatch):
    """Register a floor for the test double (and restore the registry after)."""
    def register(model_id=TopicEmbedder.model_id, floor=TOPIC_FLOOR):
        monkeypatch.setitem(calibration.registry(), calibration.calibration_key(model_id), {"floor": floor})
    register()
    return register


@pytest.fixture
def library(db, campaign, topic, calibrated):
    """A library on the calibrated test double; `holder["embedder"]` swaps it."""
    holder = {"embedder": topic}
    lib = Library(db, campaign, lambda: holder["embedder"], progress=False)
    lib.holder = holder
    return lib
