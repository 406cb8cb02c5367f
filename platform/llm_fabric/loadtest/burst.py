"""A known burst of requests against a running engine, logged as the ledger's request records.

What a gateway does in production (send, then log one record per request), done by the fabric so
a contributor or a test can drive a local engine with traffic whose shape is known in advance:
prompt lengths follow a log-normal distribution fixed by its p50 and p95, output lengths are
exact (`ignore_eos`), tenants take turns, and every third request streams. The records are the
JSON Lines of llm_fabric.request_record (`docs/ledger.md`), with the token counts the engine itself reported.

Prompt lengths are the distribution's quantiles at i / n (i = 1..n-1, the last at 1 - 1/(4n)), shuffled:
the burst's nearest-rank p-th percentile is then the distribution's own whenever n * p / 100 is a
whole number (n a multiple of 20 for p50 and p95), where a few dozen random draws would scatter the
p95 widely. A prompt of L planned tokens is L ASCII characters: exactly L tokens for a
byte-level tokenizer without merges (the tiny test model), fewer for a real model's tokenizer; the
records always carry what the engine counted.
"""

from __future__ import annotations

import json
import math
import random
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from statistics import NormalDist
from typing import Any

from llm_fabric.atomicio import write_atomic
from llm_fabric.errors import FabricError, UsageError
from llm_fabric.request_record import OK, RequestRecord

_ALPHABET = "abcdefghijklmnopqrstuvwxyz      "  # no '<': the text never spells a special token


@dataclass(frozen=True)
class PlannedRequest:
    index: int
    prompt: str
    max_tokens: int
    tenant: str
    stream: bool

    @property
    def planned_prompt_tokens(self) -> int:
        return len(self.prompt)


def lognormal_lengths(count: int, p50: int, p95: int, *, minimum: int = 1, maximum: int | None = None) -> list[int]:
    """`count` lengths at the i / count quantiles (i = 1..count-1, then 1 - 1/(4 count)) of the log-normal
    with this p50 and p95, ascending, clipped to [minimum, maximum]."""
    if count < 1:
        raise UsageError("a burst needs at least one request")
    if not 0 < p50 < p95:
        raise UsageError(f"prompt p50 ({p50}) must be positive and below p95 ({p95})")
    normal = NormalDist()
    sigma = math.log(p95 / p50) / normal.inv_cdf(0.95)
    quantiles = [(i + 1) / count for i in range(count - 1)] + [1 - 0.25 / count]
    lengths = [round(p50 * math.exp(sigma * normal.inv_cdf(q))) for q in quantiles]
    return [min(max(length, minimum), maximum or length) for length in lengths]


def nearest_rank(values: Sequence[int], percent: int) -> int:
    """The smallest value with at least `percent` % of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(math.ceil(percent / 100 * len(ordered)), 1) - 1]


def plan_burst(
    count: int,
    *,
    p50: int,
    p95: int,
    tenants: Sequence[str],
    max_prompt_tokens: int,
    max_output_tokens: int = 32,
    seed: int = 0,
) -> list[PlannedRequest]:
    """The burst's requests in sending order (shuffled lengths, unique prompts, tenants in turn)."""
    if not tenants:
        raise UsageError("a burst needs at least one tenant")
    rng = random.Random(seed)
    lengths = lognormal_lengths(count, p50, p95, maximum=max_prompt_tokens)
    rng.shuffle(lengths)
    planned = []
    for index, length in enumerate(lengths):
        # a unique random text: no two prompts share a prefix-cache block, so the counts do not depend on order
        prompt = "".join(rng.choice(_ALPHABET) for _ in range(length))
        planned.append(
            PlannedRequest(
                index=index,
                prompt=prompt,
                max_tokens=1 + rng.randrange(max_output_tokens),
                tenant=tenants[index % len(tenants)],
                stream=index % 3 == 2,
            )
        )
    return planned


def stream_events(response: Any) -> Iterator[dict[str, Any]]:
    """The JSON events of a server-sent event stream, up to `data: [DONE]`."""
    for raw in response:
        line = raw.decode().strip()
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line[len("data: ") :])


def json_headers(api_key: str | None) -> dict[str, str]:
    """A JSON request's headers, with the tenant's gateway key as a bearer token when there is one."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def record_head(arrived: datetime, deployment: str, tenant: str) -> dict[str, Any]:
    """The columns every request record has, answered or refused: when it arrived, where, for whom."""
    return {"ts": arrived, "model": deployment, "tenant": tenant}


def answered(usage: dict[str, Any], request_id: str | None, ttft_ms: float | None) -> dict[str, Any]:
    """An answered request's columns: the tokens the engine counted (cached ones where it says), its id, TTFT."""
    columns: dict[str, Any] = {
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "status": OK,
        "request_id": request_id,
    }
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is not None:
        columns["cached_prompt_tokens"] = cached
    if ttft_ms is not None:
        columns["ttft_ms"] = ttft_ms
    return columns


def send_request(
    base_url: str,
    served_model: str,
    request: PlannedRequest,
    deployment: str,
    timeout: float = 300,
    api_key: str | None = None,
) -> RequestRecord:
    """Send one planned completion (with the tenant's gateway key, if any); return its request record."""
    body: dict[str, Any] = {
        "model": served_model,
        "prompt": request.prompt,
        "max_tokens": request.max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": request.stream,
    }
    if request.stream:
        body["stream_options"] = {"include_usage": True}
    http = urllib.request.Request(
        f"{base_url}/v1/completions", data=json.dumps(body).encode(), headers=json_headers(api_key)
    )
    arrived = datetime.now(UTC)
    start = time.monotonic()
    ttft_ms: float | None = None
    try:
        with urllib.request.urlopen(http, timeout=timeout) as response:
            if request.stream:
                usage, request_id = None, None
                for chunk in stream_events(response):
                    request_id = request_id or chunk.get("id")
                    if ttft_ms is None and chunk.get("choices"):
                        ttft_ms = round((time.monotonic() - start) * 1000, 1)
                    usage = chunk.get("usage") or usage
            else:
                answer = json.loads(response.read())
                usage, request_id = answer["usage"], answer["id"]
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise FabricError(f"the engine at {base_url} did not answer request {request.index}: {exc}") from exc
    if usage is None:
        raise FabricError(f"the engine at {base_url} sent no usage for streamed request {request.index}")
    return RequestRecord(**record_head(arrived, deployment, request.tenant), **answered(usage, request_id, ttft_ms))


def send_burst(
    base_url: str,
    served_model: str,
    requests: Sequence[PlannedRequest],
    *,
    deployment: str,
    concurrency: int = 4,
    api_key: str | None = None,
) -> list[RequestRecord]:
    """Send every request, `concurrency` at a time; the records in planned order."""
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(lambda r: send_request(base_url, served_model, r, deployment, api_key=api_key), requests))


def totals_of(records: Sequence[RequestRecord]) -> dict[str, int]:
    """What a load run sent: requests, tokens (cached ones too), prompt p50/p95 of the answered, refusals."""
    answered = [r for r in records if r.answered]
    prompts = [r.prompt_tokens or 0 for r in answered] or [0]
    return {
        "requests": len(records),
        "refused": len(records) - len(answered),
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in answered),
        "cached_prompt_tokens": sum(r.cached_prompt_tokens or 0 for r in answered),
        "completion_tokens": sum(r.completion_tokens or 0 for r in answered),
        "prompt_p50": nearest_rank(prompts, 50),
        "prompt_p95": nearest_rank(prompts, 95),
    }


def write_records(path: Path, records: Sequence[RequestRecord]) -> Path:
    """The records as JSON Lines (`fabric report --requests FILE`)."""
    write_atomic(path, "".join(r.json_line() for r in records))
    return path
