"""Planning a site repo: policies -> node classes and sized options -> CP-SAT placement -> the plan.

`plan_site` makes the plan document (`llm_fabric.plan.document`). The steps are plain functions over the
site repo; the solver core (`placement`) and the node packing (`packing`) know nothing of YAML.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from dataclasses import dataclass, field

from llm_fabric.engine.backends import deployment_engine
from llm_fabric.engine.capacity.parallelism import Layout, tp_layout
from llm_fabric.engine.recipes import Recipe, load_recipes
from llm_fabric.hardware.catalog import GpuCatalog, load_gpu_catalog
from llm_fabric.hardware.kernel_matrix import KernelMatrix, load_kernel_matrix
from llm_fabric.plan.document import Plan, ReplicaPlacement, Shortfall, SolverReport, SpareHold
from llm_fabric.plan.figures import (
    EngineSetup,
    deployment_capacity,
    engine_for,
    node_entries,
    owner_allocations,
    site_usage,
)
from llm_fabric.plan.multinode import MultiNodePlan, plan_multi_node
from llm_fabric.plan.shortfalls import DemandInfo, shortfalls_of
from llm_fabric.plan.sizing import Sizing, size_on
from llm_fabric.plan.solver.packing import Request, Seat, pack_class
from llm_fabric.plan.solver.placement import Demand, NodeClass, Option, PlacementProblem, PlacementSolution, solve
from llm_fabric.plan.spares import base_seats, released_seats, spare_demands, spare_holds
from llm_fabric.policies.allocation import OwnerShare, allocation_policy, owner_shares
from llm_fabric.policies.defaults import effective_policies
from llm_fabric.policies.eligibility import ModelFacts, node_refusals
from llm_fabric.policies.gate import evaluate_policies, waiting_for_nodes
from llm_fabric.policies.spares import SpareAsk, spare_asks
from llm_fabric.site.models import Deployment, NodeManifest, PolicySet
from llm_fabric.trust.sites import TrustedSite, back_in_service

TIME_LIMIT_ENV = "FABRIC_PLAN_TIME_LIMIT"


@dataclass
class PlanContext:
    site: TrustedSite
    policies: PolicySet
    shares: dict[str, OwnerShare]
    recipes: dict[str, Recipe]
    catalog: GpuCatalog
    matrix: KernelMatrix
    util: float
    facts: dict[str, ModelFacts | None] = field(default_factory=dict)
    sizings: dict[tuple[Hashable, str, int, str | None], Sizing] = field(default_factory=dict)
    verdicts: dict[tuple[int, int], bool] = field(default_factory=dict)
    profiles: dict[str, int] = field(default_factory=dict)
    interned: dict[Hashable, int] = field(default_factory=dict)  # profiles and node views -> small numbers
    views: dict[tuple[str, str | None], int] = field(default_factory=dict)  # (node, dedicated_for) -> view
    profile_slot: dict[int, int] = field(default_factory=dict)  # profile -> its place in `class_verdicts`
    class_verdicts: list[tuple[bool, ...]] = field(default_factory=list)  # per node class, per profile
    options: dict[tuple[int, Hashable], list[Option]] = field(default_factory=dict)
    pinned: set[str] = field(default_factory=set)
    multi: MultiNodePlan = field(default_factory=MultiNodePlan)
    asks: list[SpareAsk] = field(default_factory=list)  # the policies' spares, released or not
    spare_nodes: set[str] = field(default_factory=set)  # nodes of a released spare: replicas go there first

    @classmethod
    def of(cls, site: TrustedSite) -> PlanContext:
        recipes = load_recipes()
        policies = effective_policies(site)
        ctx = cls(
            site,
            policies,
            owner_shares(site, policies),
            recipes,
            load_gpu_catalog(),
            load_kernel_matrix(),
            site.config.defaults.gpu_memory_utilization,
        )
        ctx.pinned = {n for d in site.deployments.values() for n in d.placement.nodes}
        for name, dep in site.deployments.items():
            r = recipes.get(dep.recipe)
            ctx.facts[name] = None if r is None else ModelFacts(small=r.small, total_params_b=r.total_params_b)
        ctx.asks = spare_asks(
            site, policies, lambda d: waiting_for_nodes(site, policies, site.deployments[d], ctx.facts.get(d))
        )
        return ctx

    def sizing(self, dep: Deployment, gpu_model: str, gpus_per_node: int, interconnect: str | None = None) -> Sizing:
        """`interconnect`: the one the node's enrollment measured, when it differs from the catalog's (the
        expected speed's collectives run over it)."""
        key = (_sizing_key(dep), gpu_model, gpus_per_node, interconnect)
        if key not in self.sizings:
            recipe = self.recipes[dep.recipe]
            if gpu_model not in self.catalog:
                self.sizings[key] = Sizing(gpu_model, dep.quantization or "?", refusal=f"GPU `{gpu_model}` unknown")
            else:
                gpu = self.catalog.get(gpu_model)
                if interconnect is not None and interconnect != gpu.interconnect:
                    gpu = gpu.model_copy(update={"interconnect": interconnect})
                self.sizings[key] = size_on(dep, recipe, gpu, gpus_per_node, self.matrix, self.util)
        return self.sizings[key]

    def profile(self, dep: Deployment) -> int:
        """Everything of a deployment that `node_refusals` decides on (not the name it says in messages),
        as a small number: deployments with one profile are refused by the same nodes, so eligibility is
        computed once per profile and node view instead of once per deployment and node class."""
        if dep.name not in self.profiles:
            reserving = frozenset(o for o, s in self.shares.items() if dep.name in s.reserved_replicas)
            key = (
                tuple(dep.placement.nodes),
                tuple(dep.placement.sites),
                tuple(dep.placement.gpu_models),
                tuple(dep.data_classes),
                dep.dedicated_for,
                self.facts.get(dep.name),
                reserving,
                dep.recipe in self.recipes,
            )
            self.profiles[dep.name] = self.interned.setdefault(key, len(self.interned))
        return self.profiles[dep.name]

    def node_view(self, dep: Deployment, node: NodeManifest) -> int:
        """What of a node `node_refusals` decides on for `dep`, as a small number: the owner only as
        "is it the one `dedicated_for` names" or as an owner that lends nothing; the name only where a
        deployment pins nodes."""
        memo = (node.name, dep.dedicated_for)
        if memo in self.views:
            return self.views[memo]
        if dep.dedicated_for:
            owner: object = node.owner == dep.dedicated_for
        else:
            share = self.shares.get(node.owner)
            owner = node.owner if share is not None and share.pool_limit == 0 else ""
        key = (
            node.status,
            node.site,
            node.tier,
            node.gpus.catalog_id,
            owner,
            node.name if node.name in self.pinned else "",
        )
        view = self.views[memo] = self.interned.setdefault(key, len(self.interned))
        return view

    def eligible(self, dep: Deployment, node: NodeManifest) -> bool:
        key = (self.profile(dep), self.node_view(dep, node))
        verdict = self.verdicts.get(key)
        if verdict is None:
            share = self.shares.get(node.owner)
            verdict = self.verdicts[key] = dep.recipe in self.recipes and not node_refusals(
                self.site, self.policies, dep, node, self.facts.get(dep.name), share
            )
        return verdict

    def refusals(self, dep: Deployment, node: NodeManifest) -> list[str]:
        """Why `dep` may not run on `node`, in words (computed only for the reports that show it)."""
        out = node_refusals(self.site, self.policies, dep, node, self.facts.get(dep.name), self.shares.get(node.owner))
        if dep.recipe not in self.recipes:
            out.append(f"recipe `{dep.recipe}` is unknown")
        return out


def _sizing_key(dep: Deployment) -> Hashable:
    """Everything of a deployment that `size_on` reads: deployments of one shape share their sizing."""
    target = dep.target.context_tokens if dep.target else None
    context = (dep.context.p50, dep.context.p95) if dep.context else None
    return (
        dep.recipe,
        dep.quantization,
        dep.tensor_parallel_size,
        dep.kv_cache_dtype,
        dep.max_model_len,
        context,
        target,
        dep.parallelism,
        (dep.target.itl_ms, dep.target.ttft_ms, dep.target.output_tokens) if dep.target else None,
    )


def _owner_matters(ctx: PlanContext) -> set[str]:
    """Owners whose allocation constrains placement: their nodes cannot be pooled with others'."""
    out = {d.dedicated_for for d in ctx.site.deployments.values() if d.dedicated_for}
    for owner, share in ctx.shares.items():
        if share.reserved_replicas or share.pool_limit < share.contributed:
            out.add(owner)
    return {o for o in out if o is not None}


def node_classes(ctx: PlanContext) -> tuple[list[NodeClass], list[NodeManifest]]:
    """Classes of interchangeable active nodes, and one representative node per class.

    Nodes group by GPU model, count and interconnect, owner (where its allocation matters) and pin, and then by the
    verdict of every eligibility profile: two sites whose rules admit the same deployments are one class
    (with 100 sites in five jurisdictions, a handful of classes per GPU shape rather than hundreds)."""
    owners = _owner_matters(ctx)
    groups: dict[tuple[str, ...], list[NodeManifest]] = {}
    for name, node in sorted(ctx.site.nodes.items()):
        if node.status != "active" or name in ctx.multi.taken:  # whole nodes of multi-node replicas
            continue
        key: tuple[str, ...] = (
            node.gpus.catalog_id,
            str(node.gpus.count),
            node.site,
            node.tier,
            node.owner if node.owner in owners else "",
            name if name in ctx.pinned else "",
            node.gpus.interconnect,  # what the enrollment measured: the expected speed's collectives use it
            "spare" if name in ctx.spare_nodes else "",
        )
        groups.setdefault(key, []).append(node)
    profiles = {ctx.profile(d): d for _, d in sorted(ctx.site.deployments.items())}
    ctx.profile_slot = {p: i for i, p in enumerate(profiles)}
    merged: dict[tuple[object, ...], tuple[tuple[str, ...], list[NodeManifest], tuple[bool, ...]]] = {}
    for key, nodes in sorted(groups.items()):
        verdicts = tuple(ctx.eligible(dep, nodes[0]) for dep in profiles.values())
        merged.setdefault((key[0], key[1], key[4], key[5], key[6], key[7], verdicts), (key, [], verdicts))[1].extend(
            nodes
        )
    classes: list[NodeClass] = []
    reps: list[NodeManifest] = []
    ctx.class_verdicts = []
    for key, nodes, verdicts in sorted(merged.values(), key=lambda kv: kv[0]):
        ctx.class_verdicts.append(verdicts)
        nodes.sort(key=lambda n: n.name)
        rep = nodes[0]
        classes.append(
            NodeClass(
                "/".join(k for k in key if k),
                tuple(n.name for n in nodes),
                rep.gpus.count,
                owner=rep.owner if key[4] else None,
                spare=bool(key[7]),
            )
        )
        reps.append(rep)
    return classes, reps


def _options(
    ctx: PlanContext, dep: Deployment, classes: list[NodeClass], reps: list[NodeManifest], info: DemandInfo
) -> list[Option]:
    key = (ctx.profile(dep), _sizing_key(dep))
    options = ctx.options.get(key)
    slot = ctx.profile_slot.get(key[0])
    if options is None:  # deployments alike for policy and sizing have the same options
        sized: list[tuple[int, Sizing]] = []
        for c, rep in enumerate(reps):
            if ctx.class_verdicts[c][slot] if slot is not None else ctx.eligible(dep, rep):
                s = ctx.sizing(dep, rep.gpus.catalog_id, classes[c].gpus_per_node, rep.gpus.interconnect)
                if s.ok:
                    sized.append((c, s))
        best = max((s.sessions_per_replica for _, s in sized), default=1)
        options = ctx.options[key] = [
            Option(
                c,
                s.gpus,
                capacity=max(1, s.sessions_per_replica),
                quality=round(9 * s.sessions_per_replica / max(1, best)),
            )
            for c, s in sized
        ]
    if not options:  # the reasons in words, for the shortfall that will say why nothing is placed
        for c, rep in enumerate(reps):
            refusals = ctx.refusals(dep, rep)
            if not refusals:
                sizing = ctx.sizing(dep, rep.gpus.catalog_id, classes[c].gpus_per_node, rep.gpus.interconnect)
                refusals = [sizing.refusal or "does not fit"]
            info.refusals[c] = refusals
    return list(options)


def build_demands(
    ctx: PlanContext, classes: list[NodeClass], reps: list[NodeManifest], base: Plan | None
) -> tuple[list[Demand], list[Deployment], list[DemandInfo]]:
    class_of = {n: c for c, cls in enumerate(classes) for n in cls.nodes}
    demands: list[Demand] = []
    deps: list[Deployment] = []
    infos: list[DemandInfo] = []
    for name, dep in sorted(ctx.site.deployments.items()):
        if dep.replicas == 0:
            continue
        info = DemandInfo()
        options = _options(ctx, dep, classes, reps, info)
        reserved = {o: s.reserved_replicas[name] for o, s in ctx.shares.items() if s.reserved_replicas.get(name)}
        demand = Demand(name, options, dedicated_owner=dep.dedicated_for, reserved=reserved)
        info.covered = ctx.multi.covered.get(name, 0)  # what multi-node replicas hold leaves the solver less
        if name in ctx.multi.notes:
            info.notes.append(ctx.multi.notes[name])
        if dep.target is not None:
            demand.sessions = max(0, dep.target.concurrent_sessions - info.covered)
            worst = min((o.capacity for o in options), default=1)
            demand.max_replicas = -(-demand.sessions // max(1, worst))
        else:
            demand.replicas = max(0, (dep.replicas or 0) - info.covered)
        for r in base.replicas_of(name) if base is not None else []:
            if r.node in class_of:
                demand.base[class_of[r.node]] = demand.base.get(class_of[r.node], 0) + 1
        demands.append(demand)
        deps.append(dep)
        infos.append(info)
    return demands, deps, infos


def _time_limit() -> float:
    try:
        return float(os.environ.get(TIME_LIMIT_ENV, "10"))
    except ValueError:
        return 10.0


def _requests(
    problem: PlacementProblem, sol: PlacementSolution, base: Plan | None
) -> tuple[dict[int, list[Request]], dict[tuple[str, int], str | None]]:
    """Replica requests per class (with their base seats), and who each replica is dedicated to."""
    per_class: dict[int, list[Request]] = {}
    dedicated: dict[tuple[str, int], str | None] = {}
    for d, demand in enumerate(problem.demands):
        before = base_seats(base, demand.name)
        ordinal = 0
        for o, count in sorted(sol.counts[d].items()):
            opt = demand.options[o]
            cls = problem.classes[opt.node_class]
            seats = [(node, gpus) for node, gpus in before if node in cls.nodes and len(gpus) == opt.gpus]
            reserved_here = sol.dedicated[d].get(o, 0)
            for i in range(count):
                node, gpus = seats[i] if i < len(seats) else (None, ())
                key = (demand.name, ordinal)
                per_class.setdefault(opt.node_class, []).append(Request(key, opt.gpus, node, gpus))
                dedicated[key] = demand.dedicated_owner or (cls.owner if i < reserved_here else None)
                ordinal += 1
    return per_class, dedicated


def _index_replicas(seats: dict[tuple[str, int], Seat], base: Plan | None) -> dict[tuple[str, int], int]:
    """Replica numbers: a replica on the node and GPUs it had in the base keeps its number."""
    out: dict[tuple[str, int], int] = {}
    by_dep: dict[str, list[tuple[str, int]]] = {}
    for key in sorted(seats, key=lambda k: (k[0], seats[k].node, seats[k].gpu_indices)):
        by_dep.setdefault(key[0], []).append(key)
    for dep, keys in by_dep.items():
        old = {(r.node, tuple(r.gpu_indices)): r.index for r in (base.replicas_of(dep) if base else [])}
        used: set[int] = set()
        for key in keys:
            idx = old.get((seats[key].node, seats[key].gpu_indices))
            if idx is not None and idx not in used:
                out[key] = idx
                used.add(idx)
        free = (i for i in range(len(keys) + len(used)) if i not in used)
        for key in keys:
            if key not in out:
                out[key] = next(free)
    return out


def decode(
    ctx: PlanContext, problem: PlacementProblem, sol: PlacementSolution, base: Plan | None
) -> tuple[list[ReplicaPlacement], list[SpareHold]]:
    per_class, dedicated = _requests(problem, sol, base)
    packed: dict[tuple[str, int], Seat] = {}
    for c, reqs in per_class.items():
        cls = problem.classes[c]
        packed.update(pack_class(cls.nodes, cls.gpus_per_node, reqs))
    spare_keys = {d.name for d in problem.demands if d.spare}
    seats = {k: s for k, s in packed.items() if k[0] not in spare_keys}
    holds = spare_holds(ctx.asks, problem, sol, {k: s for k, s in packed.items() if k[0] in spare_keys}, ctx.site, base)
    index = _index_replicas(seats, base)
    out: list[ReplicaPlacement] = []
    engines: dict[tuple[str, str, Layout, bool], EngineSetup] = {}  # alike replicas, one command
    for key, seat in seats.items():
        dep = ctx.site.deployments[key[0]]
        node = ctx.site.nodes[seat.node]
        sizing = ctx.sizing(dep, node.gpus.catalog_id, node.gpus.count, node.gpus.interconnect)
        layout = sizing.layout or tp_layout(len(seat.gpu_indices), node.gpus.count)
        owner = dedicated[key]
        priority = owner is not None and (ctx.shares[owner].lend_surplus if owner in ctx.shares else False)
        shape = (dep.name, node.gpus.catalog_id, layout, priority)
        if shape not in engines:
            engines[shape] = engine_for(
                ctx.recipes[dep.recipe],
                dep,
                ctx.catalog.get(node.gpus.catalog_id),
                layout,
                sizing.quantization,
                ctx.util,
                priority=priority,
                engine=deployment_engine(dep, ctx.recipes[dep.recipe], ctx.site.config.defaults.engine),
            )
        out.append(
            ReplicaPlacement(
                deployment=dep.name,
                index=index[key],
                node=node.name,
                site=node.site,
                owner=node.owner,
                gpu_indices=list(seat.gpu_indices),
                gpu_model=node.gpus.catalog_id,
                tensor_parallel_size=layout.tensor_parallel_size,
                parallelism=layout.strategy,
                data_parallel_size=layout.data_parallel_size,
                quantization=sizing.quantization,
                engine=deployment_engine(dep, ctx.recipes[dep.recipe], ctx.site.config.defaults.engine),
                **engines[shape].replica_fields(ctx.site.weights_lock),
                dedicated_for=owner,
                data_classes=list(dep.data_classes),
            )
        )
    return sorted(out, key=lambda r: (r.deployment, r.index)), holds


def _solver_report(sol: PlacementSolution, classes: int) -> SolverReport:
    return SolverReport(
        status=sol.status if sol.variables else "trivial",
        objective=sol.objective,
        best_bound=sol.best_bound,
        gap=sol.gap,
        wall_seconds=round(sol.wall_seconds, 4),
        node_classes=classes,
        variables=sol.variables,
        moves=sol.moves,
    )


def _multi_node(ctx: PlanContext, base: Plan | None) -> MultiNodePlan:
    deployments = [
        (dep, ctx.recipes[dep.recipe])
        for _, dep in sorted(ctx.site.deployments.items())
        if dep.replicas != 0 and dep.recipe in ctx.recipes
    ]
    before: dict[str, list[list[str]]] = {}
    for r in base.replicas if base is not None else []:
        if r.worker_nodes:
            before.setdefault(r.deployment, []).append(r.nodes)

    def fits_one_node(dep: Deployment, node: NodeManifest) -> bool:
        return ctx.sizing(dep, node.gpus.catalog_id, node.gpus.count, node.gpus.interconnect).ok

    nodes = list(ctx.site.nodes.values())
    return plan_multi_node(deployments, nodes, ctx.eligible, fits_one_node, ctx.catalog, ctx.util, before)


def _group_replicas(ctx: PlanContext, solved: list[ReplicaPlacement]) -> list[ReplicaPlacement]:
    """The multi-node replicas as plan replicas: numbered after the solver's, leader first, all GPUs of each node."""
    out: list[ReplicaPlacement] = []
    used = {(r.deployment, r.index) for r in solved}
    for group in ctx.multi.replicas:
        dep = ctx.site.deployments[group.deployment]
        leader = ctx.site.nodes[group.nodes[0]]
        gpu = ctx.catalog.get(leader.gpus.catalog_id)
        index = next(i for i in range(len(used) + len(ctx.multi.replicas) + 1) if (dep.name, i) not in used)
        used.add((dep.name, index))
        recipe = ctx.recipes[dep.recipe]
        engine = deployment_engine(dep, recipe, ctx.site.config.defaults.engine)
        leader_setup = engine_for(
            recipe, dep, gpu, group.layout, group.quantization, ctx.util, priority=False, engine=engine
        )
        worker = engine_for(
            recipe, dep, gpu, group.layout, group.quantization, ctx.util, priority=False, node_rank=1, engine=engine
        ).args
        out.append(
            ReplicaPlacement(
                deployment=dep.name,
                index=index,
                node=leader.name,
                worker_nodes=group.nodes[1:],
                site=leader.site,
                owner=leader.owner,
                gpu_indices=list(range(leader.gpus.count)),
                gpu_model=leader.gpus.catalog_id,
                tensor_parallel_size=group.layout.tensor_parallel_size,
                parallelism=group.layout.strategy,
                data_parallel_size=group.layout.data_parallel_size,
                pipeline_parallel_size=group.layout.pipeline_parallel_size,
                quantization=group.quantization,
                engine=engine,
                **leader_setup.replica_fields(ctx.site.weights_lock),
                worker_engine_args=worker,
                dedicated_for=dep.dedicated_for,
                data_classes=list(dep.data_classes),
            )
        )
    return out


def _out_of_service(site: TrustedSite, shortfalls: list[Shortfall], time_limit_s: float | None) -> list[Shortfall]:
    """The shortfalls marked with the cordoned nodes that cause them: those the plan of the same site with
    its cordoned nodes back in service does not have. Only they make a shortfall deployable (a cordon
    never blocks the rest); a target missed with every node in service stays a refusal."""
    cordoned = sorted(n for n, node in site.nodes.items() if node.status == "cordoned")
    if not shortfalls or not cordoned:
        return shortfalls
    restored = plan_site(back_in_service(site), time_limit_s=time_limit_s)
    still_short = {s.deployment for s in restored.shortfalls}
    out: list[Shortfall] = []
    for s in shortfalls:
        if s.deployment in still_short:
            out.append(s)
            continue
        ran_on = sorted({n for r in restored.replicas_of(s.deployment) for n in r.nodes if n in cordoned})
        nodes = ran_on or cordoned
        names = ", ".join(f"`{n}`" for n in nodes)
        why = f"{names} {'is' if len(nodes) == 1 else 'are'} cordoned; back in service, the target is met"
        out.append(s.model_copy(update={"out_of_service": nodes, "reasons": [why, *s.reasons]}))
    return out


def plan_site(site: TrustedSite, base: Plan | None = None, *, time_limit_s: float | None = None) -> Plan:
    ctx = PlanContext.of(site)
    ctx.spare_nodes = released_seats(ctx.asks, base)
    ctx.multi = _multi_node(ctx, base)
    classes, reps = node_classes(ctx)
    demands, deps, infos = build_demands(ctx, classes, reps, base)

    def options_of(name: str) -> tuple[list[Option], str | None]:
        dep = ctx.site.deployments[name]
        return _options(ctx, dep, classes, reps, DemandInfo()), dep.dedicated_for

    spares = spare_demands(ctx.asks, classes, reps, base, options_of)
    pool_limits = {c.owner: ctx.shares[c.owner].pool_limit for c in classes if c.owner in ctx.shares}
    problem = PlacementProblem(classes, demands + spares, pool_limits)
    sol = solve(problem, time_limit_s=time_limit_s or _time_limit(), workers=2)
    replicas, holds = decode(ctx, problem, sol, base)
    replicas = sorted(replicas + _group_replicas(ctx, replicas), key=lambda r: (r.deployment, r.index))
    by_dep: dict[str, list[ReplicaPlacement]] = {}
    for r in replicas:
        by_dep.setdefault(r.deployment, []).append(r)
    return Plan(
        federation=site.config.federation.name,
        replicas=replicas,
        deployments={
            dep.name: deployment_capacity(
                ctx.recipes[dep.recipe], dep, demand, ctx.policies, by_dep.get(dep.name, []), ctx.catalog, ctx.util
            ).model_copy(update={"multi_node": ctx.multi.notes.get(dep.name)})
            for dep, demand in zip(deps, demands, strict=True)
            if dep.recipe in ctx.recipes
        },
        shortfalls=_out_of_service(site, shortfalls_of(problem, sol, infos, replicas), time_limit_s),
        owners=owner_allocations(site, ctx.shares, replicas),
        sites=site_usage(site, replicas),
        nodes=node_entries(site),
        violations=evaluate_policies(site, ctx.facts),
        spares=holds,
        reclaim_order=list(allocation_policy(ctx.policies).reclaim_order),
        solver=_solver_report(sol, len(classes)),
    )
