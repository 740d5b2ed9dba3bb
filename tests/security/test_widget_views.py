"""The campaign app is inert too, whatever the text: every HTML value of every
widget (story, controls, save points, each panel, the context inspector on a
played turn and on a crafted bundle's stored report) is parsed with the same
rules as the engine's views, and the payload must have reached the app."""
from __future__ import annotations

import html
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hostile import PAYLOADS
from narrators import BagOfWordsEmbedder, ScriptedNarrator
from test_html_views import _crafted_bundle, _marker, assert_inert

sys.path.insert(0, str(Path(__file__).parents[1] / "widgets"))
from widget_helpers import html_values  # noqa: E402

from engine import Workbench  # noqa: E402
from engine.providers.connection import ConnectionReport  # noqa: E402
from widgets import CampaignApp  # noqa: E402
from widgets.common import Confirm, Message, table_html  # noqa: E402
from widgets.controls import Controls  # noqa: E402
from widgets.inspector import ContextInspector, _raw_prompt, sections_table  # noqa: E402
from widgets.settings_panel import connection_html  # noqa: E402
from widgets.state_panel import _listing  # noqa: E402
from widgets.story_view import StoryView  # noqa: E402


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
    imported = bench.import_campaign(_crafted_bundle(payload))
    camp = bench.campaign(imported.campaign_id)
    app = CampaignApp(camp, threaded=False)
    _inspected(app, camp.history()[-1].id)
    for markup in html_values(app):
        assert_inert(markup, None)


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_messages_notices_and_the_live_passage_are_inert(payload):
    """The values a played campaign rarely shows: a refusal, a failed turn's
    notice, a narrator's status line and streamed words, a confirmation, a
    connection note, and a stored state or report holding the payload anywhere."""
    story = StoryView(payload)
    entry = SimpleNamespace(kind=payload, text=payload, take=1, takes=2, edited=True)
    story.show([entry], reasoning=payload)
    shown = [story.title.value, story.passages.value, story.reasoning.value]
    story.begin(payload)
    story.status(payload)
    shown.append(story.live.value)
    story.append(payload)
    shown.append(story.live.value)
    story.abandon(payload)
    shown.append(story.notice.value)
    message, confirm, controls = Message(), Confirm(), Controls()
    message.say(payload, error=True)
    confirm.ask(payload, lambda: None)
    controls.say(payload, error=True)
    connection = ConnectionReport(narrator=payload, endpoint=payload, model=payload, reachable=True, models=[payload],
                                  window={"tokens": 10, "verified": True, "source": payload}, budget=100,
                                  warning=payload)
    shown += [message.value, confirm.question.value, controls.status.value, connection_html(connection),
              table_html([payload], [[payload, payload]], payload), _listing({payload: [payload, {payload: None}]}),
              sections_table([{"name": payload, "tokens": payload, "why": payload, payload: payload, "text": payload}],
                             estimate=5),
              _raw_prompt({"system": payload, "story": payload})]
    for markup in shown:
        assert_inert(markup, payload)
