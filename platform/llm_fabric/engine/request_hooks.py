"""What the gateway adds to a request for the engine behind a deployment: priority and the loop guard.

Small functions for `llm_fabric.gateway` (issue 15) so the engine-specific knowledge stays here.

Priority: the fabric's numbers are "lower first" (OWNER_PRIORITY < POOL_PRIORITY). vLLM's priority
scheduling serves lower values first; SGLang serves HIGHER values first by default, and the fabric
starts it with `--schedule-low-priority-values-first`, which flips it to vLLM's polarity. An SGLang
engine started without that flag (`low_values_first=False`) gets the numbers mirrored, so the
owner still goes first.

Loop guard: vLLM loads it for every request at start-up (`--logits-processors`); SGLang runs a custom
logit processor only when the request names one, so the gateway attaches `custom_logit_processor`
(the guard, serialized the way SGLang deserializes it) and `custom_params` to each request.
"""

from __future__ import annotations

import json
from typing import Any

from llm_fabric.engine.recipes import EngineName
from llm_fabric.engine.sglang.command import OWNER_PRIORITY, POOL_PRIORITY

SGLANG_GUARD_MODULE = "llm_fabric.engine.runtime.sglang_loop_guard"
SGLANG_GUARD_CLASS = "SglangLoopGuard"


def request_priority(engine: EngineName, *, owner: bool, low_values_first: bool = True) -> int:
    """The `priority` field for a request: the deployment owner's goes first on either engine."""
    value = OWNER_PRIORITY if owner else POOL_PRIORITY
    if engine == "sglang" and not low_values_first:
        return OWNER_PRIORITY + POOL_PRIORITY - value  # SGLang's default: higher values first
    return value


def serves_first(engine: EngineName, a: int, b: int, *, low_values_first: bool = True) -> bool:
    """Whether the engine schedules priority `a` before `b` (its polarity, for tests and the stand-in)."""
    if engine == "sglang" and not low_values_first:
        return a > b
    return a < b


def sglang_loop_guard_processor() -> str:
    """`custom_logit_processor` for SGLang: what `SglangLoopGuard.to_str()` returns, built without
    importing SGLang or torch (the gateway has neither).

    SGLang's `CustomLogitProcessor.to_str` is `json.dumps({"callable": dill.dumps(cls).hex()})`; dill
    pickles an importable class by reference, with protocol 4: the module and the class name. The
    engine-side test checks this string against the real `to_str` and loads it with SGLang's `from_str`.
    """
    return json.dumps({"callable": global_reference(SGLANG_GUARD_MODULE, SGLANG_GUARD_CLASS).hex()})


def global_reference(module: str, name: str) -> bytes:
    """Pickle protocol 4 of a reference to `module.name`, as pickle and dill write it for a class."""
    body = b"".join(b"\x8c" + bytes([len(part)]) + part + b"\x94" for part in (module.encode(), name.encode()))
    body += b"\x93\x94."  # STACK_GLOBAL, MEMOIZE, STOP
    return b"\x80\x04\x95" + len(body).to_bytes(8, "little") + body  # PROTO 4, FRAME


def loop_guard_fields(engine: EngineName, *, enabled: bool = True) -> dict[str, Any]:
    """Fields to merge into an OpenAI request body so the engine runs (or skips) the fabric's loop guard."""
    if engine == "vllm":
        return {} if enabled else {"vllm_xargs": {"loop_guard": False}}
    if not enabled:
        return {}
    return {"custom_logit_processor": sglang_loop_guard_processor(), "custom_params": {"loop_guard": True}}


def request_fields(
    engine: EngineName, *, owner: bool | None, loop_guard: bool = True, low_values_first: bool = True
) -> dict[str, Any]:
    """Everything the gateway adds for `engine`: priority (None: the engine runs without priority
    scheduling, so none is sent) and the loop guard."""
    fields = loop_guard_fields(engine, enabled=loop_guard)
    if owner is not None:
        fields["priority"] = request_priority(engine, owner=owner, low_values_first=low_values_first)
    return fields
