"""Every recipe x GPU engine command, parsed by the installed vLLM's own parser and checked against its registries."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fabric.engine.argcheck import ArgCase
from llm_fabric.engine.loop_guard_config import PLUGIN_CLASS
from llm_fabric.engine.recipes import load_recipes
from llm_fabric.engine.vllm.check import check_with_vllm, layout_cases, recipe_cases

pytestmark = [pytest.mark.engine, pytest.mark.slow]

BROKEN = [
    ArgCase("unknown flag", ["m", "--tensor-parallel-sise", "8"]),
    ArgCase("bad type", ["m", "--tensor-parallel-size", "eight"]),
    ArgCase("unknown tool parser", ["m", "--enable-auto-tool-choice", "--tool-call-parser", "kimi_k9"]),
    ArgCase("unknown reasoning parser", ["m", "--reasoning-parser", "deepseek_r9"]),
    ArgCase("unknown quantization", ["m", "--quantization", "fp7"]),
    ArgCase("missing logits processor", ["m", "--logits-processors", "llm_fabric.engine.nowhere:Guard"]),
    ArgCase("loop guard loads", ["m", "--logits-processors", PLUGIN_CLASS]),
]


def test_every_recipe_on_every_gpu_that_can_run_it_passes_vllm(engine_python_path: Path) -> None:
    cases, refused = recipe_cases()
    cases += layout_cases()  # DP-EP and multi-node layouts, leader and headless workers
    recipes = load_recipes()
    assert {c.label.split(" on ")[0] for c in cases if not c.label.startswith("layout: ")} == set(
        recipes
    )  # no recipe skipped
    assert any("DP 16 + EP" in c.label and "node 1" in c.label for c in cases)
    verdicts = check_with_vllm(cases + BROKEN, python=engine_python_path)
    by_label = {v.label: v for v in verdicts}
    failing = {v.label: v.problems for v in verdicts[: len(cases)] if not v.ok}
    assert failing == {}
    assert len(cases) > 100 and refused  # the kernel matrix does refuse some, e.g. FP8 on A100
    # the check can fail: each broken case is refused, for its reason
    for case, needle in zip(
        BROKEN[:-1], ["unrecognized", "invalid", "kimi_k9", "deepseek_r9", "fp7", "nowhere"], strict=True
    ):
        verdict = by_label[case.label]
        assert not verdict.ok and needle in " ".join(verdict.problems), (case.label, verdict.problems)
    assert by_label["loop guard loads"].ok
