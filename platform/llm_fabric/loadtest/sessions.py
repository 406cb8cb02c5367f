"""Agentic sessions against a running engine or the tenant gateway, logged as the ledger's request records.

The shape of the seeds' agentic traffic (seed 000: "each turn resends the entire conversation
history; includes the full inventory of tool definitions"; seed 002: a stable prefix, the tool
output appended, the whole conversation sent again):

- every session starts with the same system message, a fixed preamble and the tool list, byte for
  byte, so an engine's prefix cache (and a cache-aware router) can reuse it across sessions; the
  tool list is rendered into the system message, as chat templates do, so no tool parser is needed;
- turn 1 is that system message and the session's task; every later turn re-sends the conversation
  so far, the assistant's actual reply (so the engine sees the prefix it cached) and a tool result;
- prompt lengths (characters of the messages' contents, the burst's `planned` tokens) are the
  log-normal quantiles of `burst.lognormal_lengths` for sessions x turns requests, dealt out so that
  each session's turns grow: session s, turn t gets the (t x sessions + s)-th shortest. The burst as a
  whole has the distribution's p50 and p95 (the plan's, per deployment) while every session grows;
- each turn asks for prompt / `ratio` output tokens (`ignore_eos`): input:output about 17:1 (seed
  000: GLM 5.1 at 17.3x, Kimi K2.6 at 18.5x), more once the prefix cache has done its work.

Every turn streams (agent harnesses do) with `include_usage`, so its record has `ttft_ms` and the
cached prompt tokens the engine reported (`prompt_tokens_details.cached_tokens`; vLLM needs
`--enable-prompt-tokens-details`). A refused turn (the gateway's 401 or 429) is a record with that
status and no tokens, and ends its session: without a reply there is no next turn.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from llm_fabric.errors import FabricError, UsageError
from llm_fabric.loadtest.burst import answered, json_headers, lognormal_lengths, record_head, stream_events
from llm_fabric.request_record import RequestRecord

INPUT_OUTPUT_RATIO = 17.0
MIN_TASK_CHARS = 32  # the session's own question: what makes its conversation its own after the shared prefix
MIN_TOOL_CHARS = 32  # holds the longest head, "Tool run_tests result:\n"
_ALPHABET = "abcdefghijklmnopqrstuvwxyz      "
# (name, argument, description): rendered one per line, as a chat template renders a request's `tools`
TOOLS = (
    ("read_file", "path", "read a file"),
    ("edit_file", "patch", "apply a patch"),
    ("run_tests", "selection", "run tests, return output"),
    ("search", "pattern", "grep the repository"),
)
_PREAMBLE = "You are a coding agent in a repository. Call one tool per turn. Tools:\n"


def shared_prefix(chars: int) -> str:
    """The system message every session opens with: the preamble, the tool list, padding to `chars`."""
    head = _PREAMBLE + "".join(f"- {name}({arg}): {description}\n" for name, arg, description in TOOLS)
    if chars < len(head):
        raise UsageError(
            f"the shared prefix needs at least {len(head)} characters for the preamble and tool list, not {chars}",
            hint=f"give --prefix-tokens {len(head)} or more",
        )
    rng = random.Random("shared-prefix")  # the same text in every run and every session
    return head + "".join(rng.choice(_ALPHABET) for _ in range(chars - len(head)))


@dataclass(frozen=True)
class PlannedTurn:
    prompt_chars: int = 0  # the conversation's content characters this turn is planned to send
    max_tokens: int = 1


@dataclass(frozen=True)
class PlannedSession:
    index: int
    tenant: str
    system: str
    task: str
    turns: tuple[PlannedTurn, ...]
    seed: int

    def tool_result(self, turn: int, chars: int) -> str:
        """The tool output appended before `turn` (1-based, from 2): `chars` long, the same in every run."""
        rng = random.Random(f"{self.seed}/{self.index}/{turn}")
        head = f"Tool {TOOLS[(turn - 2) % len(TOOLS)][0]} result:\n"
        return head + "".join(rng.choice(_ALPHABET) for _ in range(max(chars - len(head), 0)))


def plan_sessions(
    sessions: int,
    turns: int,
    *,
    p50: int,
    p95: int,
    tenants: Sequence[str],
    prefix_chars: int,
    max_prompt_tokens: int,
    max_output_tokens: int,
    ratio: float = INPUT_OUTPUT_RATIO,
    seed: int = 0,
) -> list[PlannedSession]:
    """The sessions, each with its turns' planned prompt lengths (growing) and output caps."""
    if sessions < 1 or turns < 1:
        raise UsageError("agentic load needs at least one session of at least one turn")
    if not tenants:
        raise UsageError("agentic load needs at least one tenant")
    if prefix_chars + MIN_TASK_CHARS >= p50:
        raise UsageError(
            f"the shared prefix ({prefix_chars}) and a task ({MIN_TASK_CHARS}) do not fit below the p50 prompt ({p50})",
            hint="give a smaller --prefix-tokens or a larger --p50",
        )
    system = shared_prefix(prefix_chars)
    lengths = lognormal_lengths(
        sessions * turns, p50, p95, minimum=prefix_chars + MIN_TASK_CHARS, maximum=max_prompt_tokens
    )
    rng = random.Random(seed)
    planned = []
    for index in range(sessions):
        own = [lengths[turn * sessions + index] for turn in range(turns)]
        task_chars = own[0] - prefix_chars
        task = f"Task {index}: " + "".join(rng.choice(_ALPHABET) for _ in range(task_chars - len(f"Task {index}: ")))
        planned.append(
            PlannedSession(
                index=index,
                tenant=tenants[index % len(tenants)],
                system=system,
                task=task,
                turns=tuple(
                    PlannedTurn(length, max(1, min(max_output_tokens, round(length / ratio)))) for length in own
                ),
                seed=seed,
            )
        )
    return planned


def content_chars(messages: Sequence[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)


@dataclass(frozen=True)
class Target:
    """Where the turns go: an engine or the gateway (`api_key`), the model name it serves, the records' name."""

    base_url: str
    served_model: str
    deployment: str
    api_key: str | None = None
    timeout: float = 300


def _post_chat(target: Target, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str, str | None, float | None]:
    """Stream one chat completion: (usage, reply text, response id, TTFT ms); HTTPError passes through."""
    http = urllib.request.Request(
        f"{target.base_url}/v1/chat/completions", data=json.dumps(body).encode(), headers=json_headers(target.api_key)
    )
    start = time.monotonic()
    usage, response_id, ttft_ms, parts = None, None, None, []
    with urllib.request.urlopen(http, timeout=target.timeout) as response:
        for chunk in stream_events(response):
            response_id = response_id or chunk.get("id")
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if ttft_ms is None and (
                    delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
                ):
                    ttft_ms = round((time.monotonic() - start) * 1000, 1)
                parts.append(delta.get("content") or "")
            usage = chunk.get("usage") or usage
    return usage, "".join(parts), response_id, ttft_ms


def run_session(target: Target, session: PlannedSession) -> list[RequestRecord]:
    """Send the session's turns in order, each re-sending the conversation so far; one record per turn sent."""
    messages = [{"role": "system", "content": session.system}, {"role": "user", "content": session.task}]
    records: list[RequestRecord] = []
    for number, turn in enumerate(session.turns, start=1):
        if number > 1:
            missing = turn.prompt_chars - content_chars(messages)
            messages.append({"role": "user", "content": session.tool_result(number, max(missing, MIN_TOOL_CHARS))})
        body = {
            "model": target.served_model,
            "messages": messages,
            "max_tokens": turn.max_tokens,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        record = record_head(datetime.now(UTC), target.deployment, session.tenant)
        try:
            usage, reply, response_id, ttft_ms = _post_chat(target, body)
        except urllib.error.HTTPError as exc:  # refused (401, 429, ...): the record says so, the session ends
            records.append(RequestRecord(**record, prompt_tokens=None, completion_tokens=0, status=str(exc.code)))
            return records
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise FabricError(
                f"{target.base_url} did not answer turn {number} of session {session.index}: {exc}"
            ) from exc
        if usage is None:
            raise FabricError(f"{target.base_url} sent no usage for turn {number} of session {session.index}")
        records.append(RequestRecord(**record, **answered(usage, response_id, ttft_ms)))
        messages.append({"role": "assistant", "content": reply})
    return records


def send_sessions(
    target: Target, sessions: Sequence[PlannedSession], *, concurrency: int = 4
) -> list[list[RequestRecord]]:
    """Run the sessions, `concurrency` at a time (each one's turns in order); their records, session by session."""
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(lambda s: run_session(target, s), sessions))
