"""The app's hands in the browser: the keys and clicks plain ipywidgets cannot hear.

ipywidgets' Textarea has no keyboard events and its HTML runs no script, so
one small anywidget (front-end code kept in this file, no build step) sits
invisibly inside the app and listens to the page around it:

- Enter in the input box sends; Shift+Enter is a new line (as in SillyTavern);
- Escape stops a narration in progress, from anywhere in the app or when
  nothing has the focus (and cancels an open editor);
- Ctrl+Enter in a passage editor saves it;
- a click on a passage's "Edit" mark asks to edit that passage where it stands
  (and brings the editor into view once it shows), and a click on its ‹ ›
  arrows to show its previous or next take;
- the story box follows the newest text unless the reader is reading above
  it (a line sent meanwhile does not drag them down); then a "new reply ↓"
  button appears over its foot and takes them down;
- once, when the app first appears, it is scrolled into view and kept there
  until the reader scrolls or types (Run All otherwise ends at the bottom of
  the notebook, below the app).

Every message names an action; `KeyBridge.on_action(fn)` hands it to the app
as `fn(action, content)`. Nothing the narrator wrote ever reaches this code as
anything but text: passage ids travel as numbers in class names.
"""
from __future__ import annotations

from collections.abc import Callable

import anywidget
import traitlets

__all__ = ["ACTIONS", "KeyBridge"]

ACTIONS = ("send", "stop", "edit", "save_edit", "cancel_edit", "take")

_ESM = r"""
function render({ model, el }) {
  el.classList.add("sw-keys");
  el.style.display = "none";
  const app = () => el.closest(".story-workbench-app");
  const inApp = (target) => { const a = app(); return a && target instanceof Node && a.contains(target); };
  const enabled = (selector) => { const b = app()?.querySelector(selector); return b && !b.disabled; };

  // Escape stops a narration from anywhere in the app, or when nothing has the
  // focus (the input box is disabled while the narrator writes).
  const loose = (target) => target === document.body || target === document.documentElement;

  function onKey(e) {
    if (e.isComposing) return;
    if (e.key === "Escape" && loose(e.target) && enabled(".sw-stop")) {
      model.send({ action: "stop" }); e.preventDefault(); e.stopPropagation();
      return;
    }
    if (!inApp(e.target)) return;
    const editor = e.target.closest?.(".sw-editor");
    if (e.key === "Escape") {
      if (editor) { model.send({ action: "cancel_edit" }); }
      else if (enabled(".sw-stop")) { model.send({ action: "stop" }); }
      else return;
      e.preventDefault(); e.stopPropagation();
      return;
    }
    if (e.key !== "Enter") return;
    if (editor && (e.ctrlKey || e.metaKey)) {
      model.send({ action: "save_edit", text: e.target.value ?? "" });
      e.preventDefault(); e.stopPropagation();
      return;
    }
    const input = e.target.closest?.(".sw-input");
    if (input && e.target.tagName === "TEXTAREA" && !e.shiftKey && !e.altKey) {
      e.preventDefault(); e.stopPropagation();
      if (!e.target.disabled && e.target.value.trim()) model.send({ action: "send", text: e.target.value });
    }
  }

  const nodeOf = (el) => {
    const passage = el.closest(".sw-passage");
    const found = passage && [...passage.classList].find((c) => /^sw-node-\d+$/.test(c));
    return found ? Number(found.slice(8)) : null;
  };

  function onClick(e) {
    if (!inApp(e.target)) return;
    if (e.target.closest?.(".sw-edit")) { revealEditor(); return; }
    const mark = e.target.closest?.(".sw-edit-mark, .sw-take-prev, .sw-take-next");
    if (!mark) return;
    const id = nodeOf(mark);
    if (id === null) return;
    if (mark.classList.contains("sw-edit-mark")) { model.send({ action: "edit", id }); revealEditor(); }
    else model.send({ action: "take", id, step: mark.classList.contains("sw-take-prev") ? -1 : 1 });
    e.preventDefault();
  }

  // The editor opens where its passage stands, which in a long story is far
  // above the newest text the box is pinned to: bring it into view, and
  // give its box the focus, once it shows.
  function revealEditor() {
    let tries = 0;
    const timer = setInterval(() => {
      const editor = app()?.querySelector(".sw-editor");
      if (editor && editor.getBoundingClientRect().height > 0) {
        clearInterval(timer);
        editor.scrollIntoView({ block: "center" });
        editor.querySelector("textarea")?.focus({ preventScroll: true });
      } else if (++tries > 50) clearInterval(timer);
    }, 100);
  }

  // Following the story. The box is laid out bottom-up (column-reverse), so
  // the browser keeps it pinned to the newest text while scrollTop is 0 and
  // leaves it alone once the reader scrolls up (scrollTop < 0). What it
  // cannot do is say that something new arrived below: this button does.
  const READING_PX = 48;
  let watched = null, observer = null, marker = null;
  const scroller = () => app()?.querySelector(".story-workbench-story");
  const reading = (s) => Math.abs(s.scrollTop) > READING_PX;
  function showMarker(on) {
    if (marker) marker.style.display = on ? "" : "none";
  }
  function toNewest() {
    const s = scroller();
    if (s) s.scrollTop = 0;
    showMarker(false);
  }
  function makeMarker(s) {
    const holder = s.parentElement;
    if (!holder) return;
    holder.style.position = "relative";
    marker?.remove();
    marker = document.createElement("button");
    marker.type = "button";
    marker.className = "sw-new-reply";
    marker.textContent = "new reply ↓";
    marker.title = "The story went on below where you are reading: show the newest text.";
    Object.assign(marker.style, { position: "absolute", bottom: "10px", left: "min(50%, 23em)",
      transform: "translateX(-50%)",
      zIndex: "10", padding: "3px 12px", borderRadius: "12px", border: "1px solid #1a4f8b", background: "#fff",
      color: "#1a4f8b", cursor: "pointer", boxShadow: "0 1px 4px rgba(0,0,0,.25)", display: "none" });
    marker.addEventListener("click", (e) => { e.preventDefault(); toNewest(); });
    holder.appendChild(marker);
  }
  function watch() {
    const s = scroller();
    if (!s || s === watched) return;
    observer?.disconnect();
    watched = s;
    makeMarker(s);
    s.addEventListener("scroll", () => { if (!reading(s)) showMarker(false); }, { passive: true });
    observer = new MutationObserver(() => { if (reading(s)) showMarker(true); });
    for (const part of s.querySelectorAll(".sw-passages, .sw-live")) {
      observer.observe(part, { childList: true, subtree: true, characterData: true });
    }
  }
  const watcher = setInterval(watch, 500);
  watch();

  // Keep the app in view once it first appears, until the reader takes over.
  let guarding = true;
  const release = () => { guarding = false; };
  const keepInView = () => {
    const a = app();
    if (!guarding || !a) return;
    const r = a.getBoundingClientRect();
    if (r.top < -8 || r.top > window.innerHeight - 120) a.scrollIntoView({ block: "start" });
  };
  const timer = setInterval(keepInView, 250);
  const stopGuard = setTimeout(() => { guarding = false; clearInterval(timer); }, model.get("guard_ms"));
  window.addEventListener("keydown", onKey, true);
  document.addEventListener("click", onClick, true);
  for (const ev of ["wheel", "touchstart", "mousedown", "keydown"]) window.addEventListener(ev, release, true);
  return () => {
    clearInterval(timer); clearTimeout(stopGuard); clearInterval(watcher); observer?.disconnect(); marker?.remove();
    window.removeEventListener("keydown", onKey, true);
    document.removeEventListener("click", onClick, true);
    for (const ev of ["wheel", "touchstart", "mousedown", "keydown"]) window.removeEventListener(ev, release, true);
  };
}
export default { render };
"""


class KeyBridge(anywidget.AnyWidget):
    """An invisible widget that turns keys and clicks in the app into actions."""

    _esm = _ESM
    # How long the app is kept in view after it first appears, unless the
    # reader scrolls first: long enough for Run All of the play notebook.
    guard_ms = traitlets.Int(30_000).tag(sync=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._handler: Callable[[str, dict], None] | None = None
        self.on_msg(self._received)

    def on_action(self, handler: Callable[[str, dict], None]) -> None:
        self._handler = handler

    def _received(self, _widget, content, _buffers) -> None:
        action = content.get("action") if isinstance(content, dict) else None
        if action in ACTIONS and self._handler is not None:
            self._handler(action, content)
