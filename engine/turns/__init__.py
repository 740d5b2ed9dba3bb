"""The turn loop: input normalisation, the per-campaign lock, one turn (its
`plan` read and built once, the narrator streamed by `runner`, the take and
its record written by `write`), and the turn record (`record`: its names,
its stored form, its one writer)."""
from ..story.locks import busy, campaign_lock
from . import record
from .inputs import direction_line, player_line
from .plan import TurnRequest
from .runner import dry_run, run_turn

__all__ = ["TurnRequest", "busy", "campaign_lock", "direction_line", "dry_run", "player_line", "record", "run_turn"]
