"""The model cache's read speed: the `storage_read` probe of enroll.yml and the `dd` lines it prints.

The probe writes a temporary file into the model cache folder (or its nearest existing parent), reads
it back past the page cache and prints what it did, one `key value` line each, then `dd`'s own report
of the read:

    dir /var/lib/llm-fabric/models
    fs xfs
    method direct
    2048+0 records in
    2048+0 records out
    536870912 bytes (537 MB, 512 MiB) copied, 0.281 s, 1.9 GB/s

`method` is how the page cache was kept out of the measurement: `direct` (O_DIRECT, `iflag=direct`),
`nocache` (the file's pages dropped with posix_fadvise, `iflag=nocache count=0`, before a plain read) or
`cached` (neither works there: the read came from memory and says nothing about the disk). GNU dd
(coreutils' print_xfer_stats) prints decimal (SI) rates, `kB/s`, `MB/s`, `GB/s`..., and no sizes in
brackets below 1 kB; a comma decimal separator comes from a locale other than C (the probe sets LC_ALL=C,
the parser takes both). The speed is computed from the byte count and the seconds, which dd prints with more
digits than its rounded rate. Host facts are informational: output that does not fit gives no speed
and a reason, never an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llm_fabric.enrollment.inventory import ReadMethod

METHODS: tuple[ReadMethod, ...] = ("direct", "nocache", "cached")
# file systems whose files live in memory: there is no disk under the page cache to measure
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})

_NUMBER = r"[0-9]+(?:[.,][0-9]+)?(?:e[-+]?[0-9]+)?"
_TRANSFER = re.compile(
    rf"^(?P<bytes>[0-9]+) bytes?\b.*?copied, (?P<seconds>{_NUMBER}) s, "
    rf"(?P<rate>{_NUMBER}|Infinity) (?P<unit>[kMGTPEZY]?)B/s\s*$",
    re.MULTILINE,
)
_SI = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}


def _float(text: str) -> float:
    return float(text.replace(",", "."))


@dataclass(frozen=True)
class DdTransfer:
    """One `... bytes ... copied, SECONDS s, RATE UNIT/s` line of dd."""

    bytes: int
    seconds: float
    reported_mb_s: float | None  # dd's rounded rate in decimal MB/s; None for `Infinity B/s`

    @property
    def mb_s(self) -> float | None:
        """Decimal MB/s from the bytes and the seconds; None when nothing was read or no time passed."""
        if self.bytes == 0 or self.seconds <= 0:
            return None
        return self.bytes / self.seconds / 1e6


def parse_dd_transfer(text: str) -> DdTransfer | None:
    """The last transfer line of dd's report in `text`, or None when there is none."""
    matches = list(_TRANSFER.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    rate = m.group("rate")
    reported = None if rate == "Infinity" else _float(rate) * _SI[m.group("unit")] / 1e6
    return DdTransfer(bytes=int(m.group("bytes")), seconds=_float(m.group("seconds")), reported_mb_s=reported)


@dataclass(frozen=True)
class ReadSpeed:
    """What the probe found: a speed only when it is the storage's, else the reason there is none."""

    mb_s: float | None
    method: ReadMethod | None
    filesystem: str | None
    folder: str | None
    detail: str


def parse_read_probe(rc: int, stdout: str) -> ReadSpeed:
    fields: dict[str, str] = {}
    for line in stdout.splitlines():
        key, _, value = line.partition(" ")
        if key in ("dir", "fs", "method", "error") and key not in fields:
            fields[key] = value.strip()
    folder, filesystem = fields.get("dir"), fields.get("fs")
    if stdout.strip() == "skipped":
        return ReadSpeed(None, None, None, None, "not measured: the read probe was turned off (size 0)")
    if rc != 0 or "error" in fields:
        reason = fields.get("error") or f"the probe exited with status {rc}"
        return ReadSpeed(None, None, filesystem, folder, f"not measured: {reason}")
    method_text = fields.get("method", "")
    transfer = parse_dd_transfer(stdout)
    if method_text not in METHODS or transfer is None or transfer.mb_s is None:
        return ReadSpeed(None, None, filesystem, folder, "not measured: the probe's output has no dd read report")
    method = METHODS[METHODS.index(method_text)]
    speed = round(transfer.mb_s, 1)
    where = f"{folder} ({filesystem})" if filesystem else str(folder)
    size = f"{transfer.bytes / 1e6:.0f} MB"
    if filesystem in MEMORY_FILESYSTEMS:
        detail = f"{speed} MB/s reading {size} from {where}: page cache, the model cache is in memory (no disk)"
        return ReadSpeed(speed, method, filesystem, folder, detail)
    if method == "cached":
        detail = (
            f"{speed} MB/s reading {size} from {where} came from the page cache (neither O_DIRECT nor "
            "posix_fadvise worked there): not the disk's speed, not recorded"
        )
        return ReadSpeed(None, method, filesystem, folder, detail)
    how = "O_DIRECT" if method == "direct" else "after dropping its pages (posix_fadvise)"
    return ReadSpeed(speed, method, filesystem, folder, f"{speed} MB/s reading {size} from {where}, {how}")
