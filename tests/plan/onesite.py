"""A one-site federation in memory (Brno, one owner), for plan tests that choose their own nodes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import (
    Cluster,
    DataClass,
    Deployment,
    FabricConfig,
    Federation,
    GpuInventory,
    HostInventory,
    Jurisdiction,
    NodeManifest,
    Operator,
    PolicySet,
    SiteSpec,
    SovereigntyRule,
    Tenant,
)

OWNER = "cerit"
GPUS = {  # catalog id -> (product name, MiB, compute capability)
    "h100-sxm": ("NVIDIA H100 80GB HBM3", 81559, "9.0"),
    "h200": ("NVIDIA H200", 143771, "9.0"),
    "b200": ("NVIDIA B200", 183359, "10.0"),
}


def node(
    name: str, gpu: str, *, driver: str = "580.82.07", status: str = "active", host: HostInventory | None = None
) -> NodeManifest:
    product, mib, cc = GPUS[gpu]
    return NodeManifest(
        name=name,
        site="brno",
        owner=OWNER,
        tier="full",
        status=status,  # type: ignore[arg-type]
        enrolled_at=datetime(2026, 11, 1, tzinfo=UTC),
        gpus=GpuInventory(
            catalog_id=gpu,
            product=product,
            count=8,
            memory_mib=mib,
            compute_capability=cc,
            interconnect="nvswitch",
            driver_version=driver,
        ),
        host=host or HostInventory(),
    )


def federation(nodes: list[NodeManifest], deployment: Deployment) -> SiteRepo:
    config = FabricConfig(
        federation=Federation(name="one-site", display_name="one site"),
        data_classes={
            "public": DataClass(description="public", rank=0),
            "internal": DataClass(description="i", rank=1),
        },
        sites={
            "brno": SiteSpec(
                display_name="Brno",
                jurisdiction=Jurisdiction(country="CZ", eu=True),
                operator=Operator(name="CERIT-SC", federation_member=True),
                cluster=Cluster(name="brno"),
            )
        },
    )
    return SiteRepo(
        root=Path("/nonexistent"),
        config=config,
        nodes={n.name: n for n in nodes},
        tenants={OWNER: Tenant(name=OWNER, display_name="CERIT", contributor=True, data_classes=["public"])},
        deployments={deployment.name: deployment},
        site_policies={"rules": PolicySet(sovereignty={"internal": SovereigntyRule(prompt_logging=False)})},
    )
