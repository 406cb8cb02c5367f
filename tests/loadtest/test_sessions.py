"""Agentic sessions (`llm_fabric.loadtest.sessions`): their plan, and the burst command's refusals.

Sending them is tested through the real gateway (tests/gateway/test_sessions.py) and to the real
engine (tests/gateway/test_engine.py).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.errors import UsageError
from llm_fabric.loadtest.burst import lognormal_lengths, nearest_rank
from llm_fabric.loadtest.sessions import MIN_TASK_CHARS, plan_sessions, shared_prefix


def test_sessions_share_one_prefix_grow_each_turn_and_keep_the_distribution() -> None:
    plan = plan_sessions(
        4, 5, p50=1100, p95=33958, tenants=["a", "b"], prefix_chars=550, max_prompt_tokens=60000, max_output_tokens=9999
    )
    assert plan == plan_sessions(
        4, 5, p50=1100, p95=33958, tenants=["a", "b"], prefix_chars=550, max_prompt_tokens=60000, max_output_tokens=9999
    )
    assert {s.system for s in plan} == {shared_prefix(550)} and len(shared_prefix(550)) == 550
    assert len({s.task for s in plan}) == 4 and [s.tenant for s in plan] == ["a", "b", "a", "b"]
    lengths = [t.prompt_chars for s in plan for t in s.turns]
    assert sorted(lengths) == lognormal_lengths(20, 1100, 33958, minimum=550 + MIN_TASK_CHARS, maximum=60000)
    assert (nearest_rank(lengths, 50), nearest_rank(lengths, 95)) == (1100, 33958)
    for session in plan:
        own = [t.prompt_chars for t in session.turns]
        assert own == sorted(own) and own[0] == len(session.system) + len(session.task)
        assert [t.max_tokens for t in session.turns] == [round(n / 17) for n in own]
    assert session.tool_result(3, 40) == session.tool_result(3, 40) and len(session.tool_result(3, 40)) == 40


def test_the_output_cap_and_impossible_shapes() -> None:
    plan = plan_sessions(
        1, 3, p50=600, p95=2000, tenants=["a"], prefix_chars=300, max_prompt_tokens=900, max_output_tokens=20
    )
    assert max(t.prompt_chars for t in plan[0].turns) == 900 and max(t.max_tokens for t in plan[0].turns) == 20
    with pytest.raises(UsageError, match="preamble and tool list"):
        shared_prefix(50)
    with pytest.raises(UsageError, match="below the p50"):
        plan_sessions(
            2, 2, p50=300, p95=900, tenants=["a"], prefix_chars=290, max_prompt_tokens=900, max_output_tokens=9
        )
    with pytest.raises(UsageError, match="tenant"):
        plan_sessions(2, 2, p50=600, p95=900, tenants=[], prefix_chars=300, max_prompt_tokens=900, max_output_tokens=9)


def _burst(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["engine", "burst", "--url", "http://127.0.0.1:9", *args])
    return code, out.getvalue()


def test_the_burst_refuses_what_it_cannot_do_before_sending(tmp_path: Path) -> None:
    records = str(tmp_path / "r.jsonl")
    assert _burst("--model", "m", "--tenant", "a", "--tenant", "b", "--api-key", "k", "--records", records)[0] == 2
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"apiVersion": "llm-fabric/v1", "kind": "Plan", "federation": "f", "solver": {
        "status": "trivial", "objective": 0, "best_bound": 0, "gap": 0, "wall_seconds": 0, "node_classes": 0,
        "variables": 0}}))  # fmt: skip
    code, out = _burst("--model", "m", "--plan", str(plan), "--records", records)
    assert code == 2 and "--plan needs --deployment" in out
    code, out = _burst("--plan", str(plan), "--deployment", "qwen3-5", "--sessions", "2", "--records", records)
    assert code == 2 and "has no deployment `qwen3-5`" in out
    assert _burst("--sessions", "2", "--records", records)[0] == 2  # no model named
    assert not (tmp_path / "r.jsonl").exists()
