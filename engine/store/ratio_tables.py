"""The per-model correction of the token estimate, one row per model.

The workbench counts with cl100k; a model's own tokenizer counts more (SmolLM2
ran 5.6-15.9% above it against a real llama.cpp server). The measured ratio
is kept in the file so a reopened workbench builds its first prompt right.
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Float, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base, utcnow

__all__ = ["TokenRatioRow"]


class TokenRatioRow(Base):
    __tablename__ = "token_ratios"

    model_key: Mapped[str] = mapped_column(String(500), primary_key=True)  # "model @ http://host:port"
    ratio: Mapped[float] = mapped_column(Float)  # in force: server tokens per cl100k token
    last_observed: Mapped[float] = mapped_column(Float)
    samples: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(40))  # tokenize | usage | refusal
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
