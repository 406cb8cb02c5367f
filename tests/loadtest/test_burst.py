"""The known burst (`llm_fabric.loadtest.burst`): its prompt-length distribution and its plan."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from statistics import NormalDist

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_fabric.errors import UsageError
from llm_fabric.loadtest.burst import lognormal_lengths, nearest_rank, plan_burst, write_records
from llm_fabric.request_record import OK, RequestRecord


def brute_force_rank(values: list[int], percent: int) -> int:
    """The definition itself: the smallest value with at least `percent` % of the values at or below it."""
    return min(v for v in values if sum(1 for w in values if w <= v) * 100 >= percent * len(values))


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=200), st.integers(1, 100))
def test_nearest_rank_is_the_definition(values: list[int], percent: int) -> None:
    assert nearest_rank(values, percent) == brute_force_rank(values, percent)


@pytest.mark.parametrize(("count", "p50", "p95"), [(20, 96, 480), (40, 128, 640), (100, 1100, 33958), (60, 5, 9)])
def test_a_burst_of_a_multiple_of_20_has_the_distribution_s_own_p50_and_p95(count: int, p50: int, p95: int) -> None:
    lengths = lognormal_lengths(count, p50, p95)
    assert lengths == sorted(lengths) and len(lengths) == count
    assert (nearest_rank(lengths, 50), nearest_rank(lengths, 95)) == (p50, p95)


def test_lengths_are_the_lognormal_quantiles_and_clipped() -> None:
    sigma = math.log(640 / 128) / NormalDist().inv_cdf(0.95)
    lengths = lognormal_lengths(40, 128, 640)
    assert lengths[9] == round(128 * math.exp(sigma * NormalDist().inv_cdf(10 / 40)))
    assert lengths[-1] == round(128 * math.exp(sigma * NormalDist().inv_cdf(1 - 0.25 / 40)))
    clipped = lognormal_lengths(40, 128, 640, minimum=30, maximum=900)
    assert min(clipped) == 30 and max(clipped) == 900 and lengths[-1] > 900
    assert lognormal_lengths(1, 10, 20) == [round(10 * math.exp(math.log(2) / 1.6448536269514722 * 0.6744897501960817))]


def test_bad_distributions_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="below p95"):
        lognormal_lengths(10, 500, 100)
    with pytest.raises(UsageError, match="at least one request"):
        lognormal_lengths(0, 1, 2)
    with pytest.raises(UsageError, match="tenant"):
        plan_burst(3, p50=10, p95=20, tenants=[], max_prompt_tokens=100)


def test_the_plan_is_deterministic_and_mixes_tenants_and_streaming(tmp_path: Path) -> None:
    plan = plan_burst(
        40, p50=128, p95=640, tenants=["a", "b", "c"], max_prompt_tokens=900, max_output_tokens=24, seed=8
    )
    assert plan == plan_burst(
        40, p50=128, p95=640, tenants=["a", "b", "c"], max_prompt_tokens=900, max_output_tokens=24, seed=8
    )
    assert sorted(p.planned_prompt_tokens for p in plan) == lognormal_lengths(40, 128, 640, maximum=900)
    assert [p.planned_prompt_tokens for p in plan] != sorted(p.planned_prompt_tokens for p in plan)  # shuffled
    assert [p.tenant for p in plan[:4]] == ["a", "b", "c", "a"]
    assert [p.stream for p in plan[:6]] == [False, False, True, False, False, True]
    assert all(1 <= p.max_tokens <= 24 for p in plan)
    # unique prompts (no shared prefix-cache block of 16 tokens) that never spell a special token
    assert len({p.prompt[:16] for p in plan}) == 40 and not any("<" in p.prompt for p in plan)
    record = RequestRecord(ts=datetime(2026, 11, 5, 10, tzinfo=UTC), model="m", tenant="a", prompt_tokens=3, status=OK)
    path = write_records(tmp_path / "r.jsonl", [record])
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {
            "ts": "2026-11-05T10:00:00.000000Z",
            "model": "m",
            "tenant": "a",
            "prompt_tokens": 3,
            "completion_tokens": 0,
            "status": "200",
        }
    ]
