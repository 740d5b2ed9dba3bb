"""Real public files from other tools (tests/data/interop, see SOURCES.md):
each is recognised by its own markers, imports with exact text and a report
that names every field it did not carry; each format's importer refuses the
others' files and writes nothing."""
import base64
import io
import json
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, PngImagePlugin

from engine.bundle import BundleRefused
from engine.interop.aidungeon import read_ai_dungeon, read_ai_dungeon_cards
from engine.interop.charcard import read_character_card
from engine.interop.detect import detect
from engine.interop.files import import_character_card, read_any
from engine.interop.koboldai import read_koboldai
from engine.interop.novelai import read_novelai
from engine.interop.sillytavern import read_sillytavern

DATA = Path(__file__).parents[1] / "data" / "interop"


def raw(name: str) -> dict | list:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


# ------------------------------------------------------------------ detection
@pytest.mark.parametrize("name, fmt, label", [
    ("sillytavern-eldoria-2023.json", "sillytavern", "SillyTavern World Info"),
    ("sillytavern-eldoria-2024.json", "sillytavern", "SillyTavern World Info"),
    ("v2-seraphina.json", "character card", "chara_card_v2"),
    ("v2-seraphina-small.png", "character card", "chara_card_v2"),
    ("ccv3-default-chan.png", "character card", "chara_card_v3"),
    ("novelai-test-with-keys.lorebook", "novelai", "NovelAI lorebook"),
    ("koboldai-half-life-2.json", "koboldai", "KoboldAI save"),
    ("aidungeon-worldinfo-towns.json", "aidungeon cards", "AI Dungeon"),
    ("risuai-airisu-lorebook.json", "risuai", "RisuAI lorebook"),
])
def test_each_real_file_is_recognised_by_its_own_markers(name, fmt, label):
    found = detect(read_any(DATA / name))
    assert found.format == fmt and label in found.label


# ------------------------------------------------------------------ SillyTavern
@pytest.mark.parametrize("name, fields", [
    ("sillytavern-eldoria-2023.json", ("order", "position")),
    ("sillytavern-eldoria-2024.json", ("order", "position", "depth", "probability", "groupWeight", "addMemo",
                                       "useProbability")),
])
def test_sillytavern_world_info_arrives_exactly_with_macros_named(fresh, name, fields):
    source = raw(name)["entries"]
    report = fresh.import_file(DATA / name, protagonist="Aldric")
    assert report.format == "SillyTavern World Info"
    cards = fresh.campaign(report.campaign_id).story_cards()
    assert len(cards) == 4 and cards["title"].tolist() == ["eldoria", "shadowfang", "glade", "power"]
    for i, entry in enumerate(source[str(n)] for n in range(4)):
        assert cards["entry"][i] == entry["content"].replace("{{user}}", "Aldric")  # {{char}} has no name here
        assert cards["keys"][i] == entry["key"]
    assert any("{{char}}" in w and "left as written" in w for w in report.warnings)
    assert any("{{user}} → Aldric" in w for w in report.warnings)
    carried = " ".join(report.not_carried)
    for field in fields:
        assert f"`{field}` on 4 of 4 World Info entries" in carried, field


# ------------------------------------------------------------------ character cards
def test_a_v2_png_card_brings_its_book_character_and_greeting(fresh):
    card = raw("v2-seraphina.json")
    data = card["data"]
    report = fresh.import_file(DATA / "v2-seraphina-small.png", protagonist="Aldric")
    assert report.format == "character card (chara_card_v2)"
    camp = fresh.campaign(report.campaign_id)
    sub = lambda t: t.replace("{{char}}", "Seraphina").replace("{{user}}", "Aldric")  # noqa: E731
    assert [n.text for n in camp.history()] == [sub(data["first_mes"])]
    cards = camp.story_cards()
    assert len(cards) == 1 + len(data["character_book"]["entries"]) == 5
    assert cards.iloc[0]["title"] == "Seraphina" and cards.iloc[0]["card_type"] == "character"
    assert cards.iloc[0]["entry"] == "\n\n".join(sub(data[k]) for k in ("description", "personality") if data[k].strip())
    for row, entry in zip(cards.iloc[1:].itertuples(), data["character_book"]["entries"], strict=True):
        assert row.entry == sub(entry["content"]) and row.keys == entry["keys"]
    assert camp.state["entities"]["seraphina"]["name"] == "Seraphina"
    carried = " ".join(report.not_carried)
    for field in ("mes_example", "creator_notes", "tags", "extensions", "alternate_greetings"):
        if data.get(field):
            assert f"`{field}` in the card" in carried, field
    assert "`talkativeness` in the file" in carried


def test_the_character_can_be_the_protagonist_instead(fresh):
    data = raw("v2-seraphina.json")["data"]
    report = fresh.import_file(DATA / "v2-seraphina.json", character_as="protagonist")
    camp = fresh.campaign(report.campaign_id)
    from engine.store import CampaignRow

    with fresh.db.reading() as s:
        row = s.get(CampaignRow, camp.id)
        assert row.protagonist == "Seraphina"
        # {{char}} and {{user}} both name the player's character now.
        assert row.premise.startswith(data["description"].replace("{{char}}", "Seraphina")[:80])
    assert "Seraphina" not in camp.story_cards()["title"].tolist()


def test_a_v3_png_card_with_a_ccv3_chunk(fresh):
    image = Image.open(DATA / "ccv3-default-chan.png")
    data = json.loads(base64.b64decode(image.text["ccv3"]))["data"]
    report = fresh.import_file(DATA / "ccv3-default-chan.png")
    assert report.format == "character card (chara_card_v3)"
    camp = fresh.campaign(report.campaign_id)
    assert camp.title == "Default-chan" and [n.text for n in camp.history()] == [data["first_mes"]]
    assert "`alternate_greetings` in the card" in " ".join(report.not_carried)


def _png_with(chunks: dict[str, str], itxt: bool) -> bytes:
    info = PngImagePlugin.PngInfo()
    for key, value in chunks.items():
        (info.add_itxt if itxt else info.add_text)(key, value)
    out = io.BytesIO()
    Image.new("RGB", (4, 4)).save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def test_itxt_chunks_and_ccv3_preferred_over_chara(fresh):
    v2 = (DATA / "v2-seraphina.json").read_bytes()
    v3 = json.dumps({"spec": "chara_card_v3", "spec_version": "3.0",
                     "data": {**raw("v2-seraphina.json")["data"], "name": "Seraphina v3"}}).encode()
    png = _png_with({"chara": base64.b64encode(v2).decode(), "ccv3": base64.b64encode(v3).decode()}, itxt=True)
    report = fresh.import_file(png)
    assert report.format == "character card (chara_card_v3)" and report.title == "Seraphina v3"


def test_a_charx_archive(fresh, tmp_path):
    """No public .charx was found (SOURCES.md): this one is built from the
    real Seraphina card and its picture, and names its asset."""
    path = tmp_path / "seraphina.charx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("card.json", (DATA / "v2-seraphina.json").read_bytes())
        archive.writestr("assets/icon/main.png", (DATA / "v2-seraphina-small.png").read_bytes())
    report = fresh.import_file(path)
    assert report.format == "character card (chara_card_v2)" and report.counts["story_cards"] == 5
    assert any("1 file in the .charx archive besides card.json" in n and "assets/icon/main.png" in n
               for n in report.not_carried)


def test_a_v3_charx_names_each_asset_and_risus_jpeg_prefixed_archive_reads_too(fresh, tmp_path):
    """The real Default-chan v3 card with its own picture as the icon asset,
    as a plain zip and as RisuAI writes it (a JPEG, then the zip)."""
    card = json.loads(base64.b64decode(Image.open(DATA / "ccv3-default-chan.png").text["ccv3"]))
    card["data"]["assets"] = [{"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main",
                               "ext": "png"}]
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr("card.json", json.dumps(card))
        archive.writestr("assets/icon/images/main.png", (DATA / "ccv3-default-chan.png").read_bytes())
    jpeg = io.BytesIO()
    Image.new("RGB", (4, 4)).save(jpeg, "JPEG")
    for name, raw_bytes in (("plain.charx", packed.getvalue()), ("risu.charx", jpeg.getvalue() + packed.getvalue())):
        (tmp_path / name).write_bytes(raw_bytes)
        report = fresh.import_file(tmp_path / name)
        assert report.format == "character card (chara_card_v3)" and report.title == "Default-chan"
        carried = " ".join(report.not_carried)
        assert "the card's 1 asset" in carried and "icon “main” (embeded://assets/icon/images/main.png)" in carried
        assert "assets/icon/images/main.png" in carried


def test_a_card_book_as_knowledge(fresh):
    report = fresh.import_file(DATA / "v2-seraphina.json", as_knowledge=True, protagonist="Aldric")
    assert report.counts["knowledge_sources"] == 1 and report.counts["story_cards"] == 1  # the character's card


@pytest.mark.parametrize("png", [b"\x89PNG\r\n\x1a\nnot really", None])
def test_a_png_without_a_card_is_refused_and_writes_nothing(counted, png):
    wb, census = counted
    before = census()
    data = png if png is not None else _png_with({"Comment": "just a picture"}, itxt=False)
    with pytest.raises(BundleRefused, match="PNG"):
        wb.import_file(data)
    assert census() == before


# ------------------------------------------------------------------ NovelAI
def test_a_novelai_lorebook_arrives_with_every_text(fresh):
    source = raw("novelai-test-with-keys.lorebook")
    report = fresh.import_file(DATA / "novelai-test-with-keys.lorebook")
    assert report.format == "NovelAI lorebook"
    cards = fresh.campaign(report.campaign_id).story_cards()
    assert cards["entry"].tolist() == [e["text"] for e in source["entries"]]  # every character, byte-exact
    assert sum(map(len, cards["entry"])) == sum(len(e["text"]) for e in source["entries"])
    assert cards["title"].tolist() == [e["displayName"] for e in source["entries"]]
    assert cards["keys"].tolist() == [e["keys"] for e in source["entries"]]
    assert cards["card_type"].tolist() == ["Locations", "Characters", "Locations"]
    carried = " ".join(report.not_carried)
    assert "`contextConfig` on 3 of 3 lorebook entries" in carried and "`searchRange` on 3 of 3" in carried
    assert "`settings` in the lorebook" in carried


def test_the_novelai_file_is_refused_by_the_sillytavern_importer(counted):
    wb, census = counted
    before = census()
    with pytest.raises(BundleRefused, match="NovelAI lorebook"):
        wb.import_sillytavern(DATA / "novelai-test-with-keys.lorebook")
    assert census() == before


# ------------------------------------------------------------------ KoboldAI
def test_a_koboldai_save_with_its_world_info_and_note(fresh):
    source = raw("koboldai-half-life-2.json")
    report = fresh.import_file(DATA / "koboldai-half-life-2.json")
    assert report.format == "KoboldAI save"
    camp = fresh.campaign(report.campaign_id)
    assert [n.text for n in camp.history()] == [source["prompt"]]
    cards = camp.story_cards()
    assert cards["entry"].tolist() == [w["content"] for w in source["worldinfo"]]
    assert cards["keys"][0] == ["Civil Protection", "Metro cop", "CP", "Officer", "Cop"]
    from engine.store import CampaignRow

    with fresh.db.reading() as s:
        assert s.get(CampaignRow, camp.id).authors_note == source["authorsnote"]
    assert any("${}" in w for w in report.warnings)


def test_koboldai_actions_become_the_story_in_order(fresh):
    save = {**raw("koboldai-half-life-2.json"), "actions": [" Barney grins.", "\n> You take the crowbar.\n",
                                                            " It is heavier than you remember."],
            "wifolders_d": {"1": {"name": "Combine"}}}
    report = fresh.import_file(save)
    history = fresh.campaign(report.campaign_id).history()
    assert [n.text for n in history][1:] == save["actions"]
    assert [n.kind for n in history] == ["start", "narrator", "player", "narrator"]
    assert "`wifolders_d` in the save" in " ".join(report.not_carried)


def test_a_koboldai_save_is_refused_by_the_ai_dungeon_importer(counted):
    wb, census = counted
    before = census()
    with pytest.raises(BundleRefused, match="KoboldAI save"):
        wb.import_ai_dungeon(DATA / "koboldai-half-life-2.json")
    assert census() == before


# ------------------------------------------------------------------ AI Dungeon
def test_old_ai_dungeon_world_info_keeps_every_entry(fresh):
    source = raw("aidungeon-worldinfo-towns.json")
    report = fresh.import_file(DATA / "aidungeon-worldinfo-towns.json")
    cards = fresh.campaign(report.campaign_id).story_cards()
    assert cards["entry"].tolist() == [e["entry"] for e in source]
    carried = " ".join(report.not_carried)
    assert "`hidden` on 15 of 15 story cards" in carried and "`id` on 15 of 15 story cards" in carried


def test_ai_dungeon_cards_as_knowledge(fresh):
    report = fresh.import_ai_dungeon(DATA / "aidungeon-worldinfo-towns.json", as_knowledge=True)
    assert report.counts.get("knowledge_sources") == 1 and "story_cards" not in report.counts


# ------------------------------------------------------------------ refusals across formats
READERS = {
    "sillytavern": lambda d: read_sillytavern(d),
    "character card": lambda d: read_character_card(d),
    "novelai": lambda d: read_novelai(d),
    "koboldai": lambda d: read_koboldai(d),
    "aidungeon": lambda d: read_ai_dungeon(d),
    "aidungeon cards": lambda d: read_ai_dungeon_cards(d),
}
FILES = ["sillytavern-eldoria-2023.json", "sillytavern-eldoria-2024.json", "v2-seraphina.json", "ccv3-default-chan.png",
         "novelai-test-with-keys.lorebook", "koboldai-half-life-2.json", "aidungeon-worldinfo-towns.json",
         "risuai-airisu-lorebook.json"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FILES), st.sampled_from(sorted(READERS)))
def test_a_reader_takes_only_its_own_format(name, reader):
    data = read_any(DATA / name)
    own = detect(data).format
    if own == reader:
        READERS[reader](data)  # its own file reads without a refusal
    else:
        with pytest.raises(BundleRefused, match="Nothing was imported"):
            READERS[reader](data)


def test_the_character_card_importer_refuses_world_info(counted):
    wb, census = counted
    before = census()
    with pytest.raises(BundleRefused, match="SillyTavern World Info"):
        import_character_card(wb.db, DATA / "sillytavern-eldoria-2023.json")
    assert census() == before


def test_a_png_card_handed_to_the_world_info_importer_is_refused_by_name(counted):
    wb, census = counted
    before = census()
    with pytest.raises(BundleRefused, match="character card.*import_file"):
        wb.import_sillytavern(DATA / "v2-seraphina-small.png")
    assert census() == before


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["entries", "keys", "key", "content", "text", "prompt", "actions", "spec",
                                         "data", "name", "first_mes", "mes_example", "lorebookVersion", "worldinfo",
                                         "gamestarted", "authorsnote", "storyCards", "value", "title", "memory",
                                         "character_book", "enabled", "constant", "displayName", "category",
                                         "categories", "type", "comment", "disable", "uid"]), inner, max_size=6),
                    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(JSON, st.sampled_from(sorted(READERS)))
def test_any_json_is_read_or_refused_never_crashed(data, reader):
    from engine.bundle.plan import Plan

    try:
        assert isinstance(READERS[reader](data), Plan)
    except BundleRefused:
        pass


def test_a_v1_card_the_root_fields_of_a_real_v2_file(fresh):
    """SillyTavern writes the v1 fields at the root of every v2 card; alone they are a TavernAI v1 card."""
    card = raw("v2-seraphina.json")
    v1 = {k: v for k, v in card.items() if k not in ("spec", "spec_version", "data")}
    assert detect(v1).label == "a character card (v1, TavernAI)"
    report = fresh.import_file(v1, protagonist="Aldric")
    assert report.format == "character card (v1)"
    history = fresh.campaign(report.campaign_id).history()
    assert [n.text for n in history] == [v1["first_mes"].replace("{{char}}", "Seraphina").replace("{{user}}", "Aldric")]
    carried = " ".join(report.not_carried)
    carried_fields = {"name", "description", "personality", "scenario", "first_mes"}
    expected = [k for k, v in v1.items() if k not in carried_fields and v not in ("", None, [], {})]
    assert expected and all(f"`{k}` in the card" in carried for k in expected), expected


# ------------------------------------------------------------------ RisuAI
def _risu_entries() -> list:
    return [e for e in raw("risuai-airisu-lorebook.json") if e["mode"] != "folder"]


@pytest.mark.parametrize("shape", ["as saved", "exported", "module"])
def test_a_risuai_lorebook_arrives_as_cards_with_its_keys_and_exact_text(fresh, tmp_path, shape):
    """The real list RisuAI keeps in a save folder, and the same entries in
    the two wrappers RisuAI writes: its lorebook export and a module."""
    saved = raw("risuai-airisu-lorebook.json")
    document = {"as saved": saved, "exported": {"type": "risu", "ver": 1, "data": saved},
                "module": {"type": "risuModule", "name": "Airisu", "lorebook": saved, "regex": [{"in": "a"}]}}[shape]
    path = tmp_path / "airisu.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    report = fresh.import_file(path)
    assert report.format == "RisuAI lorebook"
    cards = fresh.campaign(report.campaign_id).story_cards()
    entries = _risu_entries()
    assert cards["title"].tolist() == [e["comment"] for e in entries]  # the folders became no card
    for row, entry in zip(cards.itertuples(), entries, strict=True):
        assert row.entry == entry["content"]  # byte-exact
        assert row.keys == [k.strip() for k in entry["key"].split(",")]
        assert row.secondary_keys == ([k.strip() for k in entry["secondkey"].split(",")] if entry["selective"] else [])
        assert row.logic == "and_any" and row.constant is entry["alwaysActive"]
    assert cards["notes"][0] == "In the RisuAI folder “🌍 세계관 폴더”."
    carried = " ".join(report.not_carried)
    with_options = sum(1 for e in entries if e.get("extentions"))
    assert "`insertorder` on 6 of 6 lorebook entries" in carried and f"`extentions` on {with_options} of 6" in carried
    assert any("2 RisuAI folders became no card" in w for w in report.warnings)
    if shape == "module":
        assert "`regex` in the file: regex scripts" in carried and fresh.campaign(report.campaign_id).title == "Airisu"


def test_risuai_cards_fire_as_in_risuai(fresh):
    """A selective entry needs a key and a secondary key, as RisuAI asks;
    an always-active one is always there."""
    from engine.cards import lore_for

    report = fresh.import_file(DATA / "risuai-airisu-lorebook.json")
    always = {e["comment"] for e in _risu_entries() if e["alwaysActive"]}
    night_city = "주요 장소 - 나이트 시티"  # keys: location, place...; secondary: Night City, city...

    def fired(text):
        with fresh.db.reading() as s:
            return {f.title for f in lore_for(s, report.campaign_id, [text], "")}

    assert fired("The location is Night City.") == always | {night_city}
    assert fired("The location is quiet.") == always  # the key alone is not enough
    assert len(always) == 2


def test_a_risuai_preset_is_refused_by_name_and_writes_nothing(counted):
    wb, census = counted
    before = census()
    with pytest.raises(BundleRefused, match="RisuAI preset or settings file"):
        wb.import_file({"type": "risu", "ver": 1, "data": {"name": "Memory", "settings": {}}})
    assert census() == before


# ------------------------------------------------------------------ keys in a script's syntax
def test_the_skyrim_world_infos_script_keys_are_reported_and_shown_as_never_firing(fresh):
    """The public Skyrim World Info writes keys such as `Honeywood#[t=5l=5f=2S=2]`
    for a script: they cannot fire here, and the import says so by card."""
    from engine.cards import lore_for

    source = raw("aidungeon-worldinfo-towns.json")
    report = fresh.import_file(DATA / "aidungeon-worldinfo-towns.json")
    (warning,) = [w for w in report.warnings if "never fire" in w]
    assert warning.startswith(f"{len(source)} keys on {len(source)} cards") and "“Honeywood” (1)" in warning
    cards = fresh.campaign(report.campaign_id).story_cards()
    assert cards["unusable_keys"].tolist() == [[e["keys"]] for e in source]
    assert cards["title"][0] == "Honeywood" and cards["entry"].tolist() == [e["entry"] for e in source]
    with fresh.db.reading() as s:
        assert lore_for(s, report.campaign_id, ["We ride to Honeywood and Dragon Bridge."], "") == []


# ------------------------------------------------------------------ every field of a card
def test_a_character_books_name_is_carried(fresh):
    data = raw("v2-seraphina.json")["data"]
    report = fresh.import_file(DATA / "v2-seraphina.json")
    cards = fresh.campaign(report.campaign_id).story_cards()
    book = data["character_book"]["name"]
    assert book == "Eldoria" and all(o.endswith(f"lorebook “{book}”") for o in cards["origin"][1:])
    as_knowledge = fresh.import_file(DATA / "v2-seraphina.json", as_knowledge=True)
    with fresh.db.reading() as s:
        from sqlalchemy import select

        from engine.store.knowledge_tables import KnowledgeSourceRow

        titles = s.scalars(select(KnowledgeSourceRow.title)
                           .where(KnowledgeSourceRow.campaign_id == as_knowledge.campaign_id)).all()
    assert titles == [book]


def test_a_risuai_character_export_names_risus_own_data(fresh):
    """RisuAI exports characters as cards whose book is read like any other;
    its own data under `extensions.risuai` is named field by field."""
    card = raw("v2-seraphina.json")
    card["data"]["extensions"] = {"risuai": {"customScripts": [{"in": "x", "out": "y"}], "triggerscript": [],
                                             "sdData": [["always", "solo"]], "utilityBot": False}}
    report = fresh.import_file(card)
    assert report.counts["story_cards"] == 5
    (line,) = [n for n in report.not_carried if "extensions.risuai" in n]
    assert "`customScripts`, `sdData`" in line and "triggerscript" not in line
