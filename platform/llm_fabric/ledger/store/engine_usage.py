"""Usage from the engines' own counters in Prometheus (vLLM's and SGLang's metric names).

Counter totals are exact, not `increase()` estimates: the raw samples of each series are read
day by day (range selectors, so no sample is skipped) and summed as reset-aware deltas, starting
from the last sample before the month. A series' first sample inside the month counts from there
(what it held before is earlier traffic), like Prometheus' own `increase`. Peaks (tokens/s,
concurrent requests, queue depth) are summed over replicas at each 30-second step first, then
maximised; the gauges' peaks (`vllm:num_requests_running`/`waiting`, SGLang's `num_running_reqs`/
`num_queue_reqs`) are also never below the busiest replica's maximum over all its raw samples, so a
burst between two steps still shows.
Prompt-length percentiles come from the histogram and are approximate.

SGLang's counters are read beside vLLM's: `sglang:prompt_tokens_total`, `sglang:cached_tokens_total`,
`sglang:generation_tokens_total`, and requests as `sglang:num_requests_total` minus
`sglang:num_aborted_requests_total` (SGLang counts aborted requests among the finished ones, vLLM's
`request_success` does not). SGLang has no prefix-cache query counter: its hit rate is cached over
prompt tokens. The model key of a series is its `deployment` label when the serving PodMonitor set one, else
vLLM's `model_name`; the owner is its `owner` label, else the plan's owner of its node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from llm_fabric.engine.backends import BACKENDS, series_selector
from llm_fabric.ledger.store.period import Month
from llm_fabric.ledger.store.promapi import PrometheusClient
from llm_fabric.ledger.store.usage import PERCENTILES, Tokens


def _counters() -> dict[str, str]:
    """Every engine's counter series (its backend's names) -> what the books count in it."""
    out: dict[str, str] = {}
    for engine in BACKENDS.values():
        m = engine.metrics
        kinds = (
            (m.prompt_tokens, "input"),
            (m.cached_prompt_tokens, "cached_input"),
            (m.generation_tokens, "output"),
            (m.requests_finished, "requests"),
            (m.prefix_cache_hits, "prefix_hits"),
            (m.prefix_cache_queries, "prefix_queries"),
            (m.requests_aborted, "aborted_requests"),
        )
        out |= {name: kind for name, kind in kinds if name is not None}
    return out


COUNTERS = _counters()
# peaks and prompt lengths: each engine's series of the same meaning
GENERATION = series_selector(lambda m: m.generation_tokens)
RUNNING = series_selector(lambda m: m.requests_running)
WAITING = series_selector(lambda m: m.requests_waiting)
PROMPT_BUCKETS = series_selector(lambda m: m.prompt_tokens_bucket)
_SELECTOR = '{__name__=~"' + "|".join(COUNTERS) + '"}'
BASELINE = timedelta(minutes=10)
STEP = "30s"


@dataclass
class EngineModel:
    tokens: Tokens = field(default_factory=Tokens)
    prefix_hits: int = 0
    prefix_queries: int = 0
    peak_output_tokens_per_s: float | None = None
    peak_concurrent_requests: int | None = None
    max_queue_depth: int | None = None
    prompt_percentiles: dict[int, int] = field(default_factory=dict)
    days_with_data: set[date] = field(default_factory=set)

    @property
    def cache_hit_rate(self) -> float | None:
        if self.prefix_queries:
            return round(self.prefix_hits / self.prefix_queries, 4)
        return self.tokens.cache_hit_rate


@dataclass
class EngineUsage:
    url: str
    by_model: dict[str, EngineModel]
    by_owner_model: dict[tuple[str, str], Tokens]
    daily: dict[tuple[str, date], Tokens]
    series_without_owner: list[str]
    covered_until: datetime


def _model_key(labels: Mapping[str, str]) -> str:
    return labels.get("deployment") or labels.get("model_name") or "unknown"


def _owner(labels: Mapping[str, str], owners: Mapping[tuple[str, str], str]) -> str | None:
    if labels.get("owner"):
        return labels["owner"]
    return owners.get((labels.get("deployment", ""), labels.get("replica", "")))


def _series_id(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _collect_samples(
    client: PrometheusClient, month: Month, until: datetime, tick: Callable[[str], None]
) -> dict[tuple[tuple[str, str], ...], dict[float, float]]:
    series: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
    for day in month.days_until(until):
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        end = min(start + timedelta(days=1), until)
        begin = start - BASELINE if day == month.first_day else start
        seconds = int((end - begin).total_seconds())
        tick(f"counters {day.isoformat()}")
        if seconds <= 0:
            continue
        for item in client.query(f"{_SELECTOR}[{seconds}s]", end):
            samples = series.setdefault(_series_id(item["metric"]), {})
            samples.update({float(t): float(v) for t, v in item.get("values", [])})
    return series


def _add_delta(
    usage: EngineUsage, labels: Mapping[str, str], kind: str, day: date, delta: int, owner: str | None
) -> None:
    model = usage.by_model.setdefault(_model_key(labels), EngineModel())
    if kind == "aborted_requests":  # SGLang: finished requests count them, the books do not
        kind, delta = "requests", -delta
    if kind in ("prefix_hits", "prefix_queries"):
        setattr(model, kind, getattr(model, kind) + delta)
        return
    targets = [model.tokens, usage.daily.setdefault((_model_key(labels), day), Tokens())]
    if owner is not None:
        targets.append(usage.by_owner_model.setdefault((owner, _model_key(labels)), Tokens()))
    for tokens in targets:
        setattr(tokens, kind, getattr(tokens, kind) + delta)


def _fold_counters(
    usage: EngineUsage,
    series: dict[tuple[tuple[str, str], ...], dict[float, float]],
    month: Month,
    owners: Mapping[tuple[str, str], str],
) -> None:
    start = month.start.timestamp()
    for key, samples in sorted(series.items()):
        labels = {k: v for k, v in key if k != "__name__"}
        kind = COUNTERS[dict(key)["__name__"]]
        owner = _owner(labels, owners)
        if owner is None and kind == "output":
            usage.series_without_owner.append(",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        model = usage.by_model.setdefault(_model_key(labels), EngineModel())
        prev: float | None = None
        for ts in sorted(samples):
            value = samples[ts]
            day = datetime.fromtimestamp(ts, UTC).date()
            if ts >= start:
                model.days_with_data.add(day)
            if prev is not None and ts >= start:
                delta = value - prev if value >= prev else value  # a drop is a restart: count from 0
                if delta:
                    _add_delta(usage, labels, kind, day, round(delta), owner)
            prev = value


def _max_over_month(
    client: PrometheusClient, query: str, month: Month, until: datetime, tick: Callable[[str], None]
) -> dict[str, float]:
    """Per model, the largest value `query` (its range `{seconds}`s, a day at a time) returns in the month."""
    best: dict[str, float] = {}
    for day in month.days_until(until):
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        end = min(start + timedelta(days=1), until)
        seconds = int((end - start).total_seconds())
        if seconds <= 0:
            continue
        tick(f"peaks {day.isoformat()}")
        # `replace`, not `format`: the selectors hold braces of their own
        for item in client.query(query.replace("{seconds}", str(seconds)), end):
            key = _model_key(item["metric"])
            best[key] = max(best.get(key, 0.0), float(item["value"][1]))
    return best


def _gauge_peaks(
    client: PrometheusClient, gauge: str, month: Month, until: datetime, tick: Callable[[str], None]
) -> dict[str, float]:
    """Per model, a gauge's peak: its replicas summed on the STEP grid, and never less than the busiest
    replica's own maximum over every raw sample. The grid alone misses a burst shorter than a step
    (the live demo's 20-request burst read 0); the raw maximum is exact for a single replica."""
    by = "sum by (deployment, model_name)"
    summed = _max_over_month(client, f"max_over_time(({by} ({gauge}))[{{seconds}}s:{STEP}])", month, until, tick)
    single = _max_over_month(
        client, f"max by (deployment, model_name) (max_over_time({gauge}[{{seconds}}s]))", month, until, tick
    )
    return {key: max(summed.get(key, 0.0), single.get(key, 0.0)) for key in sorted(summed.keys() | single.keys())}


def _percentiles(client: PrometheusClient, month: Month, until: datetime) -> dict[str, dict[int, int]]:
    seconds = int((until - month.start).total_seconds())
    out: dict[str, dict[int, int]] = {}
    if seconds <= 0:
        return out
    for p in PERCENTILES:
        expr = (
            f"histogram_quantile({p / 100}, sum by (le, deployment, model_name) "
            f"(increase({PROMPT_BUCKETS}[{seconds}s])))"
        )
        for item in client.query(expr, until):
            value = float(item["value"][1])
            if value == value and value != float("inf"):  # NaN when the model had no requests
                out.setdefault(_model_key(item["metric"]), {})[p] = round(value)
    return out


def engine_usage(
    client: PrometheusClient,
    month: Month,
    *,
    now: datetime,
    owners: Mapping[tuple[str, str], str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> EngineUsage:
    """The month's usage as the engines counted it; `owners` maps (deployment, replica) -> owner."""
    tick = progress or (lambda _msg: None)
    until = min(month.end, now)
    usage = EngineUsage(client.url, {}, {}, {}, [], until)
    _fold_counters(usage, _collect_samples(client, month, until, tick), month, owners or {})
    by = "sum by (deployment, model_name)"
    peaks: dict[str, Any] = {
        "peak_output_tokens_per_s": _max_over_month(
            client, f"max_over_time(({by} (rate({GENERATION}[1m])))[{{seconds}}s:{STEP}])", month, until, tick
        ),
        "peak_concurrent_requests": _gauge_peaks(client, RUNNING, month, until, tick),
        "max_queue_depth": _gauge_peaks(client, WAITING, month, until, tick),
    }
    for attr, values in peaks.items():
        for key, value in values.items():
            model = usage.by_model.setdefault(key, EngineModel())
            setattr(model, attr, round(value, 1) if attr == "peak_output_tokens_per_s" else round(value))
    for key, pct in _percentiles(client, month, until).items():
        usage.by_model.setdefault(key, EngineModel()).prompt_percentiles = pct
    return usage
