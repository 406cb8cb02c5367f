"""One table of the plan's review: what `plan/report.py` renders as Markdown or as terminal tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    title: str
    headers: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    notes: tuple[str, ...] = ()
