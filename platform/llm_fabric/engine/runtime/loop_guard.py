"""The loop guard: a vLLM (v1) logits-processor plugin that ends a looping generation with EOS.

Seed 000: "a looping model will happily consume its entire output budget repeating the same eight
tokens", holding its KV cache all the while. Every decode step, the plugin feeds each request's
new tokens to a `LoopDetector`; once a request loops, its next token is forced to EOS, so vLLM
finishes it normally (finish_reason "stop") and frees its KV blocks.

Load it with `--logits-processors llm_fabric.engine.runtime.loop_guard:LoopGuardLogitsProcessor`
(the fabric's engine args do). It runs inside vLLM's engine-core process, so it imports vLLM and
torch and only works where vLLM is installed. Settings come from the engine environment
(`FABRIC_LOOP_GUARD_*`, per recipe from `engine/plugins/loop_guard.yaml`); a request may turn the
guard off or tune it with `vllm_xargs`: `{"loop_guard": false}` or `{"loop_guard_min_repeats": 8}`.
Guarded stops are counted in the Prometheus counter `fabric_loop_guard_stops_total`, exported on
vLLM's own /metrics (vLLM runs prometheus_client in multiprocess mode).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import torch  # type: ignore[import-not-found]  # only in the engine venv
from prometheus_client import Counter
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

from llm_fabric.engine.runtime.loop_detect import LoopDetector, LoopGuardSettings
from llm_fabric.engine.runtime.loop_guard_params import period_bucket, request_settings
from llm_fabric.names import LOOP_GUARD_STOPS_METRIC

logger = logging.getLogger("vllm.fabric.loop_guard")  # under vLLM's logger: its handlers and format

STOPS = Counter(
    LOOP_GUARD_STOPS_METRIC,
    "Generations ended by the fabric's loop guard (a repeated token cycle).",
    ["period_bucket"],
)


@dataclasses.dataclass
class _Tracked:
    detector: LoopDetector
    output: Sequence[int]  # vLLM's live list of the request's output tokens
    eos: int
    fed: int = 0
    stopped: bool = False


class LoopGuardLogitsProcessor(LogitsProcessor):  # type: ignore[misc]
    """Forces EOS for requests whose output has fallen into a repeated token cycle."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        request_settings(LoopGuardSettings(), sampling_params.extra_args)

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.settings = LoopGuardSettings.from_env()
        self.requests: dict[int, _Tracked] = {}
        self.looping: list[int] = []  # batch rows to force to EOS in the next `apply`
        logger.info("loop guard loaded: %s", self.settings)

    def is_argmax_invariant(self) -> bool:
        return False  # forcing EOS changes the greedy choice

    def _add(self, params: SamplingParams, _prompt: list[int] | None, output: list[int]) -> _Tracked | None:
        settings = request_settings(self.settings, params.extra_args)
        eos = params.eos_token_id
        if settings is None or eos is None or params.ignore_eos:
            return None  # an ignore_eos request cannot be ended by EOS: leave it to max_tokens
        return _Tracked(LoopDetector(settings), output, eos)

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        process_dict_updates(self.requests, batch_update, self._add)
        looping: list[int] = []
        for row, tracked in self.requests.items():
            output = tracked.output
            if tracked.fed < len(output):
                feed = tracked.detector.feed
                for token in output[tracked.fed :]:
                    feed(token)
                tracked.fed = len(output)
            if tracked.detector.looping:
                looping.append(row)
                if not tracked.stopped:
                    tracked.stopped = True
                    period = tracked.detector.period or 0
                    STOPS.labels(period_bucket=period_bucket(period)).inc()
                    logger.info("loop guard: ending a generation that repeats a %d-token cycle", period)
        self.looping = looping

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.looping:
            return logits
        for row in self.looping:
            eos = self.requests[row].eos
            logits[row].fill_(float("-inf"))
            logits[row, eos] = 0.0
        return logits
