"""The turn loop: input normalisation, the per-campaign lock, one turn, and
the turn record (`record`: its names, its stored form, its one writer)."""
from ..story.locks import busy, campaign_lock
from . import record
from .inputs import direction_line, player_line
from .runner import TurnRequest, dry_run, run_turn

__all__ = ["TurnRequest", "busy", "campaign_lock", "direction_line", "dry_run", "player_line", "record", "run_turn"]
