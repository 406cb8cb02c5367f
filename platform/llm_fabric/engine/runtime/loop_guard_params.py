"""Per-request loop-guard switches, shared by the vLLM plugin and the SGLang logit processor.

A request may turn the guard off or tune it: `{"loop_guard": false}` or `{"loop_guard_min_repeats": 8}`,
in vLLM's `vllm_xargs` or SGLang's `custom_params`. No dependencies: it runs inside either engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from llm_fabric.engine.runtime.loop_detect import LoopGuardSettings

SETTING_KEYS = {
    "loop_guard_max_period": "max_period",
    "loop_guard_min_repeats": "min_repeats",
    "loop_guard_min_span": "min_span",
}

_SWITCH: dict[object, bool] = {
    True: True,
    False: False,
    "true": True,
    "false": False,
    "on": True,
    "off": False,
    "1": True,
    "0": False,
}


def period_bucket(period: int) -> str:
    """The `period_bucket` label of `fabric_loop_guard_stops_total`."""
    return "1" if period == 1 else "2-8" if period <= 8 else "9-32" if period <= 32 else "33+"


def request_settings(
    base: LoopGuardSettings, params: Mapping[str, Any] | None, source: str = "vllm_xargs"
) -> LoopGuardSettings | None:
    """The settings for one request, or None when the guard is off for it; `source` names the field in errors."""
    extra = params or {}
    raw = extra.get("loop_guard", base.enabled)
    # the OpenAI front end carries vllm_xargs as str/int/float: JSON true may arrive as 1 or "true"
    enabled = _SWITCH.get(raw.lower() if isinstance(raw, str) else raw)
    if enabled is None:
        raise ValueError(f"{source}.loop_guard must be true or false, got {raw!r}")
    if not enabled:
        return None
    overrides = {field: extra[key] for key, field in SETTING_KEYS.items() if key in extra}
    for key, value in overrides.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{source}.loop_guard_{key} must be an integer")
    return dataclasses.replace(base, **overrides) if overrides else base
