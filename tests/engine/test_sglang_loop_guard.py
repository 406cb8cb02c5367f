"""The loop guard as an SGLang custom logit processor, loaded and called through SGLang's own interface.

The processor string is the one the gateway sends (`request_hooks.loop_guard_fields`), built without
SGLang; the engine venv loads it with the pinned wheel's `CustomLogitProcessor.from_str` and drives it
as SGLang's sampler does (`tests/engine/sglang_guard_runner.py`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from llm_fabric.engine.backends import BACKENDS
from llm_fabric.engine.command import OWNER_PRIORITY, POOL_PRIORITY
from llm_fabric.engine.request_hooks import loop_guard_fields, request_fields, request_priority, serves_first

RUNNER = Path(__file__).with_name("sglang_guard_runner.py")


@pytest.mark.engine
@pytest.mark.slow
def test_sglang_loads_and_runs_the_gateways_loop_guard(engine_python_path: Path, sglang_wheel: Path) -> None:
    fields = loop_guard_fields("sglang")
    done = subprocess.run(
        [str(engine_python_path), str(RUNNER), str(sglang_wheel)],
        input=fields["custom_logit_processor"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["to_str_matches"]  # the gateway's string is SGLang's own serialization of the guard
    assert result["loaded"] == "llm_fabric.engine.runtime.sglang_loop_guard:SglangLoopGuard"
    assert result["is_custom_logit_processor"]
    loops_at = result["detector_loops_at"]
    ended = result["ended"]
    # EOS is forced on the step after the token that completed the loop, exactly as the detector says
    assert ended["looping"] == loops_at + 1
    assert ended["prose"] is None and ended["opted_out"] is None  # no loop; guard off for this request
    assert ended["tuned"] == 128  # loop_guard_min_span 128: the 4-token cycle must cover 128 tokens first
    assert result["stops"] == 2
    assert result["request_freed"]


def test_priority_polarity_per_engine() -> None:
    # the fabric starts SGLang with --schedule-low-priority-values-first: the same numbers as vLLM's
    started = {
        "vllm": ["--scheduling-policy", "priority"],
        "sglang": ["--enable-priority-scheduling", "--schedule-low-priority-values-first"],
    }
    for engine, args in started.items():
        chosen = BACKENDS[engine]  # type: ignore[index]
        assert chosen.priority_scheduling(args)
        low = chosen.low_values_first(args)
        owner, pool = (
            request_priority(owner=True, low_values_first=low),
            request_priority(owner=False, low_values_first=low),
        )
        assert (owner, pool) == (OWNER_PRIORITY, POOL_PRIORITY)
        assert serves_first(owner, pool, low_values_first=low)
    assert not BACKENDS["vllm"].priority_scheduling(["--scheduling-policy", "fcfs"])
    # an SGLang engine on its default polarity (higher first) gets mirrored numbers: the owner still goes first
    low = BACKENDS["sglang"].low_values_first(["--enable-priority-scheduling"])
    assert not low
    owner, pool = (
        request_priority(owner=True, low_values_first=low),
        request_priority(owner=False, low_values_first=low),
    )
    assert owner > pool and serves_first(owner, pool, low_values_first=low)


def test_request_fields_per_engine() -> None:
    assert request_fields("vllm", owner=None) == {}  # vLLM loads the guard at start-up; no priority scheduling
    assert request_fields("vllm", owner=True, loop_guard=False) == {
        "vllm_xargs": {"loop_guard": False},
        "priority": OWNER_PRIORITY,
    }
    sglang = request_fields("sglang", owner=False)
    assert sglang["priority"] == POOL_PRIORITY
    assert json.loads(sglang["custom_logit_processor"]).keys() == {"callable"}
    assert sglang["custom_params"] == {"loop_guard": True}
