"""One turn: plan (read and build) -> stream -> commit once.

The database is read, then released, before the narrator is called, and the
turn is written in one commit after the narrator finishes: no write lock is
ever held across a model call (the reference logged 180 "database is locked"
errors in 26 turns before it learned this). A turn that fails or is stopped
at any point before that commit has written nothing.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .. import context, narrative
from ..budget.ratios import classify_usage
from ..errors import NarratorError, NotAllowed, TurnCancelled, TurnFailed
from ..providers import Narrator, Prompt, Reasoning, Status, Text, Usage
from ..settings import Settings, stop_list
from ..store import CampaignRow, Database
from .plan import MODES, TurnRequest, plan_turn
from .record import Turn
from .write import Take, write_turn

__all__ = ["EMPTY_RETRIES", "JUDGED_WORDS", "dry_run", "run_turn", "sampling_of"]

# A reply of protocol text only is asked for again this many times before the
# turn fails: on the defaults 3 of 45 turns of the 135M model (and the first
# turn after a server restart) failed so, and a second sample costs one reply.
EMPTY_RETRIES = 1
# A reply is judged on its first JUDGED_WORDS words: one naming none of the
# things its input named is stopped there and asked again, while
# settings.uptake_takes allows (1 by default: it did not raise uptake on the
# tuning turns, see the setting); what it had written is held back from the
# reader until the judgement. 40 words is about two sentences of the 135M
# narrator, 1-2 s of its time; the last take is kept whatever it says.
JUDGED_WORDS = 40


def _joined(before: str, after: str, tight: bool = False) -> str:
    """Two pieces of one passage: a space between them unless the second goes
    on with punctuation (or, `tight`, with the word the first stopped in)."""
    before, after = before.rstrip(), after.strip()
    if not before or not after:
        return before or after
    return before + ("" if tight or after[0] in ",.;:!?…'’\")]" else " ") + after


def sampling_of(settings: Settings) -> dict:
    """The samplers the reader set, for the Prompt (none set: nothing sent)."""
    return {"top_p": settings.top_p, "min_p": settings.min_p, "repeat_penalty": settings.repeat_penalty,
            "stop": tuple(stop_list(settings.stop_strings))}


def _opens(narrator) -> bool:
    """Only a narrator that can write on from words it did not choose is given them."""
    return bool(getattr(narrator, "continues_opening", False))


def _judge(answered: tuple[str | None, str], takes: int, known: str = ""):
    """The judgement of a reply's start for the input it answers (the things
    the story `known` already names set aside), or None when there is nothing
    to judge (Continue, an input naming nothing, one take)."""
    kind, line = answered
    if takes < 2 or kind not in ("player", "direction") or not narrative.named_things(line):
        return None

    def judge(text: str) -> bool | None:
        if narrative.takes_up(text, line, known):
            return True
        return False if len(text.split()) >= JUDGED_WORDS else None

    return judge


class _SetAside(Exception):
    """A take stopped by its judge; `start` is what it had written."""

    def __init__(self, start: str):
        super().__init__(start)
        self.start = start


def _stream(narrator, prompt, on_text, on_reasoning, cancel, reasoning_budget: int = 4096, on_status=None,
            judge=None):
    """The reply, its reasoning and usage. With `judge`, the text is held back
    from `on_text` until judge(text so far) says True (then it streams on) or
    False: the take is stopped and _SetAside raised with its start."""
    text, reasoning, usage = [], [], Usage()
    stream = narrator.execute(prompt)
    try:
        for chunk in stream:
            if cancel is not None and cancel.is_set():
                raise TurnCancelled("Stopped: the narration was cancelled and nothing was written.")
            if isinstance(chunk, Text):
                text.append(chunk.text)
                if judge is not None:
                    verdict = judge("".join(text))
                    if verdict is False:
                        raise _SetAside("".join(text))
                    if verdict is None:
                        continue
                    judge, chunk = None, Text("".join(text))  # taken up: what was held streams now
                if on_text:
                    on_text(chunk.text)
            elif isinstance(chunk, Reasoning):
                reasoning.append(chunk.text)
                if on_reasoning:
                    on_reasoning(chunk.text)
            elif isinstance(chunk, Status):
                if on_status:
                    on_status(chunk.text)
            elif isinstance(chunk, Usage):
                usage = chunk
    except (TurnFailed, NotAllowed, _SetAside):
        raise
    except NarratorError as exc:
        raise TurnFailed(f"{exc} Nothing was written.") from exc
    except Exception as exc:  # a narrator bug must not leave half a turn behind
        raise TurnFailed(f"The narrator failed mid-reply ({type(exc).__name__}: {exc}). Nothing was written.") from exc
    finally:
        close = getattr(stream, "close", None)
        if close:
            close()
    if cancel is not None and cancel.is_set():
        raise TurnCancelled("Stopped: the narration was cancelled and nothing was written.")
    if judge is not None and text and on_text:  # a reply shorter than the judged start
        on_text("".join(text))
    return "".join(text), _capped("".join(reasoning).strip(), reasoning_budget) or None, usage


def _capped(reasoning: str, budget: int) -> str:
    """Reasoning has its own budget: a thinking model can write thousands of
    tokens before a short reply, and none of it is story. The start is kept."""
    if not reasoning or context.tokens.count(reasoning) <= budget:
        return reasoning
    ids = context.tokens.encoding().encode(reasoning, disallowed_special=())
    return context.tokens.encoding().decode(ids[:budget]) + f"\n[… reasoning cut at its {budget}-token budget]"


def dry_run(db: Database, campaign_id: int, narrator: Narrator, settings: Settings, request: TurnRequest,
            embedder=None, held: dict | None = None):
    """The context the next turn would be given, with no model call and no model load."""
    peek = getattr(narrator, "peek_window", None)
    window = peek() if peek else narrator.context_window()
    return plan_turn(db, campaign_id, request, settings, window, embedder, _opens(narrator), held=held).built


def run_turn(
    db: Database,
    campaign_id: int,
    narrator: Narrator,
    settings: Settings,
    request: TurnRequest,
    *,
    on_text: Callable[[str], None] | None = None,
    on_reasoning: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    embedder=None,
    on_status: Callable[[str], None] | None = None,
) -> Turn:
    """Play one turn and return the record it wrote."""
    if request.mode not in MODES:
        raise NotAllowed(f"Unknown turn mode {request.mode!r}; use one of {', '.join(MODES)}.")
    started = time.perf_counter()
    window = narrator.context_window()
    plan = plan_turn(db, campaign_id, request, settings, window, embedder, _opens(narrator))
    prepared = time.perf_counter()
    opening = plan.built.opening
    known = plan.built.report.history_text
    steer = tuple(narrative.steer_words(*plan.answered, known)) \
        if settings.steer_named and getattr(narrator, "steers", False) else ()
    prompt = Prompt(plan.built.system, plan.built.story, settings.max_output_tokens, settings.temperature,
                    opening=opening, steer=steer, **sampling_of(settings))
    takes = settings.uptake_takes if getattr(narrator, "judge_starts", False) else 1
    asked, set_aside = 0, []
    judged = _judge(plan.answered, takes, known)
    while True:
        asked += 1
        judge = judged if len(set_aside) + 1 < takes else None
        try:
            raw, reasoning, usage = _stream(narrator, prompt, on_text, on_reasoning, cancel,
                                            settings.max_reasoning_tokens, on_status, judge)
        except _SetAside as stopped:  # it named none of the input's things
            set_aside.append(stopped.start)
            if on_status:
                on_status("The reply did not take up what you named; asking again.")
            continue
        extraction = narrative.split(raw)
        prose = extraction.prose.strip()
        if prose or asked - len(set_aside) > EMPTY_RETRIES:
            break
        if on_status:  # a reply of protocol text only: asked again, once, before the turn fails
            on_status("The narrator wrote no story text; asking it once more.")
    generated = time.perf_counter()
    if not prose:
        raise TurnFailed(f"The narrator returned no story text ({asked} tries), so nothing was written. Retry, "
                         "or check the model.")
    report = plan.built.report
    if plan.extend_of is not None:  # the whole passage is held to the rules; what it said before stays as it was
        carried = plan.carried
        kept = _stored_part(carried)
        # Written on from the passage itself, a reply that starts without a space goes on with the word.
        tight = bool(plan.built.opening) and raw[:1].isalnum()
        prose, rules = narrative.hold_rules(_joined(carried[len(kept):], prose, tight), _joined(known, kept),
                                            repair_person=settings.first_person_repair)
        prose = _joined(kept, prose)
        rules["extended"] = {"node_id": plan.extend_of, "carried_words": len(carried.split())}
    else:
        prose, rules = narrative.hold_rules(prose, known, repair_person=settings.first_person_repair)
    rules["asked"] = asked
    rules["opening"] = opening
    rules["steered"] = list(steer)
    rules["sampling"] = prompt.sampling  # what the reader set and was sent; unset samplers are the narrator's own
    rules["set_aside"] = set_aside  # the starts of takes stopped for not taking up the input
    accounting = classify_usage(
        usage.as_dict(), estimate=report.tokens.estimate, budget=report.tokens.budget,
        max_output_tokens=settings.max_output_tokens, window_verified=window.verified,
    )
    # The cut part of a reply stays with its record (Turn.cut, Turn.tail).
    accounting = {**accounting,
                  "reply_cut": bool(accounting.get("reply_cut")) or bool(rules["tail"]) or rules["trailed_off"],
                  "tail": rules["tail"], "rules": rules}
    timings = {
        "prepare_ms": round((prepared - started) * 1000, 2),
        "generate_ms": round((generated - prepared) * 1000, 2),
    }
    take = Take(plan, prose, raw, extraction, reasoning, narrator=narrator.model_id, usage=usage.as_dict(),
                accounting=accounting, window=window.as_dict(), timings=timings)
    return _commit(db, campaign_id, take)


def _stored_part(carried: str) -> str:
    """What of a carried passage is its stored, finished text: up to its last
    complete sentence (the cut part is written on, and held to the rules again)."""
    kept, tail = narrative.cut_to_sentence(carried)
    return kept if tail and carried.startswith(kept) else carried


def _commit(db: Database, campaign_id: int, take: Take) -> Turn:
    with db.writing() as session:
        campaign = session.get(CampaignRow, campaign_id)
        if (campaign.head_branch_id, campaign.head_depth) != take.plan.head:
            raise TurnFailed(
                "The story moved while this turn was being narrated (another window or process "
                "changed it), so nothing was written. Look at the story and try again."
            )
        return write_turn(session, campaign, take)
