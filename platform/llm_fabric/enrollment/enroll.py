"""`fabric enroll`: facts (Ansible or a saved bundle) -> inventory -> verdict -> signed manifest -> commit."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from llm_fabric.enrollment.admission import Verdict, decide
from llm_fabric.enrollment.assembly import inventory_from_bundle
from llm_fabric.enrollment.facts import (
    DEFAULT_MODELS_DIR,
    DEFAULT_READ_PROBE_MIB,
    FactsBundle,
    ProgressCallback,
    ReadProbe,
    gather,
    load_bundle,
)
from llm_fabric.enrollment.inventory import GpuDevice, HostFacts, Inventory
from llm_fabric.enrollment.registry import Registration, load_nodes, refuse_claimed_gpus, register
from llm_fabric.errors import ConfigError, PolicyRefusal, Problem, UsageError
from llm_fabric.hardware.catalog import GpuSpec, load_gpu_catalog
from llm_fabric.kube import labels as L
from llm_fabric.playbook_runner import Connection, Target
from llm_fabric.site import gitrepo
from llm_fabric.site.loader import SiteRepo, collect_site
from llm_fabric.site.models import GpuInventory, HostInventory, NodeManifest
from llm_fabric.site.paths import check_name
from llm_fabric.trust.signatures import default_private_key_path, load_private_key


@dataclass
class EnrollRequest:
    host: str
    site_root: Path
    owner: str
    site: str
    name: str | None = None
    connection: Connection = "ssh"
    ssh_user: str | None = None
    ssh_port: int | None = None
    ssh_key: Path | None = None
    key_path: Path | None = None
    facts_file: Path | None = None
    dry_run: bool = False
    branch: str | None = None  # commit the enrolment to this branch (for review), not to the checkout
    model_cache: str = DEFAULT_MODELS_DIR  # the folder whose disk's read speed is measured
    read_probe_mib: int = DEFAULT_READ_PROBE_MIB


@dataclass
class EnrollResult:
    name: str
    verdict: Verdict
    inventory: Inventory
    manifest: NodeManifest | None
    registration: Registration | None


def _site(request: EnrollRequest) -> SiteRepo:
    """The site the enrolment is judged against: the branch it is committed onto (`gitrepo.branch_tree`)."""
    if request.branch is None or gitrepo.is_checked_out(request.site_root, request.branch):
        if gitrepo.is_repo(request.site_root) and not request.dry_run:
            # the manifest is committed alone: over an uncommitted owner or site it would not validate
            deps = ["fabric.yaml", f"tenants/{request.owner}.yaml"]
            gitrepo.require_committed(request.site_root, deps, "`fabric enroll`")
        site, problems = collect_site(request.site_root)
    else:
        with gitrepo.branch_tree(request.site_root, request.branch) as judged:
            site, problems = collect_site(judged)
    if site is None:
        raise ConfigError(problems, summary=f"{request.site_root} is not a usable site repo")
    if request.site not in site.config.sites:
        raise UsageError(f"unknown site `{request.site}`", hint=f"sites in fabric.yaml: {', '.join(site.config.sites)}")
    tenant = site.tenants.get(request.owner)
    if tenant is None or not tenant.contributor:
        contributors = sorted(n for n, t in site.tenants.items() if t.contributor)
        raise UsageError(
            f"`{request.owner}` is not a contributor tenant of this federation"
            + (f" (on branch {request.branch})" if request.branch else ""),
            hint=f"contributors: {', '.join(contributors) or 'none'} "
            f"(add tenants/{request.owner}.yaml with contributor: true)",
        )
    return site


def gather_one(request: EnrollRequest, progress: ProgressCallback | None = None) -> FactsBundle:
    target = Target(
        "target", request.host, request.connection, user=request.ssh_user, port=request.ssh_port, key=request.ssh_key
    )
    probe = ReadProbe(request.model_cache, request.read_probe_mib)
    result = gather([target], forks=1, progress=progress, read_probe=probe)
    if "target" in result.unreachable:
        raise UsageError(
            f"host {request.host} is unreachable: {result.unreachable['target']}",
            hint="check the address, --ssh-user/--ssh-port/--ssh-key, and that sshd runs there",
        )
    return result.bundles["target"]


def node_name(request: EnrollRequest, inventory: Inventory) -> str:
    """The node's name, by one rule the docs state (docs/enroll.md, "Node names").

    --name, else with --facts the positional NAME (the bundle came from a machine the operator named
    on the command line), else the machine's own short hostname as a DNS label (HOST is an address then).
    """
    if request.name:
        return check_name(request.name, "--name")
    if request.facts_file is not None:
        return check_name(request.host, "NAME (the node name, with --facts)")
    raw = (inventory.host.hostname or request.host).split(".")[0].lower()
    label = re.sub(r"[^a-z0-9-]+", "-", raw).strip("-")[:63].strip("-")
    if not label:
        raise UsageError(f"cannot make a node name from `{raw}`", hint="pass --name NODE")
    return label


def enroll(request: EnrollRequest, progress: ProgressCallback | None = None) -> EnrollResult:
    site = _site(request)
    private = None
    if not request.dry_run:
        private = load_private_key(request.key_path or default_private_key_path(request.site_root))
    bundle = load_bundle(request.facts_file) if request.facts_file else gather_one(request, progress)
    inventory = inventory_from_bundle(bundle)
    verdict = decide(inventory)
    name = node_name(request, inventory)
    if not verdict.admitted:
        return EnrollResult(name, verdict, inventory, None, None)
    manifest = build_manifest(name, request, site, inventory, verdict)
    _require_gpu_identity(manifest)
    # the real run checks again under the registry lock; this check is what makes a dry run's verdict
    # (and exit code) the real run's: the same refusal, from the same function
    refuse_claimed_gpus(manifest, load_nodes(request.site_root))
    if private is None:
        return EnrollResult(name, verdict, inventory, manifest, None)
    registration = register(request.site_root, manifest, private, branch=request.branch)
    return EnrollResult(name, verdict, inventory, manifest, registration)


def _require_gpu_identity(manifest: NodeManifest) -> None:
    problems = manifest.gpus.identity_problems()
    if problems:
        raise PolicyRefusal(
            f"refused: the GPUs of `{manifest.name}` cannot be told apart from other machines' GPUs",
            problems=[Problem(p) for p in problems],
            hint="the driver must report each GPU's UUID (nvidia-smi -L); nothing was written",
        )


def _label(value: str) -> str:
    text = re.sub(r"[^A-Za-z0-9_.-]+", "-", value).strip("-_.")[:63]
    return text.rstrip("-_.")


def build_manifest(
    name: str, request: EnrollRequest, site: SiteRepo, inventory: Inventory, verdict: Verdict
) -> NodeManifest:
    assert verdict.tier != "rejected" and verdict.gpus.model is not None
    spec = load_gpu_catalog().get(verdict.gpus.model)
    gpus = _gpu_inventory(spec, inventory, verdict)
    return NodeManifest(
        name=name,
        site=request.site,
        owner=request.owner,
        tier=verdict.tier,
        enrolled_at=datetime.now(UTC).replace(microsecond=0),
        provenance="enrolled",
        gpus=gpus,
        host=_host_inventory(inventory.host),
        labels=_node_labels(request, site, verdict.tier, gpus, inventory.gpus[0]),
        checks=verdict.checks,
    )


def _gpu_inventory(spec: GpuSpec, inventory: Inventory, verdict: Verdict) -> GpuInventory:
    """What the tools measured, the catalog filling in what they did not say."""
    first = inventory.gpus[0]
    return GpuInventory(
        catalog_id=spec.id,
        product=first.name,
        vendor=spec.vendor,
        count=len(inventory.gpus),
        memory_mib=first.memory_mib or spec.memory_mib,
        compute_capability=verdict.gpus.compute_capability or spec.compute_capability,
        uuids=[g.uuid for g in inventory.gpus if g.uuid],
        interconnect=inventory.interconnect or spec.interconnect,
        driver_version=inventory.driver_version
        or ("in-kernel" if inventory.driver_source == "in-kernel" else "unknown"),
        cuda_version=inventory.cuda_version,
    )


def _host_inventory(host: HostFacts) -> HostInventory:
    return HostInventory.model_validate(host.model_dump(include=set(HostInventory.model_fields)))


def _node_labels(
    request: EnrollRequest, site: SiteRepo, tier: str, gpus: GpuInventory, first: GpuDevice
) -> dict[str, str]:
    """The fabric's labels, plus the keys the vendor's GPU feature discovery would set on the node."""
    labels = {
        L.OWNER: request.owner,
        L.TIER: tier,
        L.SITE: request.site,
        f"{L.PREFIX}/jurisdiction": site.config.sites[request.site].jurisdiction.country,
        L.GPU_MODEL: gpus.catalog_id,
    }
    if gpus.vendor == "nvidia":
        major, _, minor = gpus.compute_capability.partition(".")
        return labels | {
            "nvidia.com/gpu.product": _label(first.name),
            "nvidia.com/gpu.memory": str(gpus.memory_mib),
            "nvidia.com/gpu.count": str(gpus.count),
            "nvidia.com/gpu.compute.major": major,
            "nvidia.com/gpu.compute.minor": minor or "0",
        }
    return labels | {
        "amd.com/gpu.product-name": _label(first.name),
        "amd.com/gpu.vram": f"{round(gpus.memory_mib / 1024)}G",
        "amd.com/gpu.family": "AI",
        "amd.com/gpu.device-id": (first.pci_device_id or "").removeprefix("0x"),
    }
