"""The month's request records tallied in one pass, one tally per thread, added together at the end.

Why not SQL: besides the sums, the books need per-minute peaks and exact percentiles, and in DuckDB
any GROUP BY with more than a few hundred groups (minutes, prompt lengths) costs more than reading
the whole file (docs/benchmarks.md, "Ledger aggregation"). Here one compiled loop (numba, no GIL)
walks each Arrow batch once and adds every record into small arrays indexed by the dictionary codes
Parquet already stores for model and tenant, the day and the minute of the month.

Invariants:
- Tokens and TTFT (whole microseconds) are summed as int64: exact, and the same whichever thread
  read which records, so re-running a month gives the same books.
- Token counts are whole numbers from 0 to 2^31 - 1 (a record outside that is an error).
- Prompt-length percentiles are exact (nearest rank): lengths below `DENSE` are counted per length,
  longer ones per bucket and kept as (index << shift | length) keys (prompt_lengths).
- The tallies of one run share their name registries, so a model or tenant has the same index in
  every thread's tally and merging them is plain addition.
- Records outside the month are counted, not tallied; a record with no timestamp is outside.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from llm_fabric.errors import UsageError
from llm_fabric.ledger.period import Month
from llm_fabric.ledger.prompt_lengths import (
    COLUMNS,
    DENSE,
    DENSE_BITS,
    LOG2_BYTE,
    STEP_BITS,
    STEP_MASK,
    LongLengths,
    load_collector,
)

Ints = npt.NDArray[np.int64]
Codes = npt.NDArray[np.int32]

MAX_BATCH = 1 << 20
MAX_COUNT = 1 << 31
MAX_ROWS = MAX_COUNT - MAX_BATCH  # records one Tally takes, so that no int32 counter can overflow
MISSING = np.iinfo(np.int64).min  # a missing timestamp or prompt length
MAX_TTFT_MS = 4_000_000.0  # 66 minutes: beyond it a TTFT is a clock error (and its sums stay exact)
US_PER_MINUTE = 60_000_000
# per-length counters while tallying (their wraps are carried in int32): see _tally_batch
COUNTER = np.uint8
COUNTER_BITS = np.iinfo(COUNTER).bits
# fields of the (model, tenant, day, ok) cells
COUNT, INPUT, CACHED, OUTPUT, TTFT_N, TTFT_US = range(6)
FIELDS = 6


@dataclass
class Coded:
    """A string column as dictionary codes (0 .. len(names) - 1) and the names they stand for."""

    codes: Codes
    names: list[str]


@dataclass
class Columns:
    """One batch of request records, normalised (record_batches.normalise): read-only, C-contiguous."""

    ts_us: Ints  # UTC microseconds since the epoch, MISSING when absent
    model: Coded
    tenant: Coded
    status: Codes  # index into ok_lut
    ok_lut: npt.NDArray[np.int64]  # 1 for a success status, 0 for a failure
    prompt: Ints  # MISSING when absent: 0 tokens, and not among the percentiles
    output: Ints
    cached: Ints
    ttft_ms: npt.NDArray[np.float64]  # NaN when absent; empty when the records carry no TTFT at all

    def __len__(self) -> int:
        return len(self.ts_us)


def _tally_batch(  # type: ignore[no-untyped-def]
    ts,
    mcode,
    tcode,
    scode,
    ok_lut,
    prompt,
    output,
    cached,
    ttft,
    mmap,
    tmap,
    start_us,
    end_us,
    cells,
    minute_in,
    minute_out,
    model_len,
    tenant_len,
    model_wraps,
    tenant_wraps,
    keys,
    nlong,
    shift,
):
    """Add one batch; returns (records outside the month, end of the keys written from `nlong`, first bad row or -1).

    A length is counted in its column of `model_len` and `tenant_len`: itself below DENSE, else its
    bucket's (prompt_lengths). The counters are `COUNTER`s, 8-bit: a quarter of the cache lines of
    32-bit ones (at 32 bits the tenants' table cost 13 ns a record); a wrap adds one to `*_wraps`.
    A length >= DENSE also goes to `keys` as (model index << shift | length) in row 0 and (tenant
    index << shift | length) in row 1, from column `nlong` on.

    Every column is read once, here, rather than converted by numpy first: each numpy pass over a
    batch costs about as much as this whole loop. The arrays are indexed flat, by unsigned offsets:
    numba then skips its negative-index checks, which took a quarter of the loop's time.
    """
    outside = 0
    has_ttft = ttft.shape[0] == ts.shape[0]
    tenants, days, minutes, lengths = cells.shape[1], cells.shape[2], minute_in.shape[1], model_len.shape[1]
    cell, minute_i, minute_o = cells.reshape(-1), minute_in.reshape(-1), minute_out.reshape(-1)
    model_n, tenant_n, model_keys, tenant_keys = model_len.reshape(-1), tenant_len.reshape(-1), keys[0], keys[1]
    model_w, tenant_w = model_wraps.reshape(-1), tenant_wraps.reshape(-1)
    for i in range(ts.shape[0]):
        t = ts[i]
        if t < start_us or t >= end_us:
            outside += 1
            continue
        p, o, c = prompt[i], output[i], cached[i]
        if (p < 0 and p != MISSING) or o < 0 or c < 0 or p >= MAX_COUNT or o >= MAX_COUNT or c >= MAX_COUNT:
            return outside, nlong, i
        ttft_us = MISSING
        if has_ttft and not np.isnan(ttft[i]):
            if not abs(ttft[i]) < MAX_TTFT_MS:
                return outside, nlong, i
            ttft_us = int(np.rint(ttft[i] * 1000.0))
        minute = np.uint64(t - start_us) // np.uint64(US_PER_MINUTE)  # unsigned: no floor-division sign fix-up
        day = minute // np.uint64(1440)
        m, te, ok = mmap[np.uint32(mcode[i])], tmap[np.uint32(tcode[i])], ok_lut[np.uint32(scode[i])]
        tokens_in = max(p, 0)
        at = ((np.uint64((m * tenants + te) * days) + day) * np.uint64(2) + np.uint64(ok)) * np.uint64(FIELDS)
        cell[at + np.uint64(COUNT)] += 1
        cell[at + np.uint64(INPUT)] += tokens_in
        cell[at + np.uint64(CACHED)] += c
        cell[at + np.uint64(OUTPUT)] += o
        if ttft_us != MISSING:
            cell[at + np.uint64(TTFT_N)] += 1
            cell[at + np.uint64(TTFT_US)] += ttft_us
        at = np.uint64(m * minutes) + minute
        minute_i[at] += tokens_in
        minute_o[at] += o
        if p != MISSING:
            column = p
            if p >= DENSE:
                x = p >> DENSE_BITS  # e = floor(log2(p)) - DENSE_BITS, from a table (prompt_lengths); p < 2^31
                e = LOG2_BYTE[x] if x < 256 else 8 + LOG2_BYTE[x >> 8] if x < 65536 else 16 + LOG2_BYTE[x >> 16]
                column = DENSE + (e << STEP_BITS) + ((p >> (e + DENSE_BITS - STEP_BITS)) & STEP_MASK)
                model_keys[np.uint64(nlong)], tenant_keys[np.uint64(nlong)] = (m << shift) | p, (te << shift) | p
                nlong += 1
            at = np.uint64(m * lengths + column)
            model_n[at] += 1
            if model_n[at] == 0:
                model_w[at] += 1
            at = np.uint64(te * lengths + column)
            tenant_n[at] += 1
            if tenant_n[at] == 0:
                tenant_w[at] += 1
    return outside, nlong, -1


def _grow(array: npt.NDArray[Any], axis: int, size: int) -> npt.NDArray[Any]:
    """`array` with its `axis` at least `size` long (zeros added); doubling keeps regrowth rare."""
    if array.shape[axis] >= size:
        return array
    shape = list(array.shape)
    shape[axis] = max(size, 2 * shape[axis], 4)
    grown = np.zeros(shape, dtype=array.dtype)
    grown[tuple(slice(0, n) for n in array.shape)] = array
    return grown


_kernel_lock = threading.Lock()
_kernel: Any = None


def load_kernel() -> Any:
    """`_tally_batch` compiled by numba (or loaded from numba's cache), once per process.

    Not at import: numba and the compiled loop take 0.5-1 s to load, and only a process that reads
    request records needs them (not `fabric exporter` or a report from Prometheus alone). One explicit
    signature per kind of key (32 and 64 bits), so the loop is ready before the first batch rather than
    compiled on it.
    """
    global _kernel
    with _kernel_lock:
        if _kernel is None:
            import numba

            nb: Any = numba  # numba ships no type hints
            ints = nb.types.Array(nb.int64, 1, "C", readonly=True)
            codes = nb.types.Array(nb.int32, 1, "C", readonly=True)
            floats = nb.types.Array(nb.float64, 1, "C", readonly=True)
            counters = nb.from_dtype(np.dtype(COUNTER))[:, ::1]
            signatures = [
                nb.types.UniTuple(nb.int64, 3)(
                    ints,
                    codes,
                    codes,
                    codes,
                    ints,
                    ints,
                    ints,
                    ints,
                    floats,
                    nb.int64[::1],
                    nb.int64[::1],
                    nb.int64,
                    nb.int64,
                    nb.int64[:, :, :, :, ::1],
                    nb.int64[:, ::1],
                    nb.int64[:, ::1],
                    counters,
                    counters,
                    nb.int32[:, ::1],
                    nb.int32[:, ::1],
                    keys[:, ::1],
                    nb.int64,
                    nb.int64,
                )
                for keys in (nb.int32, nb.int64)
            ]
            kernel = nb.njit(signatures, nogil=True, cache=True)(_tally_batch)
            _first_call(kernel)
            load_collector()  # its partner for the percentiles, while numba is loading
            _kernel = kernel
        return _kernel


def _first_call(kernel: Any) -> None:
    """Call the loop once on no records: numba's first dispatch imports numpy.ma (30 ms), here
    rather than in the middle of the first batch."""

    def empty(dtype: type[np.generic], *shape: int) -> npt.NDArray[Any]:
        array = np.zeros(shape or (0,), dtype=dtype)
        array.flags.writeable = False
        return array

    ints, codes = empty(np.int64), empty(np.int32)
    kernel(
        ints,
        codes,
        codes,
        codes,
        ints,
        ints,
        ints,
        ints,
        empty(np.float64),
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        0,
        0,
        np.zeros((0, 0, 0, 0, 0), np.int64),
        np.zeros((0, 0), np.int64),
        np.zeros((0, 0), np.int64),
        np.zeros((0, 0), COUNTER),
        np.zeros((0, 0), COUNTER),
        np.zeros((0, 0), np.int32),
        np.zeros((0, 0), np.int32),
        np.zeros((2, 0), np.int32),
        0,
        24,
    )


def _bad_value(cols: Columns, row: int) -> tuple[str, float, str]:
    """(column, value, what would be right) of the out-of-range value the kernel stopped at."""
    for column, values in (
        ("prompt_tokens", cols.prompt),
        ("completion_tokens", cols.output),
        ("cached_prompt_tokens", cols.cached),
    ):
        value = int(values[row])
        if not 0 <= value < MAX_COUNT and not (column == "prompt_tokens" and value == MISSING):
            return column, value, f"token counts are whole numbers from 0 to {MAX_COUNT - 1}"
    return "ttft_ms", float(cols.ttft_ms[row]), f"time to first token is in milliseconds, below {MAX_TTFT_MS:.0f}"


class Names:
    """Names in order of first appearance -> index; maps a batch's dictionary to those indexes.

    Thread-safe: the tallies of one run share one registry per kind (tally_records).
    """

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self._lock = threading.Lock()

    def map(self, names: list[str]) -> Ints:
        with self._lock:
            return np.array([self.index.setdefault(n, len(self.index)) for n in names], dtype=np.int64)

    @property
    def names(self) -> list[str]:
        with self._lock:
            return list(self.index)


@dataclass
class Tally:
    """Partial books of the records one thread has read; `merge` folds several into one."""

    month: Month
    where: str  # what the records are, for error messages
    models: Names = field(default_factory=Names)
    tenants: Names = field(default_factory=Names)
    cells: Ints = field(init=False)  # [model, tenant, day, ok, field]
    minute_input: Ints = field(init=False)  # [model, minute of the month]
    minute_output: Ints = field(init=False)
    # [model | tenant, length or DENSE + bucket] (prompt_lengths): count = lengths + wraps << COUNTER_BITS;
    # COUNTER and int32 while tallying, exact int64 (and no wraps) once merged
    model_lengths: npt.NDArray[np.integer[Any]] = field(init=False)
    tenant_lengths: npt.NDArray[np.integer[Any]] = field(init=False)
    model_wraps: npt.NDArray[np.int32] = field(init=False)
    tenant_wraps: npt.NDArray[np.int32] = field(init=False)
    long: LongLengths = field(default_factory=LongLengths)  # lengths >= DENSE
    rows: int = 0
    rows_outside: int = 0

    def __post_init__(self) -> None:
        self.days = len(self.month.days)
        self.start_us = int(self.month.start.timestamp()) * 1_000_000
        self.end_us = int(self.month.end.timestamp()) * 1_000_000
        self.cells = np.zeros((0, 0, self.days, 2, FIELDS), dtype=np.int64)
        self.minute_input = np.zeros((0, self.days * 1440), dtype=np.int64)
        self.minute_output = np.zeros((0, self.days * 1440), dtype=np.int64)
        self.model_lengths = np.zeros((0, COLUMNS), dtype=COUNTER)
        self.tenant_lengths = np.zeros((0, COLUMNS), dtype=COUNTER)
        self.model_wraps = np.zeros((0, COLUMNS), dtype=np.int32)
        self.tenant_wraps = np.zeros((0, COLUMNS), dtype=np.int32)

    def _reserve(self, models: int, tenants: int) -> None:
        self.cells = _grow(_grow(self.cells, 0, models), 1, tenants)
        self.minute_input = _grow(self.minute_input, 0, models)
        self.minute_output = _grow(self.minute_output, 0, models)
        self.model_lengths = _grow(self.model_lengths, 0, models)
        self.tenant_lengths = _grow(self.tenant_lengths, 0, tenants)
        self.model_wraps = _grow(self.model_wraps, 0, models)
        self.tenant_wraps = _grow(self.tenant_wraps, 0, tenants)

    def full(self, batch: int) -> bool:
        """Whether `batch` more records could overflow a counter: start another Tally then."""
        return self.rows + batch > MAX_ROWS

    def add(self, cols: Columns) -> None:
        if len(cols) > MAX_BATCH or self.full(len(cols)):
            raise ValueError(f"batches hold at most {MAX_BATCH} records, tallies at most {MAX_ROWS}")
        mmap, tmap = self.models.map(cols.model.names), self.tenants.map(cols.tenant.names)
        models, tenants = int(mmap.max(initial=-1)) + 1, int(tmap.max(initial=-1)) + 1
        self._reserve(models, tenants)
        self.long.reserve(max(models, tenants), int(cols.prompt.max(initial=0)), len(cols))
        outside, used, bad = load_kernel()(
            cols.ts_us,
            cols.model.codes,
            cols.tenant.codes,
            cols.status,
            cols.ok_lut,
            cols.prompt,
            cols.output,
            cols.cached,
            cols.ttft_ms,
            mmap,
            tmap,
            self.start_us,
            self.end_us,
            self.cells,
            self.minute_input,
            self.minute_output,
            self.model_lengths,
            self.tenant_lengths,
            self.model_wraps,
            self.tenant_wraps,
            self.long.buffer,
            self.long.used,
            self.long.shift,
        )
        if bad >= 0:
            column, value, right = _bad_value(cols, bad)
            raise UsageError(f"{self.where}: {column} = {value} in a request record", hint=right)
        self.rows += len(cols)
        self.rows_outside += outside
        self.long.used = used

    def _exact_lengths(self) -> None:
        """The length counters as exact int64 counts, their wraps folded in (and zeroed)."""

        def exact(counts: npt.NDArray[np.integer[Any]], wraps: npt.NDArray[np.int32]) -> Ints:
            folded: Ints = counts.astype(np.int64) + (wraps.astype(np.int64) << COUNTER_BITS)
            return folded

        if self.model_lengths.dtype != np.int64:
            self.model_lengths = exact(self.model_lengths, self.model_wraps)
            self.tenant_lengths = exact(self.tenant_lengths, self.tenant_wraps)
            self.model_wraps, self.tenant_wraps = np.zeros_like(self.model_wraps), np.zeros_like(self.tenant_wraps)

    @classmethod
    def merge(cls, parts: list[Tally]) -> Tally:
        """One tally with every part's records; names indexed in order of first appearance across parts.

        Parts sharing their registries (one run's threads) are added into the first, indexes and keys
        as they are; others into a new tally, re-indexed. Names are not sorted here: reports sort them.
        """
        if not parts:
            raise ValueError("nothing to merge")
        first = parts[0]
        shared = all(p.models is first.models and p.tenants is first.tenants for p in parts)
        out, rest = (first, parts[1:]) if shared else (cls(first.month, first.where), parts)
        maps = [(out.models.map(p.models.names), out.tenants.map(p.tenants.names)) for p in rest]
        out._reserve(len(out.models.index), len(out.tenants.index))
        out._exact_lengths()
        for part, (mmap, tmap) in zip(rest, maps, strict=True):
            # a part's arrays may be shorter than its shared registry (names another thread added later)
            mmap, tmap = mmap[: part.cells.shape[0]], tmap[: part.cells.shape[1]]
            dm, dt = len(mmap), len(tmap)
            out.cells[np.ix_(mmap, tmap)] += part.cells[:dm, :dt]
            out.minute_input[mmap] += part.minute_input[:dm]
            out.minute_output[mmap] += part.minute_output[:dm]
            part._exact_lengths()
            out.model_lengths[mmap] += part.model_lengths[:dm]
            out.tenant_lengths[tmap] += part.tenant_lengths[:dt]
            out.long.extend(part.long, mmap, tmap)
            out.rows += part.rows
            out.rows_outside += part.rows_outside
        return out
