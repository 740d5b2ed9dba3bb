"""`test_connection`: can the configured narrator be reached, and what
window will the prompt really be built to? Answered in words."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import httpx

from .. import html
from . import window as windows
from .endpoints import EndpointRefused, rejection_reason
from .http import ResponseRefused, make_client, read_json
from .openai import server_message

__all__ = ["ConnectionReport", "check_connection", "window_warning"]


@dataclass(frozen=True)
class ConnectionReport:
    narrator: str
    endpoint: str
    model: str
    reachable: bool
    models: list[str] = field(default_factory=list)
    model_found: bool | None = None
    window: dict = field(default_factory=dict)
    budget: int = 0
    warning: str | None = None
    detail: str = ""

    @property
    def window_words(self) -> str:
        """The window found and how sure it is, or why none was found."""
        w = self.window if isinstance(self.window, dict) else {}
        tokens = w.get("tokens")
        if tokens:
            how = "verified" if w.get("verified") else "not verified"
            size = f"{tokens:,}" if isinstance(tokens, int) and not isinstance(tokens, bool) else str(tokens)
            return f"{size} tokens ({w.get('source') or 'source unknown'}; {how})"
        why = str(w.get("detail") or (self.detail if not self.reachable else "") or
                  "the server did not say how big it is")
        if not self.reachable and not w:
            why = f"the narrator was not reached ({self.detail.rstrip('.')})" if self.detail else \
                "the narrator was not reached"
        return f"none found: {why}"

    @property
    def ok(self) -> bool:
        return self.reachable and self.model_found is not False

    def _repr_html_(self) -> str:
        rows = [
            ("narrator", self.narrator), ("endpoint", self.endpoint or "(embedded)"), ("model", self.model),
            ("reachable", "yes" if self.reachable else "no"),
            ("models offered", ", ".join(self.models) or "-"),
            ("window", self.window_words),
            ("how", self.window.get("detail", "")), ("budget", f"{self.budget:,} tokens"),
            ("estimate correction", self.window.get("ratio_detail") or "-"),
        ]
        warn = html.tag("p", self.warning, style="color:#a15c00") if self.warning else ""
        fail = html.tag("p", self.detail, style="color:#b00020") if self.detail else ""
        return html.tag("div", html.key_values(rows) + warn + fail)


def window_warning(window: windows.Window, budget: int, model: str) -> str | None:
    if window.source == windows.DECLARED:
        binds = (f"Prompts are being built to {window.tokens:,} rather than {budget:,} tokens."
                 if window.tokens < budget else
                 f"That is not below the {budget:,}-token budget, so it changes nothing today.")
        return (f"The window is set in settings to {window.tokens:,} tokens because this server cannot be "
                f"asked. Nothing has verified that number. {binds}")
    if not window.verified:
        return (f"The window could not be checked: {window.detail}. Prompts are built to the {budget:,}-token "
                "budget; if the server's window is smaller, it will cut the start of the prompt (the rules "
                "and canon). Set context_window_override to the server's window if it cannot be asked.")
    if window.tokens < budget:
        more = f" The model itself can go up to {window.model_max:,}." if window.model_max and window.model_max > window.tokens else ""
        return (f"This server gives '{model}' {window.tokens:,} tokens, less than the {budget:,}-token story "
                f"budget. Prompts are being built to {window.tokens:,} so nothing is silently cut.{more}")
    return None


def check_connection(settings, narrator=None, client: httpx.Client | None = None) -> ConnectionReport:
    budget = settings.context_budget
    if settings.narrator == "local":
        # "Reachable" for an embedded model means it generated a token: a build
        # that loads but dies at its first generation must not say yes.
        try:
            ok, how = narrator.check() if hasattr(narrator, "check") else (True, "")
            window = narrator.context_window()
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            return ConnectionReport("local", "", "", False, budget=budget, detail=str(exc))
        return ConnectionReport("local", "", narrator.model_id, ok, [narrator.model_id], True,
                                window.as_dict(), budget, window_warning(window, budget, narrator.model_id),
                                detail="" if ok else how)
    base, model = settings.endpoint_url.rstrip("/"), settings.model
    reason = rejection_reason(base)
    if reason:
        return ConnectionReport("endpoint", base, model, False, budget=budget,
                                detail=f"That endpoint can't be used: {reason}.")
    client = client or make_client(windows.PROBE_TIMEOUT)
    try:
        entries = _offered(client, base)
    except (httpx.HTTPError, ValueError, TypeError, AttributeError) as exc:
        why = str(exc) if isinstance(exc, EndpointRefused | ResponseRefused | ValueError) else type(exc).__name__
        return ConnectionReport("endpoint", base, model, False, budget=budget,
                                detail=f"Could not list models at {base} ({why}). Is the server running?")
    models = [e["id"] for e in entries]
    # Always asked afresh: a connection test that repeats a remembered window
    # would say "verified" about a server restarted with a smaller one.
    peek = getattr(narrator, "peek_window", None)
    window = peek() if peek else windows.probe(client, base, model, declared=settings.context_window_override)
    entry, candidates = windows.find_model(model, entries) if model else (None, [])
    found = (entry is not None) if model else None
    warning = _changed(window) + (window_warning(window, budget, model) or "")
    if candidates:
        warning = (f"The model name '{model}' is ambiguous: it begins {len(candidates)} of the models the server "
                   f"offers ({', '.join(candidates)}); give more of the name. ") + warning
    elif found is False:
        warning = f"The server does not offer a model named '{model}' (it offers: {', '.join(models) or 'none'}). " + warning
    return ConnectionReport("endpoint", base, model, True, models, found, window.as_dict(), budget, warning or None)


def _offered(client: httpx.Client, base: str) -> list[dict]:
    status, body = read_json(client, "GET", f"{base}/models",
                             timeout=httpx.Timeout(windows.PROBE_TIMEOUT, connect=windows.CONNECT_TIMEOUT))
    if status != 200 or not isinstance(body, dict):
        said = server_message(json.dumps(body)) if body is not None else ""
        raise ValueError(f"HTTP {status}" + (f"; the server said: “{said}”" if said else ""))
    return [e for e in body.get("data") or [] if isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"]]


def _changed(window: windows.Window) -> str:
    if not window.changed_from:
        return ""
    return (f"The window changed since the server was last asked: {window.changed_from:,} then, {window.tokens:,} "
            "now (the server was restarted or the model reloaded); prompts are built to the new one. ")
