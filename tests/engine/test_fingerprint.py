"""The configuration fingerprint (engine.fingerprint): stable, moved by every field that can change an
answer, unmoved by the ones that cannot (layout, port, memory, batch caps, priority, served name)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from llm_fabric.engine.backends import command_for, fingerprint_for
from llm_fabric.engine.command import ServingArgs
from llm_fabric.engine.fingerprint import ConfigFingerprint, FingerprintFields, canonical
from llm_fabric.engine.recipes import Recipe, get_recipe
from llm_fabric.hardware.catalog import load_gpu_catalog

RECIPE = "llama-3.3-70b"  # fp8 and bf16, two KV dtypes, both engines


def base() -> ServingArgs:
    return ServingArgs(get_recipe(RECIPE), load_gpu_catalog().get("h100-sxm"), tensor_parallel_size=2)


def _recipe(**changes: Any) -> Callable[[ServingArgs], ServingArgs]:
    def change(serving: ServingArgs) -> ServingArgs:
        recipe: Recipe = serving.recipe
        return dataclasses.replace(serving, recipe=recipe.model_copy(update=changes))

    return change


def _generation(**changes: Any) -> Callable[[ServingArgs], ServingArgs]:
    def change(serving: ServingArgs) -> ServingArgs:
        gen = serving.recipe.generation.model_copy(update=changes)
        return dataclasses.replace(serving, recipe=serving.recipe.model_copy(update={"generation": gen}))

    return change


def _checkpoint(serving: ServingArgs) -> ServingArgs:
    quants = {
        k: v.model_copy(update={"checkpoint": v.checkpoint + "-other"}) for k, v in serving.recipe.quantizations.items()
    }
    return dataclasses.replace(serving, recipe=serving.recipe.model_copy(update={"quantizations": quants}))


# (the fingerprint field that must move, a change of the serving inputs), one per included field
INCLUDED: list[tuple[str, Callable[[ServingArgs], ServingArgs], str]] = [
    ("checkpoint", _checkpoint, "vllm"),
    ("revision", _recipe(extra_args=["--revision", "0123abc"]), "vllm"),
    ("quantization", lambda s: dataclasses.replace(s, quantization="bf16"), "vllm"),
    ("kv_cache_dtype", lambda s: dataclasses.replace(s, kv_cache_dtype="fp8"), "vllm"),
    ("max_model_len", lambda s: dataclasses.replace(s, max_model_len=8192), "vllm"),
    ("tool_call_parser", _recipe(tool_call_parser="hermes"), "vllm"),
    ("reasoning_parser", _recipe(reasoning_parser="qwen3"), "vllm"),
    ("chat_template", _recipe(chat_template="templates/other.jinja"), "vllm"),
    ("trust_remote_code", _recipe(trust_remote_code=True), "vllm"),
    ("generation", lambda s: dataclasses.replace(s, max_output_tokens=1024), "vllm"),
    ("generation", lambda s: dataclasses.replace(s, temperature=0.3), "vllm"),
    ("generation", lambda s: dataclasses.replace(s, top_p=0.5), "vllm"),
    ("generation", lambda s: dataclasses.replace(s, presence_penalty=1.0), "vllm"),
    ("generation", _generation(temperature=0.9), "vllm"),
    ("loop_guard", lambda s: dataclasses.replace(s, loop_guard=False), "vllm"),
    ("extra_args", _recipe(extra_args=["--enforce-eager"]), "vllm"),
    ("engine", lambda s: s, "sglang"),
]

# serving options that change speed or placement, never the answer
EXCLUDED = st.fixed_dictionaries(
    {},
    optional={
        "tensor_parallel_size": st.sampled_from([1, 4, 8]),
        "port": st.integers(1024, 65535),
        "gpu_memory_utilization": st.floats(0.5, 0.95),
        "max_num_seqs": st.integers(1, 1024),
        "max_queued_requests": st.integers(1, 1024),
        "priority_scheduling": st.booleans(),
        "served_model_name": st.sampled_from(["a", "llama-chat", "x-y"]),
        "gpu": st.sampled_from(["h200", "h100-sxm"]),
    },
)


def test_the_digest_is_the_same_in_another_process_with_another_hash_seed() -> None:
    here = fingerprint_for("vllm", base()).sha256
    code = (
        "from tests.engine.test_fingerprint import base;"
        "from llm_fabric.engine.backends import fingerprint_for;"
        "print(fingerprint_for('vllm', base()).sha256)"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == here
    # the encoding is sorted JSON without spaces: what is hashed can be recomputed by anyone
    fields = fingerprint_for("vllm", base()).fields
    assert canonical(fields) == json.dumps(fields.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    assert hashlib.sha256(canonical(fields).encode()).hexdigest() == here


@pytest.mark.parametrize(
    ("name", "change", "engine"), INCLUDED, ids=[f"{i}-{n}" for i, (n, _, _) in enumerate(INCLUDED)]
)
def test_each_included_field_moves_the_fingerprint(
    name: str, change: Callable[[ServingArgs], ServingArgs], engine: str
) -> None:
    before = fingerprint_for("vllm", base())
    after = fingerprint_for(engine, change(base()))  # type: ignore[arg-type]
    assert after.sha256 != before.sha256
    assert name in before.differences(after)
    assert name in before.describe_differences(after)


@settings(max_examples=40, deadline=None)
@given(EXCLUDED)
def test_excluded_options_leave_the_fingerprint_alone(changes: dict[str, Any]) -> None:
    serving = base()
    if "gpu" in changes:
        changes["gpu"] = load_gpu_catalog().get(changes["gpu"])
    other = dataclasses.replace(serving, **changes)
    command_for("vllm", other)  # a replica that really can be built: the options are valid
    assert fingerprint_for("vllm", other) == fingerprint_for("vllm", serving)


def test_a_fingerprint_whose_digest_is_not_its_fields_is_refused() -> None:
    good = fingerprint_for("vllm", base())
    data = good.model_dump(mode="json")
    data["fields"]["max_model_len"] = 1024
    with pytest.raises(ValidationError, match="sha256 is not the digest of the fields"):
        ConfigFingerprint.model_validate(data)
    assert FingerprintFields.model_validate(data["fields"]).max_model_len == 1024


def test_the_fields_are_what_the_command_runs() -> None:
    serving = dataclasses.replace(base(), max_model_len=8192, kv_cache_dtype="fp8")
    args = command_for("vllm", serving).args
    fields = fingerprint_for("vllm", serving).fields
    assert args[0] == fields.checkpoint
    assert args[args.index("--max-model-len") + 1] == str(fields.max_model_len) == "8192"
    assert args[args.index("--kv-cache-dtype") + 1] == fields.kv_cache_dtype == "fp8"
    sglang = command_for("sglang", serving).args
    assert sglang[sglang.index("--model-path") + 1] == fingerprint_for("sglang", serving).fields.checkpoint
