"""The canary in a real browser: a campaign whose every field a reader sees
holds an attacker's payload is opened in the app in JupyterLab in Chromium,
and none of the payloads' scripts, handlers or links may run. Headless tests
parse the HTML; this one lets the browser try."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_campaign_app_browser import CHROMIUM, CHROMIUM_ARGS, SECOND, _requirements, lab, open_app  # noqa: F401

sys.path.insert(0, str(Path(__file__).parents[1] / "security"))
from hostile import PAYLOADS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = [p for p in PAYLOADS if "__pwned" in p]

CELL = f"""\
import sys
sys.path.insert(0, {str(ROOT)!r})
from engine import Workbench
from widgets import CampaignApp

payloads = {SCRIPTED!r}
wb = Workbench.open("hostile.db")
wb.configure(embedder="none", memory_enabled=False, auto_summarize=False)
joined = "\\n\\n".join(payloads)
camp = wb.new_campaign(payloads[0], premise=joined, protagonist=payloads[1], opening=joined)
for n, p in enumerate(payloads):
    camp.memories.add(p, pinned=True)
    camp.add_story_card(f"card {{n}} " + p, keys=["lantern"], entry=p)
camp.save_point(payloads[2], note=payloads[3])
CampaignApp(camp)"""

pytestmark = pytest.mark.browser


def test_no_payload_runs_in_the_app(lab, tmp_path):  # noqa: F811 - the fixture, imported
    sync_playwright = _requirements()
    base, token, work = lab
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "id": "hostile", "metadata": {},
                           "outputs": [], "source": CELL.splitlines(keepends=True)}],
                "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                            "name": "python3"}, "language_info": {"name": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    (work / "hostile.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            app = open_app(page, base, token, "hostile.ipynb")
            page.wait_for_timeout(3 * SECOND)  # images would have failed to load and fired by now
            for button in app.locator("button").all():  # open what opens: panels, takes, save points
                label = (button.inner_text() or "").strip().lower()
                if label in ("memory", "knowledge", "state", "settings", "context", "lore") and button.is_enabled():
                    button.click()
                    page.wait_for_timeout(500)
            page.mouse.move(300, 300)
            page.mouse.move(700, 600)  # hover handlers get their chance
            shown = app.inner_text()
            pwned = page.evaluate("() => window.__pwned")
            page.screenshot(path=str(tmp_path / "hostile.png"), full_page=True)
        finally:
            browser.close()
    assert pwned is None, f"a payload ran in the page (window.__pwned = {pwned!r})"
    assert not dialogs
    assert "<script>window.__pwned = 1</script>" in shown  # shown as text, so it reached the page
