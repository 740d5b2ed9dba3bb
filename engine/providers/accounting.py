"""After the turn: did the server read the prompt we sent?

The server's own prompt-token count is compared with our estimate. The
verdict is recorded with the take and shown; it never discards the turn,
whose reply has already streamed and is accepted story.
"""
from __future__ import annotations

from .window import safety_reserve

__all__ = ["EXCEEDED", "FITS", "TRUNCATION_SUSPECTED", "UNKNOWN", "classify_usage"]

FITS = "fits"
EXCEEDED = "exceeded"
TRUNCATION_SUSPECTED = "truncation_suspected"
UNKNOWN = "unknown"


def classify_usage(usage: dict | None, *, estimate: int, budget: int, max_output_tokens: int,
                   window_verified: bool) -> dict:
    prompt = (usage or {}).get("prompt_tokens")
    reserve = safety_reserve(budget)
    record = {
        "status": UNKNOWN, "server_prompt_tokens": None, "estimate": estimate, "difference": None,
        "budget": budget, "max_output_tokens": max_output_tokens, "safety_reserve": reserve,
        "observed_margin": None, "window_verified": window_verified,
    }
    if type(prompt) is not int or prompt <= 0:
        detail = "The server reported no prompt token count, so nothing confirms the whole prompt was read."
    else:
        margin = budget - max_output_tokens - prompt
        record.update(server_prompt_tokens=prompt, difference=prompt - estimate, observed_margin=margin)
        if prompt + reserve < estimate:
            record["status"] = TRUNCATION_SUSPECTED
            detail = (f"The server read {prompt:,} prompt tokens of the {estimate:,} sent, a shortfall larger "
                      f"than the {reserve:,}-token safety reserve. A server that cuts an over-long prompt "
                      "reports exactly this, and it cuts from the start: the narrator's rules and the canon.")
        elif prompt + max_output_tokens > budget:
            record["status"] = EXCEEDED
            detail = (f"The server counted {prompt:,} prompt tokens; with {max_output_tokens:,} for the reply "
                      f"that is more than the {budget:,}-token window the prompt was built for, so the reply "
                      "may have been cut short.")
        else:
            record["status"] = FITS
            detail = f"The server read {prompt:,} prompt tokens, leaving {margin:,} beside the reply."
    if not window_verified:
        detail += " The window itself was not verified for this turn."
    record["detail"] = detail
    return record
