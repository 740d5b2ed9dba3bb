"""Lore: the story cards (world info) and the author's note, in the player's hands.

A story card is a piece of lore with keys: when a key appears in your line
or the recent story, the card enters the prompt (a constant card always
does). The panel lists the cards (searchable), adds, edits and deletes them
through the campaign (`camp.story_cards()`, `add_story_card`,
`edit_story_card`, `delete_story_card`), marks the cards that fired on the
newest turn (read from that turn's report), and shows keys that can never
fire when the engine names them (`unusable_keys`).

The author's note is a short standing instruction ("Keep the tone grim")
the builder places a few lines from the end of the story history, where a
model still heeds it; its tokens are counted in each turn's report and in
the context meter.
"""
from __future__ import annotations

import threading

import ipywidgets as w

from engine import Campaign, html
from engine.budget import tokens as token_count

from .common import Confirm, Message, attempt, table_html
from .runner import describe_error

__all__ = ["LorePanel", "fired_cards", "split_keys"]

NEW = 0  # the dropdown value for "a new card"
# A side panel lists this many cards; the search box finds the rest.
SHOWN = 60
_WIDE = w.Layout(width="100%", max_width="40em")


def split_keys(text: str) -> list[str]:
    """Keys as a player types them: separated by commas, blanks dropped."""
    return [k.strip() for k in (text or "").split(",") if k.strip()]


def fired_cards(turn) -> dict[int, str]:
    """{card id: why} for the cards that fired on `turn` (its report's knowledge section)."""
    report = getattr(turn, "report", None) or {}
    knowledge = report.get("knowledge") if isinstance(report.get("knowledge"), dict) else {}
    out = {}
    for card in knowledge.get("cards_fired") or []:
        if isinstance(card, dict) and isinstance(card.get("card_id"), int):
            found, key = card.get("found_in", ""), card.get("key", "")
            out[card["card_id"]] = "always" if found == "always" else f"{key!s} in {found}" if key else str(found)
    return out


class LorePanel(w.VBox):
    def __init__(self, camp: Campaign):
        self.camp = camp
        self.search = w.Text(placeholder="Search titles, keys and text", layout=_WIDE,
                             tooltip="Shows the cards whose title, keys or text contain these words.")
        self.listing = w.HTML()
        self.listing.add_class("sw-cards")
        self.choice = w.Dropdown(description="Card", options=[("(a new card)", NEW)], layout=_WIDE)
        self.card_title = w.Text(description="Title", placeholder="Mara", layout=_WIDE)
        self.card_keys = w.Text(description="Keys", placeholder="Mara, innkeeper, the inn", layout=_WIDE,
                           tooltip="Words that bring the card into the prompt when they appear in your line or "
                                   "the recent story; separated by commas.")
        self.text = w.Textarea(description="Text", placeholder="Mara keeps the Lantern Inn and owes Wren a favour.",
                               rows=3, layout=_WIDE)
        for field in (self.card_title, self.card_keys, self.text):
            field.style = {"description_width": "5em"}
        self.constant = w.Checkbox(description="Always in the prompt (constant)", indent=False,
                                   layout=w.Layout(width="auto"))
        self.enabled = w.Checkbox(value=True, description="Enabled", indent=False, layout=w.Layout(width="auto"))
        self.save = w.Button(description="Add card", button_style="primary", layout=w.Layout(width="auto"))
        self.delete = w.Button(description="Delete…", layout=w.Layout(width="auto"))
        self.confirm = Confirm()
        self.message = Message()
        self.note = w.Textarea(placeholder="A standing instruction, e.g. Keep the tone grim; Mara lies about the key.",
                               rows=2, layout=_WIDE, tooltip="Placed a few lines from the end of the story history "
                               "on every turn, where the narrator still heeds it.")
        self.note.add_class("sw-authors-note")
        self.save_note = w.Button(description="Save note", layout=w.Layout(width="auto"))
        self.note_words = w.HTML()
        self.note_message = Message()
        self._frame = None
        self._fired: dict[int, str] = {}
        self._loaded_note = ""
        self._lock = threading.Lock()
        self._quiet = False
        super().__init__([
            html_heading("Story cards"), self.search, self.listing, self.choice, self.card_title, self.card_keys, self.text,
            w.HBox([self.constant, self.enabled], layout=w.Layout(flex_flow="row wrap")),
            w.HBox([self.save, self.delete], layout=w.Layout(flex_flow="row wrap")), self.confirm, self.message,
            html_heading("Author's note"), self.note, w.HBox([self.save_note, self.note_words]), self.note_message,
        ])
        self.search.observe(lambda _: self._list(), "value")
        self.choice.observe(lambda _: self._quiet or self._chosen(), "value")
        self.save.on_click(lambda _: self.save_card())
        self.delete.on_click(lambda _: self.ask_delete())
        self.save_note.on_click(lambda _: self.set_note())
        self.note.observe(lambda _: self._count_note(), "value")
        self.refresh()

    # ------------------------------------------------------------ cards
    def save_card(self) -> None:
        """Add a card (nothing chosen) or change the chosen one."""
        card_id = self.choice.value
        fields = dict(title=self.card_title.value.strip(), keys=split_keys(self.card_keys.value), entry=self.text.value.strip(),
                      constant=self.constant.value, enabled=self.enabled.value)
        if card_id == NEW:
            added: list[int] = []
            if attempt(lambda: added.append(self.camp.add_story_card(**fields)), self.message,
                       f"Card '{fields['title'] or 'untitled'}' added: it enters the prompt when a key is named."):
                self.refresh(select=added[0])
        elif attempt(lambda: self.camp.edit_story_card(card_id, **fields), self.message, "Card saved."):
            self.refresh(select=card_id)

    def ask_delete(self) -> None:
        card_id = self.choice.value
        if card_id == NEW:
            self.message.say("Choose a card to delete first.", error=True)
            return
        self.confirm.ask(f"Delete the card '{self.choice.label}'? This cannot be undone.",
                         lambda: attempt(lambda: self.camp.delete_story_card(card_id), self.message, "Card deleted.")
                         and self.refresh(select=NEW))

    def _chosen(self) -> None:
        """Fill the form from the chosen card (or empty it for a new one)."""
        card_id, frame = self.choice.value, self._frame
        row = None
        if card_id != NEW and frame is not None and len(frame):
            found = frame[frame["id"] == card_id]
            row = found.iloc[0] if len(found) else None
        self.card_title.value = "" if row is None else str(row["title"])
        self.card_keys.value = "" if row is None else ", ".join(row["keys"])
        self.text.value = "" if row is None else str(row["entry"])
        self.constant.value = False if row is None else bool(row["constant"])
        self.enabled.value = True if row is None else bool(row["enabled"])
        self.save.description = "Add card" if row is None else "Save card"
        self.delete.disabled = row is None

    # ------------------------------------------------------------ the author's note
    def set_note(self) -> None:
        if attempt(lambda: self.camp.set_authors_note(self.note.value), self.note_message,
                   "Author's note saved: it applies from the next turn." if self.note.value.strip() else
                   "Author's note removed."):
            self.note.value = self._loaded_note = self.camp.authors_note

    def _count_note(self) -> None:
        text = self.note.value.strip()
        self.note_words.value = (html.tag("span", f"about {token_count.count(text):,} tokens on every turn",
                                          style="color:#666;padding-left:.6em") if text else "")

    # ------------------------------------------------------------ view
    def refresh(self, select: int | None = None) -> None:
        with self._lock:
            try:
                self._frame = self.camp.story_cards()
                self._fired = fired_cards(self._newest_turn())
                note = self.camp.authors_note
            except Exception as exc:  # noqa: BLE001 - shown in place
                self.listing.value = html.tag("p", describe_error(exc), style="color:#b00020")
                return
            if self.note.value == self._loaded_note:  # a note being typed is left alone
                self.note.value = note
            self._loaded_note = note
            current = self.choice.value if select is None else select
            options = [("(a new card)", NEW)] + [(f"{r.title or '(untitled)'} · {r.id}", int(r.id))
                                                 for r in self._frame.itertuples()]
            self._quiet = True
            try:
                self.choice.options = options
                self.choice.value = current if current in [v for _, v in options] else NEW
            finally:
                self._quiet = False
            self._chosen()
            self._list()

    def _newest_turn(self):
        history = self.camp.history()
        head = history[-1] if history else None
        return self.camp.turn(head.id) if head is not None and head.kind == "narrator" else None

    def _list(self) -> None:
        frame = self._frame
        if frame is None or not len(frame):
            self.listing.value = html.tag("p", "No story cards yet: add one below (a name, the words that bring "
                                          "it in, and what the narrator should know).", style="color:#888")
            return
        words = self.search.value.strip().lower()
        rows = [r for r in frame.to_dict("records") if not words or words in _haystack(r)]
        extra = "unusable_keys" in frame.columns
        columns = ["", "title", "keys", "text", "in prompt", *(("keys that never fire",) if extra else ())]
        cells = [[self._mark(r), r["title"], ", ".join(r["keys"]), _short(r["entry"]), _when(r),
                  *((", ".join(r.get("unusable_keys") or []),) if extra else ())] for r in rows[:SHOWN]]
        more = len(rows) - SHOWN
        tail = html.tag("p", f"{more} more: search to find them.", style="color:#888") if more > 0 else ""
        fired = (html.tag("p", f"✦ marks the {len(self._fired)} card(s) that fired on the newest turn.",
                          style="color:#666;font-size:85%;margin:.2em 0") if self._fired else "")
        self.listing.value = (table_html(columns, cells, "sw-cards-table") + tail + fired if rows else
                              html.tag("p", f"No card matches “{words}”.", style="color:#888"))

    def _mark(self, row) -> str:
        why = self._fired.get(int(row["id"]))
        return f"✦ fired ({why})" if why else ""


def html_heading(text: str) -> w.HTML:
    return w.HTML(html.tag("b", text, style="display:block;margin:.4em 0 .2em 0"))


def _haystack(row) -> str:
    return " ".join([str(row.get("title", "")), " ".join(row.get("keys") or []), str(row.get("entry", ""))]).lower()


def _short(text: str, words: int = 14) -> str:
    parts = str(text or "").split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


def _when(row) -> str:
    if not row.get("enabled", True):
        return "off"
    return "always" if row.get("constant") else "when a key is named"
