"""The recipe catalog: one YAML per model under the distribution's `engine/models/`.

A recipe holds what the fabric must know to serve a model: its architecture facts (for the KV
cache and decode figures of the capacity model), the quantizations it is offered in (with the
weight bytes, scales included), the engine's parsers and the generation defaults operators
learned the hard way. An operator edits it in a pull request; the loader reports every problem
with file, line and a "did you mean".
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from llm_fabric import wording
from llm_fabric.basemodel import FabricModel
from llm_fabric.distribution import data_path, shipped_recipe_ids
from llm_fabric.documents import load_model, suggest
from llm_fabric.errors import ConfigError, Problem, UsageError

QuantizationName = Literal["bf16", "fp8", "nvfp4", "mxfp4", "int4"]
EngineName = Literal["vllm", "sglang"]
ENGINES: tuple[EngineName, ...] = ("vllm", "sglang")
DEFAULT_ENGINE: EngineName = "vllm"  # a recipe's engine unless it names one
KvCacheDtype = Literal["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"]

# bytes of one KV-cache element; "auto" is the model's activation dtype (bf16 for every recipe here)
KV_DTYPE_BYTES: dict[str, int] = {"auto": 2, "bf16": 2, "fp16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


class GqaAttention(FabricModel):
    """Grouped-query (or multi-head) attention: K and V per KV head are cached."""

    kind: Literal["gqa"]
    kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)


class MlaAttention(FabricModel):
    """Multi-head latent attention (DeepSeek-V3 family): one compressed latent plus the RoPE key is cached."""

    kind: Literal["mla"]
    kv_lora_rank: int = Field(ge=1)
    qk_rope_head_dim: int = Field(ge=1)
    indexer_head_dim: int | None = Field(
        None, ge=1, description="DeepSeek sparse attention indexer key cached per token (fp8 + fp32 scale)"
    )


class SlidingWindow(FabricModel):
    """Layers that attend to a fixed window only: their cache is bounded per sequence."""

    layers: int = Field(ge=1)
    window: int = Field(ge=1)


class LinearAttention(FabricModel):
    """Recurrent (Gated DeltaNet) layers: a fixed state per sequence instead of a per-token cache."""

    layers: int = Field(ge=1)
    value_heads: int = Field(ge=1)
    key_head_dim: int = Field(ge=1)
    value_head_dim: int = Field(ge=1)
    state_dtype_bytes: int = Field(4, ge=1, description="mamba_ssm_dtype of the config (float32: 4)")


class Experts(FabricModel):
    routed: int = Field(ge=1)
    active: int = Field(ge=1)
    shared: int = Field(0, ge=0)


class Architecture(FabricModel):
    family: str = Field(description="the model_type / architecture of the published config")
    total_params_b: float = Field(gt=0)
    active_params_b: float = Field(gt=0)
    layers: int = Field(ge=1)
    kv_layers: int | None = Field(None, ge=1, description="layers with a full per-token KV cache; default: layers")
    hidden_size: int = Field(ge=1)
    attention_heads: int = Field(ge=1)
    attention: Annotated[GqaAttention | MlaAttention, Field(discriminator="kind")]
    sliding_window: SlidingWindow | None = None
    linear_attention: LinearAttention | None = None
    experts: Experts | None = None
    vocab_size: int = Field(ge=1)
    native_dtype: QuantizationName
    max_context: int = Field(ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> Architecture:
        if self.active_params_b > self.total_params_b:
            raise ValueError("active_params_b cannot exceed total_params_b")
        extra = (self.sliding_window.layers if self.sliding_window else 0) + (
            self.linear_attention.layers if self.linear_attention else 0
        )
        if self.full_kv_layers + extra != self.layers:
            raise ValueError(
                f"kv_layers ({self.full_kv_layers}) + sliding/linear layers ({extra}) must equal layers ({self.layers})"
            )
        if self.experts is not None and self.experts.active > self.experts.routed:
            raise ValueError("experts.active cannot exceed experts.routed")
        return self

    @property
    def full_kv_layers(self) -> int:
        return self.kv_layers if self.kv_layers is not None else self.layers


class QuantizationOption(FabricModel):
    checkpoint: str = Field(description="Hugging Face repo of the weights served in this quantization")
    weights_gb: float = Field(gt=0, description="whole model in decimal GB, scales and unquantized layers included")
    quantization_arg: str | None = Field(
        None, description="value of vLLM --quantization; null: vLLM reads it from the checkpoint's config"
    )
    native: bool = Field(False, description="the precision the model was released (or trained) in")
    weight_only_fallback: bool = Field(
        False,
        description="accept vLLM's weight-only kernels on GPUs without native support (e.g. MXFP4 on Hopper)",
    )
    note: str = ""


class GenerationDefaults(FabricModel):
    max_output_tokens: int = Field(32768, ge=1, description="output cap: a looping model runs out of rope")
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0, description="for loop-prone models")
    temperature: float | None = Field(None, ge=0.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)


class SglangSettings(FabricModel):
    """How SGLang serves the recipe. Its parser names differ from vLLM's for some families (DeepSeek,
    gpt-oss, Llama); the top-level parser fields of a recipe are vLLM's."""

    tool_call_parser: str | None = Field(None, description="SGLang --tool-call-parser (its own registry names)")
    reasoning_parser: str | None = Field(None, description="SGLang --reasoning-parser")
    chat_template: str | None = Field(None, description="SGLang --chat-template: a builtin name or a file path")
    quantization_args: dict[QuantizationName, str] = Field(
        default_factory=dict,
        description="SGLang --quantization per offered quantization; absent: SGLang reads the checkpoint's config",
    )
    extra_args: list[str] = Field(default_factory=list, description="further `sglang.launch_server` arguments")
    note: str = ""


Script = Literal["latin", "cyrillic", "greek", "han", "kana", "hangul", "arabic", "hebrew", "devanagari", "other"]


class CanaryPrompt(FabricModel):
    """One canary prompt: sent greedily to every replica, its answer compared across replicas and with the
    deployment's recorded reference (`fabric canary --record`); the cheap signals hold even before one exists."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="the prompt's name in verdicts and metrics")
    prompt: str = Field(min_length=1, description="the user message")
    max_tokens: int = Field(16, ge=1, le=256, description="a short answer: the canary's cost is this per replica")
    script: Script | None = Field(None, description="the script the answer must be written in (letters only)")
    min_tokens: int = Field(1, ge=0, description="fewer answer tokens than this fails (an engine that stalls)")
    tool_call: bool = Field(False, description="offer a tool; the answer must be a tool call the parser parses")


def _default_canary() -> list[CanaryPrompt]:
    return []


def _auto_kv_dtype() -> list[KvCacheDtype]:
    return ["auto"]


Parallelism = Literal["tp", "dp-ep"]


def _tp_only() -> list[Parallelism]:
    return ["tp"]


class Recipe(FabricModel):
    version: Literal[1] = 1
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    display_name: str
    source: str = Field(description="where the architecture facts come from")
    small: bool = Field(description="may be placed on limited-tier nodes")
    architecture: Architecture
    engine: EngineName = Field(DEFAULT_ENGINE, description="the engine a deployment of this recipe runs unless it says")
    quantizations: dict[QuantizationName, QuantizationOption] = Field(min_length=1)
    default_quantization: QuantizationName
    kv_cache_dtypes: list[KvCacheDtype] = Field(default_factory=_auto_kv_dtype, min_length=1)
    tensor_parallel_sizes: list[int] = Field(min_length=1)
    parallelism: list[Parallelism] = Field(
        default_factory=_tp_only,
        description="strategies a replica may use: tp (tensor parallel, pipeline stages across nodes); "
        "dp-ep (data-parallel attention + expert parallelism, for MLA mixture-of-experts models)",
    )
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    chat_template: str | None = Field(None, description="path of a chat template to pass to vLLM, if any")
    chat_template_notes: str = ""
    trust_remote_code: bool = False
    extra_args: list[str] = Field(default_factory=list, description="further `vllm serve` arguments")
    sglang: SglangSettings | None = Field(None, description="how SGLang serves it; absent: vLLM only")
    generation: GenerationDefaults = Field(default_factory=GenerationDefaults)
    known_issues: list[str] = Field(default_factory=list)
    canary: list[CanaryPrompt] = Field(
        default_factory=_default_canary, description="canary prompts (greedy, short): `fabric canary`"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        names = [p.name for p in self.canary]
        if len(set(names)) != len(names):
            raise ValueError("canary: prompt names must be unique")
        if any(p.tool_call for p in self.canary) and self.tool_call_parser is None:
            raise ValueError("canary: a tool_call prompt needs the recipe's tool_call_parser")
        if self.engine == "sglang" and self.sglang is None:
            raise ValueError("engine `sglang` needs an `sglang:` section (its parsers and arguments)")
        for quant in self.sglang.quantization_args if self.sglang else {}:
            if quant not in self.quantizations:
                raise ValueError(f"sglang.quantization_args: `{quant}` is not one of quantizations")
        if self.default_quantization not in self.quantizations:
            raise ValueError(
                f"default_quantization `{self.default_quantization}` is not one of quantizations "
                f"({', '.join(self.quantizations)})"
            )
        if "dp-ep" in self.parallelism and self.architecture.experts is None:
            raise ValueError("parallelism dp-ep needs a mixture-of-experts model (architecture.experts)")
        heads = self.architecture.attention_heads
        for tp in self.tensor_parallel_sizes:
            if tp < 1 or heads % tp:
                raise ValueError(f"tensor_parallel_sizes: {tp} does not divide the {heads} attention heads")
        return self

    @property
    def total_params_b(self) -> float:
        return self.architecture.total_params_b

    @property
    def active_params_b(self) -> float:
        return self.architecture.active_params_b

    def quantization(self, name: str | None) -> tuple[str, QuantizationOption]:
        """The named quantization (default: the recipe's), or UsageError listing what is offered."""
        key = name or self.default_quantization
        option = self.quantizations.get(key)  # type: ignore[call-overload]
        if option is None:
            offered = ", ".join(self.quantizations)
            guess = suggest(key, list(self.quantizations))
            hint = f"did you mean `{guess}`?" if guess else f"{self.id} is offered in: {offered}"
            raise UsageError(f"recipe `{self.id}` does not offer quantization `{key}`", hint=hint)
        return key, option


def context_limit(recipe: Recipe, max_model_len: int | None) -> int:
    """The context length a replica of `recipe` runs with: the deployment's (or the CLI's) `max_model_len`,
    else the model's whole context. The one place this default is taken: the planner records the result
    in each replica (`ReplicaPlacement.context_length`) and the plan's readers take it from there; a
    reader without a plan (`fabric engine args`, the site checks) calls this."""
    return max_model_len or recipe.architecture.max_context


def recipe_dir() -> Path:
    return data_path("engine", "models")


def recipe_ids() -> list[str]:
    """Ids of the recipes shipped with the distribution (file stems)."""
    return shipped_recipe_ids()


def load_recipe_file(path: Path) -> Recipe:
    recipe = load_model(path, Recipe)
    if recipe.id != path.stem:
        raise ConfigError(
            [
                Problem(
                    f"id `{recipe.id}` does not match the file name",
                    file=path,
                    field="id",
                    hint=f"rename the file to {recipe.id}.yaml or set id: {path.stem}",
                )
            ]
        )
    return recipe


def load_recipes(directory: Path | None = None) -> dict[str, Recipe]:
    """Every recipe of `directory` (default: the distribution's); all problems of all files in one ConfigError."""
    if directory is None:
        return dict(_default_recipes())
    return _load_dir(directory)


def _load_dir(directory: Path) -> dict[str, Recipe]:
    recipes: dict[str, Recipe] = {}
    problems: list[Problem] = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            recipes[path.stem] = load_recipe_file(path)
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(
            problems, summary=f"recipes in {directory} are not valid ({wording.count(len(problems), 'problem')})"
        )
    return recipes


@cache
def _default_recipes() -> dict[str, Recipe]:
    return _load_dir(recipe_dir())


def get_recipe(recipe_id: str) -> Recipe:
    recipes = _default_recipes()
    if recipe_id not in recipes:
        known = sorted(recipes)
        guess = suggest(recipe_id, known)
        hint = f"did you mean `{guess}`?" if guess else f"known recipes: {', '.join(known)}"
        raise UsageError(f"unknown recipe `{recipe_id}`", hint=hint)
    return recipes[recipe_id]
