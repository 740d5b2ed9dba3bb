"""The player's table in a real browser, at 900 and 1,400 px: Enter sends and
Shift+Enter is a new line, Escape stops, a cut reply is marked and finished
with one click, a player's own line is edited where it stands, a card added
in the Lore panel fires on the next turn, the settings never trap (the
public-endpoint case), the context meter follows the turns, and a reloaded
page brings the campaign back with Run All, which leaves the app in view.

The narrator is a scripted one paced at reading speed (tests/narrators.py):
what is under test is the page, and a fixed script makes the cut reply and
the card's key certain. Screenshots go to the test's temporary folder, and
to evidence/ under `make evidence` (screenshot_folder).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_campaign_app_browser import (  # noqa: F401 - lab is a fixture
    CHROMIUM,
    CHROMIUM_ARGS,
    SECOND,
    _overflowing,
    _requirements,
    _what_the_page_showed,
    lab,
    open_app,
    screenshot_folder,
    section_header,
)

ROOT = Path(__file__).resolve().parents[2]
TURN = 60 * SECOND

REPLIES = [
    "You climb the stair. The lamp room door stands open and the",  # cut: it ends mid-sentence
    "The wind has scattered the keeper's ledger across the floor.",
    "The two lines echo up the stair and fade.",
    " ".join(["The lamp turns and the light sweeps the water."] * 12),  # long: stopped with Escape
    "You knock, and the sound rolls up the tower.",
    "Mara looks up from the ledger and says the keeper went north.",
]

SETUP = f"""\
import sys, time
sys.path.insert(0, {str(ROOT)!r})
sys.path.append({str(ROOT / "tests")!r})
from engine import Workbench
from narrators import ScriptedNarrator
from widgets import CampaignApp


class Paced(ScriptedNarrator):
    \"\"\"Scripted replies streamed at reading pace, so the stream and Stop can be seen.\"\"\"

    def execute(self, prompt):
        for chunk in super().execute(prompt):
            time.sleep(0.12)
            yield chunk


wb = Workbench.open("table.db")
wb.configure(narrator=Paced({REPLIES!r}), memory_enabled=False, auto_summarize=False, embedder="none")
found = wb.campaigns()
camp = found[-1] if found else wb.new_campaign("The Lantern Stair", premise="An old lighthouse.",
                                               protagonist="Wren", opening="Rain needles the cliff path.")
app = CampaignApp(camp)
app"""
BELOW = "\n\n".join(["## Below the app", *[f"A long note, paragraph {i}: " + "words " * 60 for i in range(12)]])

pytestmark = pytest.mark.browser


def _notebook(work: Path) -> None:
    def cell(kind, source, n):
        base = {"cell_type": kind, "id": f"c{n}", "metadata": {}, "source": source.splitlines(keepends=True)}
        return {**base, "execution_count": None, "outputs": []} if kind == "code" else base
    notebook = {"cells": [cell("code", SETUP, 1), cell("markdown", BELOW, 2),
                          cell("code", "app.transcript()", 3)],
                "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                            "name": "python3"}, "language_info": {"name": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    (work / "table.ipynb").write_text(json.dumps(notebook), encoding="utf-8")


@pytest.mark.parametrize("width", [900, 1400])
def test_the_players_table(lab, tmp_path, width):  # noqa: F811 - the fixture, imported
    sync_playwright = _requirements()
    base, token, work = lab
    _notebook(work)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            try:
                _at_the_table(page, base, token, width, screenshot_folder(tmp_path))
            except Exception as exc:
                raise AssertionError(_what_the_page_showed(page, tmp_path)) from exc
            assert not errors, errors
        finally:
            browser.close()


def _at_the_table(page, base, token, width, shots: Path) -> None:
    app = open_app(page, base, token, "table.ipynb")
    story = app.locator(".story-workbench-story")
    box = app.locator(".sw-input textarea")

    # Enter sends; the cut reply ends at its last sentence, marked; one click finishes it.
    box.click()
    page.keyboard.type("I try the door")
    page.keyboard.press("Enter")
    _written(app)
    assert "> I try the door." in story.inner_text() and box.input_value() == ""
    app.locator(".sw-cut-mark").wait_for(timeout=TURN)
    assert "You climb the stair." in story.inner_text() and "door stands open and the" not in story.inner_text()
    app.screenshot(path=str(shots / f"app-cut-{width}.png"))
    app.locator(".sw-finish:not([disabled])").click()
    story.get_by_text("scattered the keeper's ledger").wait_for(timeout=TURN)
    _written(app)
    assert app.locator(".sw-cut-mark").count() == 0

    # Shift+Enter is a new line; Enter then sends both lines.
    box.click()
    page.keyboard.type("line one")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("line two")
    assert box.input_value() == "line one\nline two"
    page.keyboard.press("Enter")
    story.get_by_text("The two lines echo").wait_for(timeout=TURN)
    _written(app)

    # Escape stops a narration: nothing is written.
    narrations = app.locator(".story-narrator").count()
    box.click()
    page.keyboard.type("I watch the lamp")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('.story-workbench-app .sw-live')?.innerText.includes('lamp turns')",
                           timeout=TURN)
    page.keyboard.press("Escape")
    app.locator(".sw-status").get_by_text("Stopped").wait_for(timeout=TURN)
    app.locator(".sw-input textarea:not([disabled])").wait_for(timeout=30 * SECOND)
    assert app.locator(".story-narrator").count() == narrations

    # A player's own line, edited where it stands and branched from: the editor opens between its neighbours.
    line = app.locator(".sw-passage", has=page.locator(".story-player", has_text="I try the door"))
    line.locator(".sw-edit-mark").click()
    editor = app.locator(".sw-editor textarea")
    editor.wait_for(timeout=30 * SECOND)
    assert editor.input_value() == "> I try the door."
    assert _editor_between_passages(page), "the editor is not where the passage stood"
    app.screenshot(path=str(shots / f"app-editing-{width}.png"))
    editor.fill("I knock at the door")
    app.locator(".sw-editor-branch").click()  # answered afresh on a new line (Save would keep the story after it)
    story.get_by_text("You knock, and the sound rolls").wait_for(timeout=TURN)
    _written(app)
    assert "> I knock at the door." in story.inner_text() and "I try the door" not in story.inner_text()

    # A card added in the Lore panel fires on the next turn.
    lore = _open(app, "Lore")
    lore.locator("input[placeholder='Mara']").fill("Mara")
    lore.locator("input[placeholder^='Mara, innkeeper']").fill("Mara, innkeeper")
    lore.locator("textarea[placeholder^='Mara keeps']").fill("Mara keeps the Lantern Inn.")
    lore.get_by_role("button", name="Add card").click()
    lore.get_by_text("Card 'Mara' added").wait_for(timeout=30 * SECOND)
    box.fill("")  # the stopped turn's line was kept in the box
    box.click()
    page.keyboard.type("I ask Mara about the keeper")
    page.keyboard.press("Enter")
    _written(app)
    lore.locator(".sw-cards").get_by_text("fired").first.wait_for(timeout=30 * SECOND)
    meter = app.locator(".sw-meter-words")
    assert "tokens of the" in meter.inner_text() and "lore and knowledge" in meter.inner_text()
    app.screenshot(path=str(shots / f"app-lore-{width}.png"))
    _close(app, "Lore")

    # A save point's label is shown whole, its time included.
    app.locator(".sw-savepoints input[type=text]").fill("before the stair")
    app.get_by_role("button", name="Save point").click()
    app.locator(".sw-status").get_by_text("Save point “before the stair” made").wait_for(timeout=30 * SECOND)
    page.wait_for_function("() => { const s = document.querySelector('.story-workbench-app .sw-savepoints select');"
                           " return s && s.selectedIndex >= 0 && s.options[s.selectedIndex].text.includes('stair'); }",
                           timeout=30 * SECOND)
    assert page.evaluate(_LABEL_FITS), "the save point's label is cut in its list"

    # Settings never trap: a public endpoint is refused; back to Embedded, Apply works.
    settings = _open(app, "Settings")
    settings.locator(".sw-setting-narrator select").select_option(label="My server (OpenAI-compatible)")
    settings.locator(".sw-setting-endpoint_url input").fill("http://8.8.8.8/v1")
    settings.locator(".sw-setting-model input").fill("llama3")
    settings.get_by_role("button", name="Apply").click()
    settings.locator("[role=alert]").get_by_text("can't be used").wait_for(timeout=30 * SECOND)
    settings.locator(".sw-setting-narrator select").select_option(label="Embedded (SmolLM2, offline)")
    reply = settings.locator(".sw-setting-max_output_tokens input")
    reply.fill("0")
    reply.press("Tab")
    settings.get_by_role("button", name="Apply").click()
    settings.get_by_text("Saved: Reply length.").wait_for(timeout=30 * SECOND)
    assert "Reply length 0 is less than the least it can be" in settings.inner_text()
    assert "max_output_tokens" not in settings.locator("[role=status]").inner_text()  # labels, not names
    assert _overflowing(page) == [], f"at {width} px with Settings open"
    _close(app, "Settings")

    # The page reloaded: Run All brings the campaign back, and leaves the app in view.
    page.reload(wait_until="domcontentloaded")
    page.locator(".jp-Notebook .jp-CodeCell .cm-content").first.wait_for(timeout=60 * SECOND)
    page.wait_for_timeout(5 * SECOND)
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-content").get_by_text("Run All Cells", exact=True).click()
    app = page.locator(".story-workbench-app").first
    app.wait_for(timeout=90 * SECOND)
    app.locator(".story-workbench-story").get_by_text("I knock at the door").wait_for(timeout=30 * SECOND)
    page.locator(".sw-transcript").get_by_text("I ask Mara").wait_for(timeout=60 * SECOND)  # the cell below
    page.wait_for_timeout(4 * SECOND)  # Run All has finished and scrolled to the last cell
    assert _app_in_view(page), "Run All left the app out of view"
    app.screenshot(path=str(shots / f"app-{width}.png"))


def _written(app) -> None:
    app.locator(".sw-status").get_by_text("Written").wait_for(timeout=TURN)
    app.locator(".sw-input textarea:not([disabled])").wait_for(timeout=30 * SECOND)


def _open(app, title: str):
    section_header(app, title).click()
    panel = app.locator(f".sw-panel-{title.lower()}")
    panel.wait_for(timeout=30 * SECOND)
    return panel


def _close(app, title: str) -> None:
    section_header(app, title).click()
    app.locator(f".sw-panel-{title.lower()}").wait_for(state="hidden", timeout=30 * SECOND)


_EDITOR_BETWEEN = """() => {
  const editor = document.querySelector('.story-workbench-app .sw-editor').getBoundingClientRect();
  const before = [...document.querySelectorAll('.story-workbench-app .sw-passages .sw-passage')].pop();
  const after = document.querySelector('.story-workbench-app .story-workbench-story > .widget-html:not(.sw-passages) .sw-passage');
  const b = before.getBoundingClientRect();
  return editor.height > 60 && editor.top >= b.bottom - 2 && (!after || after.getBoundingClientRect().top >= editor.bottom - 2);
}"""
_LABEL_FITS = """() => {
  const select = document.querySelector('.story-workbench-app .sw-savepoints select');
  const label = select.options[select.selectedIndex].text;
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = getComputedStyle(select).font;
  return label.includes('saved') && ctx.measureText(label).width + 24 <= select.clientWidth;
}"""
_APP_IN_VIEW = """() => {
  const r = document.querySelector('.story-workbench-app').getBoundingClientRect();
  return r.top >= -8 && r.top < window.innerHeight - 100;
}"""


def _editor_between_passages(page) -> bool:
    return page.evaluate(_EDITOR_BETWEEN)


def _app_in_view(page) -> bool:
    return page.evaluate(_APP_IN_VIEW)
