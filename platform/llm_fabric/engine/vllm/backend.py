"""vLLM as an engine backend: its command, the shared capacity model as it is, its parser's check."""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.engine.backend import ArgsCheck, CapacityQuery, CapacityReport
from llm_fabric.engine.capacity.model import estimate
from llm_fabric.engine.command import EngineCommand, ServingArgs
from llm_fabric.engine.recipes import EngineName
from llm_fabric.engine.reported import Reported
from llm_fabric.engine.vllm import live
from llm_fabric.engine.vllm.command import LAUNCHER, engine_command


@dataclass(frozen=True)
class VllmBackend:
    name: EngineName = "vllm"
    version: str | None = None  # the installed vLLM's (the engine venv's)
    launcher: tuple[str, ...] = LAUNCHER
    model_positional: bool = True
    attention_dp: bool = False  # vLLM's DP attention is a layout (--parallelism dp-ep)

    def command(self, serving: ServingArgs) -> EngineCommand:
        return engine_command(serving)

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
