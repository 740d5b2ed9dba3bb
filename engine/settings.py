"""Workbench settings: one typed record, stored as key/value rows.

Key/value rows let a later version add a setting without a migration; the
dataclass keeps every reader typed and every value checked on the way in.
"""
from __future__ import annotations

import difflib
import numbers
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from .errors import WorkbenchError
from .store import SettingRow

__all__ = ["DEFAULT_NARRATOR_PROMPT", "Settings", "load", "save"]

DEFAULT_NARRATOR_PROMPT = (
    "You are the narrator of an interactive story. Write in the second person, present "
    "tense, addressing the protagonist as \"you\". Describe what happens next in vivid, "
    "concrete prose, give other characters their own voices and motives, and end at a "
    "moment that invites the player to act. Never decide what the player does, says or "
    "feels; never speak for the player. Keep to what the story has established."
)


@dataclass(frozen=True)
class Settings:
    narrator: str = "local"  # "local" (an embedded GGUF model) or "endpoint"
    # The embedded narrator's GGUF file; "" is the bundled SmolLM2-135M.
    model_path: str = ""
    # The window the embedded model is loaded with. SmolLM2 was trained to
    # 8,192; 4,096 keeps its KV cache small on a 2-core machine.
    n_ctx: int = 4096
    endpoint_url: str = ""
    model: str = ""
    api_mode: str = "chat"  # "chat" or "completion"
    # The whole window the narrator is given: prompt plus reply. The
    # reference's default; capped to what the server really has.
    context_budget: int = 16_384
    # A 135M model loops when left to run; 200 tokens is a paragraph or two.
    max_output_tokens: int = 200
    temperature: float = 0.8
    # Thinking kept per turn (a reasoning model's chain of thought is not story
    # and is not sent back; this caps what is stored and shown).
    max_reasoning_tokens: int = 4096
    timeout_seconds: int = 300
    narrator_prompt: str = DEFAULT_NARRATOR_PROMPT
    # Used only when the server cannot be asked its window; never "verified".
    context_window_override: int | None = None
    embedder: str = "local"  # "local" (embedded MiniLM), "gguf", "endpoint", or "none"
    embedding_model: str = ""
    # embedder="gguf": a local GGUF embedding model (e.g. nomic-embed-text), run out of process.
    embedding_model_path: str = ""
    # History block trim: one step gives up 1/trim_fraction of the window (see
    # engine/context/history.py); 0 turns it off and the window slides by one node.
    trim_fraction: int = 4
    # Ask the narrator to append a ```state block of typed events each turn.
    state_protocol: bool = True
    memory_enabled: bool = True
    auto_summarize: bool = True
    memory_top_k: int = 5  # memories recalled per turn
    memory_capacity: int = 200  # active memories kept before the least recently used are forgotten

    def check(self) -> Settings:
        problems = []
        if self.narrator not in ("local", "endpoint"):
            problems.append(f"narrator must be 'local' or 'endpoint', not {self.narrator!r}")
        if self.api_mode not in ("chat", "completion"):
            problems.append(f"api_mode must be 'chat' or 'completion', not {self.api_mode!r}")
        if not 256 <= self.context_budget <= 1_000_000:
            problems.append(f"context_budget must be between 256 and 1,000,000 tokens, not {self.context_budget}")
        if not 16 <= self.max_output_tokens <= 32_768:
            problems.append(f"max_output_tokens must be between 16 and 32,768, not {self.max_output_tokens}")
        if self.max_output_tokens >= self.context_budget:
            problems.append("max_output_tokens must be smaller than context_budget")
        if not 0.0 <= self.temperature <= 2.0:
            problems.append(f"temperature must be between 0 and 2, not {self.temperature}")
        if not 30 <= self.timeout_seconds <= 3600:
            problems.append(f"timeout_seconds must be between 30 and 3600, not {self.timeout_seconds}")
        if self.context_window_override is not None and not 256 <= self.context_window_override <= 200_000:
            problems.append("context_window_override must be between 256 and 200,000 tokens, or None")
        if self.trim_fraction < 0:
            problems.append("trim_fraction must be 0 (off) or a positive whole number")
        if not 1 <= self.memory_top_k <= 50:
            problems.append(f"memory_top_k must be between 1 and 50, not {self.memory_top_k}")
        if self.memory_capacity < 1:
            problems.append("memory_capacity must be at least 1")
        if self.embedder not in ("local", "gguf", "endpoint", "none"):
            problems.append(f"embedder must be 'local', 'gguf', 'endpoint' or 'none', not {self.embedder!r}")
        if self.embedder == "gguf" and not self.embedding_model_path:
            problems.append("embedder='gguf' needs embedding_model_path, the GGUF file of an embedding model")
        if not 256 <= self.n_ctx <= 1_048_576:
            problems.append(f"n_ctx must be between 256 and 1,048,576 tokens, not {self.n_ctx}")
        if self.embedder == "endpoint" and not (self.endpoint_url and self.embedding_model):
            problems.append("embedder='endpoint' needs endpoint_url and embedding_model (e.g. nomic-embed-text)")
        if self.narrator == "endpoint" and not self.model:
            problems.append("narrator='endpoint' needs model, the name the server knows it by")
        if self.endpoint_url:
            from .providers.endpoints import rejection_reason

            reason = rejection_reason(self.endpoint_url)
            if reason:
                problems.append(f"that endpoint can't be used: {reason}")
        if self.narrator == "endpoint" and not self.endpoint_url:
            problems.append("narrator='endpoint' needs endpoint_url, e.g. http://127.0.0.1:11434/v1")
        if problems:
            raise WorkbenchError("Settings not changed: " + "; ".join(problems) + ".")
        return self


_NAMES = {f.name for f in fields(Settings)}
# `Workbench.configure` keywords that are not stored fields but set one.
_SHORTCUTS = {"endpoint": "sets endpoint_url and selects the endpoint narrator"}
_KINDS = {f.name: f.type for f in fields(Settings)}
_EXAMPLES = {"int": "a whole number such as 8192", "float": "a number such as 0.8",
             "bool": "True or False", "str": "text in quotes"}


def _kind_problem(name: str, value: Any) -> str | None:
    """A sentence when `value` is the wrong kind for setting `name`; None when it fits.

    A bool is refused where a number is wanted (True would quietly become 1),
    and a whole number is accepted where a float is."""
    kind = _KINDS[name].replace(" | None", "")
    optional = _KINDS[name].endswith("| None")
    if value is None and optional:
        return None
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
    return Settings(**{k: v for k, v in stored.items() if k in _NAMES})


def save(session: Session, current: Settings, changes: dict[str, Any]) -> Settings:
    unknown = sorted(set(changes) - _NAMES)
    if unknown:
        raise WorkbenchError(_unknown_message(unknown))
    wrong = [p for p in (_kind_problem(k, v) for k, v in changes.items()) if p]
    if wrong:
        raise WorkbenchError("Settings not changed: " + "; ".join(wrong) + ".")
    new = replace(current, **{k: _plain(k, v) for k, v in changes.items()}).check()
    for key, value in asdict(new).items():
        if value != getattr(current, key) or session.get(SettingRow, key) is None:
            session.merge(SettingRow(key=key, value=value))
    return new
