"""Property tests on random federations: no placement breaks sovereignty, a dedicated allocation or a
tier, no GPU is given twice, and what cannot be placed is reported (never a silent partial plan).

The checks below restate the rules independently of `llm_fabric.policies` on purpose.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from llm_fabric.engine.recipes import get_recipe
from llm_fabric.plan.document import Plan
from llm_fabric.plan.planning import plan_site
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import (
    Cluster,
    DataClass,
    Dedicated,
    Deployment,
    FabricConfig,
    Federation,
    GpuInventory,
    Jurisdiction,
    NodeManifest,
    Operator,
    PolicySet,
    SiteSpec,
    SovereigntyRule,
    Tenant,
)

SITES = {  # name -> (country, eu, federation member)
    "brno": ("CZ", True, True),
    "praha": ("CZ", True, False),
    "berlin": ("DE", True, True),
    "zurich": ("CH", False, True),
}
GPUS = {"h200": ("NVIDIA H200", 143771, "9.0"), "b200": ("NVIDIA B200", 183359, "10.0")}
MODELS = [
    ("qwen3-5-122b", "qwen3.5-122b", "fp8", 2),
    ("gpt-oss-120b", "gpt-oss-120b", "mxfp4", 1),
    ("mistral-small-4", "mistral-small-4", "fp8", 1),
]
CLASSES = ["public", "internal", "sensitive"]
RULES = PolicySet(
    sovereignty={
        "public": SovereigntyRule(external_fallback=True),
        "internal": SovereigntyRule(eu_only=True),
        "sensitive": SovereigntyRule(
            jurisdictions=["CZ"], eu_only=True, federation_operators_only=True, prompt_logging=False
        ),
    }
)


def _node(i: int, site: str, owner: str, gpu: str, count: int, tier: str) -> NodeManifest:
    product, mib, cc = GPUS[gpu]
    return NodeManifest(
        name=f"n{i}",
        site=site,
        owner=owner,
        tier=tier,  # type: ignore[arg-type]
        enrolled_at=datetime(2026, 10, 1, tzinfo=UTC),
        gpus=GpuInventory(
            catalog_id=gpu,
            product=product,
            count=count,
            memory_mib=mib,
            compute_capability=cc,
            interconnect="nvswitch",
            driver_version="580.82.07",
        ),
    )


@st.composite
def federations(draw: st.DrawFn) -> SiteRepo:
    owners = ["t0", "t1", "t2"]
    nodes = {}
    for i in range(draw(st.integers(1, 5))):
        node = _node(
            i,
            draw(st.sampled_from(sorted(SITES))),
            draw(st.sampled_from(owners)),
            draw(st.sampled_from(sorted(GPUS))),
            draw(st.sampled_from([4, 8])),
            draw(st.sampled_from(["full", "full", "limited"])),
        )
        nodes[node.name] = node
    contributed = Counter[str]()
    for n in nodes.values():
        contributed[n.owner] += n.gpus.count
    tenants = {}
    deployments = {}
    for name, recipe, quant, tp in draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=3, unique=True)):
        deployments[name] = Deployment(
            name=name,
            recipe=recipe,
            quantization=quant,
            tensor_parallel_size=tp,
            replicas=draw(st.integers(1, 3)),
            max_model_len=32768,
            data_classes=draw(st.lists(st.sampled_from(CLASSES), min_size=1, max_size=2, unique=True)),
            dedicated_for=draw(st.sampled_from([None, None, *owners])),
        )
    for owner in owners:
        gpus = draw(st.integers(0, contributed[owner]))
        tenants[owner] = Tenant(
            name=owner,
            display_name=owner,
            contributor=True,
            data_classes=CLASSES,
            dedicated=Dedicated(gpus=gpus) if gpus or draw(st.booleans()) else None,
        )
    config = FabricConfig(
        federation=Federation(name="random", display_name="random"),
        data_classes={c: DataClass(description=c, rank=i) for i, c in enumerate(CLASSES)},
        sites={
            s: SiteSpec(
                display_name=s,
                jurisdiction=Jurisdiction(country=c, eu=eu),
                operator=Operator(name=s, federation_member=m),
                cluster=Cluster(name=s),
            )
            for s, (c, eu, m) in SITES.items()
        },
    )
    return SiteRepo(
        root=Path("/nonexistent"),
        config=config,
        nodes=nodes,
        tenants=tenants,
        deployments=deployments,
        site_policies={"rules": RULES},
    )


def _allowed(site: str, data_class: str) -> bool:
    country, eu, member = SITES[site]
    if data_class == "public":
        return True
    if data_class == "internal":
        return eu
    return country == "CZ" and eu and member


def _check(fed: SiteRepo, plan: Plan) -> None:
    seats = Counter((r.node, g) for r in plan.replicas for g in r.gpu_indices)
    assert not seats or max(seats.values()) == 1, "a GPU is given twice"
    pool_on = Counter[str]()
    for r in plan.replicas:
        node, dep = fed.nodes[r.node], fed.deployments[r.deployment]
        assert all(0 <= g < node.gpus.count for g in r.gpu_indices)
        assert all(_allowed(node.site, dc) for dc in dep.data_classes), f"{r.deployment} on {node.site}"
        assert node.tier == "full" or get_recipe(dep.recipe).small
        if dep.dedicated_for is not None:
            assert node.owner == dep.dedicated_for and r.dedicated_for == dep.dedicated_for
        else:
            pool_on[node.owner] += len(r.gpu_indices)
    for owner, used in pool_on.items():
        ded = fed.tenants[owner].dedicated
        contributed = sum(n.gpus.count for n in fed.nodes.values() if n.owner == owner)
        assert used <= contributed - (ded.gpus if ded else 0), f"pool took {owner}'s dedicated GPUs"
    short = {s.deployment: s for s in plan.shortfalls}
    for name, dep in fed.deployments.items():
        placed = len(plan.replicas_of(name))
        if placed < (dep.replicas or 0):
            assert name in short and short[name].planned == placed and short[name].reasons
            assert not plan.complete
        else:
            assert name not in short


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(federations())
def test_random_federations_never_break_a_rule(fed: SiteRepo) -> None:
    plan = plan_site(fed, time_limit_s=2)
    event("complete" if plan.complete else "with shortfalls or violations")
    event("some replicas placed" if plan.replicas else "nothing placed")
    _check(fed, plan)
