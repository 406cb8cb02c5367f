"""vLLM as an engine backend: its command, the shared capacity model as it is, its parser's check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_fabric.engine.backend import ArgsCheck, CapacityQuery, CapacityReport, EngineMetrics, ProbeTraits
from llm_fabric.engine.capacity.model import estimate
from llm_fabric.engine.command import EngineCommand, ServingArgs
from llm_fabric.engine.recipes import EngineName, Recipe
from llm_fabric.engine.reported import Reported
from llm_fabric.engine.vllm import live
from llm_fabric.engine.vllm.command import LAUNCHER, VLLM_VERSION, engine_command

# vLLM's compile cache (torch.compile graphs, keyed by a hash of the configuration) on the node's model
# cache, which the serving pods mount at /models: a restarted replica reuses it instead of recompiling.
# vLLM leaves VLLM_CACHE_ROOT out of that hash (envs.py), so the path itself invalidates nothing.
COMPILE_CACHE = "/models/compile-cache/vllm"
# the v1 engine's series (vllm/v1/metrics/loggers.py)
METRICS = EngineMetrics(
    prompt_tokens="vllm:prompt_tokens_total",
    cached_prompt_tokens="vllm:prompt_tokens_cached_total",
    generation_tokens="vllm:generation_tokens_total",
    prefix_cache_hits="vllm:prefix_cache_hits_total",
    prefix_cache_queries="vllm:prefix_cache_queries_total",
    requests_finished="vllm:request_success_total",
    requests_aborted=None,
    requests_running="vllm:num_requests_running",
    requests_waiting="vllm:num_requests_waiting",
    kv_cache_usage="vllm:kv_cache_usage_perc",
    preemptions="vllm:num_preemptions_total",
    ttft_bucket="vllm:time_to_first_token_seconds_bucket",
    itl_bucket="vllm:inter_token_latency_seconds_bucket",
    e2e_bucket="vllm:e2e_request_latency_seconds_bucket",
    prompt_tokens_bucket="vllm:request_prompt_tokens_bucket",
)
PROBE_TRAITS = ProbeTraits(python="python3", health_path="/health", running_metric=METRICS.requests_running)


@dataclass(frozen=True)
class VllmBackend:
    name: EngineName = "vllm"
    version: str = VLLM_VERSION  # the check runs the installed vLLM, which the `engine-cpu` extra pins to it
    launcher: tuple[str, ...] = LAUNCHER
    model_positional: bool = True
    attention_dp: bool = False  # vLLM's DP attention is a layout (--parallelism dp-ep)
    image_options: tuple[str, str] = ("engine_image", "engine_image_rocm")
    container_env: Mapping[str, str] = field(
        default_factory=lambda: {"VLLM_NO_USAGE_STATS": "1", "VLLM_CACHE_ROOT": COMPILE_CACHE}
    )
    # the Run:ai streamer: the official image ships runai-model-streamer, engine/images/Dockerfile installs
    # vLLM's `runai` extra for images that do not (serving.weights.loader_args)
    streamed_load_format: str | None = "runai_streamer"
    metrics: EngineMetrics = METRICS
    probe_traits: ProbeTraits = field(default_factory=lambda: PROBE_TRAITS)

    def command(self, serving: ServingArgs) -> EngineCommand:
        return engine_command(serving)

    def parsers(self, recipe: Recipe) -> tuple[str | None, str | None]:
        return recipe.tool_call_parser, recipe.reasoning_parser

    def template_and_args(self, recipe: Recipe) -> tuple[str | None, list[str]]:
        return recipe.chat_template, list(recipe.extra_args)

    def refusal(self, recipe: Recipe, kv_cache_dtype: str) -> tuple[str, str, str] | None:
        return None  # the recipe's own checks are vLLM's

    def priority_scheduling(self, args: Sequence[str]) -> bool:
        return "--scheduling-policy" in args and args[list(args).index("--scheduling-policy") + 1] == "priority"

    def low_values_first(self, args: Sequence[str]) -> bool:
        return True

    def loop_guard_fields(self, *, enabled: bool) -> dict[str, Any]:
        # loaded for every request at start-up (--logits-processors): only switching it off is sent
        return {} if enabled else {"vllm_xargs": {"loop_guard": False}}

    def capacity(self, query: CapacityQuery) -> CapacityReport:
        return CapacityReport(
            estimate(
                query.recipe,
                query.gpu,
                query.count,
                tensor_parallel_size=query.tensor_parallel_size,
                quantization=query.quantization,
                kv_cache_dtype=query.kv_cache_dtype,
                context_tokens=query.context_tokens,
                users=query.users,
                gpu_memory_utilization=query.gpu_memory_utilization,
                max_num_seqs=query.max_num_seqs,
                input_tokens=query.input_tokens,
                output_tokens=query.output_tokens,
                parallelism=query.parallelism,
                gpus_per_node=query.gpus_per_node,
                latency_target=query.latency_target,
            )
        )

    def check_args(self) -> ArgsCheck:
        from llm_fabric.engine.vllm.check import check_with_vllm, recipe_cases

        cases, refused = recipe_cases()
        return ArgsCheck(check_with_vllm(cases), refused, "vLLM's parser")

    def planned_config(self, args: list[str]) -> Reported:
        return live.planned_config(args)

    def reported_config(self, base_url: str, timeout: float) -> Reported:
        return live.reported_config(base_url, timeout)


VLLM = VllmBackend()
