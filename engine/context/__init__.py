"""What the narrator is shown: one token counter and a pure builder."""
from . import tokens
from .assembly import Brief, Built, ContextOverflow, Line, build, render_line, safety_reserve

__all__ = ["Brief", "Built", "ContextOverflow", "Line", "build", "render_line", "safety_reserve", "tokens"]
