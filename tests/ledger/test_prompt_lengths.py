"""Prompt-length buckets and keys (llm_fabric.ledger.prompt_lengths) against plain Python."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_fabric.ledger import prompt_lengths as pl
from llm_fabric.ledger.period import Month
from llm_fabric.ledger.tally import Coded, Columns, Tally

NOV = Month.parse("2026-11")


@given(st.integers(pl.DENSE, 2**31 - 1))
def test_a_bucket_holds_its_length_and_buckets_are_ordered(length: int) -> None:
    bucket = pl.bucket_of(length)
    assert 0 <= bucket < pl.BUCKETS
    assert pl.bucket_start(bucket) <= length
    assert bucket + 1 == pl.BUCKETS or length < pl.bucket_start(bucket + 1)
    assert pl.bucket_start(bucket + 1) - pl.bucket_start(bucket) <= max(1, length // 128)


def _columns(lengths: list[int], tenants: list[int]) -> Columns:
    n = len(lengths)

    def frozen(values: object, dtype: type[np.generic]) -> np.ndarray:  # type: ignore[type-arg]
        array = np.array(values, dtype=dtype)
        array.flags.writeable = False
        return array

    return Columns(
        ts_us=frozen([int(NOV.start.timestamp()) * 1_000_000 + i for i in range(n)], np.int64),
        model=Coded(frozen([0] * n, np.int32), ["m"]),
        tenant=Coded(frozen(tenants, np.int32), [f"t{i}" for i in range(max(tenants) + 1)]),
        status=frozen([0] * n, np.int32),
        ok_lut=frozen([1, 0], np.int64),
        prompt=frozen(lengths, np.int64),
        output=frozen([1] * n, np.int64),
        cached=frozen([0] * n, np.int64),
        ttft_ms=frozen([], np.float64),
    )


def test_the_compiled_tally_counts_each_length_in_the_bucket_python_gives() -> None:
    rng = np.random.default_rng(3)
    lengths = [
        int(x)
        for x in np.concatenate(
            [
                rng.integers(1, pl.DENSE, 300),
                rng.integers(pl.DENSE, 1 << 20, 600),
                [pl.DENSE, 8191, 8192, (1 << 24) - 1, 1 << 24, 2**31 - 1],
            ]
        )
    ]
    tally = Tally(NOV, "test")
    tally.add(_columns(lengths, [i % 3 for i in range(len(lengths))]))
    want = np.zeros(pl.COLUMNS, dtype=np.int64)
    for length in lengths:
        want[length if length < pl.DENSE else pl.DENSE + pl.bucket_of(length)] += 1
    assert tally.model_lengths[0].tolist() == want.tolist()
    assert tally.long.shift == pl.WIDE  # 2^31 - 1 needs 64-bit keys


@given(st.lists(st.integers(1, 3_000_000), min_size=1, max_size=400), st.sampled_from([50, 95, 99]))
def test_percentiles_by_buckets_and_keys_are_the_exact_nearest_rank(lengths: list[int], p: int) -> None:
    tally = Tally(NOV, "test")
    tenants = [length % 4 for length in lengths]
    tally.add(_columns(lengths, tenants))
    merged = Tally.merge([tally])
    by_model = pl.percentiles_by(merged.model_lengths[:1], merged.long, 0, (p,))
    ordered = sorted(lengths)
    assert by_model == [{p: ordered[-(-p * len(ordered) // 100) - 1]}]
    by_tenant = pl.percentiles_by(merged.tenant_lengths[:4], merged.long, 1, (p,))
    for t in range(4):
        mine = sorted(x for x, y in zip(lengths, tenants, strict=True) if y == t)
        assert by_tenant[t] == ({p: mine[-(-p * len(mine) // 100) - 1]} if mine else {})


def test_eight_bit_counters_carry_their_wraps() -> None:
    """The compiled loop's per-length counters are 8-bit; each wrap is carried, so counts stay exact."""
    lengths = [100] * 140_000 + [5000] * 66_000 + [7] * 3
    tally = Tally(NOV, "test")
    tally.add(_columns(lengths, [0] * len(lengths)))
    assert tally.model_lengths.dtype == np.uint8 and int(tally.model_wraps[0, 100]) == 140_000 // 256
    merged = Tally.merge([tally])
    assert int(merged.model_lengths[0, 100]) == 140_000
    assert int(merged.tenant_lengths[0, pl.DENSE + pl.bucket_of(5000)]) == 66_000
    assert pl.percentiles_by(merged.model_lengths[:1], merged.long, 0, (50, 95)) == [{50: 100, 95: 5000}]


def test_keys_and_counters_that_disagree_are_an_internal_error_not_a_wrong_answer() -> None:
    tally = Tally(NOV, "test")
    tally.add(_columns([5000] * 10, [0] * 10))
    wanted = {(0, pl.bucket_of(5000), 3)}
    assert tally.long.resolve(0, wanted, {(0, pl.bucket_of(5000)): 10}) == {(0, pl.bucket_of(5000), 3): 5000}
    with pytest.raises(RuntimeError, match="collected 10 long lengths where the counters say 4"):
        tally.long.resolve(0, wanted, {(0, pl.bucket_of(5000)): 4})
