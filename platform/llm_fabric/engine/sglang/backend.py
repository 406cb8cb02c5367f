"""SGLang as an engine backend: its command, its memory semantics and DP attention over the shared
capacity model, the pinned wheel's parser as its check."""

from __future__ import annotations

from dataclasses import dataclass

from llm_fabric.engine.backend import ArgsCheck, CapacityQuery, CapacityReport
from llm_fabric.engine.command import EngineCommand, ServingArgs
from llm_fabric.engine.recipes import EngineName
from llm_fabric.engine.reported import Reported
from llm_fabric.engine.sglang import live
from llm_fabric.engine.sglang.capacity import sglang_estimate
from llm_fabric.engine.sglang.command import LAUNCHER, SGLANG_VERSION, sglang_command


@dataclass(frozen=True)
class SglangBackend:
    name: EngineName = "sglang"
    version: str | None = SGLANG_VERSION
    launcher: tuple[str, ...] = LAUNCHER
    model_positional: bool = False  # --model-path
    attention_dp: bool = True

    def command(self, serving: ServingArgs) -> EngineCommand:
        return sglang_command(serving)

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
