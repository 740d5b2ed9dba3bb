"""The campaign app is inert too, whatever the text: every HTML value of every
widget (story, controls, save points, each panel, the context inspector on a
played turn and on a crafted bundle's stored report) is parsed with the same
rules as the engine's views, and the payload must have reached the app."""
from __future__ import annotations

import html
import sys
from pathlib import Path

import pytest
from hostile import PAYLOADS
from narrators import BagOfWordsEmbedder, ScriptedNarrator
from test_html_views import _crafted_bundle, _marker, assert_inert

sys.path.insert(0, str(Path(__file__).parents[1] / "widgets"))
from widget_helpers import html_values  # noqa: E402

from engine import Workbench  # noqa: E402
from engine.bundle import facade  # noqa: E402
from widgets import CampaignApp  # noqa: E402
from widgets.inspector import ContextInspector  # noqa: E402


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    wb = Workbench.open(tmp_path_factory.mktemp("widget-views") / "views.db", background=False)
    wb.configure(narrator=ScriptedNarrator(PAYLOADS, reasoning=PAYLOADS[0]), embedder=BagOfWordsEmbedder())
    yield wb
    wb.close()


def _inspected(app: CampaignApp, node_id: int) -> None:
    for panel in app.panel_widgets:
        if isinstance(panel, ContextInspector):
            panel.show(node_id)


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_every_widget_of_a_played_campaign_is_inert(bench, payload):
    camp = bench.new_campaign(payload, premise=payload, protagonist="Ila", opening=payload)
    turn = camp.act(payload)
    camp.save_point(payload, note=payload)
    camp.memories.add(payload, pinned=True)
    camp.add_story_card(payload.replace("\x00", "") or "card", keys=["lantern"], entry=payload.replace("\x00", ""))
    body = payload.replace("\x00", "")
    camp.knowledge.add("note.md", f"# {body}\n\n{body} lantern crypt\n", title=payload, notes=payload)
    app = CampaignApp(camp, threaded=False)
    _inspected(app, turn.id)
    values = html_values(app)
    for markup in values:
        assert_inert(markup, None)
    assert any(_marker(payload) in html.unescape(v) for v in values), "the payload never reached the app"


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_the_inspector_on_a_crafted_bundles_report_is_inert(bench, payload):
    imported = facade.import_campaign(bench, _crafted_bundle(payload))
    camp = bench.campaign(imported.campaign_id)
    app = CampaignApp(camp, threaded=False)
    _inspected(app, camp.history()[-1].id)
    for markup in html_values(app):
        assert_inert(markup, None)

