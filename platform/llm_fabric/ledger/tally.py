"""The month's request records tallied in one pass, one tally per thread, merged by name at the end.

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
  longer ones are kept as values and sorted once at the end.
- Records outside the month are counted, not tallied; a record with no timestamp is outside.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from llm_fabric.errors import UsageError
from llm_fabric.ledger.period import Month

Ints = npt.NDArray[np.int64]
Codes = npt.NDArray[np.int32]

# Lengths below DENSE are counted per length, in int32 counters: 20 tenants' counters (330 KB) stay
# in a core's 512 KB L2 cache. Measured per record: 2^12 int32 35 ns, int64 54 ns; 2^14 int64 47-85 ns.
DENSE = 1 << 12
MAX_BATCH = 1 << 20
MAX_COUNT = 1 << 31
MAX_ROWS = MAX_COUNT - MAX_BATCH  # records one Tally takes, so that no int32 counter can overflow
MISSING = np.iinfo(np.int64).min  # a missing timestamp or prompt length
MAX_TTFT_MS = 4_000_000.0  # 66 minutes: beyond it a TTFT is a clock error (and its sums stay exact)
US_PER_MINUTE = 60_000_000
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


def _tally_batch(ts, mcode, tcode, scode, ok_lut, prompt, output, cached, ttft, mmap, tmap,  # type: ignore[no-untyped-def]
                 start_us, end_us, cells, minute_in, minute_out, model_len, tenant_len, long):
    """Add one batch; returns (records outside the month, long lengths written to `long`, first bad row or -1).

    Every column is read once, here, rather than converted by numpy first: each numpy pass over a
    batch costs about as much as this whole loop.
    """
    outside = 0
    nlong = 0
    dense = model_len.shape[1] - 1
    has_ttft = ttft.shape[0] == ts.shape[0]
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
        minute = (t - start_us) // US_PER_MINUTE
        day = minute // 1440
        m, te, ok = mmap[mcode[i]], tmap[tcode[i]], ok_lut[scode[i]]
        tokens_in = max(p, 0)
        cells[m, te, day, ok, COUNT] += 1
        cells[m, te, day, ok, INPUT] += tokens_in
        cells[m, te, day, ok, CACHED] += c
        cells[m, te, day, ok, OUTPUT] += o
        if ttft_us != MISSING:
            cells[m, te, day, ok, TTFT_N] += 1
            cells[m, te, day, ok, TTFT_US] += ttft_us
        minute_in[m, minute] += tokens_in
        minute_out[m, minute] += o
        if p >= dense:
            model_len[m, dense] += 1
            tenant_len[te, dense] += 1
            long[0, nlong], long[1, nlong], long[2, nlong] = m, te, p
            nlong += 1
        elif p != MISSING:
            model_len[m, p] += 1
            tenant_len[te, p] += 1
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
    signature, so the loop is ready before the first batch rather than compiled on it.
    """
    global _kernel
    with _kernel_lock:
        if _kernel is None:
            import numba

            nb: Any = numba  # numba ships no type hints
            ints = nb.types.Array(nb.int64, 1, "C", readonly=True)
            codes = nb.types.Array(nb.int32, 1, "C", readonly=True)
            floats = nb.types.Array(nb.float64, 1, "C", readonly=True)
            signature = nb.types.UniTuple(nb.int64, 3)(
                ints, codes, codes, codes, ints, ints, ints, ints, floats,
                nb.int64[::1], nb.int64[::1], nb.int64, nb.int64,
                nb.int64[:, :, :, :, ::1], nb.int64[:, ::1], nb.int64[:, ::1], nb.int32[:, ::1],
                nb.int32[:, ::1], nb.int32[:, ::1],
            )
            _kernel = nb.njit(signature, nogil=True, cache=True)(_tally_batch)
        return _kernel


def _bad_value(cols: Columns, row: int) -> tuple[str, float, str]:
    """(column, value, what would be right) of the out-of-range value the kernel stopped at."""
    for column, values in (("prompt_tokens", cols.prompt), ("completion_tokens", cols.output),
                           ("cached_prompt_tokens", cols.cached)):
        value = int(values[row])
        if not 0 <= value < MAX_COUNT and not (column == "prompt_tokens" and value == MISSING):
            return column, value, f"token counts are whole numbers from 0 to {MAX_COUNT - 1}"
    return "ttft_ms", float(cols.ttft_ms[row]), f"time to first token is in milliseconds, below {MAX_TTFT_MS:.0f}"


class _Names:
    """Names in order of first appearance -> index; maps a batch's dictionary to those indexes."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def map(self, names: list[str]) -> Ints:
        return np.array([self.index.setdefault(n, len(self.index)) for n in names], dtype=np.int64)

    @property
    def names(self) -> list[str]:
        return list(self.index)


@dataclass
class Tally:
    """Partial books of the records one thread has read; `merge` folds several into one."""

    month: Month
    where: str  # what the records are, for error messages
    models: _Names = field(default_factory=_Names)
    tenants: _Names = field(default_factory=_Names)
    cells: Ints = field(init=False)  # [model, tenant, day, ok, field]
    minute_input: Ints = field(init=False)  # [model, minute of the month]
    minute_output: Ints = field(init=False)
    # [model | tenant, length]; the last column counts lengths >= DENSE (int32 while tallying, int64 merged)
    model_lengths: npt.NDArray[np.signedinteger[Any]] = field(init=False)
    tenant_lengths: npt.NDArray[np.signedinteger[Any]] = field(init=False)
    # lengths >= DENSE as [model index, tenant index, length] columns, one array per batch
    long_parts: list[Codes] = field(default_factory=list)
    rows: int = 0
    rows_outside: int = 0

    def __post_init__(self) -> None:
        self.days = len(self.month.days)
        self.start_us = int(self.month.start.timestamp()) * 1_000_000
        self.end_us = int(self.month.end.timestamp()) * 1_000_000
        self.cells = np.zeros((0, 0, self.days, 2, FIELDS), dtype=np.int64)
        self.minute_input = np.zeros((0, self.days * 1440), dtype=np.int64)
        self.minute_output = np.zeros((0, self.days * 1440), dtype=np.int64)
        self.model_lengths = np.zeros((0, DENSE + 1), dtype=np.int32)
        self.tenant_lengths = np.zeros((0, DENSE + 1), dtype=np.int32)
        self._long = np.zeros((3, 0), dtype=np.int32)

    def _reserve(self, models: int, tenants: int, batch: int = 0) -> None:
        self.cells = _grow(_grow(self.cells, 0, models), 1, tenants)
        self.minute_input = _grow(self.minute_input, 0, models)
        self.minute_output = _grow(self.minute_output, 0, models)
        self.model_lengths = _grow(self.model_lengths, 0, models)
        self.tenant_lengths = _grow(self.tenant_lengths, 0, tenants)
        self._long = _grow(self._long, 1, batch)

    def full(self, batch: int) -> bool:
        """Whether `batch` more records could overflow a counter: start another Tally then."""
        return self.rows + batch > MAX_ROWS

    def add(self, cols: Columns) -> None:
        if len(cols) > MAX_BATCH or self.full(len(cols)):
            raise ValueError(f"batches hold at most {MAX_BATCH} records, tallies at most {MAX_ROWS}")
        mmap, tmap = self.models.map(cols.model.names), self.tenants.map(cols.tenant.names)
        self._reserve(len(self.models.index), len(self.tenants.index), len(cols))
        outside, nlong, bad = load_kernel()(
            cols.ts_us, cols.model.codes, cols.tenant.codes, cols.status, cols.ok_lut, cols.prompt, cols.output,
            cols.cached, cols.ttft_ms, mmap, tmap, self.start_us, self.end_us, self.cells, self.minute_input,
            self.minute_output, self.model_lengths, self.tenant_lengths, self._long,
        )
        if bad >= 0:
            column, value, right = _bad_value(cols, bad)
            raise UsageError(f"{self.where}: {column} = {value} in a request record", hint=right)
        self.rows += len(cols)
        self.rows_outside += outside
        if nlong:
            self.long_parts.append(self._long[:, :nlong].copy())

    @classmethod
    def merge(cls, parts: list[Tally]) -> Tally:
        """One tally with every part's records, models and tenants indexed in sorted name order."""
        if not parts:
            raise ValueError("nothing to merge")
        out = cls(parts[0].month, parts[0].where)
        for name in sorted({n for p in parts for n in p.models.index}):
            out.models.index[name] = len(out.models.index)
        for name in sorted({n for p in parts for n in p.tenants.index}):
            out.tenants.index[name] = len(out.tenants.index)
        out._reserve(len(out.models.index), len(out.tenants.index))
        out.model_lengths, out.tenant_lengths = (a.astype(np.int64) for a in (out.model_lengths, out.tenant_lengths))
        for part in parts:
            mmap, tmap = out.models.map(part.models.names), out.tenants.map(part.tenants.names)
            dm, dt = len(mmap), len(tmap)
            out.cells[np.ix_(mmap, tmap)] += part.cells[:dm, :dt]
            out.minute_input[mmap] += part.minute_input[:dm]
            out.minute_output[mmap] += part.minute_output[:dm]
            out.model_lengths[mmap] += part.model_lengths[:dm]
            out.tenant_lengths[tmap] += part.tenant_lengths[:dt]
            for long in part.long_parts:
                out.long_parts.append(np.stack([mmap[long[0]], tmap[long[1]], long[2]]).astype(np.int32))
            out.rows += part.rows
            out.rows_outside += part.rows_outside
        return out


def nearest_rank(counts: npt.NDArray[np.signedinteger[Any]], long_sorted: npt.NDArray[np.signedinteger[Any]],
                 percentiles: tuple[int, ...]) -> dict[int, int]:
    """Nearest-rank percentiles: the smallest length whose cumulative count reaches ceil(p x n / 100).

    `counts[x]` is how many lengths equal x for x < DENSE; `long_sorted` are the lengths >= DENSE, sorted.
    """
    cumulative = np.cumsum(counts[:DENSE])
    dense = int(cumulative[-1]) if len(cumulative) else 0
    n = dense + len(long_sorted)
    out: dict[int, int] = {}
    for p in percentiles if n else ():
        rank = (p * n + 99) // 100
        out[p] = int(np.searchsorted(cumulative, rank)) if rank <= dense else int(long_sorted[rank - dense - 1])
    return out


def long_values_by(tally: Tally, side: int, names: int) -> dict[int, npt.NDArray[np.signedinteger[Any]]]:
    """The lengths >= DENSE per model (side 0) or tenant (side 1) index below `names`, sorted.

    One sort of (index << shift | length), numpy's SIMD sort: several times faster than grouping by
    an argsort first, and twice as fast again in 32 bits, which fit while there are fewer than 128
    names and every length is below 2^24. Each index's run is then found by binary search.
    """
    if not tally.long_parts:
        return {}
    narrow = names < 1 << 7 and max(int(part[2].max()) for part in tally.long_parts) < 1 << 24
    shift, kind = (24, np.int32) if narrow else (32, np.int64)
    keys: npt.NDArray[np.signedinteger[Any]] = np.concatenate(
        [np.left_shift(part[side].astype(kind), shift) | part[2].astype(kind) for part in tally.long_parts])
    keys.sort()
    bounds = np.searchsorted(keys, np.left_shift(np.arange(names + 1, dtype=kind), shift))
    return {g: keys[s:e] & ((1 << shift) - 1) for g, (s, e) in enumerate(itertools.pairwise(bounds)) if e > s}
