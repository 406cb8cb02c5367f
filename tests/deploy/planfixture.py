"""A plan of the reference site in the seed-000 layout, built from the Plan contract's fields.

Used where the resource builders are under test and the placement is not: the solver is tested by
its own suite, and `test_serving_from_build_plan` covers the real `plan_site` output.
"""

from __future__ import annotations

from llm_fabric.engine.fingerprint import ConfigFingerprint, FingerprintFields, fingerprint
from llm_fabric.plan.document import Plan, ReplicaPlacement, SolverReport

CONTEXT = 131072


def seed_fingerprint(model_id: str, quant: str) -> ConfigFingerprint:
    """A fingerprint of the fields the seed layout says (the resource builders only carry it along)."""
    fields = FingerprintFields(
        engine="vllm",
        engine_version=None,
        checkpoint=model_id,
        revision=None,
        quantization=quant,
        kv_cache_dtype="auto",
        max_model_len=CONTEXT,
        tool_call_parser=None,
        reasoning_parser=None,
        chat_template=None,
        trust_remote_code=False,
        generation={"max_tokens": 32768},
        loop_guard=True,
        extra_args=[],
    )
    return fingerprint(fields)


# deployment -> (node, owner, gpu model, GPU indices, quantization, model id, data classes, dedicated_for)
LAYOUT: dict[str, tuple[str, str, str, list[int], str, str, list[str], str | None]] = {
    "deepseek-v3-2": (
        "dgx-b200-01",
        "cerit-sc",
        "b200",
        list(range(8)),
        "fp8",
        "deepseek-ai/DeepSeek-V3.2",
        ["public", "internal", "sensitive"],
        None,
    ),
    "kimi-k2-6": (
        "dgx-b300-01",
        "cerit-sc",
        "b300",
        [0, 1, 2, 3],
        "int4",
        "moonshotai/Kimi-K2.6",
        ["public", "internal", "sensitive"],
        None,
    ),
    "glm-5-1": (
        "dgx-b300-01",
        "cerit-sc",
        "b300",
        [4, 5],
        "nvfp4",
        "zai-org/GLM-5.1-NVFP4",
        ["public", "internal", "sensitive"],
        None,
    ),
    "qwen3-5": (
        "dgx-b300-01",
        "cerit-sc",
        "b300",
        [6, 7],
        "fp8",
        "Qwen/Qwen3.5-FP8",
        ["public", "internal", "sensitive"],
        None,
    ),
    "qwen3-5-122b": (
        "hgx-h200-ceitec",
        "ceitec-structural",
        "h200",
        [0, 1],
        "fp8",
        "Qwen/Qwen3.5-122B-FP8",
        ["public", "internal", "sensitive"],
        "ceitec-structural",
    ),
    "gpt-oss-120b": (
        "hgx-h200-ceitec",
        "ceitec-structural",
        "h200",
        [2],
        "mxfp4",
        "openai/gpt-oss-120b",
        ["public", "internal"],
        None,
    ),
    "mistral-small-4": (
        "hgx-h200-ceitec",
        "ceitec-structural",
        "h200",
        [3],
        "fp8",
        "mistralai/Mistral-Small-4",
        ["public", "internal"],
        None,
    ),
}


def seed_plan(extra_replicas: int = 0) -> Plan:
    replicas = []
    for name, (node, owner, model, gpus, quant, model_id, classes, dedicated) in LAYOUT.items():
        tp = len(gpus)
        args = [
            model_id,
            "--tensor-parallel-size",
            str(tp),
            "--served-model-name",
            name,
            "--max-model-len",
            str(CONTEXT),
        ]
        replicas.append(
            ReplicaPlacement(
                deployment=name,
                index=0,
                node=node,
                site="brno",
                owner=owner,
                gpu_indices=gpus,
                gpu_model=model,
                tensor_parallel_size=tp,
                quantization=quant,
                checkpoint=model_id,
                revision=None,
                served_model_name=name,
                context_length=CONTEXT,
                config_fingerprint=seed_fingerprint(model_id, quant),
                engine_args=args,
                engine_env={"VLLM_USE_DEEP_GEMM": "1"} if model == "b200" else {},
                dedicated_for=dedicated,
                data_classes=classes,
            )
        )
    for i in range(extra_replicas):
        base = replicas[i % len(LAYOUT)]
        replicas.append(base.model_copy(update={"index": 1 + i // len(LAYOUT)}))
    solver = SolverReport(
        status="trivial", objective=0, best_bound=0, gap=0, wall_seconds=0, node_classes=0, variables=0
    )
    return Plan(federation="cerit-sc", replicas=replicas, solver=solver)
