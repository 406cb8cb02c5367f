"""Tenants of the site repo: `fabric tenants add|list|show` (the API keys are `llm_fabric.gateway.keys`).

A new tenant file is checked before it is written: a valid model, a name no other tenant has, data
classes that fabric.yaml declares. It is committed alone, to the checkout or (`branch`) to a review
branch, like an enrolment, and judged against what it is committed onto: the branch's committed files
(so a tenant already on the review branch counts), or the checkout, whose fabric.yaml must then have no
uncommitted changes (the commit would hold the tenant without the data classes it names).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from llm_fabric.atomicio import write_atomic
from llm_fabric.documents import Document, dump_yaml, problems_from_validation, suggest
from llm_fabric.errors import ConfigError, UsageError
from llm_fabric.site import gitrepo
from llm_fabric.site.loader import SiteRepo, collect_site
from llm_fabric.site.models import Limits, Tenant
from llm_fabric.site.schemas import modeline

TENANTS = "tenants"


@dataclass(frozen=True)
class AddedTenant:
    path: Path
    commit: str | None
    branch: str | None


@dataclass(frozen=True)
class TenantSummary:
    tenant: Tenant
    gpus_contributed: int  # active nodes the tenant owns
    nodes: list[str]


def _site(root: Path) -> SiteRepo:
    site, problems = collect_site(root)
    if site is None:
        raise ConfigError(problems, summary=f"{root} is not a usable site repo")
    return site


def new_tenant(
    root: Path,
    name: str,
    *,
    display_name: str,
    data_classes: list[str],
    contributor: bool = False,
    contact: str | None = None,
    limits: Limits | None = None,
    branch: str | None = None,
) -> AddedTenant:
    if gitrepo.is_checked_out(root, branch):
        branch = None  # --branch names the checkout: commit there
    if branch is None and gitrepo.is_repo(root):
        gitrepo.require_committed(root, ["fabric.yaml"], f"`fabric tenants add {name}`")
    path = root / TENANTS / f"{name}.yaml"
    body = {"version": 1, "name": name, "display_name": display_name, "contributor": contributor}
    body |= {"data_classes": data_classes}
    body |= {"limits": limits.model_dump(exclude_none=True)} if limits and limits.model_dump(exclude_none=True) else {}
    body |= {"contact": contact} if contact else {}
    try:
        Tenant.model_validate(body)
    except ValidationError as exc:
        raise ConfigError(problems_from_validation(exc, Document(path=path, tree=body), Tenant)) from exc
    with gitrepo.branch_tree(root, branch) as judged:
        _check_new_tenant(_site(judged), name, data_classes, judged / TENANTS / f"{name}.yaml", root)
    text = f"{modeline(Path(TENANTS) / path.name)}\n{dump_yaml(body)}"
    message = f"tenants: add {name}" + (" (contributor)" if contributor else "")
    if branch is not None:
        commit = gitrepo.commit_to_branch(root, branch, {f"{TENANTS}/{path.name}": text}, message)
        return AddedTenant(path, commit, branch)
    write_atomic(path, text, mode=0o644)
    commit = gitrepo.commit_paths(root, [path], message) if gitrepo.is_repo(root) else None
    return AddedTenant(path, commit, None)


def _check_new_tenant(site: SiteRepo, name: str, data_classes: list[str], path: Path, root: Path) -> None:
    if name in site.tenants or path.exists():
        raise UsageError(
            f"tenant `{name}` exists ({TENANTS}/{path.name})", hint=f"see `fabric tenants show {name} -C {root}`"
        )
    known = sorted(site.config.data_classes)
    for data_class in data_classes:
        if data_class not in known:
            guess = suggest(data_class, known)
            raise UsageError(
                f"data class `{data_class}` is not declared in fabric.yaml",
                hint=f"did you mean `{guess}`?" if guess else f"data classes: {', '.join(known)}",
            )


def tenant_summaries(root: Path) -> list[TenantSummary]:
    site = _site(root)
    out = []
    for name, tenant in sorted(site.tenants.items()):
        nodes = sorted(n.name for n in site.nodes.values() if n.owner == name and n.status == "active")
        out.append(TenantSummary(tenant, site.contributed_gpus(name), nodes))
    return out


def tenant_summary(root: Path, name: str) -> TenantSummary:
    summaries = {s.tenant.name: s for s in tenant_summaries(root)}
    if name not in summaries:
        guess = suggest(name, sorted(summaries))
        raise UsageError(
            f"no tenant `{name}` in {root / TENANTS}",
            hint=f"did you mean `{guess}`?" if guess else f"tenants: {', '.join(sorted(summaries)) or 'none'}",
        )
    return summaries[name]
