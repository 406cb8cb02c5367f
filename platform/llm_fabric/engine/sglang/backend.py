"""SGLang as an engine backend: its command, its memory semantics and DP attention over the shared
capacity model, the pinned wheel's parser as its check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_fabric.engine.backend import ArgsCheck, CapacityQuery, CapacityReport, EngineMetrics, ProbeTraits
from llm_fabric.engine.command import EngineCommand, ServingArgs
from llm_fabric.engine.recipes import EngineName, Recipe
from llm_fabric.engine.reported import Reported
from llm_fabric.engine.sglang import live
from llm_fabric.engine.sglang.capacity import sglang_estimate
from llm_fabric.engine.sglang.command import KV_CACHE_DTYPES, LAUNCHER, SGLANG_VERSION, sglang_command
from llm_fabric.engine.sglang.requests import loop_guard_fields

# its series with `--enable-metrics` (sglang/srt/metrics/collector.py)
METRICS = EngineMetrics(
    prompt_tokens="sglang:prompt_tokens_total",
    cached_prompt_tokens="sglang:cached_tokens_total",
    generation_tokens="sglang:generation_tokens_total",
    prefix_cache_hits=None,  # no lookup counters: hits are its cached tokens, lookups its prompt tokens
    prefix_cache_queries=None,
    requests_finished="sglang:num_requests_total",
    requests_aborted="sglang:num_aborted_requests_total",
    requests_running="sglang:num_running_reqs",
    requests_waiting="sglang:num_queue_reqs",
    kv_cache_usage="sglang:token_usage",
    preemptions="sglang:num_retracted_requests_total",
    ttft_bucket="sglang:time_to_first_token_seconds_bucket",
    itl_bucket="sglang:inter_token_latency_seconds_bucket",
    e2e_bucket="sglang:e2e_request_latency_seconds_bucket",
    prompt_tokens_bucket="sglang:prompt_tokens_histogram_bucket",
)
PROBE_TRAITS = ProbeTraits(python="python3", health_path="/health", running_metric=METRICS.requests_running)


@dataclass(frozen=True)
class SglangBackend:
    name: EngineName = "sglang"
    version: str = SGLANG_VERSION
    launcher: tuple[str, ...] = LAUNCHER
    model_positional: bool = False  # --model-path
    attention_dp: bool = True
    image_options: tuple[str, str] = ("sglang_image", "sglang_image_rocm")
    # SGLang's /health runs a one-token generation by default; the fabric's liveness probe generates, so
    # /health (startup, readiness: every 10 s) only says whether the server has started
    container_env: Mapping[str, str] = field(default_factory=lambda: {"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "0"})
    streamed_load_format: str | None = None  # SGLang's images are not known to carry the Run:ai streamer
    metrics: EngineMetrics = METRICS
    probe_traits: ProbeTraits = field(default_factory=lambda: PROBE_TRAITS)

    def command(self, serving: ServingArgs) -> EngineCommand:
        return sglang_command(serving)

    def parsers(self, recipe: Recipe) -> tuple[str | None, str | None]:
        """The recipe's `sglang:` section names them (SGLang's parser names differ from vLLM's)."""
        if recipe.sglang is None:
            return recipe.tool_call_parser, recipe.reasoning_parser
        return recipe.sglang.tool_call_parser, recipe.sglang.reasoning_parser

    def template_and_args(self, recipe: Recipe) -> tuple[str | None, list[str]]:
        """The `sglang:` section's (the command refuses a recipe without one)."""
        if recipe.sglang is None:
            return recipe.chat_template, list(recipe.extra_args)
        return recipe.sglang.chat_template, list(recipe.sglang.extra_args)

    def refusal(self, recipe: Recipe, kv_cache_dtype: str) -> tuple[str, str, str] | None:
        """SGLang needs the recipe's `sglang:` section and a KV-cache dtype SGLang has."""
        if recipe.sglang is None:
            msg = f"recipe `{recipe.id}` has no `sglang:` section: it is not known to run on SGLang"
            return "engine", msg, "use `engine: vllm`, or add the section (parsers, arguments) to the recipe"
        if kv_cache_dtype in recipe.kv_cache_dtypes and kv_cache_dtype not in KV_CACHE_DTYPES:
            usable = [k for k in recipe.kv_cache_dtypes if k in KV_CACHE_DTYPES]
            return (
                "kv_cache_dtype",
                f"SGLang has no KV-cache dtype `{kv_cache_dtype}`",
                f"use one of {', '.join(usable)}",
            )
        return None

    def priority_scheduling(self, args: Sequence[str]) -> bool:
        return "--enable-priority-scheduling" in args

    def low_values_first(self, args: Sequence[str]) -> bool:
        # SGLang's default serves higher values first; the fabric starts it with this flag
        return "--schedule-low-priority-values-first" in args

    def loop_guard_fields(self, *, enabled: bool) -> dict[str, Any]:
        return loop_guard_fields(enabled=enabled)

    def capacity(self, query: CapacityQuery) -> CapacityReport:
        """SGLang's figures; the traffic shape, layout choice and latency target are vLLM's model's only."""
        sg = sglang_estimate(
            query.recipe,
            query.gpu,
            query.count,
            tensor_parallel_size=query.tensor_parallel_size,
            attn_dp_size=query.attn_dp_size,
            quantization=query.quantization,
            kv_cache_dtype=query.kv_cache_dtype,
            context_tokens=query.context_tokens,
            users=1 if query.users == "max" else query.users,
            gpu_memory_utilization=query.gpu_memory_utilization,
            max_running_requests=query.max_num_seqs,
        )
        note = (
            f"SGLang: --mem-fraction-static {sg.mem_fraction_static:g} (the same KV pool), "
            f"--attn-dp-size {sg.attn_dp_size}: {sg.kv_copies} cop{'y' if sg.kv_copies == 1 else 'ies'} "
            "of each token's KV per replica; max-num-seqs is --max-running-requests"
        )
        extra = {k: v for k, v in sg.as_dict().items() if k not in sg.estimate.as_dict()}
        return CapacityReport(sg.estimate, extra, note)

    def check_args(self) -> ArgsCheck:
        from llm_fabric.engine.sglang.check import check_with_sglang, sglang_cases

        cases, refused = sglang_cases()
        return ArgsCheck(check_with_sglang(cases), refused, f"SGLang {SGLANG_VERSION}'s parser")

    def planned_config(self, args: list[str]) -> Reported:
        return live.planned_config(args)

    def reported_config(self, base_url: str, timeout: float) -> Reported:
        return live.reported_config(base_url, timeout)


SGLANG = SglangBackend()
