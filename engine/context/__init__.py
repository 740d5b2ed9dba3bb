"""What the narrator is shown: one token counter and a pure builder."""
from ..budget import tokens
from .builder import (
    Brief,
    Built,
    ContextOverflow,
    Inputs,
    Knowledge,
    build,
    render_line,
    safety_reserve,
)
from .history import HistorySource, Line, ListHistory, history_floor, trim_block
from .length import length_hint
from .report import HISTORY_SECTIONS, MEMORY_SECTIONS, Report

__all__ = [
    "tokens", "Brief", "Built", "ContextOverflow", "Inputs", "Knowledge", "build", "render_line",
    "safety_reserve", "HistorySource", "Line", "ListHistory", "history_floor", "trim_block", "length_hint",
    "Report", "HISTORY_SECTIONS", "MEMORY_SECTIONS",
]
