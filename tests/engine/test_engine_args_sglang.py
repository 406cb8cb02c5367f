"""Every recipe x GPU SGLang command, parsed by the pinned SGLang's own parser (read from its wheel).

SGLang's `ServerArgs.add_cli_args` builds the parser `python -m sglang.launch_server` uses; its choices
are SGLang's parser registries and quantization / KV-cache lists. Broken commands are refused for the
reason SGLang gives, and the fabric's loop guard loads through SGLang's `CustomLogitProcessor.from_str`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.engine.argcheck import ArgCase
from llm_fabric.engine.recipes import load_recipes
from llm_fabric.engine.sglang.check import check_with_sglang, sglang_cases

pytestmark = [pytest.mark.engine, pytest.mark.slow]

M = ["--model-path", "m"]
BROKEN = [
    (ArgCase("unknown flag", [*M, "--tp-sise", "8"]), "unrecognized arguments: --tp-sise"),
    (ArgCase("bad type", [*M, "--tp-size", "eight"]), "invalid int value"),
    (ArgCase("vLLM's tool parser name", [*M, "--tool-call-parser", "deepseek_v32"]), "invalid choice: 'deepseek_v32'"),
    (ArgCase("vLLM's reasoning parser name", [*M, "--reasoning-parser", "openai_gptoss"]), "'openai_gptoss'"),
    (ArgCase("unknown quantization", [*M, "--quantization", "fp7"]), "invalid choice: 'fp7'"),
    (ArgCase("vLLM's KV dtype name", [*M, "--kv-cache-dtype", "fp8"]), "invalid choice: 'fp8'"),
    (ArgCase("vLLM's memory flag", [*M, "--gpu-memory-utilization", "0.9"]), "unrecognized arguments"),
    (ArgCase("polarity without priority", [*M, "--schedule-low-priority-values-first"]), "no effect without"),
    (ArgCase("LoRA colon in the name", [*M, "--served-model-name", "a:b"]), "must not contain ':'"),
]


def test_every_recipe_on_every_gpu_that_can_run_it_passes_sglang(engine_python_path: Path, sglang_wheel: Path) -> None:
    cases, refused = sglang_cases()
    assert {c.label.split(" on ")[0] for c in cases} == set(load_recipes())  # every recipe runs on SGLang
    assert any("dp-attn 8, ep 8" in c.label for c in cases)  # DP attention + EP shapes are checked too
    broken = [case for case, _ in BROKEN]
    verdicts = check_with_sglang(cases + broken, python=engine_python_path, wheel=sglang_wheel)
    failing = {v.label: v.problems for v in verdicts[: len(cases)] if not v.ok}
    assert failing == {}
    assert len(cases) > 100 and refused  # the kernel matrix refuses some, e.g. FP8 on A100
    by_label = {v.label: v for v in verdicts}
    for case, needle in BROKEN:
        verdict = by_label[case.label]
        assert not verdict.ok and needle in " ".join(verdict.problems), (case.label, verdict.problems)


def test_check_args_cli_for_sglang(
    engine_python_path: Path, sglang_wheel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["engine", "check-args", "--engine", "sglang"]) == 0
    out = capsys.readouterr().out
    assert "engine commands pass SGLang 0.5.23's parser" in out


def test_check_args_cli_refuses_a_command_sglang_rejects(
    engine_python_path: Path, sglang_wheel: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # one real command and one SGLang's parser rejects, judged by that parser through the CLI
    cases, refused = sglang_cases()
    monkeypatch.setattr("llm_fabric.engine.sglang.check.sglang_cases", lambda: ([cases[0], BROKEN[0][0]], refused))
    assert main(["engine", "check-args", "--engine", "sglang"]) == 2
    captured = capsys.readouterr()
    assert "fail unknown flag: " in captured.out and "unrecognized arguments: --tp-sise" in captured.out
    assert "1/2 engine commands pass SGLang 0.5.23's parser" in captured.out
    assert "1 of 2 engine commands fail SGLang 0.5.23's parser" in captured.err
    assert "fix the recipe (engine/models/) or the engine's command.py" in captured.err
