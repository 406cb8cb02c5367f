"""A plan with a rollout, for the delivery tests: the seed-000 plan with two waves at brno.

Hand-built on purpose, and only here: `Plan.rollout` is filled by `fabric plan --base` (review/rollout.py),
which another change builds at the same time; these tests take the document's model as the contract. A test
chaining `fabric plan --base` and `fabric render` replaces them once both are merged.

Wave 1: the surge replica of qwen3-5 (standing in for qwen3-5/0, on free H200 GPUs) and the restart of
mistral-small-4/0 (an accepted outage); wave 2: the restart of qwen3-5/0, once its surge is ready.
"""

from __future__ import annotations

from llm_fabric.plan.document import (
    DeploymentRollout,
    Plan,
    ReplicaRestart,
    Rollout,
    RolloutWave,
    SurgeReplica,
)
from tests.deploy.planfixture import seed_plan

SURGE_NODE = "hgx-h200-ceitec"
SURGE_GPUS = [4, 5]  # the seed plan leaves them free


def rollout_plan(base: Plan | None = None) -> Plan:
    plan = base or seed_plan()
    qwen = plan.replicas_of("qwen3-5")[0]
    surge = qwen.model_copy(update={"node": SURGE_NODE, "gpu_indices": SURGE_GPUS, "gpu_model": "h200"})
    rollout = Rollout(
        base_revision="0" * 40,
        deployments=[
            DeploymentRollout(
                deployment="qwen3-5",
                max_unavailable=1,
                restarts=[ReplicaRestart(index=0, reason="fingerprint")],
                surges=[SurgeReplica(replaces=0, placement=surge, source="free")],
                waves=[
                    RolloutWave(wave=1, surges=[0], serving=2, target=1, cold_start_s=400),
                    RolloutWave(wave=2, restarts=[0], serving=1, target=1, cold_start_s=900),
                ],
            ),
            DeploymentRollout(
                deployment="mistral-small-4",
                max_unavailable=1,
                restarts=[ReplicaRestart(index=0, reason="engine")],
                waves=[RolloutWave(wave=1, restarts=[0], serving=0, target=1, cold_start_s=300)],
                outage_s=300,
                outage_accepted="a test: the outage is reviewed",
            ),
        ],
    )
    return plan.model_copy(update={"rollout": rollout})
