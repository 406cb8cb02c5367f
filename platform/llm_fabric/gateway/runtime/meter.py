"""The meter: one JSON line per request in the foundation's record schema (llm_fabric.request_record).

Rejections are records too (status 401, 403, 429, ...) with no tokens, so `fabric report` and
`fabric ledger ingest` see refused demand; their `prompt_tokens` is null (a refused request has no
prompt length, so the month's prompt percentiles do not count it as a length-0 prompt). Prompts are
written only where the request's data class allows it (`log_prompts`, from the sovereignty policy)
and the site turned prompt logging on.

Records go to a folder, one file per UTC day of writing (`requests-2026-12-01.jsonl`; with a
writer name, `requests-2026-12-01.<writer>.jsonl`, one file per gateway pod so that two pods never
append to one file): once the day is over its file never changes again and can be shipped and
ingested (`fabric ledger ingest FOLDER`). The day is the writing day, not the arrival day: a
request that arrived before midnight and finished after it is in the next day's file, and the
ledger still books it under its arrival day (`ts`). Ingesting the open day again is harmless:
the ledger keys records by request id and day.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from llm_fabric.request_record import RequestRecord


class Meter:
    """Appends records to the day's JSON Lines file in `folder`; one write per line (O_APPEND), so lines never
    interleave. `clock` (epoch seconds) decides the day."""

    def __init__(self, folder: Path, *, writer: str | None = None, clock: Callable[[], float] = time.time) -> None:
        self.folder = folder
        self.writer = writer
        self._clock = clock
        self._lock = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)

    def path_for(self, epoch_s: float) -> Path:
        """The file of the UTC day of `epoch_s`."""
        day = datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d")
        return self.folder / (f"requests-{day}.{self.writer}.jsonl" if self.writer else f"requests-{day}.jsonl")

    def write(self, record: RequestRecord) -> None:
        line = record.json_line().encode()
        with self._lock:
            fd = os.open(self.path_for(self._clock()), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
