"""The calibration registry and the measurement that fills it."""
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import TOPIC_FLOOR
from knowledge_doubles import GenerousEmbedder, TopicEmbedder

from engine.providers.embedders import MINILM_ID, MPNET_ID
from engine.search import calibrate, calibration_key, floor_for, load_pairs
from engine.search.calibration import CALIBRATION_FILE, PairSet, calibrated_models, propose_floor, registry

NOMIC_FLOOR = 0.58


@pytest.mark.parametrize("name", ["nomic-embed-text", "nomic-embed-text:latest", "NOMIC-EMBED-TEXT:v1.5",
                                  "  nomic-embed-text  "])
def test_nomic_and_its_tags_share_one_floor(name):
    assert floor_for(name) == NOMIC_FLOOR


@pytest.mark.parametrize("name", ["some-other-embedding-model", "mxbai-embed-large", "bge-m3:latest",
                                  "text-embedding-3-small", "", "   ", None, "gguf:SmolLM2.gguf:mean",
                                  "test-topic-embedder", "generous-embedder"])
def test_anything_unmeasured_has_no_floor(name):
    assert floor_for(name) is None


def test_a_configuration_id_keeps_its_colons():
    assert calibration_key("gguf:Model.gguf:mean") == "gguf:model.gguf:mean"
    assert calibration_key("nomic-embed-text:latest") == "nomic-embed-text"


def test_every_entry_carries_its_measurement():
    data = json.loads(CALIBRATION_FILE.read_text())
    assert set(registry()) == {"nomic-embed-text", MINILM_ID.lower(), MPNET_ID.lower(), "google/embeddinggemma-300m",
                               "google/embeddinggemma-300m-int8"}
    assert calibrated_models() == sorted(registry())
    for key, entry in data["models"].items():
        assert 0 < entry["floor"] < 1, key
        t, o = entry["targeted"], entry["off_topic"]
        assert t["n"] + o["n"] >= 100 and {"min", "max"} <= set(t) & set(o)
        assert o["max"] < entry["floor"], key  # above every off-topic pair
        assert "measured_on" in entry and entry["pairs"]
    nomic = data["models"]["nomic-embed-text"]
    assert (nomic["floor"], nomic["targeted"]["n"], nomic["off_topic"]["n"]) == (0.58, 13, 100)
    assert nomic["off_topic"]["max"] == 0.5578 and nomic["targeted"]["p10"] == 0.6090


BOOKS_PAIRS = Path(__file__).parents[1] / "data" / "knowledge" / "retrieval_pairs.json"


def test_the_minilm_entry_was_measured_on_the_pair_set_of_real_books():
    entry = registry()[MINILM_ID.lower()]
    pairs = load_pairs(BOOKS_PAIRS)
    assert entry["pairs_sha256"] == pairs.sha256, "retrieval_pairs.json changed: re-measure the MiniLM floor"
    assert entry["rule"] == "above_off_topic" and entry["targeted"]["n"] == len(pairs.targeted)
    assert entry["off_topic"]["n"] == len(pairs.off_topic) * len(pairs.passages)
    assert entry["floor"] > entry["off_topic"]["max"] and entry["targeted_above_floor"] >= 0.25


def test_above_off_topic_floors_sit_just_over_every_off_topic_pair():
    from engine.search.calibration import floor_above

    assert floor_above(0.4311, [0.5, 0.6, 0.3]) == 0.44
    assert floor_above(0.4311, [0.1, 0.2, 0.3, 0.45]) == 0.44  # a quarter reach it
    assert floor_above(0.858, [0.72, 0.80, 0.85, 0.86]) is None  # too few above: no semantic admission


def test_the_pair_set_shape():
    pairs = load_pairs()
    assert pairs.size >= 100 and len(pairs.targeted) >= 13 and len(pairs.off_topic) >= 20
    assert {t["passage"] for t in pairs.targeted} == set(pairs.passages)
    assert all(p["text"] and "heading" in p for p in pairs.passages.values())


def test_floor_proposal_sits_inside_the_gap_or_nowhere():
    assert propose_floor(0.6090, 0.5578) == 0.58
    assert propose_floor(0.3036, 0.2446) == 0.27
    assert propose_floor(0.50, 0.50) is None and propose_floor(0.4, 0.5) is None
    tight = propose_floor(0.5012, 0.5009)
    assert 0.5009 < tight < 0.5012


SMALL = PairSet(
    passages={"abbey": {"heading": "The Old Abbey", "text": "The abbey crypt bears a broken circle."},
              "tavern": {"heading": "Taverns", "text": "Taverns had timber beams, hearths and ale."}},
    targeted=[{"query": "The monks' burial vault under the ruined monastery", "passage": "abbey"},
              {"query": "Ale by the fireplace at the inn", "passage": "tavern"}],
    off_topic=["The kiln was held at cone six for a soak.", "The compiler rejects the borrow.",
               "The surgeon checks the infusion pump."],
)


def test_a_separating_model_gets_a_floor_between_its_populations():
    result = calibrate(TopicEmbedder(), SMALL)
    assert result.separated and result.targeted.n == 2 and result.off_topic.n == 6
    assert result.off_topic.max < result.floor < result.targeted.min
    assert result.off_topic.max < TOPIC_FLOOR < result.targeted.min  # the floor conftest registers
    assert len(result.scores) == 8 and "Proposed floor" in result.words
    entry = result.entry()
    assert entry["floor"] == result.floor and entry["targeted"]["n"] == 2 and entry["measured_on"]


def test_a_generous_model_gets_no_floor():
    result = calibrate(GenerousEmbedder(), SMALL)
    assert result.off_topic.min > 0.99  # everything looks related
    assert result.floor is None and not result.separated and "overlap" in result.words


STAGE_PAIRS = Path(__file__).parents[1] / "data" / "knowledge" / "stage_pairs.json"


def test_the_second_models_entry_was_measured_on_the_tuning_half():
    """The second stage's floor comes from pairs of the evaluation's tuning
    half only (experiments.retrieval_eval.split), never from the scenes it is
    reported on."""
    from experiments.retrieval_eval import load_labels, split

    entry = registry()[MPNET_ID.lower()]
    pairs = load_pairs(STAGE_PAIRS)
    assert entry["pairs_sha256"] == pairs.sha256, "stage_pairs.json changed: re-measure the second model's floor"
    assert entry["rule"] == "above_off_topic" and entry["floor"] > entry["off_topic"]["max"]
    assert entry["targeted"]["n"] == len(pairs.targeted) and entry["targeted_above_floor"] >= 0.25
    tuning, held = split(load_labels())
    assert {t["scene"] for t in pairs.targeted} <= {t["id"] for t in tuning.targeted}
    assert not {t["scene"] for t in pairs.targeted} & {t["id"] for t in held.targeted}


@pytest.mark.realmodel
def test_minilm_remeasured_on_real_books_gives_the_shipped_floor():
    from engine.providers.embedders import MiniLMEmbedder

    entry = registry()[MINILM_ID.lower()]
    result = calibrate(MiniLMEmbedder(), load_pairs(BOOKS_PAIRS), rule="above_off_topic")
    print(result.words)
    assert result.off_topic.max == pytest.approx(entry["off_topic"]["max"], abs=0.002)
    assert result.floor == entry["floor"] > result.off_topic.max


@pytest.mark.realmodel
def test_the_westhaven_pairs_still_separate_under_minilm():
    from engine.providers.embedders import MiniLMEmbedder

    result = calibrate(MiniLMEmbedder())
    assert result.separated and result.floor is not None and result.targeted.min > result.floor



# ---------------------------------------------------------------- query centre
def test_a_centred_measurement_takes_the_shared_direction_off_every_query(tmp_path, monkeypatch):
    """TopicEmbedder puts one constant component under every text, as prompted
    models do; measured with its centre taken off, the everyday pairs fall
    and the entry carries the centre the engine will take off a turn's query."""
    from engine.search import centre_for, centred
    from engine.search.calibration import register

    plain = calibrate(TopicEmbedder(), SMALL)
    measured = calibrate(TopicEmbedder(), SMALL, centre=True)
    assert plain.centre is None and "query_centre" not in plain.entry()
    assert measured.off_topic.max < plain.off_topic.max - 0.1
    entry = measured.entry()["query_centre"]
    assert entry["dims"] == len(measured.centre) and entry["scenes"] == 5  # 2 targeted + 3 everyday scenes

    target = tmp_path / "calibration.json"
    written = register(measured, target)  # the entry as the registry file holds it
    monkeypatch.setitem(registry(), calibration_key(TopicEmbedder.model_id), written)
    centre = centre_for(TopicEmbedder.model_id)
    assert centre is not None and np.allclose(centre, measured.centre, atol=1e-6)

    raw = TopicEmbedder().embed(["The kiln was held at cone six for a soak."])
    unit_raw = raw / np.linalg.norm(raw)
    expected = (unit_raw - centre) / np.linalg.norm(unit_raw - centre)
    assert np.allclose(centred(TopicEmbedder.model_id, unit_raw), expected, atol=1e-6)
    # a model without a centre is only made unit length
    assert np.allclose(centred("no-such-model", raw), unit_raw, atol=1e-6)


def test_the_second_stage_searches_with_the_centred_query(monkeypatch):
    from engine.search import VectorStage, centred
    from engine.search.calibration import calibration_key

    centre = np.zeros(len(TopicEmbedder().vector("x")), dtype=np.float32)
    centre[0] = 0.5  # the constant component every text carries
    import base64

    entry = {"floor": 0.3, "query_centre": {"dims": len(centre), "scenes": 1,
                                             "float32_base64": base64.b64encode(centre.astype("<f4").tobytes()).decode()}}
    monkeypatch.setitem(registry(), calibration_key("centred-topic"), entry)
    stage = VectorStage(TopicEmbedder("centred-topic"))
    scene = "The monks' burial vault under the ruined monastery"
    got = stage.query([scene])
    raw = TopicEmbedder().embed([scene])
    assert np.allclose(got, centred("centred-topic", raw), atol=1e-6)
    assert not np.allclose(got, raw / np.linalg.norm(raw), atol=1e-3)


@pytest.mark.parametrize("model", ["google/embeddinggemma-300m", "google/embeddinggemma-300m-int8"])
def test_the_relevance_models_centre_was_measured_on_the_tuning_pairs(model):
    """EmbeddingGemma's entries carry the query centre of the tuning half's
    pair set (95 scenes), and their floors are on the centred scale."""
    entry = registry()[model]
    pairs = load_pairs(STAGE_PAIRS)
    assert entry["pairs_sha256"] == pairs.sha256
    centre = entry["query_centre"]
    assert centre["dims"] == 768 and centre["scenes"] == len(pairs.targeted) + len(pairs.off_topic)
    from engine.search import centre_for

    vector = centre_for(model)
    assert vector.shape == (768,) and 0.2 < float(np.linalg.norm(vector)) < 0.8
