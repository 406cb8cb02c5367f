"""What a stack is configured with: the site repo and the knobs of the resources it builds.

One model serves three callers: the Pulumi stacks (config keys, camelCase, declared with a
description in each `Pulumi.yaml`), `fabric render` (CLI options), and the tests.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from llm_fabric import __version__
from llm_fabric.basemodel import FabricModel
from llm_fabric.engine.backends import backend

# Each engine backend's `image_options` names the two fields of its image below.
# Upstream vLLM plus llm-fabric's loop-guard plugin, built from engine/images/Dockerfile: every
# generated engine command loads the plugin, which the stock image cannot import.
DEFAULT_ENGINE_IMAGE = f"llm-fabric/vllm-openai:v{backend('vllm').version}-fabric{__version__}"
DEFAULT_ENGINE_IMAGE_ROCM = f"llm-fabric/vllm-rocm:v{backend('vllm').version}-fabric{__version__}"
# SGLang's release the SGLang commands are checked against, plus llm-fabric for the loop guard's
# logit processor: engine/images/Dockerfile.sglang.
DEFAULT_SGLANG_IMAGE = f"llm-fabric/sglang:v{backend('sglang').version}-fabric{__version__}"
DEFAULT_SGLANG_IMAGE_ROCM = f"llm-fabric/sglang-rocm:v{backend('sglang').version}-fabric{__version__}"


class StackOptions(FabricModel):
    site_repo: Path = Field(description="path of the site repo (fabric.yaml, nodes/, tenants/, deployments/)")
    site: str | None = Field(None, description="site id whose cluster this stack deploys to; default: the only site")
    plan_file: Path | None = Field(
        None, description="a plan saved by `fabric plan --json`; default: plan the site repo afresh"
    )
    engine_image: str = Field(
        DEFAULT_ENGINE_IMAGE,
        description="vLLM image with llm-fabric's plugins for NVIDIA nodes (build: engine/images/Dockerfile)",
    )
    engine_image_rocm: str = Field(
        DEFAULT_ENGINE_IMAGE_ROCM,
        description="vLLM image with llm-fabric's plugins for AMD nodes (build: engine/images/Dockerfile)",
    )
    sglang_image: str = Field(
        DEFAULT_SGLANG_IMAGE,
        description="SGLang image with llm-fabric's loop guard, NVIDIA nodes (build: engine/images/Dockerfile.sglang)",
    )
    sglang_image_rocm: str = Field(
        DEFAULT_SGLANG_IMAGE_ROCM,
        description="SGLang image with llm-fabric's loop guard for AMD nodes (build: engine/images/Dockerfile.sglang)",
    )
    model_cache_path: str = Field(
        "/var/lib/llm-fabric/models",
        description="host folder with staged model weights (made by the provisioning playbook)",
    )
    shm_size: str = Field("32Gi", description="size of /dev/shm for tensor-parallel workers")
    startup_base_seconds: int = Field(600, ge=60, description="startup probe budget before weights are counted")
    startup_seconds_per_gb: float = Field(
        1.0, ge=0.0, description="startup probe budget per GB of the replica's GPU memory (weights streamed from disk)"
    )
    queue_depth_threshold: int = Field(50, ge=1, description="alert when a deployment's waiting requests exceed this")
    kv_cache_threshold: float = Field(0.9, gt=0.0, le=1.0, description="alert when KV cache usage exceeds this")
    prefix_hit_drop_ratio: float = Field(
        0.7, gt=0.0, lt=1.0, description="alert when the 30m prefix-cache hit rate falls below this share of the 6h one"
    )


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def config_keys(stack: str) -> dict[str, str]:
    """camelCase config key -> description, as the stack's Pulumi.yaml declares them."""
    fields = StackOptions.model_fields
    return {camel(name): fields[name].description or "" for name in STACK_FIELDS[stack]}


_COMMON = ("site_repo", "site")
STACK_FIELDS: dict[str, tuple[str, ...]] = {
    "allocations": _COMMON,
    "serving": (
        *_COMMON,
        "plan_file",
        "engine_image",
        "engine_image_rocm",
        "sglang_image",
        "sglang_image_rocm",
        "model_cache_path",
        "shm_size",
        "startup_base_seconds",
        "startup_seconds_per_gb",
    ),
    "observability": (*_COMMON, "plan_file", "queue_depth_threshold", "kv_cache_threshold", "prefix_hit_drop_ratio"),
}
