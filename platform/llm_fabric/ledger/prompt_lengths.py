"""Prompt lengths as the tally keeps them, and their exact nearest-rank percentiles.

The tally (llm_fabric.ledger.tally) counts every record's prompt length, per model and per tenant,
in a row of int32 counters with one column per length below `DENSE` and one per *bucket* above:
bucket b of length p >= DENSE is (e - 12) * 128 + the 7 bits after the leading one, e = floor(log2 p),
so buckets are ordered, contiguous and at most 1/128 of their lengths wide. Each long length is also
written as two keys, (model index << shift | p) and (tenant index << shift | p).

A percentile's rank then falls in one column of the cumulative counts (`nearest_rank`). In a length
column that is the answer; in a bucket it is the r-th smallest length of that bucket, which one pass
over the keys collects and a sort of the few collected finds (`LongLengths.resolve`). Neither the
keys nor any whole column of records is ever sorted.

Invariants:
- Exact: every length is counted once, in its column, and kept once per side as a key.
- Keys are 32-bit (shift 24) while every index is below 2^7 and every length below 2^24: half the
  memory of 64-bit keys. Past either limit every key is widened to 64 bits (shift 32).
- Key buffers are never grown by copying: a full one is kept as a part and a new one started. Pages
  of a buffer that were never written are never faulted in, so its unused tail costs address space only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

Keys = npt.NDArray[np.signedinteger[Any]]
Ints = npt.NDArray[np.int64]
Counts = npt.NDArray[np.signedinteger[Any]]

DENSE_BITS, STEP_BITS = 12, 7
# Lengths below DENSE are counted per length: 20 tenants' int32 rows stay in a core's 512 KB L2
# cache. Measured per record: 2^12 int32 35 ns, int64 54 ns; 2^14 int64 47-85 ns.
DENSE = 1 << DENSE_BITS
STEP_MASK = (1 << STEP_BITS) - 1
BUCKETS = (31 - DENSE_BITS) << STEP_BITS  # lengths up to 2^31 - 1
COLUMNS = DENSE + BUCKETS  # of a row of counters
NARROW, WIDE = 24, 32  # shifts of 32-bit and 64-bit keys
BUFFER = 1 << 20  # keys per buffer, at least
Wanted = tuple[int, int, int]  # (index, bucket, rank within the bucket)
# floor(log2(x)) for 0 < x < 256, for the compiled loops: a table and at most three lookups are
# cheaper there than math.frexp's libm call (3 ns per long length, measured).
LOG2_BYTE = np.array([0] + [x.bit_length() - 1 for x in range(1, 256)], dtype=np.int64)


def bucket_of(length: int) -> int:
    """The bucket of a length >= DENSE (the compiled loops inline the same arithmetic)."""
    e = length.bit_length() - 1
    return ((e - DENSE_BITS) << STEP_BITS) + ((length >> (e - STEP_BITS)) & STEP_MASK)


def bucket_start(bucket: int) -> int:
    """The smallest length in `bucket`."""
    return ((1 << STEP_BITS) + (bucket & STEP_MASK)) << ((bucket >> STEP_BITS) + DENSE_BITS - STEP_BITS)


def nearest_rank(counts: Counts, percentiles: Iterable[int]) -> dict[int, tuple[int, int]]:
    """Per percentile p, the column of `counts` holding rank ceil(p x n / 100) and the rank's place in it.

    A column below DENSE is the length itself; a higher one is bucket column - DENSE, whose length
    at that place (0 = its smallest) LongLengths.resolve finds.
    """
    cumulative = np.cumsum(counts)
    n = int(cumulative[-1]) if len(cumulative) else 0
    out: dict[int, tuple[int, int]] = {}
    for p in percentiles if n else ():
        rank = (p * n + 99) // 100
        column = int(np.searchsorted(cumulative, rank))
        out[p] = column, rank - (int(cumulative[column - 1]) if column else 0) - 1
    return out


def _collect(keys, shift, wanted, out, n):  # type: ignore[no-untyped-def]
    """Copy to `out` from `n` on the keys whose (index, bucket) is flagged in `wanted`; returns the new end."""
    mask = (1 << shift) - 1
    flags = np.uint64(wanted.shape[0])
    for i in range(keys.shape[0]):
        key = keys[i]
        p = key & mask
        x = p >> DENSE_BITS  # the tally loop's arithmetic
        e = LOG2_BYTE[x] if x < 256 else 8 + LOG2_BYTE[x >> 8] if x < 65536 else 16 + LOG2_BYTE[x >> 16]
        bucket = (e << STEP_BITS) + ((p >> (e + DENSE_BITS - STEP_BITS)) & STEP_MASK)
        at = np.uint64((key >> shift) * BUCKETS + bucket)
        if at < flags and wanted[at]:
            if n < out.shape[0]:  # more keys than the counters said: counted, never written past the end
                out[np.uint64(n)] = key
            n += 1
    return n


_collect_lock = threading.Lock()
_collector: Any = None


def load_collector() -> Any:
    """`_collect` compiled by numba (or loaded from its cache), once per process, and called once."""
    global _collector
    with _collect_lock:
        if _collector is None:
            import numba

            nb: Any = numba  # numba ships no type hints
            signatures = [
                nb.int64(keys[::1], nb.int64, nb.uint8[::1], keys[::1], nb.int64) for keys in (nb.int32, nb.int64)
            ]
            collector = nb.njit(signatures, nogil=True, cache=True)(_collect)
            none = np.zeros(0, dtype=np.int32)
            collector(none, NARROW, np.zeros(0, dtype=np.uint8), none, 0)
            _collector = collector
        return _collector


def _identity(index_map: Ints) -> bool:
    return bool(np.array_equal(index_map, np.arange(len(index_map))))


def _widened(keys: Keys) -> Keys:
    wide: Keys = np.left_shift(keys >> NARROW, WIDE, dtype=np.int64) | (keys & ((1 << NARROW) - 1))
    return wide


class LongLengths:
    """One tally's keys of lengths >= DENSE: full buffers (`parts`) and the one being written."""

    def __init__(self) -> None:
        self.shift = NARROW
        self.parts: list[Keys] = []
        self.buffer: Keys = np.empty((2, 0), dtype=np.int32)
        self.used = 0  # keys written to `buffer`

    @property
    def mask(self) -> int:
        return (1 << self.shift) - 1

    def arrays(self) -> list[Keys]:
        """Every [2, n] array of keys written so far."""
        return self.parts + ([self.buffer[:, : self.used]] if self.used else [])

    def reserve(self, names: int, longest: int, batch: int) -> None:
        """Room for `batch` more keys, of indexes below `names` and lengths up to `longest`."""
        if self.shift == NARROW and (names > 1 << 7 or longest >= 1 << NARROW):
            self.widen()
        if self.buffer.shape[1] - self.used < batch:
            self.parts = self.arrays()
            self.buffer = np.empty((2, max(batch, BUFFER)), dtype=np.int32 if self.shift == NARROW else np.int64)
            self.used = 0

    def widen(self) -> None:
        """Every key as a 64-bit one; the next `reserve` starts a 64-bit buffer."""
        if self.shift == NARROW:
            self.parts = [_widened(keys) for keys in self.arrays()]
            self.shift, self.buffer, self.used = WIDE, np.empty((2, 0), dtype=np.int64), 0

    def extend(self, other: LongLengths, model_map: Ints, tenant_map: Ints) -> None:
        """Add `other`'s keys, its model and tenant indexes mapped through `model_map` and `tenant_map`."""
        same = _identity(model_map) and _identity(tenant_map)
        if other.shift != self.shift or not same:
            self.widen()
        for keys in other.arrays():
            if other.shift != self.shift:
                keys = _widened(keys)
            if not same:
                keys = np.stack([self._remap(keys[0], model_map), self._remap(keys[1], tenant_map)])
            self.parts.append(keys)

    def _remap(self, keys: Keys, index_map: Ints) -> Keys:
        remapped: Keys = np.left_shift(index_map[keys >> WIDE], WIDE) | (keys & self.mask)
        return remapped

    def resolve(self, side: int, wanted: set[Wanted], sizes: Mapping[tuple[int, int], int]) -> dict[Wanted, int]:
        """The length at each wanted (index, bucket, rank) of the model (side 0) or tenant (side 1) keys.

        `sizes[(index, bucket)]` is how many keys that bucket holds (its counter): the collected keys
        fit exactly. Only they are sorted, by (index, length), so a bucket's run starts at its first key.
        """
        if not wanted:
            return {}
        collect = load_collector()
        flags = np.zeros((max(index for index, _, _ in wanted) + 1) * BUCKETS, dtype=np.uint8)
        for index, bucket, _ in wanted:
            flags[index * BUCKETS + bucket] = 1
        parts = self.arrays()
        dtype = parts[0].dtype if parts else np.int64
        picked = np.empty(sum(sizes[(i, b)] for i, b in {(i, b) for i, b, _ in wanted}), dtype=dtype)
        end = 0
        for part in parts:
            end = collect(part[side], self.shift, flags, picked, end)
        if end != len(picked):
            raise RuntimeError(f"collected {end} long lengths where the counters say {len(picked)}")
        picked.sort()
        out: dict[Wanted, int] = {}
        for index, bucket, rank in wanted:
            first = int(np.searchsorted(picked, (index << self.shift) | bucket_start(bucket)))
            out[(index, bucket, rank)] = int(picked[first + rank]) & self.mask
        return out


def percentiles_by(counts: Counts, long: LongLengths, side: int, percentiles: Iterable[int]) -> list[dict[int, int]]:
    """Exact nearest-rank percentiles of each row of `counts` ([index, COLUMNS] counters of one side)."""
    ranks = [nearest_rank(row, percentiles) for row in counts]
    wanted = {
        (i, column - DENSE, place) for i, row in enumerate(ranks) for column, place in row.values() if column >= DENSE
    }
    sizes = {(i, b): int(counts[i, DENSE + b]) for i, b, _ in wanted}
    exact = long.resolve(side, wanted, sizes)
    return [
        {p: column if column < DENSE else exact[(i, column - DENSE, place)] for p, (column, place) in row.items()}
        for i, row in enumerate(ranks)
    ]
