"""Load a site repo directory into a `SiteRepo`, reporting every problem of every file at once.

Order: parse and validate each file on its own (schema errors), then check the references
between files (a node's site and owner exist, a deployment's recipe exists, allocations fit
what the owner contributed). Nothing is changed; a later step may act on a valid `SiteRepo`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from llm_fabric import wording
from llm_fabric.distribution import shipped_recipe_ids
from llm_fabric.documents import Document, read_yaml, suggest, validate_document
from llm_fabric.errors import ConfigError, Problem
from llm_fabric.site.models import (
    Deployment,
    FabricConfig,
    LedgerConfig,
    NodeManifest,
    PolicySet,
    RetirementRecord,
    Tenant,
)
from llm_fabric.site.paths import RETIRED, unsafe_entry
from llm_fabric.site.root import FABRIC_FILE as FABRIC_FILE
from llm_fabric.site.root import not_a_site_repo
from llm_fabric.site.weights_lock import LOCK_FILE, WeightsLock

M = TypeVar("M", bound=BaseModel)

LEDGER_FILE = "ledger.yaml"
COLLECTIONS = ("nodes", "tenants", "deployments", "policies")


@dataclass
class SiteRepo:
    root: Path
    config: FabricConfig
    nodes: dict[str, NodeManifest] = field(default_factory=dict)
    tenants: dict[str, Tenant] = field(default_factory=dict)
    deployments: dict[str, Deployment] = field(default_factory=dict)
    site_policies: dict[str, PolicySet] = field(default_factory=dict)
    ledger: LedgerConfig | None = None
    weights_lock: WeightsLock = field(default_factory=WeightsLock)  # weights.lock: empty when absent
    retirements: dict[str, RetirementRecord] = field(default_factory=dict)
    documents: dict[Path, Document] = field(default_factory=dict)
    # files present but not loadable: references to them are not reported again as unknown
    unloadable: dict[str, set[str]] = field(default_factory=dict)

    def exists(self, collection: str, name: str) -> bool:
        loaded: dict[str, object] = getattr(self, collection)
        return name in loaded or name in self.unloadable.get(collection, set())

    def path_of(self, collection: str, name: str) -> Path:
        return self.root / collection / f"{name}.yaml"

    def line_of(self, path: Path, *loc: int | str) -> int | None:
        doc = self.documents.get(path)
        return doc.line_of(tuple(loc)) if doc is not None else None

    def problem(self, path: Path, loc: tuple[int | str, ...], message: str, hint: str | None = None) -> Problem:
        field_path = ".".join(str(s) for s in loc) or None
        return Problem(message, file=path, line=self.line_of(path, *loc), field=field_path, hint=hint)

    def contributed_gpus(self, owner: str) -> int:
        return sum(n.gpus.count for n in self.nodes.values() if n.owner == owner and n.status == "active")

    def enrolled_gpus(self, owner: str) -> int:
        """The owner's GPUs that are not retired: a cordoned node still counts (it is out of service for a
        while, and the plan reports what its absence costs instead of refusing the site repo)."""
        return sum(n.gpus.count for n in self.nodes.values() if n.owner == owner and n.status != "retired")


class _Collector:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.documents: dict[Path, Document] = {}
        self.unloadable: dict[str, set[str]] = {}

    def load(self, path: Path, model: type[M]) -> M | None:
        unsafe = unsafe_entry(path)
        if unsafe is not None:
            self.problems.append(unsafe)
            return None
        try:
            doc = read_yaml(path)
            self.documents[path] = doc
            obj = validate_document(doc, model)
        except ConfigError as exc:
            self.problems.extend(exc.problems)
            return None
        # the model defaults `version` for files the code writes; a file an operator writes states it
        # (docs/site-repo.md), so that a version 2 can tell old files from new ones
        if "version" in model.model_fields and isinstance(doc.tree, dict) and "version" not in doc.tree:
            self.problems.append(
                Problem(
                    "required field `version` is missing",
                    file=path,
                    line=1,
                    field="version",
                    hint="add `version: 1` as the first line",
                )
            )
        return obj

    def load_collection(self, root: Path, folder: str, model: type[M], named: bool) -> dict[str, M]:
        out: dict[str, M] = {}
        directory = root / folder
        unsafe = unsafe_entry(directory)
        if unsafe is not None:
            self.problems.append(unsafe)
            return out
        if not directory.is_dir():
            return out
        for path in sorted(directory.iterdir()):
            if path.suffix == ".yml":
                self.problems.append(Problem("use the .yaml extension", file=path, hint=f"rename to {path.stem}.yaml"))
                continue
            if path.suffix != ".yaml" or path.name.startswith("."):
                continue
            obj = self.load(path, model)
            if obj is None:
                self.unloadable.setdefault(folder, set()).add(path.stem)
                continue
            name = getattr(obj, "name", None) if named else None
            if named and name != path.stem:
                self.problems.append(
                    Problem(
                        f"name `{name}` does not match the file name",
                        file=path,
                        line=self.documents[path].line_of(("name",)),
                        field="name",
                        hint=f"rename the file to {name}.yaml or set name: {path.stem}",
                    )
                )
            out[path.stem] = obj
        return out


def collect_site(root: Path) -> tuple[SiteRepo | None, list[Problem]]:
    """Load what can be loaded; return the repo (None if fabric.yaml is unusable) and every problem."""
    if not root.is_dir():
        return None, [Problem(f"site repo folder {root} does not exist", hint="run `fabric init DIR` first")]
    if (missing := not_a_site_repo(root)) is not None:
        return None, [missing]
    col = _Collector()
    config = col.load(root / FABRIC_FILE, FabricConfig)
    nodes = col.load_collection(root, "nodes", NodeManifest, named=True)
    tenants = col.load_collection(root, "tenants", Tenant, named=True)
    deployments = col.load_collection(root, "deployments", Deployment, named=True)
    policies = col.load_collection(root, "policies", PolicySet, named=False)
    ledger = col.load(root / LEDGER_FILE, LedgerConfig) if _present(root / LEDGER_FILE) else None
    weights_lock = col.load(root / LOCK_FILE, WeightsLock) if _present(root / LOCK_FILE) else None
    retirements = col.load_collection(root, RETIRED, RetirementRecord, named=True)
    if config is None:
        return None, col.problems
    site = SiteRepo(
        root=root,
        config=config,
        nodes=nodes,
        tenants=tenants,
        deployments=deployments,
        site_policies=policies,
        ledger=ledger,
        weights_lock=weights_lock or WeightsLock(),
        retirements=retirements,
        documents=col.documents,
        unloadable=col.unloadable,
    )
    problems = col.problems
    for check in REFERENCE_CHECKS:
        problems.extend(check(site))
    return site, problems


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def load_site(root: Path) -> SiteRepo:
    """A fully valid site repo, or ConfigError listing every problem."""
    site, problems = collect_site(root)
    return require_valid(root, site, problems)


def require_valid(root: Path, site: SiteRepo | None, problems: list[Problem]) -> SiteRepo:
    """`site` when `collect_site` found no problem; ConfigError listing every one otherwise."""
    if problems or site is None:
        raise ConfigError(
            problems, summary=f"site repo {root} is not valid ({wording.count(len(problems), 'problem')})"
        )
    return site


def _unknown(kind: str, value: str, known: list[str]) -> tuple[str, str]:
    guess = suggest(value, known)
    hint = (
        f"did you mean `{guess}`?" if guess else (f"known: {', '.join(known)}" if known else f"no {kind} is declared")
    )
    return f"unknown {kind} `{value}`", hint


def _check_nodes(site: SiteRepo) -> list[Problem]:
    out: list[Problem] = []
    sites, tenants = sorted(site.config.sites), sorted(site.tenants)
    for name, node in site.nodes.items():
        path = site.path_of("nodes", name)
        if node.site not in site.config.sites:
            msg, hint = _unknown("site", node.site, sites)
            out.append(site.problem(path, ("site",), msg, hint))
        if not site.exists("tenants", node.owner):
            msg, hint = _unknown("tenant", node.owner, tenants)
            out.append(site.problem(path, ("owner",), msg, hint + " (owners are tenants in tenants/)"))
        elif node.owner in site.tenants and not site.tenants[node.owner].contributor:
            out.append(
                site.problem(
                    path,
                    ("owner",),
                    f"owner `{node.owner}` is not a contributor",
                    "set contributor: true in its tenant file",
                )
            )
    seen: dict[str, str] = {}
    for name, node in site.nodes.items():
        if node.status == "retired":
            continue  # a retired node's GPUs are free to be enrolled under another name
        for i, uuid in enumerate(node.gpus.uuids):
            if uuid in seen and seen[uuid] != name:
                out.append(
                    site.problem(
                        site.path_of("nodes", name),
                        ("gpus", "uuids", i),
                        f"GPU {uuid} is also registered under node `{seen[uuid]}`",
                        "a GPU belongs to one node: retire the other node first",
                    )
                )
            seen.setdefault(uuid, name)
    return out


def _check_tenants(site: SiteRepo) -> list[Problem]:
    out: list[Problem] = []
    classes = sorted(site.config.data_classes)
    for name, tenant in site.tenants.items():
        path = site.path_of("tenants", name)
        for i, dc in enumerate(tenant.data_classes):
            if dc not in site.config.data_classes:
                msg, hint = _unknown("data class", dc, classes)
                out.append(site.problem(path, ("data_classes", i), msg, hint))
        if tenant.dedicated is None or site.unloadable.get("nodes"):
            # with a node file unreadable, the contributed count would be wrong; its own error is reported
            continue
        contributed = site.enrolled_gpus(name)
        if tenant.dedicated.gpus > contributed:
            out.append(
                site.problem(
                    path,
                    ("dedicated", "gpus"),
                    f"dedicated allocation of {tenant.dedicated.gpus} GPUs exceeds "
                    f"the {contributed} GPUs `{name}` contributed",
                    f"lower dedicated.gpus to at most {contributed}, or enroll more nodes owned by `{name}`",
                )
            )
        for dep_name in tenant.dedicated.replicas:
            if not site.exists("deployments", dep_name):
                msg, hint = _unknown("deployment", dep_name, sorted(site.deployments))
                out.append(site.problem(path, ("dedicated", "replicas", dep_name), msg, hint))
    return out


def _check_deployments(site: SiteRepo) -> list[Problem]:
    out: list[Problem] = []
    recipes = shipped_recipe_ids()
    for name, dep in site.deployments.items():
        path = site.path_of("deployments", name)
        if dep.recipe not in recipes:
            msg, hint = _unknown("recipe", dep.recipe, recipes)
            out.append(site.problem(path, ("recipe",), msg, hint))
        for i, dc in enumerate(dep.data_classes):
            if dc not in site.config.data_classes:
                msg, hint = _unknown("data class", dc, sorted(site.config.data_classes))
                out.append(site.problem(path, ("data_classes", i), msg, hint))
        for i, s in enumerate(dep.placement.sites):
            if s not in site.config.sites:
                msg, hint = _unknown("site", s, sorted(site.config.sites))
                out.append(site.problem(path, ("placement", "sites", i), msg, hint))
        for i, n in enumerate(dep.placement.nodes):
            if not site.exists("nodes", n):
                msg, hint = _unknown("node", n, sorted(site.nodes))
                out.append(site.problem(path, ("placement", "nodes", i), msg, hint))
        if dep.dedicated_for is not None:
            tenant = site.tenants.get(dep.dedicated_for)
            if tenant is None and not site.exists("tenants", dep.dedicated_for):
                msg, hint = _unknown("tenant", dep.dedicated_for, sorted(site.tenants))
                out.append(site.problem(path, ("dedicated_for",), msg, hint))
            elif tenant is not None and not tenant.contributor:
                out.append(
                    site.problem(
                        path,
                        ("dedicated_for",),
                        f"`{dep.dedicated_for}` is not a contributor",
                        "dedicated deployments belong to contributors",
                    )
                )
    return out


def _check_policies(site: SiteRepo) -> list[Problem]:
    out: list[Problem] = []
    for name, pol in site.site_policies.items():
        for dc in pol.sovereignty:
            if dc not in site.config.data_classes:
                msg, hint = _unknown("data class", dc, sorted(site.config.data_classes))
                out.append(site.problem(site.path_of("policies", name), ("sovereignty", dc), msg, hint))
    return out


def _check_ledger(site: SiteRepo) -> list[Problem]:
    if site.ledger is None:
        return []
    out: list[Problem] = []
    path = site.root / LEDGER_FILE
    if site.ledger.currency != site.config.federation.currency:
        out.append(
            site.problem(
                path,
                ("currency",),
                f"ledger currency {site.ledger.currency} differs from "
                f"the federation's {site.config.federation.currency}",
                "use one currency for the books",
            )
        )
    for dep_name in site.ledger.reference_prices:
        if not site.exists("deployments", dep_name):
            msg, hint = _unknown("deployment", dep_name, sorted(site.deployments))
            out.append(site.problem(path, ("reference_prices", dep_name), msg, hint))
    for i, hw in enumerate(site.ledger.hardware):
        if not site.exists("nodes", hw.node):
            msg, hint = _unknown("node", hw.node, sorted(site.nodes))
            out.append(site.problem(path, ("hardware", i, "node"), msg, hint))
    return out


REFERENCE_CHECKS: list[Callable[[SiteRepo], list[Problem]]] = [
    _check_nodes,
    _check_tenants,
    _check_deployments,
    _check_policies,
    _check_ledger,
]
