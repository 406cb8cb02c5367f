"""What the gateway adds to a request for the engine behind a deployment: priority and the loop guard.

Small functions for `llm_fabric.gateway` (issue 15); what differs per engine is its backend's
(`priority_scheduling`, `low_values_first`, `loop_guard_fields`).

Priority: the fabric's numbers are "lower first" (OWNER_PRIORITY < POOL_PRIORITY). vLLM's priority
scheduling serves lower values first; SGLang serves HIGHER values first by default, and the fabric
starts it with `--schedule-low-priority-values-first`, which flips it to vLLM's polarity. An engine
started the other way round (`low_values_first=False`) gets the numbers mirrored, so the owner still
goes first.
"""

from __future__ import annotations

from typing import Any

from llm_fabric.engine.backends import backend
from llm_fabric.engine.command import OWNER_PRIORITY, POOL_PRIORITY
from llm_fabric.engine.recipes import EngineName


def request_priority(*, owner: bool, low_values_first: bool = True) -> int:
    """The `priority` field for a request: the deployment owner's goes first on either polarity."""
    value = OWNER_PRIORITY if owner else POOL_PRIORITY
    if not low_values_first:
        return OWNER_PRIORITY + POOL_PRIORITY - value  # an engine serving higher values first
    return value


def serves_first(a: int, b: int, *, low_values_first: bool = True) -> bool:
    """Whether an engine of this polarity schedules priority `a` before `b` (for tests and the stand-in)."""
    return a > b if not low_values_first else a < b


def loop_guard_fields(engine: EngineName, *, enabled: bool = True) -> dict[str, Any]:
    """Fields to merge into an OpenAI request body so the engine runs (or skips) the fabric's loop guard."""
    return backend(engine).loop_guard_fields(enabled=enabled)


def request_fields(
    engine: EngineName, *, owner: bool | None, loop_guard: bool = True, low_values_first: bool = True
) -> dict[str, Any]:
    """Everything the gateway adds for `engine`: priority (None: the engine runs without priority
    scheduling, so none is sent) and the loop guard."""
    fields = loop_guard_fields(engine, enabled=loop_guard)
    if owner is not None:
        fields["priority"] = request_priority(owner=owner, low_values_first=low_values_first)
    return fields
