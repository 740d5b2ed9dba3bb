"""Workbench settings: one typed record, stored as key/value rows.

Key/value rows let a later version add a setting without a migration; the
dataclass keeps every reader typed and every value checked on the way in.

Each setting is declared once, in the dataclass below, with `setting(...)`:
its default, its label for people, its help, its bounds or choices, and the
narrator (or embedder) it belongs to. `Settings.check` and the settings
panel (widgets/settings_panel.py) both read that declaration, so a bound is
never spelled twice. To add a setting, add one line:

    my_setting: int = setting(8, "Words per line", "Why a player would change it.", low=1, high=80,
                              narrator="local", panel=True)

A plain default (`my_setting: int = 8`) works too: it is typed and stored,
labelled by its name, unbounded and not in the panel.
"""
from __future__ import annotations

import difflib
import numbers
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from .budget import standing
from .errors import WorkbenchError
from .search.tuning import DEFAULT as DEFAULT_TUNING
from .search.tuning import Tuning
from .store import SettingRow

__all__ = ["DEFAULT_NARRATOR_PROMPT", "SAMPLERS", "SPECS", "STOP_LIMIT", "Settings", "Spec", "load", "save", "setting",
           "stop_list"]

DEFAULT_NARRATOR_PROMPT = (
    "You are the narrator of an interactive story. Write in the second person, present "
    "tense, addressing the protagonist as \"you\". Describe what happens next in vivid, "
    "concrete prose, give other characters their own voices and motives, and end at a "
    "moment that invites the player to act. Never decide what the player does, says or "
    "feels; never speak for the player. Keep to what the story has established."
)


@dataclass(frozen=True)
class Spec:
    """How one setting is shown and checked.

    `low`/`high` bound a number (None: no bound on that side); `choices` are
    (value, words) pairs; `narrator`/`embedder` name the choice the setting
    belongs to (it is checked and shown only then; both given: either one);
    `required` means it may not be empty where it applies; `follows` computes
    the value while nobody has set one (stored as None, so it keeps
    following); `panel` puts it in the app's settings panel, in declaration
    order; `unit` and `zero` are words for the number and for 0."""

    label: str
    help: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[tuple[Any, str], ...] = ()
    narrator: str | None = None
    embedder: str | None = None
    required: bool = False
    follows: Callable[[Any], Any] | None = None
    panel: bool = False
    unit: str = ""
    zero: str = ""
    step: float | None = None
    placeholder: str = ""
    long: bool = False  # many lines of text (a Textarea in the panel)
    sampler: bool = False  # sent to the narrator only when set; the panel resets them together

    def bounds_words(self) -> str:
        """'between 16 and 32,768 tokens', 'at least 1', '' when unbounded."""
        unit = f" {self.unit}" if self.unit else ""
        if self.low is not None and self.high is not None:
            return f"between {_number(self.low)} and {_number(self.high)}{unit}"
        if self.low is not None:
            return f"at least {_number(self.low)}{unit}"
        if self.high is not None:
            return f"at most {_number(self.high)}{unit}"
        return ""

    def out_of_bounds(self, value: Any) -> bool:
        if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        return (self.low is not None and value < self.low) or (self.high is not None and value > self.high)

    def clamp(self, value: Any) -> Any:
        """The nearest value inside the bounds, of the same type."""
        if not self.out_of_bounds(value):
            return value
        bound = self.low if self.low is not None and value < self.low else self.high
        return type(value)(bound)

    def tooltip(self, name: str) -> str:
        """Help for people, with the name code uses (wb.configure) at the end."""
        limits = self.bounds_words()
        parts = [self.help, f"{limits[0].upper()}{limits[1:]}." if limits else "",
                 f"0: {self.zero}." if self.zero else "", f"(setting: {name})"]
        return " ".join(p for p in parts if p)


def setting(default: Any, label: str, help: str = "", **spec: Any) -> Any:  # noqa: A002 - the declaration's word
    """A dataclass field carrying its Spec: the one place a setting is declared."""
    return field(default=default, metadata={"spec": Spec(label, help, **spec)})


def _number(value: float) -> str:
    """3600 stays 3600; 32768 reads 32,768; 0.5 stays 0.5."""
    if float(value).is_integer():
        value = int(value)
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return str(value)


def _budget_default(s: Settings) -> int:
    """The story budget nobody has set: the embedded model's own window, so a
    fresh setup never asks for more than it has; with a server, the
    reference's 16,384, capped to the server's window whenever it can be asked."""
    return s.n_ctx if s.narrator == "local" else 16_384


NARRATORS = (("local", "Embedded (SmolLM2, offline)"), ("endpoint", "My server (OpenAI-compatible)"))
EMBEDDERS = (("local", "Embedded MiniLM (offline)"), ("endpoint", "My server's embedding model"),
             ("gguf", "A GGUF embedding model"), ("none", "None (word search only)"))
SECOND_STAGES = (("auto", "Embedded mpnet behind the embedded MiniLM"), ("embedded", "Embedded mpnet (offline)"),
                 ("endpoint", "My server's /v1/embeddings"), ("rerank", "My server's /rerank"),
                 ("off", "Off (first stage only)"))
RELEVANCE_MODELS = (("embeddinggemma", "EmbeddingGemma-300M (offline; Gemma Terms of Use)"),
                    ("embeddinggemma-int8", "EmbeddingGemma-300M, its int8 copy (a faster background pass)"),
                    ("mpnet", "all-mpnet-base-v2 (offline)"), ("minilm", "all-MiniLM-L6-v2 (offline)"))


def _relevance_default(s: Settings) -> str:
    """EmbeddingGemma-300M where it is installed (make setup, unless GEMMA=0),
    through its int8 copy where that is made too (make setup makes it), else
    mpnet. The int8 copy by measurement (retrieval_eval, 4 December, each
    with its own floor and constants chosen on the tuning half): held out at
    4,096 it found 53 of 91 scenes against fp32's 48, 46 % precise against
    51 %, 1 of 41 everyday scenes against 0, 5 of 15 paraphrases against 1;
    and its background pass runs 2.4 times as fast (8.7 passages a second
    on two idle cores: 7.7 minutes for 4,000 passages, fp32 18.7)."""
    from .providers.embeddinggemma import installed, int8_ready

    if int8_ready():
        return "embeddinggemma-int8"
    return "embeddinggemma" if installed() else "mpnet"


@dataclass(frozen=True)
class Settings:
    narrator: str = setting("local", "Narrator", "Who writes the story: the embedded model, offline on this "
                            "machine, or a model on your own server.", choices=NARRATORS, panel=True)
    # The embedded narrator's GGUF file; "" is the bundled SmolLM2-135M.
    model_path: str = setting("", "Model file", "A GGUF file for the embedded narrator; empty is the bundled "
                              "SmolLM2-135M.", narrator="local", panel=True, placeholder="(the bundled SmolLM2)")
    # The window the embedded model is loaded with. SmolLM2 was trained to
    # 8,192; 4,096 keeps its KV cache small on a 2-core machine.
    n_ctx: int = setting(4096, "Model window", "Tokens the embedded model is loaded with; the story budget "
                         "follows it unless you set one.", low=256, high=1_048_576, unit="tokens",
                         narrator="local", panel=True, step=1024)
    # Cached chunks the prompt repeats (the kept history after a
    # floor step) are moved, not read again, as llama-server's --cache-reuse.
    embedded_cache_reuse: bool = setting(True, "Reuse moved history", "The embedded model keeps the history it "
                                         "has read when a trim step moves it, instead of reading it again; off "
                                         "matches the unchanged start of the prompt only.", narrator="local")
    endpoint_url: str = setting("", "Server address", "Your OpenAI-compatible server (Ollama, llama.cpp, vLLM), "
                                "on this machine or your network.", narrator="endpoint", embedder="endpoint",
                                required=True, panel=True, placeholder="http://127.0.0.1:11434/v1")
    model: str = setting("", "Model name", "The name your server knows the model by.", narrator="endpoint",
                         required=True, panel=True, placeholder="qwen2.5:7b")
    api_mode: str = setting("chat", "API", "Chat sends the prompt as messages; completion as one text (base "
                            "models).", choices=(("chat", "Chat"), ("completion", "Completion")),
                            narrator="endpoint")
    # The whole window the narrator is given: prompt plus reply. Follows the
    # narrator's window until set (see _budget_default); capped to what the
    # server really has either way.
    context_budget: int = setting(None, "Story budget", "Tokens the narrator is given, prompt plus reply. Until "
                                  "you set it, it follows the narrator's window; a smaller window on the server "
                                  "caps it.", low=256, high=1_000_000, unit="tokens", follows=_budget_default,
                                  panel=True, step=1024)
    # A 135M model loops when left to run; 200 tokens is a paragraph or two.
    max_output_tokens: int = setting(200, "Reply length", "The longest reply, in tokens; a reply stopped here is "
                                     "marked, and Continue finishes it.", low=16, high=32_768, unit="tokens",
                                     panel=True, step=50)
    temperature: float = setting(0.8, "Temperature", "0 is most predictable; 2 is wild.", low=0.0, high=2.0,
                                 panel=True, step=0.1)
    # Samplers beyond temperature, each sent only when set (None): unset, the
    # embedded model keeps the values measured for it (engine.providers.embedded:
    # repeat penalty 1.3, min-p 0.05, top-p 0.95) and a server keeps its own.
    top_p: float | None = setting(None, "Top-p", "Keep only the likeliest tokens that together reach this "
                                  "probability (1 keeps all). Empty: the narrator's own (0.95 embedded).",
                                  low=0.01, high=1.0, panel=True, step=0.05, sampler=True)
    min_p: float | None = setting(None, "Min-p", "Drop tokens less likely than this share of the likeliest "
                                  "(0 keeps all). Empty: the narrator's own (0.05 embedded).", low=0.0, high=1.0,
                                  panel=True, step=0.01, sampler=True)
    repeat_penalty: float | None = setting(None, "Repetition penalty", "Above 1 makes words already written "
                                           "less likely (1 is off). Empty: the narrator's own (1.3 embedded, "
                                           "measured: below 1.2 the 135M model loops).", low=1.0, high=2.0,
                                           panel=True, step=0.05, sampler=True)
    stop_strings: str = setting("", "Stop strings", "The reply ends where one of these appears; separate them "
                                "with |, and write \\n for a new line (e.g. \\n> | THE END). At most 4.",
                                panel=True, placeholder="\\n> | THE END", sampler=True)
    # Thinking kept per turn (a reasoning model's chain of thought is not story
    # and is not sent back; this caps what is stored and shown).
    max_reasoning_tokens: int = setting(4096, "Thinking kept", "How much of a reasoning model's thinking is "
                                        "kept per turn.", low=0, unit="tokens")
    timeout_seconds: int = setting(300, "Reply timeout", "How long to wait for a reply.", low=30, high=3600,
                                   unit="seconds")
    narrator_prompt: str = setting(DEFAULT_NARRATOR_PROMPT, "Narrator instructions",
                                   "The standing rules the narrator is given first.", long=True)
    # Used only when the server cannot be asked its window; never "verified".
    context_window_override: int | None = setting(None, "Server window", "The server's window, for a server "
                                                  "that cannot be asked.", low=256, high=200_000, unit="tokens",
                                                  narrator="endpoint")
    embedder: str = setting("local", "Embedder", "What finds memories and passages by meaning.", choices=EMBEDDERS,
                            panel=True)
    embedding_model: str = setting("", "Embedding model", "Your server's embedding model.", embedder="endpoint",
                                   required=True, panel=True, placeholder="nomic-embed-text")
    # embedder="gguf": a local GGUF embedding model (e.g. nomic-embed-text), run out of process.
    embedding_model_path: str = setting("", "Embedding GGUF", "A GGUF embedding model on this machine.",
                                        embedder="gguf", required=True, panel=True,
                                        placeholder="~/models/nomic-embed-text.gguf")
    # The second stage (engine/search/second_stage.py) re-scores the first search's candidates.
    second_stage: str = setting("auto", "Second stage", "A stronger model that judges the passages the first "
                                "search found (its vectors are computed after import, in the background).",
                                choices=SECOND_STAGES, panel=True)
    second_stage_url: str = setting("", "Second-stage server", "The server for second_stage 'endpoint' or "
                                    "'rerank'; empty: the server address.", placeholder="http://127.0.0.1:8080/v1")
    second_stage_model: str = setting("", "Second-stage model", "The model your server knows it by.",
                                      placeholder="bge-reranker-v2-m3")
    # The offline model that judges relevance (engine/providers/embedders.py); follows what is installed.
    relevance_model: str = setting(None, "Relevance model", "The offline model that judges what is relevant. "
                                   "EmbeddingGemma-300M is Google's, under the Gemma Terms of Use; until you set "
                                   "one it is used wherever it is installed (its int8 copy where made), else mpnet.", choices=RELEVANCE_MODELS,
                                   follows=_relevance_default, panel=True)
    # History block trim: one step gives up 1/trim_fraction of the window (see
    # engine/context/history.py); 0 turns it off and the window slides by one node.
    trim_fraction: int = setting(4, "History trim (1/N)", "When the story outgrows the budget, the oldest "
                                 "history goes in blocks of 1/N of the window (4: a quarter), which keeps the "
                                 "server's prompt cache warm.", low=0, high=64, zero="one line at a time",
                                 panel=True)
    # engine.narrative.prose.hold_rules: a reply narrated as "I" is turned to "you", except speech (quoted,
    # or reported after a colon or a speech verb), link text and code; each turn's record lists the changes.
    first_person_repair: bool = setting(True, "Repair first person", "A reply the narrator wrote as \"I\" is "
                                        "turned to \"you\" (speech, link text and code are left as written); "
                                        "each turn's record lists what changed.", panel=True)
    # Ask the narrator to append a ```state block of typed events each turn.
    state_protocol: bool = setting(True, "Narrative state", "Ask the narrator for state events (who, where, "
                                   "what is carried).", panel=True)
    # engine.narrative.reply_opening says why and what it measured.
    open_reply: bool = setting(True, "Start the reply", "The embedded narrator's reply begins from your input told "
                               "as story (\"You light the lantern.\") and goes on from there; a small model stays "
                               "with what you did. Those words are not stored twice.")
    # engine.providers.embedded.STEER_BIAS says what it measured.
    steer_named: bool = setting(True, "Steer to what you named", "The embedded narrator favours the words for the "
                                "things your input named (\"the lantern\") until its reply has named one.")
    # engine.turns.runner.JUDGED_WORDS says how a reply's start is judged. Off by default: on the narration
    # tuning turns (narration_eval.takes_ab, 11 named turns x 2 retries each) the stored reply took up the
    # named thing in 6 of 22 with one take and 6 of 22 with up to three (2.1 starts a turn); a lenient
    # first judge (the story's own words counting) gave 4 of 22, up to five takes 6 of 22.
    uptake_takes: int = setting(1, "Takes to stay on topic", "The embedded narrator's reply whose first two sentences "
                                "name none of the things your input named is stopped and asked again, up to this "
                                "many takes in all (1: never).", low=1, high=8)
    memory_enabled: bool = setting(True, "Memory", "Write memories after each turn and recall them.", panel=True)
    auto_summarize: bool = setting(True, "Summaries", "Summarise the story as it grows.")
    memory_top_k: int = setting(5, "Memories recalled", "Memories recalled per turn.", low=1, high=50)
    memory_capacity: int = setting(200, "Memories kept", "Active memories kept before the least recently used "
                                   "are forgotten.", low=1)
    # Every number retrieval and recall were tuned on (engine.search.Tuning);
    # a changed copy is stored as its changes only.
    tuning: Tuning = setting(DEFAULT_TUNING, "Search tuning", "Candidates, weights, floors, caps and cuts of "
                             "retrieval and memory recall: dataclasses.replace(engine.search.DEFAULT, ...).")
    # Names of settings whose value follows others (nobody set one): stored as None.
    _following: frozenset = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        following = {name for name, spec in SPECS.items()
                     if spec.follows is not None and getattr(self, name) is None}
        object.__setattr__(self, "_following", frozenset(following))
        for name in sorted(following):
            object.__setattr__(self, name, SPECS[name].follows(self))

    def applies(self, name: str) -> bool:
        """Whether setting `name` is used with the narrator and embedder chosen."""
        spec = SPECS[name]
        if spec.narrator is None and spec.embedder is None:
            return True
        return self.narrator == spec.narrator or self.embedder == spec.embedder

    def follows(self, name: str) -> bool:
        """True while nobody has set `name` and it follows the others (the story budget)."""
        return name in self._following

    def problems(self, named: bool = True) -> list[str]:
        """Every rule this record breaks, one sentence each; only the settings
        the chosen narrator and embedder use are checked, so a value left in a
        field that does not apply never blocks a change. `named=False` names
        settings by their labels (the panel); True by their names (code)."""
        call = (lambda n: n) if named else (lambda n: SPECS[n].label)
        problems = []
        for name, spec in SPECS.items():
            if not self.applies(name):
                continue
            value = getattr(self, name)
            if spec.choices and value not in [v for v, _ in spec.choices]:
                listed = " or ".join(repr(v) for v, _ in spec.choices)
                problems.append(f"{call(name)} must be {listed}, not {value!r}")
            elif spec.out_of_bounds(value):
                problems.append(f"{call(name)} must be {spec.bounds_words()}, not {_number(value)}")
            elif spec.required and not value:
                example = f", e.g. {spec.placeholder}" if spec.placeholder else ""
                problems.append(f"{_choice_words(self, name, True)} needs {name}{example}" if named else
                                f"{_choice_words(self, name, False)}: fill in {spec.label}{example}")
        if len(stop_list(self.stop_strings)) > STOP_LIMIT:
            problems.append(f"{call('stop_strings')} may hold at most {STOP_LIMIT} (OpenAI-compatible servers "
                            f"take no more), not {len(stop_list(self.stop_strings))}")
        if isinstance(self.narrator_prompt, str):  # every prompt opens with it, whole (engine.budget.standing)
            if standing.excess("narrator_prompt", self.narrator_prompt.strip()):
                problems.append(f"{call('narrator_prompt')} must be at most "
                                f"{standing.BOUNDS['narrator_prompt'].words}, not {len(self.narrator_prompt):,} "
                                "characters (campaign-specific rules belong in the campaign's AI instructions)")
        if self.max_output_tokens >= self.context_budget:
            problems.append(f"{call('max_output_tokens')} must be smaller than {call('context_budget')} "
                            f"({_number(self.max_output_tokens)} is not less than {_number(self.context_budget)})")
        if str(self.relevance_model).startswith("embeddinggemma") and not self.follows("relevance_model"):
            from .providers.embeddinggemma import installed

            if not installed():
                problems.append(f"{call('relevance_model')} '{self.relevance_model}' is not installed here: run `python -m "
                                "engine.providers.embeddinggemma` (make setup does, unless GEMMA=0) or choose "
                                "'mpnet' or 'minilm'")
        if self.endpoint_url and self.applies("endpoint_url"):
            from .providers.endpoints import rejection_reason

            reason = rejection_reason(self.endpoint_url)
            if reason:
                problems.append(f"that endpoint can't be used: {reason}")
        return problems

    def check(self) -> Settings:
        problems = self.problems()
        if problems:
            raise WorkbenchError("Settings not changed: " + "; ".join(problems) + ".")
        return self


# The most stop strings a request carries: OpenAI's API takes four, and servers that copy it refuse more.
STOP_LIMIT = 4


def stop_list(text: str) -> list[str]:
    """The stop strings of the setting: split at |, with \\n read as a new
    line and \\| as a bar; blanks dropped."""
    parts = (text or "").replace("\\|", "\x00").split("|")
    out = [p.strip(" ").replace("\x00", "|").replace("\\n", "\n").replace("\\t", "\t") for p in parts]
    return [p for p in out if p.strip()]


def _choice_words(s: Settings, name: str, named: bool) -> str:
    """Who needs the setting: "narrator='endpoint'" for code, "My server" for people."""
    spec = SPECS[name]
    key = "narrator" if spec.narrator is not None and s.narrator == spec.narrator else "embedder"
    value = getattr(s, key)
    if named:
        return f"{key}={value!r}"
    return dict(SPECS[key].choices).get(value, value)


def _spec_of(f) -> Spec:
    return f.metadata.get("spec") or Spec(f.name.replace("_", " ").capitalize())


SPECS: dict[str, Spec] = {f.name: _spec_of(f) for f in fields(Settings) if f.init}
# The samplers beyond temperature, in the panel's order (sent only when set).
SAMPLERS = tuple(name for name, spec in SPECS.items() if spec.sampler)
_NAMES = set(SPECS)
# `Workbench.configure` keywords that are not stored fields but set one.
_SHORTCUTS = {"endpoint": "sets endpoint_url and selects the endpoint narrator"}
_KINDS = {f.name: f.type for f in fields(Settings) if f.init}
_EXAMPLES = {"int": "a whole number such as 8192", "float": "a number such as 0.8",
             "bool": "True or False", "str": "text in quotes"}


def defaults() -> dict[str, Any]:
    """Each setting's declared default (None where it follows others)."""
    return {f.name: f.default for f in fields(Settings) if f.init and f.default is not MISSING}


def _kind_problem(name: str, value: Any) -> str | None:
    """A sentence when `value` is the wrong kind for setting `name`; None when it fits.

    A bool is refused where a number is wanted (True would quietly become 1),
    and a whole number is accepted where a float is. None is accepted where
    the setting may be empty, or follows others (it follows them again)."""
    kind = _KINDS[name].replace(" | None", "")
    optional = _KINDS[name].endswith("| None")
    if value is None and (optional or SPECS[name].follows is not None):
        return None
    if kind == "Tuning":
        return None if isinstance(value, (Tuning, dict)) else (
            f"{name} must be an engine.search.Tuning (dataclasses.replace(engine.search.DEFAULT, ...)), "
            f"not {value!r} ({type(value).__name__})")
    fits = {"bool": isinstance(value, bool),
            "int": isinstance(value, numbers.Integral) and not isinstance(value, bool),
            "float": isinstance(value, numbers.Real) and not isinstance(value, bool),
            "str": isinstance(value, str)}[kind]
    if fits:
        return None
    also = " or None" if optional else ""
    return f"{name} must be {_EXAMPLES[kind]}{also}, not {value!r} ({type(value).__name__})"


def _plain(name: str, value: Any) -> Any:
    """numpy and other number types stored as the Python type the field declares."""
    kind = _KINDS[name].replace(" | None", "")
    if kind == "Tuning":
        return value if isinstance(value, Tuning) else Tuning.from_changes(value)
    if value is None or kind in ("bool", "str"):
        return value
    return int(value) if kind == "int" else float(value)


def _unknown_message(unknown: list[str]) -> str:
    known = sorted(_NAMES | set(_SHORTCUTS))
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        parts.append(f"{name!r}{hint}")
    listing = ", ".join(f"{k}= ({_SHORTCUTS[k]})" if k in _SHORTCUTS else f"{k}=" for k in known)
    return (f"Unknown setting {', '.join(parts)}: nothing was changed. "
            f"wb.configure() takes {listing}.")


def load(session: Session) -> Settings:
    stored = dict(session.execute(select(SettingRow.key, SettingRow.value)).all())
    values = {k: v for k, v in stored.items() if k in _NAMES}
    if "tuning" in values:
        values["tuning"] = Tuning.from_changes(values["tuning"])
    return Settings(**values)


def propose(current: Settings, changes: dict[str, Any]) -> Settings:
    """`current` with `changes`, unchecked: a setting that follows others keeps
    following unless it is changed (None makes it follow again)."""
    unknown = sorted(set(changes) - _NAMES)
    if unknown:
        raise WorkbenchError(_unknown_message(unknown))
    wrong = [p for p in (_kind_problem(k, v) for k, v in changes.items()) if p]
    if wrong:
        raise WorkbenchError("Settings not changed: " + "; ".join(wrong) + ".")
    kept = {name: None for name in current._following if name not in changes}
    return replace(current, **kept, **{k: _plain(k, v) for k, v in changes.items()})


def save(session: Session, current: Settings, changes: dict[str, Any]) -> Settings:
    new = propose(current, changes).check()
    values = {f.name: getattr(new, f.name) for f in fields(new) if f.init}
    values["tuning"] = new.tuning.changes()
    for key in _NAMES:
        value = None if new.follows(key) else values[key]
        row = session.get(SettingRow, key)
        if row is None or row.value != value:
            session.merge(SettingRow(key=key, value=value))
    return new
