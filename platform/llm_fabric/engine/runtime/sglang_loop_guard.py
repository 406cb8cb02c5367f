"""The loop guard for SGLang: a custom logit processor that ends a looping generation with EOS.

SGLang has no server-wide logits-processor plugin like vLLM's `--logits-processors`; it runs a
processor that a request names (`custom_logit_processor`, the string `SglangLoopGuard.to_str()`,
with `custom_params`) when the server was started with `--enable-custom-logit-processor`. The
gateway attaches it to every request for an SGLang deployment (`llm_fabric.engine.request_hooks`).
The string is SGLang's own serialization (dill) of this class by reference: the scheduler imports
this module, so the SGLang image must have llm-fabric installed, as the vLLM image does.

Each call gets the logits of the rows that use the processor and, per row, its `custom_params`
plus `__req__`, a weak proxy of SGLang's request (`output_ids`, `eos_token_ids`). A request's
`LoopDetector` is kept on the request itself, so it lives and dies with it: no table to clean.
Once the output loops, every logit but EOS is set to -inf, SGLang finishes the request normally
and frees its KV cache. Settings: the scheduler's `FABRIC_LOOP_GUARD_*` environment (per recipe,
from `engine/plugins/loop_guard.yaml`), then the request's `loop_guard*` custom params.
Guarded stops are counted in `fabric_loop_guard_stops_total` (prometheus_client, which SGLang ships).
"""

from __future__ import annotations

import logging
from typing import Any

import torch  # type: ignore[import-not-found]  # only where SGLang runs
from prometheus_client import Counter
from sglang.srt.sampling.custom_logit_processor import CustomLogitProcessor

from llm_fabric.engine.runtime.loop_detect import LoopDetector, LoopGuardSettings
from llm_fabric.engine.runtime.loop_guard_params import period_bucket, request_settings
from llm_fabric.names import LOOP_GUARD_STOPS_METRIC

logger = logging.getLogger("sglang.fabric.loop_guard")

STOPS = Counter(
    LOOP_GUARD_STOPS_METRIC,
    "Generations ended by the fabric's loop guard (a repeated token cycle).",
    ["period_bucket"],
)
STATE_ATTRIBUTE = "_fabric_loop_guard"  # set on SGLang's Req through the weak proxy it hands us


class _Tracked:
    __slots__ = ("detector", "eos", "fed", "stopped")

    def __init__(self, detector: LoopDetector | None, eos: int | None) -> None:
        self.detector, self.eos, self.fed, self.stopped = detector, eos, 0, False


def _eos(req: Any, params: dict[str, Any]) -> int | None:
    if isinstance(params.get("eos_token_id"), int):
        return int(params["eos_token_id"])
    ids = getattr(req, "eos_token_ids", None)
    return min(ids) if ids else None


def _tracked(req: Any, params: dict[str, Any], base: LoopGuardSettings) -> _Tracked:
    state = getattr(req, STATE_ATTRIBUTE, None)
    if state is None:
        settings = request_settings(base, params, source="custom_params")
        eos = _eos(req, params)
        state = _Tracked(LoopDetector(settings) if settings is not None and eos is not None else None, eos)
        setattr(req, STATE_ATTRIBUTE, state)
    return state


class SglangLoopGuard(CustomLogitProcessor):  # type: ignore[misc]
    """Forces EOS for requests whose output has fallen into a repeated token cycle."""

    def __call__(
        self, logits: torch.Tensor, custom_param_list: list[dict[str, Any] | None] | None = None
    ) -> torch.Tensor:
        if not custom_param_list:
            return logits
        base = _base_settings()
        for row, params in enumerate(custom_param_list):
            req = params.get("__req__") if params else None
            if req is None:
                continue
            tracked = _tracked(req, params, base)  # type: ignore[arg-type]
            if tracked.detector is None:
                continue
            output = req.output_ids
            if tracked.fed < len(output):
                feed = tracked.detector.feed
                for token in output[tracked.fed :]:
                    feed(int(token))
                tracked.fed = len(output)
            if tracked.detector.looping:
                if not tracked.stopped:
                    tracked.stopped = True
                    period = tracked.detector.period or 0
                    STOPS.labels(period_bucket=period_bucket(period)).inc()
                    logger.info("loop guard: ending a generation that repeats a %d-token cycle", period)
                logits[row].fill_(float("-inf"))
                logits[row, tracked.eos] = 0.0
        return logits


_BASE: list[LoopGuardSettings] = []


def _base_settings() -> LoopGuardSettings:
    """The scheduler's settings, read from its environment once."""
    if not _BASE:
        _BASE.append(LoopGuardSettings.from_env())
        logger.info("loop guard loaded: %s", _BASE[0])
    return _BASE[0]
