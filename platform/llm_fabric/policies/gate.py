"""The policy gate of `fabric validate` (exit 3): rules checked on the site repo without solving.

The placement itself never breaks a rule (the solver only offers eligible nodes); this gate catches
what an operator wrote that no placement could honour, and rules that contradict each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from llm_fabric.policies.allocation import owner_shares
from llm_fabric.policies.defaults import effective_policies
from llm_fabric.policies.eligibility import ModelFacts, node_refusals
from llm_fabric.policies.violations import Violation
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import Deployment, PolicySet
from llm_fabric.site.validation import Finding


def model_facts(site: SiteRepo) -> dict[str, ModelFacts | None]:
    """Tier facts per deployment, from the recipes (None where the recipe is missing)."""
    from llm_fabric.engine.recipes import load_recipes

    recipes = load_recipes()
    out: dict[str, ModelFacts | None] = {}
    for name, dep in site.deployments.items():
        recipe = recipes.get(dep.recipe)
        out[name] = None if recipe is None else ModelFacts(small=recipe.small, total_params_b=recipe.total_params_b)
    return out


def _violation(site: SiteRepo, collection: str, name: str, loc: tuple[str | int, ...], **kw: object) -> Violation:
    path = site.root / collection if collection.endswith(".yaml") else site.path_of(collection, name)
    return Violation.model_validate(
        {**kw, "file": str(path), "line": site.line_of(path, *loc), "field": ".".join(map(str, loc)) or None}
    )


def _policy_file(site: SiteRepo, data_class: str) -> tuple[str, str]:
    """(collection, name) of the site policy file that defines `data_class`, else fabric.yaml."""
    for name, pol in sorted(site.site_policies.items(), reverse=True):
        if data_class in pol.sovereignty:
            return "policies", name
    return "fabric.yaml", ""


def _flag_set(site: SiteRepo, dc: str, flag: str, rule: str, message: str) -> Violation:
    """A sovereignty flag `dc` may not set: at the flag in the policy file that defines it, else at the class."""
    coll, name = _policy_file(site, dc)
    loc = ("sovereignty", dc, flag) if coll == "policies" else ("data_classes", dc)
    return _violation(
        site,
        coll,
        name,
        loc,
        rule=rule,
        objects=[f"data-class/{dc}"],
        message=message,
        hint=f"set {flag}: false for `{dc}`",
    )


def check_rules(site: SiteRepo, policies: PolicySet) -> list[Violation]:
    """Rules that are missing or contradict the federation's principles."""
    out: list[Violation] = []
    ranks = {dc: c.rank for dc, c in site.config.data_classes.items()}
    top = max(ranks.values(), default=0)
    for dc in sorted(ranks):
        rule = policies.sovereignty.get(dc)
        if rule is None:
            out.append(
                _violation(
                    site,
                    "fabric.yaml",
                    "",
                    ("data_classes", dc),
                    rule="sovereignty.rule-missing",
                    objects=[f"data-class/{dc}"],
                    message=f"data class `{dc}` has no sovereignty rule; nothing may process it",
                    hint=f"add `sovereignty: {{{dc}: ...}}` to a file in policies/",
                )
            )
            continue
        if rule.external_fallback and (ranks[dc] == top or rule.federation_operators_only):
            why = "the most sensitive class" if ranks[dc] == top else "a class restricted to federation operators"
            out.append(
                _flag_set(
                    site,
                    dc,
                    "external_fallback",
                    "sovereignty.external-fallback",
                    f"`{dc}` is {why} but allows external fallback providers",
                )
            )
        if rule.prompt_logging and ranks[dc] == top and top > 0:
            out.append(
                _flag_set(
                    site,
                    dc,
                    "prompt_logging",
                    "sovereignty.prompt-logging",
                    f"`{dc}` is the most sensitive class but its prompts would be logged",
                )
            )
    return out


def _allocation_violation(site: SiteRepo, owner: str, dep_name: str, rule: str, message: str, hint: str) -> Violation:
    """A tenant's dedicated replicas of one deployment, refused: the tenant file's `dedicated.replicas` entry."""
    return _violation(
        site,
        "tenants",
        owner,
        ("dedicated", "replicas", dep_name),
        rule=rule,
        objects=[f"tenant/{owner}", f"deployment/{dep_name}"],
        message=message,
        hint=hint,
    )


def check_allocations(site: SiteRepo, policies: PolicySet) -> list[Violation]:
    out: list[Violation] = []
    for owner, share in owner_shares(site, policies).items():
        for dep_name, count in sorted(share.reserved_replicas.items()):
            dep = site.deployments.get(dep_name)
            if dep is None:
                continue
            gpus = count * (dep.tensor_parallel_size or 1)
            if gpus > share.enrolled:  # a cordoned node's GPUs count: its absence is a shortfall of the plan
                out.append(
                    _allocation_violation(
                        site,
                        owner,
                        dep_name,
                        "allocation.exceeds-contribution",
                        f"{count} dedicated replicas of `{dep_name}` need at least {gpus} GPUs; "
                        f"`{owner}` contributed {share.enrolled}",
                        f"reserve at most {share.enrolled // (dep.tensor_parallel_size or 1)} "
                        f"replicas, or enroll more of `{owner}`'s machines",
                    )
                )
            if dep.replicas is not None and count > dep.replicas:
                out.append(
                    _allocation_violation(
                        site,
                        owner,
                        dep_name,
                        "allocation.exceeds-deployment",
                        f"`{owner}` reserves {count} replicas of `{dep_name}`, which has {dep.replicas}",
                        f"raise `{dep_name}`'s replicas to {count} or reserve fewer",
                    )
                )
            if dep.dedicated_for not in (None, owner):
                out.append(
                    _allocation_violation(
                        site,
                        owner,
                        dep_name,
                        "allocation.other-tenants-deployment",
                        f"`{dep_name}` is dedicated to `{dep.dedicated_for}`, not to `{owner}`",
                        f"reserve replicas of a pool deployment, or one dedicated to `{owner}`",
                    )
                )
    return out


def check_nodes(site: SiteRepo) -> list[Violation]:
    out: list[Violation] = []
    for name, node in sorted(site.nodes.items()):
        for i, check in enumerate(node.checks):
            if check.status == "fail":
                out.append(
                    _violation(
                        site,
                        "nodes",
                        name,
                        ("checks", i, "status"),
                        rule="tiers.rejected-node",
                        objects=[f"node/{name}"],
                        message=f"node `{name}` failed admission check `{check.id}` "
                        f"({check.value} against {check.threshold}); rejected nodes never join",
                        hint=f"remove nodes/{name}.yaml, or re-enroll the machine once it passes",
                    )
                )
    return out


def in_service(site: SiteRepo) -> SiteRepo:
    """The site repo as it would be with every cordoned node back in service (the what-if of a fault)."""
    back = {
        n: node.model_copy(update={"status": "active"}) for n, node in site.nodes.items() if node.status == "cordoned"
    }
    values = {f.name: getattr(site, f.name) for f in fields(SiteRepo)}  # a plain SiteRepo, also of a TrustedSite
    return SiteRepo(**(values | {"nodes": site.nodes | back}))


def while_cordoned(nodes: list[str]) -> str:
    names = ", ".join(f"`{n}`" for n in nodes)
    return f"{names} {'is' if len(nodes) == 1 else 'are'} cordoned"


def waiting_for_nodes(site: SiteRepo, policies: PolicySet, dep: Deployment, facts: ModelFacts | None) -> list[str]:
    """The cordoned nodes that could run `dep` once back in service: a deployment no node in service may
    run while these are out is a shortfall the plan reports, not a rule broken by the site repo."""
    cordoned = [n for n, node in sorted(site.nodes.items()) if node.status == "cordoned"]
    if not cordoned:
        return []
    restored = in_service(site)
    shares = owner_shares(restored, policies)
    return [
        n
        for n in cordoned
        if not node_refusals(restored, policies, dep, restored.nodes[n], facts, shares.get(restored.nodes[n].owner))
    ]


def check_deployments(site: SiteRepo, policies: PolicySet, facts: dict[str, ModelFacts | None]) -> list[Violation]:
    """Each deployment needs at least one node that policy allows; pins must respect sovereignty. A
    deployment that only cordoned nodes could run is left to the plan's shortfalls (`waiting_for_nodes`)."""
    out: list[Violation] = []
    shares = owner_shares(site, policies)
    by_name = sorted(site.nodes.items())
    for name, dep in sorted(site.deployments.items()):
        if dep.replicas == 0:
            continue
        reasons: dict[str, list[str]] = {}
        # a dedicated deployment's owner's nodes first: at 10,000 nodes the scan stops after a few, not thousands
        mine = [kv for kv in by_name if kv[1].owner == dep.dedicated_for] if dep.dedicated_for else []
        order = [*mine, *by_name] if mine else by_name  # the owner's nodes again in `by_name`: refused or unseen
        for node_name, node in order:
            refusals = node_refusals(site, policies, dep, node, facts.get(name), shares.get(node.owner))
            if not refusals:
                break
            reasons[node_name] = refusals
        else:
            if waiting_for_nodes(site, policies, dep, facts.get(name)):
                continue
            reasons = dict(sorted(reasons.items()))
            detail = "; ".join(f"{n}: {' and '.join(r)}" for n, r in reasons.items()) or "the federation has no nodes"
            out.append(
                _violation(
                    site,
                    "deployments",
                    name,
                    ("data_classes",),
                    rule="placement.no-eligible-node",
                    objects=[f"deployment/{name}", *(f"node/{n}" for n in reasons)],
                    message=f"no node may run `{name}` under the policies ({detail})",
                    hint="relax the deployment's placement or data classes, or enroll a node that satisfies them",
                )
            )
    return out


def evaluate_policies(site: SiteRepo, facts: dict[str, ModelFacts | None] | None = None) -> list[Violation]:
    """Every policy violation of a well-formed site repo."""
    policies = effective_policies(site)
    return [
        *check_rules(site, policies),
        *check_allocations(site, policies),
        *check_nodes(site),
        *check_deployments(site, policies, model_facts(site) if facts is None else facts),
    ]


def _policy_findings(site: SiteRepo) -> list[Finding]:
    return [Finding(severity="policy", problem=v.to_problem()) for v in evaluate_policies(site)]


def _out_of_service_findings(site: SiteRepo) -> list[Finding]:
    """Warnings (validate still passes): what the cordoned nodes leave short until they are back."""
    if not any(n.status == "cordoned" for n in site.nodes.values()):
        return []
    policies = effective_policies(site)
    facts = model_facts(site)
    out: list[Finding] = []
    for owner, share in owner_shares(site, policies).items():
        if share.dedicated_unbacked:
            down = sorted(n for n, node in site.nodes.items() if node.owner == owner and node.status == "cordoned")
            path = site.path_of("tenants", owner)
            out.append(
                Finding(
                    severity="warning",
                    problem=site.problem(
                        path,
                        ("dedicated", "gpus"),
                        f"{share.dedicated_unbacked} of `{owner}`'s {share.dedicated_gpus} dedicated GPUs are out "
                        f"of service while {while_cordoned(down)}; the plan reports the shortfall and deploys the rest",
                        f"once repaired: `fabric nodes uncordon {down[0]}`",
                    ),
                )
            )
    shares = owner_shares(site, policies)
    for name, dep in sorted(site.deployments.items()):
        if dep.replicas == 0 or any(
            not node_refusals(site, policies, dep, node, facts.get(name), shares.get(node.owner))
            for node in site.nodes.values()
        ):
            continue
        waiting = waiting_for_nodes(site, policies, dep, facts.get(name))
        if waiting:
            out.append(
                Finding(
                    severity="warning",
                    problem=site.problem(
                        site.path_of("deployments", name),
                        (),
                        f"no node in service may run `{name}` while {while_cordoned(waiting)}; "
                        "the plan reports the shortfall and deploys the rest",
                        f"once repaired: `fabric nodes uncordon {waiting[0]}`",
                    ),
                )
            )
    return out


site_checks: list[Callable[[SiteRepo], list[Finding]]] = [_policy_findings, _out_of_service_findings]
