"""Detecting a generation that repeats the same token cycle (seed 000's "same eight tokens" loop).

A generation is looping with period `p` when every one of its last tokens equals the token `p`
positions earlier. The detector keeps, for each period that currently matches, the length of
that matching run; the run of period `p` ending at position `i` covers `run + p` periodic tokens.
It reports a loop once a cycle of period `p <= max_period` has appeared `min_repeats` times in a
row AND covers at least `min_span` tokens, so a short "----" ruler or a repeated word is not a loop
while 64 "!" are.

The cost per token is proportional to how often the new token occurs among the last `max_period`
tokens (found through a position index, not by scanning every period), so normal text costs a few
dictionary operations per token. This module has no dependencies: it runs inside the vLLM engine
process (see `llm_fabric.engine.loop_guard`) and in the fabric's own tests and benchmarks.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ENV_PREFIX = "FABRIC_LOOP_GUARD_"


@dataclass(frozen=True)
class LoopGuardSettings:
    """When a generation counts as looping. Defaults suit chat and code (rulers, tables, repeated words)."""

    enabled: bool = True
    max_period: int = 64
    min_repeats: int = 4
    min_span: int = 64

    def __post_init__(self) -> None:
        if not 1 <= self.max_period <= 1024:
            raise ValueError(f"max_period must be between 1 and 1024, got {self.max_period}")
        if self.min_repeats < 2:
            raise ValueError(f"min_repeats must be at least 2, got {self.min_repeats}")
        if self.min_span < 2:
            raise ValueError(f"min_span must be at least 2, got {self.min_span}")

    def to_env(self) -> dict[str, str]:
        """The engine environment that carries these settings into the vLLM process."""
        return {
            f"{ENV_PREFIX}ENABLED": "1" if self.enabled else "0",
            f"{ENV_PREFIX}MAX_PERIOD": str(self.max_period),
            f"{ENV_PREFIX}MIN_REPEATS": str(self.min_repeats),
            f"{ENV_PREFIX}MIN_SPAN": str(self.min_span),
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LoopGuardSettings:
        env = os.environ if environ is None else environ
        default = cls()

        def number(name: str, fallback: int) -> int:
            raw = env.get(f"{ENV_PREFIX}{name}")
            if raw is None or raw.strip() == "":
                return fallback
            try:
                return int(raw)
            except ValueError as exc:
                raise ValueError(f"{ENV_PREFIX}{name} must be an integer, got {raw!r}") from exc

        enabled_raw = env.get(f"{ENV_PREFIX}ENABLED", "1").strip().lower()
        return cls(
            enabled=enabled_raw not in ("0", "false", "no", "off"),
            max_period=number("MAX_PERIOD", default.max_period),
            min_repeats=number("MIN_REPEATS", default.min_repeats),
            min_span=number("MIN_SPAN", default.min_span),
        )


class LoopDetector:
    """Feed one generation's tokens in order; `feed` returns True from the token that completes a loop."""

    __slots__ = ("_count", "_index", "_max_period", "_need", "_ring", "_runs", "period")

    def __init__(self, settings: LoopGuardSettings) -> None:
        m = settings.max_period
        self._max_period = m
        # run length (matches of tok[i] == tok[i-p]) at which period p counts as a loop
        self._need = [0] + [max(settings.min_repeats * p, settings.min_span) - p for p in range(1, m + 1)]
        self._ring: list[int] = [-1] * m
        self._index: dict[int, deque[int]] = {}
        self._runs: dict[int, int] = {}
        self._count = 0
        self.period: int | None = None  # the loop's period once detected

    @property
    def looping(self) -> bool:
        return self.period is not None

    def feed(self, token: int) -> bool:
        i = self._count
        self._count = i + 1
        m = self._max_period
        slot = i % m
        positions = self._index.get(token)
        runs: dict[int, int] = {}
        if positions:
            old_runs = self._runs
            need = self._need
            found = 0
            for j in positions:  # oldest first, so the last hit is the shortest period
                p = i - j
                r = old_runs.get(p, 0) + 1
                runs[p] = r
                if r >= need[p]:
                    found = p
            if found and self.period is None:
                self.period = found
        self._runs = runs
        if i >= m:  # the token m positions back leaves the window
            old = self._ring[slot]
            old_positions = self._index[old]
            old_positions.popleft()
            if not old_positions and old != token:
                del self._index[old]
        self._ring[slot] = token
        if positions is None:
            self._index[token] = deque((i,))
        else:
            positions.append(i)
        return self.period is not None

    def feed_all(self, tokens: Iterable[int]) -> bool:
        for token in tokens:
            self.feed(token)
        return self.period is not None

    @property
    def tokens_seen(self) -> int:
        return self._count


def find_loop(tokens: Iterable[int], settings: LoopGuardSettings | None = None) -> tuple[int, int] | None:
    """(position of the token that completed the loop, period), or None: for tests and offline checks."""
    detector = LoopDetector(settings or LoopGuardSettings())
    for position, token in enumerate(tokens):
        if detector.feed(token):
            assert detector.period is not None
            return position, detector.period
    return None
