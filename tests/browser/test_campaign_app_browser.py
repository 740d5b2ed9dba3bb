"""The app in a real browser: JupyterLab from .venv, Debian Chromium driven by
Playwright, the real embedded narrator. Headless widget tests cannot show
that the front end renders the widgets, that a typed line reaches the kernel
and that streamed narration reaches the page; this does.

Chromium comes from apt (`make browser-deps`, a prerequisite of `make test`);
Playwright is never allowed to download a browser of its own.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from engine import Workbench

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]
# Screenshots are what a test saw: they go to its temporary folder, and to
# evidence/ only when `make evidence` asks with the switch the research
# sidecars read (experiments/results.py), so `make test` leaves the tree clean.
EVIDENCE_SWITCH = "STORY_WORKBENCH_EVIDENCE"
SECOND = 1000  # Playwright timeouts are in milliseconds
TURN = 240 * SECOND  # one turn of the embedded model, generous for a loaded 2-core machine

# A long opening: the story overflows its box from the start, so "the newest
# text is in view" is a real claim about where the box is scrolled.
OPENING = "\n\n".join(["Rain needles the cliff path below the lighthouse."]
                       + [f"Gull {i} wheels over the black water and cries at the shut door of the tower."
                          for i in range(1, 15)])

NOTEBOOK_CELL = f"""\
import sys
sys.path.insert(0, {str(ROOT)!r})
from engine import Workbench
from widgets import CampaignApp

wb = Workbench.open("browser.db")
# This test is about the page; derived work (memories, summaries, embeddings)
# would share the one embedded model with the turns and only slow them down.
quiet = {{k: v for k, v in dict(memory_enabled=False, auto_summarize=False, embedder="none").items()
          if hasattr(wb.settings, k)}}
wb.configure(narrator="local", max_output_tokens=40, **quiet)
camp = wb.new_campaign("The Lantern Stair", premise="An old lighthouse whose keeper vanished.",
                       protagonist="Wren", opening={OPENING!r})
CampaignApp(camp)"""

pytestmark = pytest.mark.browser


def _requirements():
    """Fail, not skip: `make test` installs both, so a missing one is a broken setup."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run `make browser-deps` (apt-get install chromium).")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing from .venv: run `make setup` (it is in the dev extra).")
    return sync_playwright


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_notebook(folder: Path) -> None:
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": "app", "metadata": {}, "outputs": [],
                   "source": NOTEBOOK_CELL.splitlines(keepends=True)}],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    (folder / "app.ipynb").write_text(json.dumps(notebook), encoding="utf-8")


def _quiet_settings(folder: Path) -> Path:
    """Lab settings that skip the 'get notified about Jupyter news?' toast (it covers the app)."""
    target = folder / "@jupyterlab" / "apputils-extension"
    target.mkdir(parents=True)
    (target / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    return folder


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on 127.0.0.1 with a token, in a temp dir; stopped by its own pid."""
    work = tmp_path / "lab"
    work.mkdir()
    _write_notebook(work)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "IPYTHONDIR": str(tmp_path / "ipython"),
           "JUPYTERLAB_SETTINGS_DIR": str(_quiet_settings(tmp_path / "settings"))}
    command = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
               f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
               f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:
        command.append("--allow-root")  # containers and CI run as root
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(command, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(base, token, server, tmp_path / "lab.log")
        yield base, token, work
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)  # the group this test started, by its id
            server.wait(5)
        log.close()


def _wait_for_server(base: str, token: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited early:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{base}/api/status", params={"token": token}, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"JupyterLab did not start within 90 s:\n{log.read_text()[-3000:]}")


def test_the_app_plays_in_jupyterlab_in_chromium(lab, tmp_path):
    sync_playwright = _requirements()
    base, token, work = lab
    (work / "harbour.md").write_text("# Harbour\n\nThe harbour chain is raised at dusk by the keeper.\n")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            try:
                _play_in_the_page(page, base, token, work, screenshot_folder(tmp_path))
            except Exception as exc:
                raise AssertionError(_what_the_page_showed(page, tmp_path)) from exc
            assert not [e for e in errors if "widget" in e.lower()], errors
        finally:
            browser.close()
    _check_the_campaign_file(work / "browser.db")


def screenshot_folder(tmp_path: Path) -> Path:
    """evidence/ when evidence is asked for, else the test's temporary folder."""
    folder = ROOT / "evidence" if os.environ.get(EVIDENCE_SWITCH) == "1" else tmp_path
    folder.mkdir(exist_ok=True)
    return folder


def _what_the_page_showed(page, tmp_path: Path) -> str:
    """On failure: a screenshot beside the test's temp files and the page's text, to say why."""
    shot = tmp_path / "failure.png"
    try:
        page.screenshot(path=str(shot), full_page=True)
        text = page.locator(".jp-Notebook").inner_text(timeout=5 * SECOND)
    except Exception as exc:  # noqa: BLE001 - the diagnosis must not hide the failure
        text = f"(could not read the page: {exc})"
    return f"The page (screenshot {shot}):\n{text[-4000:]}\nJupyterLab log:\n{(tmp_path / 'lab.log').read_text()[-3000:]}"


def open_app(page, base: str, token: str, notebook: str):
    """Open `notebook` in JupyterLab, run its first cell, and return the app once it shows."""
    page.goto(f"{base}/lab/tree/{notebook}?token={token}", wait_until="domcontentloaded")
    editor = page.locator(".jp-Notebook .jp-CodeCell .cm-content").first
    editor.wait_for(timeout=60 * SECOND)
    page.wait_for_timeout(10 * SECOND)  # the kernel starting
    editor.click()
    page.keyboard.press("Shift+Enter")
    app = page.locator(".story-workbench-app")
    app.wait_for(timeout=90 * SECOND)
    return app


def _play_in_the_page(page, base: str, token: str, work: Path, shots: Path) -> None:
    app = open_app(page, base, token, "app.ipynb")
    story = app.locator(".story-workbench-story")
    assert "Rain needles the cliff path" in story.inner_text()
    _assert_newest_in_view(page)  # a long opening: the box opens at its end

    _send(page, app, "I try the door at the foot of the tower", watch_stream=True)
    assert "> I try the door at the foot of the tower." in story.inner_text()
    _assert_newest_in_view(page)
    reading = _scroll_story_to_the_top(page)  # the reader goes back to reread...
    _send(page, app, "I climb the stair, counting the steps")
    assert _passage_at_the_top(page) == reading  # ...and the new text does not drag them down
    page.evaluate("() => { document.querySelector('.story-workbench-story').scrollTop = 0; }")
    _assert_newest_in_view(page)
    narrations = story.locator(".story-narrator")
    assert narrations.count() == 2 and narrations.nth(1).inner_text().strip()

    app.locator(".sw-undo").click()
    _wait_for_story(page, "document.querySelectorAll('.story-workbench-story .story-narrator').length === 1")
    assert "counting the steps" not in story.inner_text()

    app.locator(".sw-retry").click()
    _wait_for_story(page, "document.querySelector('.story-workbench-app .sw-takes')?.innerText.includes('2/2')")
    _wait_idle(app)
    assert story.locator(".story-narrator").count() == 1

    for width in (900, 1400):  # no control overflows or clips its label at either width
        page.set_viewport_size({"width": width, "height": 1100})
        page.wait_for_timeout(700)
        assert _overflowing(page) == [], f"at {width} px"
        _assert_newest_in_view(page)

    _settings_panel(page, app)
    _stop_during_a_narration(page, app)
    _context_panel(app)
    _state_panel(app)
    _memory_panel(app)
    _knowledge_panel(app, work)
    _screenshots(page, app, shots)


def section_header(app, title: str):
    """A panel's section header (ipywidgets' Accordion), not a control with the same words."""
    return app.locator(".jupyter-widget-Collapse-header", has_text=re.compile(rf"^\s*{re.escape(title)}\s*$")).first


def _open(app, title: str):
    """Open one Accordion section; returns that panel."""
    section_header(app, title).click()
    panel = app.locator(f".sw-panel-{title.lower()}")
    panel.wait_for(timeout=30 * SECOND)
    return panel


def _settings_panel(page, app) -> None:
    """Settings: a longer reply (so the next turn streams long enough to stop)."""
    panel = _open(app, "Settings")
    box = panel.locator(".sw-setting-max_output_tokens input")
    box.fill("400")
    box.press("Tab")
    panel.get_by_role("button", name="Apply").click()
    panel.get_by_text("Saved: Reply length.").wait_for(timeout=30 * SECOND)


def _stop_during_a_narration(page, app) -> None:
    """Stop while the narrator is writing: nothing is written and the controls come back."""
    before = app.locator(".story-workbench-story .story-narrator").count()
    box = app.locator(".sw-input textarea")
    box.click()
    box.fill("I wait and listen to the lamp")
    app.locator(".sw-send").click()
    page.wait_for_function("document.querySelector('.story-workbench-app .sw-live')?.innerText.trim().length > 0",
                           timeout=TURN)
    assert _live_in_view(page), "the passage being written is outside the story box"
    app.locator(".sw-stop:not([disabled])").click()
    app.locator(".sw-status").get_by_text("Stopped").wait_for(timeout=TURN)
    app.locator(".sw-input textarea:not([disabled])").wait_for(timeout=30 * SECOND)
    assert app.locator(".story-workbench-story .story-narrator").count() == before
    assert app.locator(".sw-live").inner_text().strip() == ""


def _context_panel(app) -> None:
    panel = _open(app, "Context")
    panel.locator(".sw-sections").wait_for(timeout=30 * SECOND)
    assert "narrator_rules" in panel.locator(".sw-sections").inner_text()


def _state_panel(app) -> None:
    panel = _open(app, "State")
    panel.get_by_role("button", name="Correct…").click()  # the form is behind it
    panel.locator("input[placeholder^='words']").first.fill("the lamp is lit")
    panel.get_by_role("button", name="Apply correction").click()
    panel.get_by_text("Applied 1 correction").wait_for(timeout=30 * SECOND)


def _memory_panel(app) -> None:
    panel = _open(app, "Memory")
    panel.locator("textarea").fill("Wren owes the keeper a favour.")
    panel.get_by_role("button", name="Add memory").click()
    panel.get_by_text("Memory added.").wait_for(timeout=30 * SECOND)
    assert "Wren owes the keeper a favour." in panel.locator(".sw-memories").inner_text()


def _knowledge_panel(app, work: Path) -> None:
    panel = _open(app, "Knowledge")
    with app.page.expect_file_chooser() as chooser:  # the upload's <input type=file> is not in the page
        panel.locator(".widget-upload").click()
    chooser.value.set_files(str(work / "harbour.md"))
    panel.get_by_role("button", name="Add to library").click()
    panel.get_by_text("Added").wait_for(timeout=60 * SECOND)
    assert "harbour" in panel.locator(".sw-knowledge").inner_text().lower()
    page = app.page
    page.set_viewport_size({"width": 900, "height": 1100})  # the widest panel, at the narrowest window
    page.wait_for_timeout(700)
    assert _overflowing(page) == [], "with the Knowledge panel open at 900 px"
    section_header(app, "Knowledge").click()  # closed again for the screenshots


def _screenshots(page, app, folder: Path) -> None:
    """The whole app on the real model, widgets.png (app-900.png and app-1400.png come from
    test_players_table_browser.py, which drives every control at both widths)."""
    page.set_viewport_size({"width": 1280, "height": 2600})  # the whole app, story to panels
    page.wait_for_timeout(500)
    app.screenshot(path=str(folder / "widgets.png"))


# In-page checks. Each returns what a reader would see wrong, or nothing.
_OVERFLOWING = """() => {
  const app = document.querySelector('.story-workbench-app');
  const found = [];
  const name = el => (el.className && String(el.className).split(' ').find(c => c.startsWith('sw-'))) || el.tagName;
  if (app.scrollWidth > app.clientWidth + 1) found.push('the app scrolls sideways');
  for (const el of app.querySelectorAll('*')) {
    const style = getComputedStyle(el);
    if (el.offsetParent === null) continue;  // not displayed
    if (['auto', 'scroll'].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1)
      found.push('horizontal scrollbar on ' + name(el));
    if (el.tagName === 'BUTTON' && el.scrollWidth > el.clientWidth + 1)
      found.push('clipped label: ' + el.innerText);
  }
  return found;
}"""
_NEWEST_IN_VIEW = """() => {
  const box = document.querySelector('.story-workbench-story');
  const all = box.querySelectorAll('.story-narrator, .story-start, .story-player');
  const newest = all[all.length - 1];
  const b = box.getBoundingClientRect(), n = newest.getBoundingClientRect();
  return n.bottom <= b.bottom + 2 && n.bottom >= b.top;
}"""
_LIVE_IN_VIEW = """() => {
  const box = document.querySelector('.story-workbench-story').getBoundingClientRect();
  const live = document.querySelector('.story-workbench-app .sw-live').getBoundingClientRect();
  return live.height > 0 && live.bottom <= box.bottom + 2 && live.top >= box.top - 2;
}"""


# Every element under the point, topmost first, kept to the story box's own: when
# JupyterLab scrolls the notebook so the box's top sits under its menu bar, the
# topmost element there is the menu ("Help"), not the passage (a suite-load flake);
# the box is brought into the page's view first.
_TOP_PASSAGE = """() => {
  const box = document.querySelector('.story-workbench-story');
  box.scrollIntoView({block: 'nearest'});  // the page, not the box: its own scroll is what is measured
  const r = box.getBoundingClientRect();
  const at = document.elementsFromPoint(r.left + 20, r.top + 30).find(e => e !== box && box.contains(e));
  return at ? at.innerText.slice(0, 60) : null;
}"""


def _scroll_story_to_the_top(page) -> str:
    """Scroll the story box to its first passage (a column-reverse box scrolls in negatives)."""
    page.evaluate("() => { const b = document.querySelector('.story-workbench-story');"
                  " b.scrollTop = -(b.scrollHeight - b.clientHeight); }")
    page.wait_for_timeout(300)
    shown = _passage_at_the_top(page)
    assert shown and ("Gull" in shown or "Rain" in shown), shown
    return shown


def _passage_at_the_top(page) -> str | None:
    return page.evaluate(_TOP_PASSAGE)


def _overflowing(page) -> list[str]:
    return page.evaluate(_OVERFLOWING)


def _assert_newest_in_view(page) -> None:
    assert page.evaluate(_NEWEST_IN_VIEW), "the newest passage is below the fold of the story box"


def _live_in_view(page) -> bool:
    return page.evaluate(_LIVE_IN_VIEW)


def _send(page, app, text: str, watch_stream: bool = False) -> None:
    """Type a line, press Send, and see narration stream in and the turn finish.
    With `watch_stream`, the first words (or what it waits for) must be in view."""
    before = app.locator(".story-workbench-story .story-narrator").count()
    box = app.locator(".sw-input textarea")
    box.click()
    box.fill(text)
    app.locator(".sw-send").click()
    if watch_stream:
        page.wait_for_function(
            "document.querySelector('.story-workbench-app .sw-live')?.innerText.trim().length > 0"
            f" || document.querySelectorAll('.story-workbench-story .story-narrator').length > {before}",
            timeout=TURN)
        assert _live_in_view(page) or app.locator(".story-workbench-story .story-narrator").count() > before
    _wait_for_story(page, f"document.querySelectorAll('.story-workbench-story .story-narrator').length > {before}")
    _wait_idle(app)


def _wait_for_story(page, condition: str) -> None:
    """Wait for `condition`, or fail at once with the app's own words if it shows an error."""
    alert = "document.querySelector('.story-workbench-app .sw-status [role=alert]')"
    page.wait_for_function(f"({condition}) || {alert} !== null", timeout=TURN)
    shown = page.locator(".story-workbench-app .sw-status [role=alert]")
    assert shown.count() == 0, f"The app showed an error: {shown.inner_text()}"


def _wait_idle(app) -> None:
    """The turn is over when the input box is enabled again and the status says it was written."""
    app.locator(".sw-status").get_by_text("Written").wait_for(timeout=TURN)
    app.locator(".sw-input textarea:not([disabled])").wait_for(timeout=30 * SECOND)


def _check_the_campaign_file(path: Path) -> None:
    """What the page showed is what the kernel wrote: two turns, the first with two takes;
    the stopped turn wrote nothing; the panels' memory and knowledge are in the file."""
    wb = Workbench.open(path)
    try:
        camp = wb.campaigns()[-1]
        history = camp.history()
        assert [e.kind for e in history] == ["start", "player", "narrator"]
        assert history[-1].takes == 2 and history[-1].take == 2
        assert list(camp.memories.frame()["text"]) == ["Wren owes the keeper a favour."]
        assert len(camp.knowledge.list()) == 1 and wb.settings.max_output_tokens == 400
        assert any(camp.events()["source"] == "correction")
        camp.select_take(1)  # the second turn is kept, in the first take's future
        assert camp.can_redo
    finally:
        wb.close()
