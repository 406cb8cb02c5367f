"""How `fabric canary` judges answers it was given: the script signal, and the majority of three replicas
(the engine-backed runs are tests/live/test_canary.py's; three tiny engines do not fit the test machine)."""

from __future__ import annotations

from llm_fabric.engine.recipes import get_recipe
from llm_fabric.live.canary import Answer, judge_deployment, script_of
from llm_fabric.plan.document import ReplicaPlacement
from tests.deploy.planfixture import CONTEXT, seed_fingerprint


def test_the_script_is_that_of_most_letters() -> None:
    assert [script_of(t) for t in ("Paris", "Париж", "巴黎", "パリ", "Ελλάδα", "33333", "Paris, 巴黎 und Rom")] == [
        "latin", "cyrillic", "han", "kana", "greek", None, "latin",
    ]  # fmt: skip


def _replica(index: int) -> ReplicaPlacement:
    return ReplicaPlacement(
        deployment="qwen3-5", index=index, node=f"node-{index}", site="brno", owner="cerit-sc",
        gpu_indices=[0], gpu_model="b300", tensor_parallel_size=1, quantization="fp8",
        engine_args=["Qwen/Qwen3.5"], data_classes=["public"], checkpoint="Qwen/Qwen3.5", revision=None,
        served_model_name="qwen3-5", context_length=CONTEXT, config_fingerprint=seed_fingerprint("Qwen/Qwen3.5", "fp8"),
    )  # fmt: skip


def test_of_three_replicas_only_the_odd_one_out_fails() -> None:
    prompts = [p for p in get_recipe("qwen3.5").canary if p.name == "capital"]
    replicas = [_replica(i) for i in range(3)]
    texts = {0: "Paris", 1: "Lyon", 2: "Paris"}
    answers = {i: [Answer("capital", text, completion_tokens=2, script="latin")] for i, text in texts.items()}
    notes: list[str] = []
    verdicts = judge_deployment(replicas, answers, {i: f"http://r{i}" for i in texts}, prompts, None, notes)
    assert [(v.name, v.failures) for v in verdicts] == [
        ("qwen3-5/0", []),
        ("qwen3-5/1", ['capital: answer "Lyon" differs from sibling(s) qwen3-5/0, qwen3-5/2']),
        ("qwen3-5/2", []),
    ]
    assert [v.siblings_agree for v in verdicts] == [True, False, True] and notes == []
