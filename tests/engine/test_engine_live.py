"""The real vLLM (CPU) serving the tiny model from a recipe's engine args, with the loop guard loaded."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from llm_fabric.engine.local.tiny_model import EOS, build_tiny_model
from llm_fabric.engine.process import LocalEngine
from llm_fabric.engine.runtime.loop_detect import LoopGuardSettings, find_loop
from tests.fixtures.engine import ENGINE_RECIPE, get_text, post_json, require_engine

pytestmark = [pytest.mark.engine, pytest.mark.slow]

PROMPTS = ["Hello world", "The federation serves", "def main():", "1, 2, 3,", "Brno is", "zzz"]
MAX_TOKENS = 200
# tighter than the recipe's defaults, set per request (vllm_xargs), so loops show within a short output
SETTINGS = LoopGuardSettings(min_repeats=3, min_span=12)


def complete(engine: LocalEngine, prompt: str, *, guard: bool) -> dict[str, object]:
    xargs = {
        "loop_guard": guard,
        "loop_guard_min_repeats": SETTINGS.min_repeats,
        "loop_guard_min_span": SETTINGS.min_span,
    }
    body = {
        "model": ENGINE_RECIPE,
        "prompt": prompt,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "return_token_ids": True,
        "vllm_xargs": xargs,
    }
    choice: dict[str, object] = post_json(engine, "/v1/completions", body)["choices"][0]
    return choice


def guard_stops(engine: LocalEngine) -> float:
    text = get_text(engine, "/metrics")
    return sum(float(v) for v in re.findall(r"^fabric_loop_guard_stops_total\{[^}]*\} (\S+)$", text, re.M))


def test_the_guard_shortens_looping_generations_and_leaves_the_others_alone(tiny_engine: LocalEngine) -> None:
    settings = SETTINGS
    stops_before = guard_stops(tiny_engine)
    shortened = 0
    for prompt in PROMPTS:
        free = complete(tiny_engine, prompt, guard=False)
        guarded = complete(tiny_engine, prompt, guard=True)
        free_ids, guarded_ids = list(free["token_ids"]), list(guarded["token_ids"])  # type: ignore[call-overload]
        loop = find_loop(free_ids, settings)
        if loop is None:  # no loop: the guard must not change a single token
            assert guarded_ids == free_ids, prompt
            continue
        position, _period = loop
        # with a loop: identical up to the loop's detection, then EOS ends it
        assert guarded_ids[: position + 1] == free_ids[: position + 1], prompt
        assert len(guarded_ids) == position + 2 and guarded["finish_reason"] == "stop", prompt
        assert len(guarded_ids) < len(free_ids)
        shortened += 1
    # random weights under greedy decoding loop on their own: the live test is only meaningful if some did
    assert shortened >= 2, "the tiny model produced too few loops to test the guard"
    assert guard_stops(tiny_engine) - stops_before == shortened


def test_reasoning_is_emitted_under_the_field_name_reasoning(tiny_engine: LocalEngine) -> None:
    body = {
        "model": ENGINE_RECIPE,
        "messages": [{"role": "user", "content": "think"}],
        "max_tokens": 24,
        "temperature": 0,
        "vllm_xargs": {"loop_guard": False},
    }
    message = post_json(tiny_engine, "/v1/chat/completions", body)["choices"][0]["message"]
    # the qwen3 parser: a completion without </think> is all reasoning
    assert message.get("reasoning")
    assert "reasoning_content" not in message  # gateways expecting reasoning_content must map it (docs/engine.md)


def test_metrics_are_vllm_counters_that_add_up(tiny_engine: LocalEngine) -> None:
    def counter(name: str) -> float:
        text = get_text(tiny_engine, "/metrics")
        return sum(float(v) for v in re.findall(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.M))

    before = counter("vllm:generation_tokens_total"), counter("vllm:prompt_tokens_total")
    usage = post_json(
        tiny_engine,
        "/v1/completions",
        {"model": ENGINE_RECIPE, "prompt": "count me", "max_tokens": 7, "temperature": 0, "ignore_eos": True},
    )["usage"]
    after = counter("vllm:generation_tokens_total"), counter("vllm:prompt_tokens_total")
    assert usage["completion_tokens"] == 7
    assert after[0] - before[0] == usage["completion_tokens"]
    assert after[1] - before[1] == usage["prompt_tokens"]


def test_the_tiny_tokenizer_round_trips_eos(tmp_path: Path) -> None:
    """The tokenizer the engine loads (Hugging Face `tokenizers`, in the engine venv) encodes EOS as the one
    id config.json names as eos_token_id, and decodes that id back to EOS."""
    model = build_tiny_model(tmp_path / "tiny")
    eos_id = json.loads((model / "config.json").read_text())["eos_token_id"]
    script = (
        "import json, sys; from tokenizers import Tokenizer; t = Tokenizer.from_file(sys.argv[1]); "
        "print(json.dumps([t.encode('hi' + sys.argv[2], add_special_tokens=False).ids, t.decode([int(sys.argv[3])], "
        "skip_special_tokens=False)]))"
    )
    done = subprocess.run(
        [str(require_engine()), "-c", script, str(model / "tokenizer.json"), EOS, str(eos_id)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ids, decoded = json.loads(done.stdout)
    assert ids[-1] == eos_id and ids.count(eos_id) == 1 and decoded == EOS
