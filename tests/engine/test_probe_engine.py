"""The rendered probes of a vLLM replica against the real vLLM (CPU) serving the tiny model.

The reference site is rendered by the real commands; the qwen3-5 replica's probe commands run with
the engine venv's Python (the image's: llm_fabric installed beside vLLM), pointed at the test's
engine: its port, and the served name it was started with (the recipe's id, not the deployment's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llm_fabric.engine.process import LocalEngine
from llm_fabric.engine.runtime.probe import PROMPT
from llm_fabric.serving.probes import LIVE_TOKENS
from tests.engine.live import counter_totals
from tests.engine.probe_runner import flag_value, probe_commands, render_engines, run_rendered
from tests.fixtures.engine import ENGINE_RECIPE, get_text

pytestmark = [pytest.mark.engine, pytest.mark.slow]

COUNTERS = {"prompt": "vllm:prompt_tokens_total", "generation": "vllm:generation_tokens_total"}


@pytest.fixture(scope="module")
def vllm_pod(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return render_engines(tmp_path_factory.mktemp("vllm-render"), sglang=False)["qwen3-5-0"]


def test_the_generating_probe_passes_on_the_real_engine_and_costs_what_the_docs_say(
    vllm_pod: dict[str, Any], tiny_engine: LocalEngine, engine_python_path: Path, tmp_path: Path
) -> None:
    commands = probe_commands(vllm_pod)
    # the rendered request skips the loop guard through vLLM's own extension field
    assert flag_value(commands["live"], "--fields") == '{"vllm_xargs":{"loop_guard":false}}'
    port = str(tiny_engine.port)
    state = str(tmp_path / "liveness")
    before = counter_totals(get_text(tiny_engine, "/metrics"), COUNTERS)
    live = run_rendered(
        commands["live"], engine_python_path, {"--port": port, "--model": ENGINE_RECIPE, "--state-file": state}, 120
    )
    assert live.returncode == 0, live.stdout + live.stderr
    assert live.stdout.startswith(f"live: ok: {LIVE_TOKENS} tokens in "), live.stdout
    after = counter_totals(get_text(tiny_engine, "/metrics"), COUNTERS)
    # one probe: the prompt (the tiny model's tokenizer is byte-level) and LIVE_TOKENS greedy tokens
    assert after["generation"] - before["generation"] == LIVE_TOKENS
    assert after["prompt"] - before["prompt"] == len(PROMPT.encode())
    ready = run_rendered(
        commands["ready"],
        engine_python_path,
        {"--port": port, "--drain-file": str(tmp_path / "draining"), "--live-state-file": state},
        60,
    )
    assert ready.returncode == 0, ready.stdout + ready.stderr
    assert ready.stdout.startswith("ready: ok: healthy; the canary prober could not be read")


def test_the_drain_reads_vllms_running_gauge(
    vllm_pod: dict[str, Any], tiny_engine: LocalEngine, engine_python_path: Path, tmp_path: Path
) -> None:
    commands = probe_commands(vllm_pod)
    assert flag_value(commands["drain"], "--running-metric") == "vllm:num_requests_running"
    values = {"--port": str(tiny_engine.port), "--drain-file": str(tmp_path / "draining"), "--settle": "0"}
    drain = run_rendered(commands["drain"], engine_python_path, values, 60)
    assert drain.returncode == 0, drain.stdout + drain.stderr
    assert drain.stdout.startswith("drain: drained: no request running after "), drain.stdout
    assert (tmp_path / "draining").exists()
