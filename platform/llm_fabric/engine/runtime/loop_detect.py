"""Detecting a generation that repeats the same token cycle (seed 000's "same eight tokens" loop).

A generation is looping with period `p` when every one of its last tokens equals the token `p`
positions earlier. The detector keeps, for each period that currently matches, the length of
that matching run; the run of period `p` ending at position `i` covers `run + p` periodic tokens.
It reports a loop once a cycle of period `p <= max_period` has appeared `min_repeats` times in a
row AND covers at least `min_span` tokens, so a short "----" ruler or a repeated word is not a loop
while 64 "!" are.

Period `p` loops once its run reaches `need[p] = max(min_repeats * p, min_span) - p` matches. Every
such run is at least `min(need)` tokens long (48 with the defaults), so it contains a checkpoint
when one comes every `min(need)` tokens. Only at a checkpoint are the periods matching the new token
looked up (a C-speed `list.index` over the window) and the new ones' runs measured backwards; between
checkpoints only the periods alive since the last one are checked, one comparison each, and in text
they die within a few tokens. A multiple of a tracked period whose periodic tail is at least that
multiple long is not tracked (Fine-Wilf: it repeats the shorter cycle, ends with it and cannot reach
its own `need` first), so a "!!!" run tracks one period, not 64. The detection token and period are
those of the definition; the tests check them against brute force.

This module has no dependencies: it runs inside the vLLM engine process (see
`llm_fabric.engine.runtime.loop_guard`) and in the fabric's own tests and benchmarks.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from llm_fabric.names import LOOP_GUARD_ENV_PREFIX

ENV_PREFIX = LOOP_GUARD_ENV_PREFIX


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

    __slots__ = ("_cands", "_count", "_hist", "_interval", "_keep", "_max_period", "_need", "_next_check", "period")

    def __init__(self, settings: LoopGuardSettings) -> None:
        m = settings.max_period
        self._max_period = m
        # run length (matches of tok[i] == tok[i-p]) at which period p counts as a loop
        self._need = [0] + [max(settings.min_repeats * p, settings.min_span) - p for p in range(1, m + 1)]
        # every run that reaches its `need` contains a checkpoint when checkpoints are this far apart
        self._interval = min(self._need[1:])
        self._next_check = self._interval - 1
        # the longest periodic tail a checkpoint measures, and the window the periods reach into
        self._keep = max(settings.min_repeats * m, settings.min_span, m + 1)
        self._hist: list[int] = []
        self._cands: dict[int, int] = {}  # period -> position at which its current run becomes a loop
        self._count = 0
        self.period: int | None = None  # the loop's period once detected

    @property
    def looping(self) -> bool:
        return self.period is not None

    def feed(self, token: int) -> bool:
        i = self._count
        self._count = i + 1
        if self.period is not None:
            return True
        hist = self._hist
        hist.append(token)
        if i == self._next_check:
            return self._checkpoint(token, i)
        cands = self._cands
        if not cands:
            return False
        dead: list[int] = []
        found = 0
        for p, due in cands.items():  # ascending periods: the first due one is the shortest
            if hist[-1 - p] != token:
                dead.append(p)
            elif due <= i and not found:
                found = p
        for p in dead:
            del cands[p]
        if found:
            self.period = found
            return True
        return False

    def _checkpoint(self, token: int, i: int) -> bool:
        """Find every period matching at `i` and measure the runs that are new since the last checkpoint."""
        self._next_check = i + self._interval
        hist = self._hist
        if len(hist) > 2 * self._keep:
            del hist[: -self._keep]
        m = self._max_period
        window = hist[-1 - m : -1]
        periods: list[int] = []
        start = 0
        try:
            while True:  # list.index scans in C: cheaper than a position index kept up to date per token
                j = window.index(token, start)
                periods.append(len(window) - j)
                start = j + 1
        except ValueError:
            pass
        periods.reverse()
        old = self._cands
        need = self._need
        cands: dict[int, int] = {}
        spans: list[tuple[int, int]] = []
        found = 0
        last = len(hist) - 1
        for p in periods:
            due = old.get(p)
            if due is None:
                # Fine-Wilf: a multiple of a tracked period whose periodic tail is at least that long
                # repeats that shorter cycle; it ends with it and cannot reach its own `need` first
                if any(p % q == 0 and span >= p for q, span in spans):
                    continue
                run = 0
                limit = min(need[p], last - p + 1)
                while run < limit and hist[last - run] == hist[last - run - p]:
                    run += 1
                due = i - run + need[p]
            cands[p] = due
            spans.append((p, i - due + need[p] + p))
            if due <= i and not found:
                found = p
        self._cands = cands
        if found:
            self.period = found
            return True
        return False

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
