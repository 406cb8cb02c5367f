"""The plan: which replica of which deployment runs on which node and GPUs, with what engine args.

`build_plan(site, base)` is the one entry point; the resource builders (Kubernetes, Pulumi, YAML)
read `Plan.replicas` and nothing else of the site repo's placement. A plan that misses a target
says so in `shortfalls` (in words) and `complete` is False: callers that deploy must refuse it
(`require_complete()`), never deploy part of it silently.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llm_fabric.basemodel import FabricModel
from llm_fabric.errors import PolicyRefusal, Problem
from llm_fabric.policies.violations import Violation
from llm_fabric.site.loader import SiteRepo


class ReplicaPlacement(FabricModel):
    deployment: str
    index: int = Field(ge=0, description="0-based replica number within the deployment")
    node: str
    site: str
    owner: str = Field(description="the node's owner (contributing tenant)")
    gpu_indices: list[int] = Field(description="GPU indices on the node (CUDA_VISIBLE_DEVICES order)")
    gpu_model: str = Field(description="GPU catalog id")
    tensor_parallel_size: int = Field(ge=1)
    quantization: str
    engine_args: list[str] = Field(description="`vllm serve` arguments after `serve`, model first")
    engine_env: dict[str, str] = Field(default_factory=dict)
    dedicated_for: str | None = Field(None, description="tenant whose traffic this replica serves first")
    data_classes: list[str]


class DeploymentCapacity(FabricModel):
    """Capacity of a deployment as planned (summed over its replicas)."""

    deployment: str
    recipe: str
    quantization: str
    kv_cache_dtype: str | None = None
    replicas_wanted: int = Field(description="replicas asked for, or needed to meet the target")
    replicas_planned: int
    target_sessions: int | None = None
    target_context_tokens: int | None = None
    context_p50: int
    context_p95: int
    weights_gb: float = Field(description="weights per replica (decimal GB)")
    kv_pool_gb: float = Field(description="KV cache pool per replica (decimal GB)")
    max_concurrency_p50: int = Field(description="sessions at the p50 context, all replicas")
    max_concurrency_p95: int = Field(description="sessions at the p95 context, all replicas")
    max_concurrency_target: int | None = Field(None, description="sessions at the target's context, all replicas")
    decode_tokens_per_s_single: float = Field(description="one stream alone, slowest replica")
    decode_tokens_per_s_per_user: float = Field(description="per stream with every p50 slot busy")
    decode_tokens_per_s_total: float = Field(description="all replicas, every p50 slot busy")
    engine_summary: str = Field(description="the engine args that matter, in one line")
    data_classes: list[str]
    prompt_logging: bool = Field(description="false when any data class it serves forbids logging prompts")
    external_fallback: bool = Field(description="true only when every data class it serves allows it")
    met: bool


class Shortfall(FabricModel):
    """A target the plan does not meet, and why, in words."""

    deployment: str
    wanted: int
    planned: int
    unit: Literal["replicas", "sessions"]
    reasons: list[str]

    def to_problem(self) -> Problem:
        return Problem(
            f"deployment `{self.deployment}`: planned {self.planned} of {self.wanted} {self.unit}",
            field=f"deployments/{self.deployment}",
            hint="; ".join(self.reasons),
        )


class OwnerAllocation(FabricModel):
    owner: str
    contributed_gpus: int
    dedicated_gpus: int = Field(description="GPUs held for the owner's own traffic")
    lent_gpus: int = Field(description="contributed GPUs the pool may use")
    used_by_pool_gpus: int = Field(description="of the owner's GPUs, those running pool replicas")
    lend_surplus: bool = Field(description="idle dedicated capacity is lent to the pool at run time")


class SiteUsage(FabricModel):
    site: str
    country: str
    gpus_total: int
    gpus_used: int
    gpus_free: int


class SolverReport(FabricModel):
    status: Literal["optimal", "feasible", "first-fit", "infeasible", "unknown", "model_invalid", "trivial"] = Field(
        description="first-fit: the solver improved nothing within its time limit; the plan is the greedy start")
    objective: float
    best_bound: float
    gap: float = Field(description="relative gap between the objective and the solver's bound (0 = proven optimal)")
    wall_seconds: float
    node_classes: int = Field(description="groups of interchangeable nodes the model reasons about")
    variables: int
    moves: int = Field(0, description="replicas moved or removed compared with the base plan")


class Plan(FabricModel):
    version: Literal[1] = 1
    federation: str
    replicas: list[ReplicaPlacement] = Field(default_factory=list)
    deployments: dict[str, DeploymentCapacity] = Field(default_factory=dict)
    shortfalls: list[Shortfall] = Field(default_factory=list)
    owners: dict[str, OwnerAllocation] = Field(default_factory=dict)
    sites: dict[str, SiteUsage] = Field(default_factory=dict)
    violations: list[Violation] = Field(default_factory=list)
    reclaim_order: list[str] = Field(default_factory=list)
    solver: SolverReport

    @property
    def complete(self) -> bool:
        return not self.shortfalls and not self.violations

    def replicas_of(self, deployment: str) -> list[ReplicaPlacement]:
        return [r for r in self.replicas if r.deployment == deployment]

    def require_complete(self) -> Plan:
        """The plan, or PolicyRefusal (exit 3) listing every shortfall and violation."""
        if self.complete:
            return self
        problems = [v.to_problem() for v in self.violations] + [s.to_problem() for s in self.shortfalls]
        raise PolicyRefusal(
            f"the plan for `{self.federation}` is incomplete ({len(problems)} problems)",
            problems=problems,
            hint="run `fabric plan` to see the placement and the reasons",
        )


def build_plan(site: SiteRepo, base: Plan | None = None) -> Plan:
    """Evaluate the policies, size every deployment, solve the placement; `base` keeps replicas in place."""
    from llm_fabric.deploy.planning import plan_site  # the solver stack is imported only when planning

    return plan_site(site, base)
