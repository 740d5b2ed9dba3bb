"""The player's table, round two, in Chromium: forty turns on the play page
(`make play`: Voila serving notebooks/table.ipynb) and in a notebook cell in
JupyterLab (`make lab`).

On each: turn 5 is edited where it stands in a story taller than its box (the
editor has a real height at 1,400 and 900 px) and turn 40 is still there
after it; a reply cut at the reply length is finished in the same passage; a
reader scrolled up is shown "new reply ↓"; the page is reloaded and the story
plays on. The narrator is a loopback OpenAI-compatible server run by the test
(tests/fake_server.py) whose replies are numbered, so every turn is told
apart. Screenshots go to the test's temporary folder, and to evidence/ under
`make evidence` (STORY_WORKBENCH_EVIDENCE=1).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fake_server import FakeServer, Script
from test_campaign_app_browser import (  # noqa: F401 - lab is a fixture
    CHROMIUM,
    CHROMIUM_ARGS,
    SECOND,
    _overflowing,
    _requirements,
    lab,
    screenshot_folder,
)

from engine import Workbench

ROOT = Path(__file__).resolve().parents[2]
TURNS = 40
TURN = 60 * SECOND
OPENING = "Rain needles the cliff path. Above you the lighthouse lamp turns, though no one has climbed the stair."
CUT_AT = TURNS + 1  # the server's reply to this request stops mid-sentence
CUT = "You climb to the gallery. The lamp room door stands open and the"
FINISHED = "Mara waits by the rail with the brass key."
EDITED = "Landing 5 smells of lamp oil and old rope."

pytestmark = pytest.mark.browser


def reply(n: int) -> str:
    """The server's n-th narration: numbered, so each turn reads apart."""
    if n == CUT_AT:
        return CUT
    if n == CUT_AT + 1:
        return FINISHED
    return f"Beat {n}: the lamp turns over landing {n} and Mara counts {n} bells."


class Replies:
    """A Script.reply that is a new numbered reply each time the server reads it."""

    def __init__(self):
        self.n = 0

    def __iter__(self):
        self.n += 1
        words = reply(self.n).split(" ")
        return iter([w + " " for w in words[:-1]] + words[-1:])


@pytest.fixture
def narrator():
    with FakeServer(Script(kind="llamacpp", reply=Replies(), usage=None)) as server:
        yield server


def _campaign_file(path: Path, base: str) -> None:
    wb = Workbench.open(path)
    wb.configure(endpoint=base, model="story-model", memory_enabled=False, auto_summarize=False, embedder="none",
                 max_output_tokens=120)
    wb.new_campaign("The Lantern Stair", premise="An old lighthouse whose keeper vanished.", protagonist="Wren",
                    opening=OPENING)
    wb.close()


@contextlib.contextmanager
def _play_page(tmp_path: Path, db: Path):
    """`make play`'s launcher with this campaign file; stopped by its own process group id."""
    env = {**os.environ, "STORY_WORKBENCH_PLAY_DB": str(db), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "IPYTHONDIR": str(tmp_path / "ipython")}
    log = tmp_path / "page.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "play.py")], cwd=tmp_path, env=env,
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", log.read_text())):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        url = found.group(0)
        base = url.split("/?")[0]
        while True:
            assert server.poll() is None and time.monotonic() < deadline + 60, log.read_text()[-3000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/voila/static/voila.js", timeout=2).status_code == 200:
                    break
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(5)


def _lab_notebook(work: Path, db: Path) -> str:
    source = (f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom engine import Workbench\n"
              f"from widgets import CampaignApp\nwb = Workbench.open({str(db)!r})\nCampaignApp(wb.campaigns()[-1])")
    cell = {"cell_type": "code", "execution_count": None, "id": "app", "metadata": {}, "outputs": [],
            "source": source.splitlines(keepends=True)}
    notebook = {"cells": [cell], "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)",
                                                             "language": "python", "name": "python3"},
                                              "language_info": {"name": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    (work / "table.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    return "table.ipynb"


def test_forty_turns_on_the_play_page(narrator, tmp_path):
    sync_playwright = _requirements()
    db = tmp_path / "play.db"
    _campaign_file(db, narrator.base)
    with _play_page(tmp_path, db) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            try:
                page.goto(url, wait_until="domcontentloaded")
                app = _app(page)
                _round_two(page, app, narrator, "play-page", screenshot_folder(tmp_path))
                page.reload(wait_until="domcontentloaded")  # a reload reopens the same campaign, asking nothing
                app = _app(page)
                assert page.locator(".jp-Dialog").count() == 0
                _after_reload(page, app)
            except Exception as exc:
                raise AssertionError(_shown(page, tmp_path, "page.log")) from exc
            assert not errors, errors
        finally:
            browser.close()


def test_forty_turns_in_a_notebook_cell(lab, narrator, tmp_path):  # noqa: F811 - the fixture, imported
    sync_playwright = _requirements()
    base, token, work = lab
    db = work / "table.db"
    _campaign_file(db, narrator.base)
    notebook = _lab_notebook(work, db)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            try:
                app = _run_in_lab(page, f"{base}/lab/tree/{notebook}?token={token}")
                _round_two(page, app, narrator, "play-lab", screenshot_folder(tmp_path))
                page.reload(wait_until="domcontentloaded")
                app = _run_in_lab(page, None)
                _after_reload(page, app)
                _opens_clean(page, base, token, work)
            except Exception as exc:
                raise AssertionError(_shown(page, tmp_path, "lab.log")) from exc
        finally:
            browser.close()


# ------------------------------------------------------------------ the round
def _app(page):
    app = page.locator(".story-workbench-app").first
    app.wait_for(timeout=120 * SECOND)
    app.locator(".sw-input textarea:not([disabled])").wait_for(timeout=60 * SECOND)
    return app


def _run_in_lab(page, url: str | None):
    """Open the notebook (or take the reloaded page) and Run → Run All Cells: no restart dialog."""
    if url:
        page.goto(url, wait_until="domcontentloaded")
    page.locator(".jp-Notebook .jp-CodeCell .cm-content").first.wait_for(timeout=60 * SECOND)
    page.wait_for_timeout(8 * SECOND)  # the kernel starting
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-content").get_by_text("Run All Cells", exact=True).click()
    app = _app(page)
    assert page.locator(".jp-Dialog").count() == 0
    return app


# The editor's box lies inside the story box's visible part (and the focus is in it).
_EDITOR_IN_VIEW = """(() => {
  const box = document.querySelector('.story-workbench-story').getBoundingClientRect();
  const area = document.querySelector('.story-workbench-app .sw-editor textarea');
  const r = area.getBoundingClientRect();
  return r.height > 60 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1 && document.activeElement === area;
})()"""
_COUNT = "document.querySelectorAll('.story-workbench-story .sw-passages .story-narrator').length"


def _narrations(page) -> int:
    return page.evaluate(_COUNT)


def _send(page, app, text: str) -> None:
    before = _narrations(page)
    box = app.locator(".sw-input textarea")
    box.fill(text)
    box.press("Enter")
    page.wait_for_function(
        f"document.querySelectorAll('.story-workbench-story .sw-passages .story-narrator').length > {before}"
        " && !document.querySelector('.story-workbench-app .sw-input textarea').disabled", timeout=TURN)


def _round_two(page, app, server, name: str, shots: Path) -> None:
    story = app.locator(".story-workbench-story")
    for n in range(1, TURNS + 1):
        _send(page, app, f"I climb to landing {n}")
    assert _narrations(page) == TURNS and f"Beat {TURNS}:" in story.inner_text()
    assert page.evaluate("(() => { const s = document.querySelector('.story-workbench-story');"
                         " return s.scrollHeight > 3 * s.clientHeight; })()"), "the story is not taller than its box"

    # Turn 5, edited where it stands in a long story: the editor is there and usable, turn 40 stays.
    fifth = story.locator(".sw-passages .sw-passage", has=page.locator(".story-narrator")).nth(4)
    assert "Beat 5:" in fifth.inner_text()
    fifth.locator(".sw-edit-mark").click()
    editor = app.locator(".sw-editor textarea")
    editor.wait_for(timeout=30 * SECOND)
    assert editor.input_value().startswith("Beat 5:")
    size = editor.bounding_box()
    assert size and size["height"] > 60 and size["width"] > 300, f"the editor is {size}"
    page.wait_for_function(_EDITOR_IN_VIEW, timeout=10 * SECOND)  # brought into view where turn 5 stands
    _shot(app, shots / f"{name}-editing-1400.png")
    editor.fill(EDITED)
    app.locator(".sw-editor-save").click()
    story.get_by_text(EDITED).wait_for(timeout=30 * SECOND)
    text = story.inner_text()
    assert f"Beat {TURNS}:" in text and "Beat 5:" not in text and _narrations(page) == TURNS
    assert "(edited)" in story.locator(".sw-passages .sw-passage", has=page.locator(".story-narrator")).nth(4) \
        .inner_text()

    # A cut reply, finished in the same passage (one message, one take).
    _send(page, app, "I climb to the gallery")
    app.locator(".sw-cut-mark").wait_for(timeout=TURN)
    cut = story.locator(".sw-passages .sw-passage", has=page.locator(".story-narrator")).last
    node = next(c for c in cut.get_attribute("class").split() if c.startswith("sw-node-"))
    app.locator(".sw-finish:not([disabled])").click()
    page.wait_for_function(f"document.querySelector('.story-workbench-story .{node}')?.innerText"
                           f".includes({FINISHED!r})", timeout=TURN)
    app.locator(".sw-input textarea:not([disabled])").wait_for(timeout=30 * SECOND)
    assert app.locator(".sw-cut-mark").count() == 0 and _narrations(page) == TURNS + 1
    finished = story.locator(f".{node}").inner_text()
    assert finished.count("You climb to the gallery.") == 1 and "‹" not in finished

    # Reading above: the next reply lands below, and "new reply ↓" says so and takes the reader there.
    top = "(() => { const s = document.querySelector('.story-workbench-story'); s.scrollTop = -s.scrollHeight; })()"
    at_bottom = "Math.abs(document.querySelector('.story-workbench-story').scrollTop) < 48"
    page.evaluate(top)
    page.wait_for_timeout(300)
    _send(page, app, "I listen")  # sent while reading above: the reply lands below, the reader stays
    marker = page.locator(".sw-new-reply")
    marker.wait_for(state="visible", timeout=30 * SECOND)
    assert not page.evaluate(at_bottom)  # the reader was left where they were reading
    _shot(app, shots / f"{name}-new-reply-1400.png")
    marker.click()
    marker.wait_for(state="hidden", timeout=30 * SECOND)
    assert page.evaluate(at_bottom)
    app.locator(".sw-input textarea:not([disabled])").wait_for(timeout=30 * SECOND)

    # Both widths: nothing overflows; the editor still opens where the passage stands.
    _shot(app, shots / f"{name}-1400.png")
    page.set_viewport_size({"width": 900, "height": 900})
    page.wait_for_timeout(800)
    assert _overflowing(page) == [], "at 900 px"
    sixth = story.locator(".sw-passages .sw-passage", has=page.locator(".story-narrator")).nth(5)
    sixth.locator(".sw-edit-mark").click()
    editor.wait_for(timeout=30 * SECOND)
    size = editor.bounding_box()
    assert size and size["height"] > 60, f"the editor is {size} at 900 px"
    page.wait_for_function(_EDITOR_IN_VIEW, timeout=10 * SECOND)
    _shot(app, shots / f"{name}-editing-900.png")
    editor.press("Escape")
    editor.wait_for(state="hidden", timeout=30 * SECOND)
    _shot(app, shots / f"{name}-900.png")
    page.set_viewport_size({"width": 1400, "height": 900})


def _after_reload(page, app) -> None:
    story = app.locator(".story-workbench-story")
    story.get_by_text(EDITED).wait_for(timeout=30 * SECOND)
    text = story.inner_text()
    assert f"Beat {TURNS}:" in text and FINISHED in text
    before = _narrations(page)
    _send(page, app, "I go on after the reload")
    assert _narrations(page) == before + 1


def _opens_clean(page, base: str, token: str, work: Path) -> None:
    """The play notebook opens without unsaved changes, once its kernel has started and said who it is."""
    (work / "play.ipynb").write_text((ROOT / "notebooks" / "play.ipynb").read_text(encoding="utf-8"), encoding="utf-8")
    page.goto(f"{base}/lab/tree/play.ipynb?token={token}", wait_until="domcontentloaded")
    page.locator(".lm-TabBar-tab.jp-mod-current", has_text="play.ipynb").wait_for(timeout=60 * SECOND)
    page.wait_for_timeout(20 * SECOND)  # the kernel starts and reports its language
    assert page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count() == 0, "play.ipynb opened dirty"


def _shot(app, path: Path) -> None:
    app.screenshot(path=str(path))


def _shown(page, tmp_path: Path, log: str) -> str:
    shot = tmp_path / "failure.png"
    try:
        page.screenshot(path=str(shot), full_page=True)
        text = page.locator("body").inner_text(timeout=5 * SECOND)
    except Exception as exc:  # noqa: BLE001 - the diagnosis must not hide the failure
        text = f"(could not read the page: {exc})"
    logged = (tmp_path / log).read_text()[-3000:] if (tmp_path / log).exists() else ""
    return f"The page (screenshot {shot}):\n{text[-3000:]}\nServer log:\n{logged}"
