"""After the turn: did the server read the prompt we sent?

The server's own prompt-token count is compared with our estimate. The
verdict is recorded with the take and shown; it never discards the turn,
whose reply has already streamed and is accepted story.
"""
from __future__ import annotations

from datetime import UTC, datetime

from .window import safety_reserve

__all__ = ["DECAY", "EXCEEDED", "FITS", "MAX_RATIO", "MIN_RATIO", "TRUNCATION_SUSPECTED", "UNKNOWN", "TokenRatios",
           "classify_usage", "next_ratio"]

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
        "observed_margin": None, "window_verified": window_verified, "reply_cut": False,
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
            record["reply_cut"] = _cut_at_window(usage, prompt, budget, max_output_tokens)
            if record["reply_cut"]:
                detail += (f" It was: the server stopped after {usage['completion_tokens']:,} reply tokens, where "
                           "its window ran out, so this reply is incomplete (kept, and marked so).")
        else:
            record["status"] = FITS
            detail = f"The server read {prompt:,} prompt tokens, leaving {margin:,} beside the reply."
    if not window_verified:
        detail += " The window itself was not verified for this turn."
    record["detail"] = detail
    return record


def _cut_at_window(usage: dict, prompt: int, budget: int, max_output_tokens: int) -> bool:
    """The reply ended short of its cap exactly where the window was full."""
    done = usage.get("completion_tokens")
    return type(done) is int and done < max_output_tokens and prompt + done >= budget - 1


# A measured ratio is applied only inside these bounds: below 1.0 the cl100k
# estimate is already the larger count and a smaller prompt costs nothing;
# above 3.0 the "measurement" is far more likely a server that counted
# something else (a whole batch, an image) than a real tokenizer.
MIN_RATIO, MAX_RATIO = 1.0, 3.0
# Against a real llama.cpp server the SmolLM2 tokenizer ran 5.6-15.9% above
# cl100k on different prompts of the same campaign: a higher reading is
# taken at once, a lower one only pulls the ratio down by a fifth of the gap,
# so one short prompt does not undo what a long one taught.
DECAY = 0.2


def next_ratio(current: float | None, observed: float) -> float:
    if current is None or observed >= current:
        return observed
    return current + (observed - current) * DECAY


class TokenRatios:
    """Server tokens per cl100k token, measured per model and kept in the
    workbench file, so a restart does not forget what the server taught."""

    def __init__(self, db):
        self.db = db

    def get(self, model_key: str) -> dict | None:
        from ..store.ratio_tables import TokenRatioRow

        with self.db.reading() as session:
            row = session.get(TokenRatioRow, model_key)
            return {"ratio": row.ratio, "last_observed": row.last_observed, "samples": row.samples,
                    "source": row.source} if row else None

    def observe(self, model_key: str, observed: float, source: str) -> float:
        """Fold one measurement in; returns the ratio now in force."""
        from ..store.ratio_tables import TokenRatioRow

        with self.db.writing() as session:
            row = session.get(TokenRatioRow, model_key)
            if row is None:
                row = TokenRatioRow(model_key=model_key, ratio=observed, samples=0)
                session.add(row)
            else:
                row.ratio = next_ratio(row.ratio, observed)
            row.last_observed, row.source, row.updated_at = observed, source, datetime.now(UTC).replace(tzinfo=None)
            row.samples += 1
            return row.ratio
