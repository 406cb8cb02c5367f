"""Run `playbooks/provision.yml` for an enrolled node, and `playbooks/drain.yml` to take one out.

The roles' variables are their API (prefixed, documented in each role's defaults); this module sets
them from the node manifest, the GPU catalog and the kernel matrix, so that a node is provisioned
exactly as the site repo describes it: its labels and taints, its architecture's driver floor.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import ansible_runner

from llm_fabric.deploy import labels as L
from llm_fabric.deploy.options import StackOptions
from llm_fabric.distribution import data_path
from llm_fabric.documents import suggest
from llm_fabric.enrollment.catalog import load_gpu_catalog
from llm_fabric.enrollment.facts import Target, _envvars
from llm_fabric.errors import ConfigError, UsageError
from llm_fabric.kernels.matrix import load_kernel_matrix
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import NodeManifest

Mode = Literal["full", "files"]


@dataclass
class PlaybookResult:
    playbook: str
    status: str
    stats: dict[str, dict[str, int]] = field(default_factory=dict)  # host -> ok/changed/failures/...
    failures: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return sum(s.get("changed", 0) for s in self.stats.values())

    @property
    def succeeded(self) -> bool:
        return self.status == "successful" and not self.failures

    def as_dict(self) -> dict[str, object]:
        return {
            "playbook": self.playbook,
            "status": self.status,
            "changed": self.changed,
            "stats": self.stats,
            "failures": self.failures,
        }


def find_node(site: SiteRepo, name: str) -> NodeManifest:
    if name not in site.nodes:
        guess = suggest(name, sorted(site.nodes))
        raise UsageError(
            f"node `{name}` is not enrolled in {site.root}",
            hint=f"did you mean `{guess}`?" if guess else "enroll it first: fabric enroll HOST",
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


def provision_vars(node: NodeManifest, options: StackOptions, mode: Mode) -> dict[str, Any]:
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
        "fabric_engine_cache_models_dir": options.model_cache_path,
        "fabric_engine_cache_images": [image],
        "fabric_join_node_name": node.name,
        "fabric_join_labels": L.node_labels(node),
        "fabric_join_taints": [t.as_kubectl() for t in L.node_taints(node)],
    }


def run_playbook(
    playbook: str, hosts: dict[str, dict[str, object]], extravars: dict[str, Any], *, check: bool = False
) -> PlaybookResult:
    work = Path(tempfile.mkdtemp(prefix="fabric-provision-"))
    failures: list[str] = []
    stats: dict[str, Any] = {}

    def on_event(event: dict[str, Any]) -> bool:
        data = event.get("event_data", {})
        if event.get("event") == "playbook_on_stats":
            stats.update(data)
        if event.get("event") in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            res = data.get("res", {})
            # a failed command's own words (kubectl's "context does not exist") say more than "non-zero return code"
            said = str(res.get("stderr") or "").strip().splitlines()[-1:] or [str(res.get("msg", "")).strip()]
            failures.append(f"{data.get('host')}: {data.get('task')}: {said[0]}")
        return False

    try:
        runner = ansible_runner.run(
            private_data_dir=str(work),
            playbook=str(data_path("playbooks", playbook)),
            inventory={"all": {"hosts": hosts}},
            # pipelining: one SSH round trip per module instead of three
            envvars=_envvars(work) | {"ANSIBLE_PIPELINING": "True"},
            extravars=extravars,
            cmdline="--check --diff" if check else None,
            quiet=True,
            event_handler=on_event,
            rotate_artifacts=1,
        )
        status = str(runner.status)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    per_host: dict[str, dict[str, int]] = {}
    for key in ("ok", "changed", "failures", "dark", "skipped"):
        for host, count in (stats.get(key) or {}).items():
            per_host.setdefault(host, {})[key] = int(count)
    return PlaybookResult(playbook, status, per_host, failures)


def provision_node(
    site: SiteRepo,
    name: str,
    target: Target,
    *,
    options: StackOptions,
    mode: Mode = "full",
    check: bool = False,
    overrides: dict[str, Any] | None = None,
) -> PlaybookResult:
    node = find_node(site, name)
    extravars = provision_vars(node, options, mode) | (overrides or {})
    return run_playbook("provision.yml", {node.name: target.inventory_vars()}, extravars, check=check)


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
        "drain_node": name,
        "drain_status": status,
        "drain_kubectl": kubectl,
        "drain_skip_kubectl": skip_kubectl,
    }
    if timeout is not None:
        extravars["drain_timeout"] = timeout
    if manifest is not None:
        extravars["drain_manifest"] = str(manifest)
    # drain runs on the control machine: its own Python runs the modules
    control: dict[str, object] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    return run_playbook("drain.yml", {"localhost": control}, extravars)
