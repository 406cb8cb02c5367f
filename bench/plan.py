"""Benchmark `fabric plan` on synthetic federations: wall time, peak memory, gap to the solver's bound.

Each size runs in a fresh process (so peak RSS is that plan's), `--repeat` times; the median is
reported. The federation is the real pipeline's input (a `SiteRepo` with sites, nodes, tenants with
dedicated allocations, deployments of the shipped recipes with sovereignty classes); only the YAML
reading is skipped.

    .venv/bin/python bench/plan.py                       # 100x20, 1000x100, 10000x500
    .venv/bin/python bench/plan.py --sizes 1000x100 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

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
    SiteSpec,
    Target,
    Tenant,
)

COUNTRIES = [("CZ", True), ("DE", True), ("FR", True), ("CH", False), ("US", False)]
GPUS = [  # catalog id, product, MiB, compute capability, GPUs per node, tier
    ("h200", "NVIDIA H200", 143771, "9.0", 8, "full"),
    ("h200", "NVIDIA H200", 143771, "9.0", 4, "full"),
    ("b200", "NVIDIA B200", 183359, "10.0", 8, "full"),
    ("b300", "NVIDIA B300 SXM6 AC", 275040, "10.3", 8, "full"),
    ("h100-sxm", "NVIDIA H100 80GB HBM3", 81559, "9.0", 8, "full"),
    ("l40s", "NVIDIA L40S", 46068, "8.9", 4, "limited"),
]
RECIPES = [
    "qwen3.5-122b",
    "gpt-oss-120b",
    "mistral-small-4",
    "llama-3.3-70b",
    "qwen3.5",
    "deepseek-v3.2",
    "glm-5.1",
    "kimi-k2.6",
]
CLASSES = {"public": 0, "internal": 1, "sensitive": 2}


def _nodes(rng: random.Random, n_nodes: int, sites: list[str], owners: list[str]) -> dict[str, NodeManifest]:
    out = {}
    for i in range(n_nodes):
        gpu, product, mib, cc, count, tier = rng.choice(GPUS)
        name = f"node-{i:05d}"
        out[name] = NodeManifest(
            name=name,
            site=rng.choice(sites),
            owner=rng.choice(owners),
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
    return out


def _deployments(rng: random.Random, n_deps: int, owners: list[str], gpus_total: int) -> dict[str, Deployment]:
    out = {}
    share = max(1, int(0.5 * gpus_total / n_deps / 4))  # about half the fleet asked for, ~4 GPUs a replica
    for i in range(n_deps):
        name = f"dep-{i:04d}"
        classes = rng.sample(sorted(CLASSES), rng.randint(1, 2))
        common = {
            "name": name,
            "recipe": rng.choice(RECIPES),
            "max_model_len": 32768,
            "data_classes": classes,
            "dedicated_for": rng.choice(owners) if rng.random() < 0.05 else None,
        }
        if rng.random() < 0.3:
            out[name] = Deployment(
                **common, target=Target(concurrent_sessions=rng.randint(10, 20 * share), context_tokens=8192)
            )
        else:
            out[name] = Deployment(**common, replicas=rng.randint(1, max(1, 2 * share)))
    return out


def federation(n_nodes: int, n_deps: int, seed: int = 7) -> SiteRepo:
    rng = random.Random(seed)
    n_sites = max(2, n_nodes // 100)
    sites = {}
    for i in range(n_sites):
        country, eu = COUNTRIES[i % len(COUNTRIES)]
        sites[f"site-{i:03d}"] = SiteSpec(
            display_name=f"site {i}",
            jurisdiction=Jurisdiction(country=country, eu=eu),
            operator=Operator(name=f"op{i}", federation_member=i % 7 != 6),
            cluster=Cluster(name=f"c{i}"),
        )
    owners = [f"group-{i:04d}" for i in range(max(2, n_nodes // 10))]
    nodes = _nodes(rng, n_nodes, sorted(sites), owners)
    contributed: dict[str, int] = {}
    for n in nodes.values():
        contributed[n.owner] = contributed.get(n.owner, 0) + n.gpus.count
    tenants = {}
    for o in owners:
        dedicated = rng.random() < 0.2 and contributed.get(o, 0) > 0
        tenants[o] = Tenant(
            name=o,
            display_name=o,
            contributor=True,
            data_classes=sorted(CLASSES),
            dedicated=Dedicated(gpus=min(8, contributed[o])) if dedicated else None,
        )
    config = FabricConfig(
        federation=Federation(name="synthetic", display_name="synthetic"),
        data_classes={c: DataClass(description=c, rank=r) for c, r in CLASSES.items()},
        sites=sites,
    )
    deps = _deployments(rng, n_deps, owners, sum(contributed.values()))
    return SiteRepo(root=Path("/synthetic"), config=config, nodes=nodes, tenants=tenants, deployments=deps)


def one(n_nodes: int, n_deps: int, time_limit: float) -> dict[str, object]:
    site = federation(n_nodes, n_deps)
    started = time.perf_counter()
    plan = plan_site(site, time_limit_s=time_limit)
    wall = time.perf_counter() - started
    return {
        "nodes": n_nodes,
        "deployments": n_deps,
        "wall_s": round(wall, 3),
        "solve_s": plan.solver.wall_seconds,
        "status": plan.solver.status,
        "gap": plan.solver.gap,
        "node_classes": plan.solver.node_classes,
        "variables": plan.solver.variables,
        "replicas": len(plan.replicas),
        "shortfalls": len(plan.shortfalls),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100x20,1000x100,10000x500", help="NODESxDEPLOYMENTS, comma separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        n, d = (int(x) for x in args.one.split("x"))
        print(json.dumps(one(n, d, args.time_limit)))
        return
    print(
        "| nodes | deployments | wall s (median) | solve s | status | gap | node classes | variables "
        "| replicas | shortfalls | peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run(
                [sys.executable, __file__, "--one", size, "--time-limit", str(args.time_limit)],
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(out.stdout))
        r = sorted(runs, key=lambda x: float(x["wall_s"]))[len(runs) // 2]  # type: ignore[arg-type]
        print(
            f"| {r['nodes']} | {r['deployments']} | {statistics.median(float(x['wall_s']) for x in runs):.2f} "  # type: ignore[arg-type]
            f"| {r['solve_s']} | {r['status']} | {float(r['gap']):.2%} | {r['node_classes']} | {r['variables']} "  # type: ignore[arg-type]
            f"| {r['replicas']} | {r['shortfalls']} | {max(float(x['peak_rss_mb']) for x in runs)} |"
        )  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
