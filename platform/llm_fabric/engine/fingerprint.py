"""A replica's configuration fingerprint: everything that can change the answer to the same request.

Two replicas behind one model name must answer a request alike; one started with another context
length, KV-cache dtype or parser answers differently with a 200 (seed 002). The fingerprint is
computed from the same `ServingArgs` the engine's command is built from (`engine.command`, resolved
by the same `checked`), so what is fingerprinted is what runs.

In (each can change the tokens a request gets back):
- `engine`, `engine_version`: another engine or release samples, schedules and templates differently
  (the version is the backend's pinned release, the one its image is built from);
- `checkpoint`, `revision`: the weights (`--revision` of the engine's arguments, else the revision the
  site's `weights.lock` pins, set by the plan (plan/figures.py); None: not pinned);
- `quantization`, `kv_cache_dtype`: the arithmetic of the weights and of the attention cache;
- `max_model_len`: which prompts are refused or truncated, and the default output room;
- `tool_call_parser`, `reasoning_parser`, `chat_template` (the engine's own names: SGLang's differ),
  `trust_remote_code`: how a prompt is rendered and an answer parsed;
- `generation`: the defaults a request without them gets (output cap, temperature, top_p, presence penalty);
- `loop_guard`: the fabric's logits processor ends looping generations;
- `extra_args`: the recipe's further engine arguments, which the fabric does not model one by one.

Out (they change how fast or where, not what): the layout (tensor/pipeline/data-parallel sizes,
node rank), the GPU and its kernel environment (a hardware type that picks other tokens is the
canaries' to catch, not a configuration's), port and host, GPU memory utilisation, batch and queue
caps, priority scheduling, the served model name (the deployment's, the same for every replica).

The encoding is canonical: the fields as JSON with sorted keys and no spaces, hashed with sha256;
`short` (12 hex digits) is for display and annotations.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import model_validator

from llm_fabric.basemodel import FabricModel
from llm_fabric.engine.command import ServingArgs, checked, generation_override
from llm_fabric.engine.recipes import EngineName
from llm_fabric.engine.reported import flag

SHORT = 12  # hex digits shown for a fingerprint


class FingerprintFields(FabricModel):
    engine: EngineName
    engine_version: str | None
    checkpoint: str
    revision: str | None
    quantization: str
    kv_cache_dtype: str
    max_model_len: int
    tool_call_parser: str | None
    reasoning_parser: str | None
    chat_template: str | None
    trust_remote_code: bool
    generation: dict[str, float | int]
    loop_guard: bool
    extra_args: list[str]


def canonical(fields: FingerprintFields) -> str:
    """The one encoding that is hashed: sorted-key JSON without spaces."""
    return json.dumps(fields.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def digest(fields: FingerprintFields) -> str:
    return hashlib.sha256(canonical(fields).encode()).hexdigest()


class ConfigFingerprint(FabricModel):
    sha256: str
    fields: FingerprintFields

    @model_validator(mode="after")
    def _matches(self) -> ConfigFingerprint:
        if self.sha256 != digest(self.fields):
            raise ValueError("sha256 is not the digest of the fields (edited by hand?)")
        return self

    @property
    def short(self) -> str:
        return self.sha256[:SHORT]

    def differences(self, other: ConfigFingerprint) -> list[str]:
        """The fields whose values differ, by name (empty: the same configuration)."""
        mine, theirs = self.fields.model_dump(), other.fields.model_dump()
        return sorted(name for name in mine if mine[name] != theirs[name])

    def describe_differences(self, other: ConfigFingerprint) -> str:
        """`field (this vs other), ...`: what a refusal names."""
        mine, theirs = self.fields.model_dump(mode="json"), other.fields.model_dump(mode="json")
        return ", ".join(
            f"{name} ({json.dumps(mine[name])} vs {json.dumps(theirs[name])})" for name in self.differences(other)
        )


def fingerprint_fields(
    engine: EngineName,
    serving: ServingArgs,
    version: str | None,
    parsers: tuple[str | None, str | None],
    template_and_args: tuple[str | None, list[str]],
) -> FingerprintFields:
    """The fields of the replica `serving` describes, on `engine` at release `version`; `parsers` and
    `template_and_args` are the recipe's in the engine's names (its backend's `parsers`, `template_and_args`)."""
    recipe = serving.recipe
    tp = serving.layout.tensor_parallel_size if serving.layout is not None else serving.tensor_parallel_size
    resolved = checked(
        recipe,
        serving.gpu,
        tp or min(recipe.tensor_parallel_sizes),
        serving.quantization,
        serving.kv_cache_dtype,
        serving.max_model_len,
    )
    tools, reasoning = parsers
    template, extra = template_and_args
    override = generation_override(
        recipe, max_output_tokens=serving.max_output_tokens, temperature=serving.temperature, top_p=serving.top_p
    )
    generation: dict[str, float | int] = {"max_tokens": int(override.pop("max_new_tokens")), **override}
    penalty = serving.presence_penalty if serving.presence_penalty is not None else recipe.generation.presence_penalty
    if penalty is not None:
        generation["presence_penalty"] = penalty
    return FingerprintFields(
        engine=engine,
        engine_version=version,
        checkpoint=resolved.checkpoint,
        revision=flag(extra, "--revision"),
        quantization=resolved.quantization,
        kv_cache_dtype=resolved.kv_cache_dtype,
        max_model_len=resolved.context_length,
        tool_call_parser=tools,
        reasoning_parser=reasoning,
        chat_template=template,
        trust_remote_code=recipe.trust_remote_code,
        generation=generation,
        loop_guard=serving.loop_guard,
        extra_args=extra,
    )


def fingerprint(fields: FingerprintFields) -> ConfigFingerprint:
    return ConfigFingerprint(sha256=digest(fields), fields=fields)
