"""Run `playbooks/provision.yml` for an enrolled node, and `playbooks/drain.yml` to take one out.

The roles' variables are their API (prefixed, documented in each role's defaults); this module sets
them from the node manifest, the GPU catalog and the kernel matrix, so that a node is provisioned
exactly as the site repo describes it: its labels and taints, its architecture's driver floor.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from llm_fabric.documents import suggest
from llm_fabric.errors import ConfigError, UsageError
from llm_fabric.hardware.catalog import load_gpu_catalog
from llm_fabric.hardware.kernel_matrix import load_kernel_matrix
from llm_fabric.kube import labels as L
from llm_fabric.kube.options import StackOptions
from llm_fabric.names import ENGINE_CACHE_MODELS_DIR_VAR
from llm_fabric.plan.document import Plan
from llm_fabric.playbook_runner import PlaybookResult, Target, control_machine, run_playbook
from llm_fabric.site.models import NodeManifest
from llm_fabric.site.weights_lock import WeightsLock
from llm_fabric.trust.sites import TrustedSite
from llm_fabric.weights.needs import needed_checkpoints

Mode = Literal["full", "files"]


def find_node(site: TrustedSite, name: str) -> NodeManifest:
    if name not in site.nodes:
        guess = suggest(name, sorted(site.nodes))
        enroll = f"fabric enroll HOST --site-repo {site.root} --owner GROUP --site SITE --name {name}"
        raise UsageError(
            f"node `{name}` is not enrolled in {site.root}",
            hint=f"did you mean `{guess}`?" if guess else f"enroll it first: `{enroll}`",
        )
    node = site.nodes[name]
    problems = L.taint_problems(node, None)
    if problems:
        path = site.path_of("nodes", name)
        raise ConfigError([p.__class__(p.message, file=path, field=p.field, hint=p.hint) for p in problems])
    return node


def kernel_packages(node: NodeManifest) -> list[str]:
    """Packages beyond the driver: NVSwitch systems need the fabric manager of the driver branch."""
    if node.gpus.vendor == "nvidia" and node.gpus.interconnect == "nvswitch":
        return [f"nvidia-fabricmanager-{node.gpus.driver_version.split('.')[0]}"]
    return []


def weights_vars(lock: WeightsLock, only: set[str] | None = None) -> list[dict[str, Any]]:
    """weights.lock as the fabric_engine_cache role takes it (`fabric_engine_cache_weights`).

    `only`: the checkpoints the plan's replicas on the node load (`fabric provision --plan`); without a
    plan every checkpoint of the lock, since the lock does not say which node serves which.
    """
    return [
        {"checkpoint": repo_id, "revision": locked.revision, "files": [f.model_dump() for f in locked.files]}
        for repo_id, locked in sorted(lock.checkpoints.items())
        if only is None or repo_id in only
    ]


def node_checkpoints(site: TrustedSite, plan: Plan, node: str) -> set[str]:
    """The checkpoints that the plan's replicas on `node` (as leader or worker) load."""
    return set(needed_checkpoints(site, plan, node=node))


def provision_vars(
    node: NodeManifest,
    options: StackOptions,
    mode: Mode,
    weights: WeightsLock | None = None,
    only: set[str] | None = None,
) -> dict[str, Any]:
    architecture = load_gpu_catalog().get(node.gpus.catalog_id).architecture
    entry = load_kernel_matrix().for_architecture(architecture)
    image = options.engine_image_rocm if node.gpus.vendor == "amd" else options.engine_image
    return {
        "fabric_provision_mode": mode,
        "fabric_preflight_vendor": node.gpus.vendor,
        "fabric_preflight_min_driver": entry.min_driver,
        "fabric_preflight_interconnect": node.gpus.interconnect,
        "fabric_container_runtime_vendor": node.gpus.vendor,
        "fabric_kernels_architecture": architecture,
        "fabric_kernels_packages": kernel_packages(node),
        ENGINE_CACHE_MODELS_DIR_VAR: options.model_cache_path,
        "fabric_engine_cache_images": [image],
        "fabric_engine_cache_weights": weights_vars(weights or WeightsLock(), only),
        "fabric_join_node_name": node.name,
        "fabric_join_labels": L.node_labels(node),
        "fabric_join_taints": [t.as_kubectl() for t in L.node_taints(node)],
    }


def provision_node(
    site: TrustedSite,
    name: str,
    target: Target,
    *,
    options: StackOptions,
    mode: Mode = "full",
    check: bool = False,
    overrides: dict[str, Any] | None = None,
    plan: Plan | None = None,
) -> PlaybookResult:
    """With `plan`, the model cache is checked only for the checkpoints of the replicas it places on the node."""
    node = find_node(site, name)
    only = node_checkpoints(site, plan, name) if plan is not None else None
    extravars = provision_vars(node, options, mode, site.weights_lock, only) | (overrides or {})
    # pipelining: one SSH round trip per module instead of three
    pipelining = {"ANSIBLE_PIPELINING": "True"}
    return run_playbook(
        "provision.yml", [target_named(target, node.name)], extravars=extravars, env=pipelining, check=check
    )


def drain_node(
    name: str,
    *,
    manifest: Path | None,
    status: str = "cordoned",
    kubectl: str = "kubectl",
    skip_kubectl: bool = False,
    timeout: str | None = None,
) -> PlaybookResult:
    extravars: dict[str, Any] = {
        "fabric_drain_node": name,
        "fabric_drain_status": status,
        "fabric_drain_kubectl": kubectl,
        "fabric_drain_skip_kubectl": skip_kubectl,
    }
    if timeout is not None:
        extravars["fabric_drain_timeout"] = timeout
    if manifest is not None:
        extravars["fabric_drain_manifest"] = str(manifest)
    # drain runs on the control machine, with its kubectl and kubeconfig
    return run_playbook("drain.yml", {"localhost": control_machine()}, extravars=extravars)


def target_named(target: Target, name: str) -> Target:
    """The target under the node's name, so that the play's host is the node (its stats, its `inventory_hostname`)."""
    return target if target.name == name else replace(target, name=name)
