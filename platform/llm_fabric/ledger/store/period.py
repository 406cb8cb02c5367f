"""The accounting period: one calendar month in UTC."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from llm_fabric.errors import UsageError

_MONTH = re.compile(r"^(?P<y>\d{4})-(?P<m>\d{2})$")


@dataclass(frozen=True)
class Month:
    year: int
    month: int

    @classmethod
    def parse(cls, text: str) -> Month:
        match = _MONTH.match(text.strip())
        if match is None or not 1 <= int(match["m"]) <= 12:
            raise UsageError(f"month `{text}` is not YYYY-MM", hint="e.g. --month 2026-11")
        return cls(int(match["y"]), int(match["m"]))

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    @property
    def first_day(self) -> date:
        return date(self.year, self.month, 1)

    @property
    def next_first_day(self) -> date:
        return date(self.year + self.month // 12, self.month % 12 + 1, 1)

    @property
    def start(self) -> datetime:
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        """Exclusive end: midnight UTC of the next month's first day."""
        nxt = self.next_first_day
        return datetime(nxt.year, nxt.month, 1, tzinfo=UTC)

    @property
    def days(self) -> list[date]:
        count = (self.next_first_day - self.first_day).days
        return [self.first_day + timedelta(days=i) for i in range(count)]

    def days_until(self, now: datetime) -> list[date]:
        """Days of the month that have begun by `now` (all of them for a past month)."""
        return [d for d in self.days if datetime(d.year, d.month, d.day, tzinfo=UTC) <= now]

    def require_begun(self, now: datetime) -> None:
        """UsageError (exit 2) for a month that has not begun by `now`: there is nothing to report yet."""
        if now < self.start:
            raise UsageError(
                f"month {self} has not begun: it begins on {self.first_day.isoformat()}",
                hint=f"report a month that has begun (the current one, {now:%Y-%m}, is reported as partial)",
            )
