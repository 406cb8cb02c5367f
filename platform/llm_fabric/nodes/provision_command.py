"""`fabric provision`: the trusted site and the node read, the playbook's target and variables, its outcome judged."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llm_fabric.errors import FabricError, UsageError
from llm_fabric.kube.options import StackOptions
from llm_fabric.nodes.provision import find_node, provision_node
from llm_fabric.plan.document import load_plan
from llm_fabric.playbook_runner import PlaybookResult, Target
from llm_fabric.trust.sites import load_trusted_site


@dataclass(frozen=True)
class ProvisionRequest:
    """What `fabric provision` was asked: the node, how to reach it, the mode and the role variables to override."""

    node: str
    site_repo: Path
    address: str | None
    ssh_user: str | None
    ssh_port: int | None
    ssh_key: Path | None
    connection: str
    mode: str
    check: bool
    plan_file: Path | None
    extra: tuple[str, ...]


def _overrides(extra: tuple[str, ...]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(
                f"-e {item}: expected KEY=VALUE", hint="e.g. -e fabric_preflight_require_persistence=false"
            )
        overrides[key] = value
    return overrides


def provision(request: ProvisionRequest) -> PlaybookResult:
    """playbooks/provision.yml run for the request's enrolled node of the trusted site repo."""
    site = load_trusted_site(request.site_repo)
    manifest = find_node(site, request.node)
    overrides = _overrides(request.extra)
    target = Target(
        request.node,
        request.address or manifest.host.hostname or request.node,
        "local" if request.connection == "local" else "ssh",
        user=request.ssh_user,
        port=request.ssh_port,
        key=request.ssh_key,
    )
    return provision_node(
        site,
        request.node,
        target,
        options=StackOptions(site_repo=request.site_repo),
        mode="files" if request.mode == "files" else "full",
        check=request.check,
        overrides=overrides,
        plan=load_plan(request.plan_file) if request.plan_file is not None else None,
    )


def refuse_failed(result: PlaybookResult, node: str) -> None:
    """The error of a playbook that did not succeed on `node`, if it did not."""
    if result.succeeded:
        return
    # a failed task is the node's state or its settings (exit 2); a runner that did not finish is ours (1)
    if result.status in ("successful", "failed"):
        raise UsageError(
            f"provision.yml failed on {node} ({len(result.failures)} failed tasks, listed above)",
            hint="fix the node or its settings (-e KEY=VALUE), then run it again",
        )
    raise FabricError(f"provision.yml did not finish on {node}: {result.status}")
