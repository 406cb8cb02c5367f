"""`fabric nodes list|show|verify|cordon|uncordon|remediate|retire|sign`: the registered nodes."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click
from rich.table import Table

from llm_fabric.cli.options import json_option, key_option, prometheus_option, site_repo_option
from llm_fabric.cli.output import console, err_console, print_json
from llm_fabric.errors import PolicyRefusal, Problem, UsageError
from llm_fabric.names import XID_ALERT_PREFIX

if TYPE_CHECKING:  # the plan and the Xid table load only when remediate runs
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from llm_fabric.nodes.remediate import Fault, Remedy

# absolute: the registry joins paths onto it and git runs inside it (a relative ./site was staged as site/site/...)
site_repo = site_repo_option(absolute=True)


@click.group("nodes")
def nodes_group() -> None:
    """Registered nodes: list, show, verify signatures, cordon, uncordon, remediate GPU faults, retire, sign.

    \b
    Example:
      fabric nodes verify --site-repo ./site
    """


@nodes_group.command("list")
@site_repo
@json_option("Print JSON.")
def nodes_list_command(site_repo: Path, as_json: bool) -> None:
    """List the nodes with tier, GPUs, owner and signature state.

    \b
    Example:
      fabric nodes list --site-repo ./site
    """
    from llm_fabric.enrollment.registry import verify_nodes

    rows = []
    for st in verify_nodes(site_repo):
        m = st.manifest
        rows.append(
            {
                "name": st.name,
                "site": m.site if m else None,
                "owner": m.owner if m else None,
                "tier": m.tier if m else None,
                "status": m.status if m else None,
                "gpus": f"{m.gpus.count}x {m.gpus.catalog_id}" if m else None,
                "provenance": m.provenance if m else None,
                "signature": "ok" if st.problem is None else "INVALID",
            }
        )
    if as_json:
        print_json(rows)
        return
    table = Table()
    for col in ("name", "site", "owner", "tier", "status", "gpus", "provenance", "signature"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            *[
                "" if r[c] is None else str(r[c])
                for c in ("name", "site", "owner", "tier", "status", "gpus", "provenance")
            ],
            "[green]ok[/]" if r["signature"] == "ok" else "[red]INVALID[/]",
        )
    console.print(table)


@nodes_group.command("show")
@click.argument("name")
@site_repo
def nodes_show_command(name: str, site_repo: Path) -> None:
    """Print a node's manifest and whether its signature holds.

    \b
    Example:
      fabric nodes show dgx-b200-01 --site-repo ./site
    """
    from llm_fabric.enrollment.registry import manifest_text, node_path, verify_nodes

    status = next((s for s in verify_nodes(site_repo) if s.name == name), None)
    if status is None:
        raise UsageError(f"no node `{name}` in {site_repo / 'nodes'}", hint=f"see `fabric nodes list -C {site_repo}`")
    click.echo(node_path(site_repo, name).read_text() if status.manifest is None else manifest_text(status.manifest))
    console.print("signature: " + ("[green]valid[/]" if status.problem is None else f"[red]{status.problem}[/]"))


@nodes_group.command("verify")
@site_repo
def nodes_verify_command(site_repo: Path) -> None:
    """Check every node's signature; exit 3 if any manifest was edited by hand or is unsigned.

    \b
    Example:
      fabric nodes verify --site-repo ./site
    """
    from llm_fabric.enrollment.registry import verify_nodes

    statuses = verify_nodes(site_repo)
    bad = [s for s in statuses if s.problem is not None]
    if bad:
        raise PolicyRefusal(
            f"{len(bad)} of {len(statuses)} node manifests fail verification",
            problems=[
                problem
                for s in bad
                for problem in s.load_problems or [Problem(s.problem or "", file=s.path, hint=s.hint)]
            ],
            hint=f"a manifest that does not load: fix what `fabric validate -C {site_repo}` reports first"
            if any(s.manifest is None for s in bad)
            else None,
        )
    console.print(f"[green]all {len(statuses)} node signatures are valid[/]")


@nodes_group.command("retire")
@click.argument("name")
@site_repo
@key_option
@click.option(
    "--no-drain", is_flag=True, help="Only mark the manifest: the machine and its Kubernetes node are already gone."
)
@click.option(
    "--kubectl",
    "kubectl",
    default="kubectl",
    show_default=True,
    metavar="CMD",
    help="kubectl command drain.yml runs (e.g. a path, or 'ssh bastion kubectl').",
)
@click.option("--context", "context", metavar="CTX", help="kubeconfig context (default: the site's cluster.name).")
@click.option("--drain-timeout", default="15m", show_default=True, help="How long kubectl drain waits for pods.")
def nodes_retire_command(
    name: str,
    site_repo: Path,
    key_path: Path | None,
    no_drain: bool,
    kubectl: str,
    context: str | None,
    drain_timeout: str,
) -> None:
    """Cordon and drain a node (playbooks/drain.yml), then mark it retired (re-signed and committed).

    Placement stops using a retired node. If the drain fails the manifest is left unchanged; a machine
    that is already gone (no Kubernetes node left to drain) is retired with --no-drain.

    \b
    Examples:
      fabric nodes retire hgx-h200-ceitec --site-repo ./site
      fabric nodes retire hgx-h200-ceitec --site-repo ./site --context cerit-brno-admin --drain-timeout 30m
      fabric nodes retire old-box --site-repo ./site --no-drain
    """
    from llm_fabric.nodes.retire import DrainOptions, retire_node
    from llm_fabric.trust.signatures import default_private_key_path, load_private_key

    private = load_private_key(key_path or default_private_key_path(site_repo))
    _warn_if_invalid_after(site_repo, name, "retired", after_drain=not no_drain)
    drain = None if no_drain else DrainOptions(kubectl=kubectl, context=context, timeout=drain_timeout)
    with console.status(f"draining {name} with Ansible ...") if console.is_terminal and drain else nullcontext():
        result = retire_node(site_repo, name, private, drain=drain)
    reg = result.registration
    if result.drain is not None:
        console.print(f"drain.yml: cordoned and drained {name} ({result.kubectl}), {result.drain.changed} changed")
    elif reg.commit is not None:
        console.print(f"{name}: not drained (--no-drain)")
    console.print(f"{name}: retired ({reg.path}, commit {reg.commit or 'none: already retired'})")


def _warn_if_invalid_after(site_repo: Path, name: str, status: str, *, after_drain: bool = False) -> None:
    """Say, before anything is written, what `fabric validate` would report once NAME has `status`.

    A warning, not a refusal: a machine that is gone is gone, and the site repo should say so; the
    problems listed are what the next change to the repo has to fix.
    """
    from llm_fabric.validate import problems_after_status

    problems = problems_after_status(site_repo, name, status)
    if not problems:
        return
    goes_ahead = "if the drain succeeds, the change goes ahead" if after_drain else "the change goes ahead"
    console.print(
        f"[bold yellow]warning:[/] with `{name}` {status}, `fabric validate` would report {len(problems)} "
        f"new problem(s); {goes_ahead}, fix these next:"
    )
    for p in problems:
        console.print(f"  {p}", markup=False)


def _set_schedulable(site_repo: Path, name: str, key_path: Path | None, status: Literal["active", "cordoned"]) -> None:
    from llm_fabric.nodes.cordon import set_schedulable
    from llm_fabric.trust.signatures import default_private_key_path, load_private_key

    private = load_private_key(key_path or default_private_key_path(site_repo))
    if status == "cordoned":
        _warn_if_invalid_after(site_repo, name, status)
    reg = set_schedulable(site_repo, name, private, status)
    commit = reg.commit or f"none: already {status}"
    console.print(f"{name}: {status} ({reg.path}, commit {commit})", markup=False)


@nodes_group.command("cordon")
@click.argument("name")
@site_repo
@key_option
def nodes_cordon_command(name: str, site_repo: Path, key_path: Path | None) -> None:
    """Mark NAME cordoned: its manifest's status, re-signed and committed; nothing is drained.

    The next `fabric plan` places no new replicas on it and counts none of its GPUs; what runs there
    keeps running until that plan is deployed. `fabric nodes uncordon` undoes it.

    \b
    Example:
      fabric nodes cordon hgx-h200-ceitec --site-repo ./site
    """
    _set_schedulable(site_repo, name, key_path, "cordoned")


@nodes_group.command("uncordon")
@click.argument("name")
@site_repo
@key_option
def nodes_uncordon_command(name: str, site_repo: Path, key_path: Path | None) -> None:
    """Mark a cordoned NAME active again (re-signed and committed): the next `fabric plan` counts it.

    \b
    Example:
      fabric nodes uncordon hgx-h200-ceitec --site-repo ./site
    """
    _set_schedulable(site_repo, name, key_path, "active")


@nodes_group.command("remediate")
@site_repo
@key_option
@prometheus_option(f"Read the firing {XID_ALERT_PREFIX}* alerts from this Prometheus (its HTTP API, /api/v1/alerts).")
@click.option(
    "--node", "node", metavar="NODE", help="Name the faulty node yourself (with --xid), instead of --prometheus."
)
@click.option("--xid", "xid", type=click.IntRange(min=1), metavar="N", help="The Xid NODE reported (with --node).")
@click.option(
    "--watch",
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="Keep polling --prometheus every SECONDS (until Ctrl-C); prints a fault when it starts firing.",
)
def nodes_remediate_command(
    site_repo: Path,
    key_path: Path | None,
    prometheus_url: str | None,
    node: str | None,
    xid: int | None,
    watch: float | None,
) -> None:
    """Turn GPU faults into review branches: a node-fatal Xid becomes a signed cordon on `remediate/NODE-xidN`.

    Each fault is classified with the Xid table (enrollment/xid-classes.yaml). Node-fatal: a signed
    cordon commit with the fault as its reason on a branch made from the checked-out branch, and the
    `fabric plan --base` review of that branch in Markdown, for the pull request (nothing is merged).
    Replica-fatal: names the replicas on that GPU to restart, writes nothing. Application Xids: the workload's fault,
    nothing written. A second run for the same fault changes nothing. Exit 3 when a branch it wrote
    does not pass `fabric validate --base`. Uncordoning after the repair is a reviewed change too.
    An alert is acted on only when the node's signed manifest lists its GPU's UUID; the cordon is
    signed with the key given by --key (or $FABRIC_ENROLLMENT_KEY), never one found beside the repo.

    \b
    Examples:
      fabric nodes remediate -C ./site --key /etc/fabric/remediate.key --prometheus http://prometheus-operated.monitoring.svc:9090
      fabric nodes remediate -C ./site --key ./site.enrollment.key --node dgx-b200-01 --xid 79
      fabric nodes remediate -C ./site --key /etc/fabric/remediate.key --prometheus http://127.0.0.1:9090 --watch 60
    """
    import os
    import time

    from llm_fabric.site.root import require_site_root
    from llm_fabric.trust.signatures import KEY_ENV, load_private_key

    if (node is None) != (xid is None):
        raise UsageError("--node and --xid go together", hint="e.g. --node dgx-b200-01 --xid 79")
    if (node is None) == (prometheus_url is None):
        raise UsageError(
            "say where the faults come from: --prometheus URL, or --node NODE --xid N",
            hint="e.g. fabric nodes remediate -C ./site --key KEY --node dgx-b200-01 --xid 79",
        )
    if watch is not None and prometheus_url is None:
        raise UsageError("--watch polls Prometheus", hint="give --prometheus URL with --watch")
    require_site_root(site_repo)  # outside a site repo, that is the mistake to name (not the key)
    configured = key_path or (Path(os.environ[KEY_ENV]) if os.environ.get(KEY_ENV) else None)
    if configured is None:  # an unattended signer must be told which key it signs with, never find one itself
        raise UsageError(
            "`fabric nodes remediate` signs cordons: give the key it signs with (--key PATH or $FABRIC_ENROLLMENT_KEY)",
            hint="the key beside the site repo is not taken by default here; see docs/deploy.md (GPU faults) "
            "for where the remediation key lives",
        )
    private = load_private_key(configured)
    if watch is None:
        invalid = _remediate_once(site_repo, private, prometheus_url, node, xid)
        if invalid:
            raise PolicyRefusal(
                f"{len(invalid)} review branch(es) do not pass `fabric validate --base`: {', '.join(invalid)}",
                hint="the node is cordoned there all the same; add the change the problems above ask for "
                "onto that branch before it is merged",
            )
        return
    console.print(f"watching {prometheus_url} every {watch:g} s (Ctrl-C stops)", markup=False)
    seen: set[tuple[str, int] | str] = set()
    while True:
        try:
            _remediate_once(site_repo, private, prometheus_url, None, None, seen=seen)
        except UsageError as exc:  # a Prometheus that is down for a while must not end the watch
            err_console.print(f"warning: {exc.message}; trying again in {watch:g} s", markup=False)
        time.sleep(watch)


def _remediate_once(
    site_repo: Path,
    private: Ed25519PrivateKey,
    prometheus: str | None,
    node: str | None,
    xid: int | None,
    *,
    seen: set[tuple[str, int] | str] | None = None,
) -> list[str]:
    """One pass: every fault's remedy printed; the branches written that do not validate.

    With `seen` (a watch), only the faults that started firing since the last pass are acted on (a
    restarted watch looks at every fault again, which a second run leaves as it is); a fault that
    stopped firing is forgotten, so its return is acted on again; so is a skipped alert's message.
    """
    from llm_fabric.nodes.remediate import faults_from_alerts, named_fault, remediate
    from llm_fabric.nodes.xid_alerts import firing_xids

    skipped: list[str] = []
    if prometheus is not None:
        firing = firing_xids(prometheus)
        faults, unmatched = faults_from_alerts(site_repo, firing.xids)
        skipped = firing.skipped + unmatched
    else:
        assert node is not None and xid is not None
        faults = [named_fault(node, xid)]
    if not faults and not skipped and seen is None:
        console.print(f"no GPU fault alert fires at {prometheus}: nothing to do", markup=False)
    if seen is not None:
        now: set[tuple[str, int] | str] = {(f.node, f.xid) for f in faults} | set(skipped)
        faults = [f for f in faults if (f.node, f.xid) not in seen]
        skipped = [s for s in skipped if s not in seen]
        seen.intersection_update(now)
        seen.update(now)
    for message in skipped:
        console.print(message, markup=False)
    invalid = []
    for remedy in remediate(site_repo, faults, private):
        if node is not None and remedy.outcome == "unknown-node":
            raise UsageError(remedy.message, hint=f"see `fabric nodes list -C {site_repo}`")
        console.print(remedy.message, markup=False)
        if remedy.wrote and not _print_review(site_repo, remedy):
            invalid.append(remedy.branch or "")
    return invalid


def _print_review(site_repo: Path, remedy: Remedy) -> bool:
    """Print the branch's `fabric plan --base` review in Markdown and its `validate --base` verdict; True if valid."""
    from llm_fabric.nodes.remediate import base_branch, branch_checkout
    from llm_fabric.review.base import plan_repo
    from llm_fabric.review.report import markdown
    from llm_fabric.validate import validate_site

    assert remedy.branch is not None
    base = base_branch(site_repo)
    with branch_checkout(site_repo, remedy.branch) as tree:
        reviewed = plan_repo(tree, base)
        report = validate_site(tree, base)
        found = [str(p).replace(f"{tree}/", "") for p in report.problems + report.violations]
    click.echo(f"\n<!-- the pull request's description: {remedy.branch} into {base} -->")
    click.echo(_fault_markdown(remedy.fault, base))
    click.echo(markdown(reviewed.plan, reviewed.diff), nl=False)
    if found:
        lines = "".join(f"- {p}\n" for p in found)
        click.echo(f"\n### fabric validate --base {base}: NOT valid\n\n{lines}")
    else:
        click.echo(f"\n### fabric validate --base {base}: valid\n")
    return not found


def _fault_markdown(fault: Fault, base: str) -> str:
    gpus = ", ".join(fault.gpus) or "the node's GPUs"
    return (
        f"## Remediation: cordon `{fault.node}` (node-fatal Xid {fault.xid})\n\n"
        f"- fault: Xid {fault.xid} on {gpus}; source: {fault.source}\n"
        f"- change: `nodes/{fault.node}.yaml` status `cordoned`, re-signed; nothing is drained until the plan "
        "below is deployed\n"
        f"- merge when the plan below is acceptable; uncordon after the repair is its own reviewed change\n\n"
        f"The plan of this branch against `{base}` (`fabric plan --base {base} --format markdown`):\n"
    )


@nodes_group.command("sign")
@click.argument("name")
@site_repo
@key_option
def nodes_sign_command(name: str, site_repo: Path, key_path: Path | None) -> None:
    """Sign a node manifest an operator wrote by hand (provenance: declared), vouching for it.

    \b
    Example:
      fabric nodes sign dgx-b300-02 --site-repo ./site
    """
    from llm_fabric.enrollment.registry import sign_declared
    from llm_fabric.trust.signatures import default_private_key_path, load_private_key

    private = load_private_key(key_path or default_private_key_path(site_repo))
    result = sign_declared(site_repo, name, private)
    console.print(f"signed {result.path} (commit {result.commit or '-'})", markup=False)


commands = [nodes_group]
