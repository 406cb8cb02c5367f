"""`fabric enroll`, `fabric facts`, `fabric keys init`, `fabric nodes list|show|verify|retire|sign`."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click
from rich.table import Table

from llm_fabric.cli.options import site_repo_option
from llm_fabric.cli.output import console, print_json
from llm_fabric.errors import EXIT_OK, EXIT_POLICY, PolicyRefusal, Problem, UsageError

if TYPE_CHECKING:
    from llm_fabric.enrollment.enroll import EnrollResult

# The core (pydantic models, Ansible, cryptography) is imported inside each command: every `fabric`
# invocation imports every command module, and only the command that runs should pay for its imports.

_STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "red"}
_TIER_STYLE = {"full": "bold green", "limited": "bold yellow", "rejected": "bold red"}

# absolute: the registry joins paths onto it and git runs inside it (a relative ./site was staged as site/site/...)
site_repo = site_repo_option(absolute=True)
key_option = click.option(
    "--key",
    "key_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Enrollment private key (default: $FABRIC_ENROLLMENT_KEY, else SITE_REPO.enrollment.key beside the repo).",
)


def _connection_options(func: Any) -> Any:
    for option in reversed(
        [
            click.option("--connection", type=click.Choice(["ssh", "local"]), default="ssh", show_default=True),
            click.option("--ssh-user", metavar="U", help="SSH user (default: yours / ssh config)."),
            click.option("--ssh-port", metavar="P", type=int, help="SSH port (default 22)."),
            click.option("--ssh-key", metavar="K", type=click.Path(dir_okay=False, path_type=Path), help="SSH key."),
        ]
    ):
        func = option(func)
    return func


class _Progress:
    """A spinner while Ansible runs (on stderr, so --json output stays clean)."""

    def __init__(self, host: str) -> None:
        self.status = console.status(f"gathering facts from {host} with Ansible ...") if console.is_terminal else None

    def __enter__(self) -> _Progress:
        if self.status is not None:
            self.status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.__exit__(None, None, None)

    def __call__(self, host: str, what: str) -> None:
        if self.status is not None:
            self.status.update(f"gathering facts with Ansible: {what}")


def result_json(result: EnrollResult) -> dict[str, object]:
    v = result.verdict
    reg = result.registration
    return {
        "node": result.name,
        "tier": v.tier,
        "checks": [c.model_dump(mode="json") for c in v.checks],
        "gpus": {
            "model": v.gpus.model,
            "count": v.gpus.count,
            "memory_gb_total": v.gpus.memory_gb_total,
            "compute_capability": v.gpus.compute_capability,
        },
        "manifest": str(reg.path) if reg is not None else None,
        "commit": reg.commit if reg is not None else None,
        "branch": reg.branch if reg is not None else None,
        "changes": reg.changes if reg is not None else [],
    }


def print_verdict(result: EnrollResult) -> None:
    v = result.verdict
    table = Table(title=f"admission of {result.name}", title_justify="left")
    for col in ("check", "status", "value", "threshold", "detail"):
        table.add_column(col)
    for c in v.checks:
        style = _STATUS_STYLE[c.status]
        value = "" if c.value is None else str(c.value)
        threshold = "" if c.threshold is None else str(c.threshold)
        table.add_row(c.id, f"[{style}]{c.status}[/]", value, threshold, c.detail)
    console.print(table)
    g = v.gpus
    console.print(
        f"GPUs: {g.count} x {g.product or '-'} ({g.model or 'not in catalog'}), {g.memory_gb_total} GB in all, "
        f"compute capability {g.compute_capability or '-'}"
    )
    console.print(f"tier: [{_TIER_STYLE[v.tier]}]{v.tier}[/]")
    for note in result.inventory.notes:
        console.print(f"note: {note}", markup=False)


@click.command("enroll")
@click.argument("host", metavar="HOST|NAME")
@site_repo
@click.option("--owner", required=True, metavar="GROUP", help="Contributing tenant that owns the machine.")
@click.option("--site", "site", required=True, metavar="SITE", help="Site (in fabric.yaml) where the machine runs.")
@click.option(
    "--name",
    metavar="NODE",
    help="Node name (default: NAME with --facts, else the machine's short hostname).",
)
@_connection_options
@click.option(
    "--facts", "facts_file", type=click.Path(dir_okay=False, path_type=Path), help="Decide from a saved bundle."
)
@key_option
@click.option(
    "--dry-run", is_flag=True, help="Run every check the real run does (same verdict, same exit code); write nothing."
)
@click.option(
    "--branch",
    metavar="BRANCH",
    help="Commit the manifest onto BRANCH (created from HEAD) for review, leaving the checkout as it is.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def enroll_command(host: str, site_repo: Path, **opts: Any) -> int:
    """Gather HOST's facts with Ansible, decide admission, and register a signed node manifest.

    With --facts FILE the facts come from a saved bundle (`fabric facts`) and the argument is the node's
    NAME. Exit 0 when admitted (full or limited tier), 3 when rejected or when its GPUs are registered
    under another node, 2 on usage or connection errors; --dry-run gives the same verdict and exit code.

    \b
    Examples:
      fabric enroll gpu7.example.org --site-repo ./site --owner cerit-sc --site brno --ssh-user root
      fabric enroll gpu7.example.org --site-repo ./site --owner cerit-sc --site brno --branch enroll/gpu7
      fabric enroll localhost --connection local --site-repo ./site --owner cerit-sc --site brno --dry-run
      fabric enroll gpu7 --facts gpu7.facts.json --site-repo ./site --owner cerit-sc --site brno --json
    """
    from llm_fabric.enrollment.enroll import EnrollRequest, enroll

    as_json = opts.pop("as_json")
    request = EnrollRequest(host=host, site_root=site_repo, **opts)
    with _Progress(host) as progress:
        result = enroll(request, progress=None if opts["facts_file"] else progress)
    if as_json:
        print_json(result_json(result))
    else:
        print_verdict(result)
        _print_outcome(result, request.dry_run)
    return EXIT_OK if result.verdict.admitted else EXIT_POLICY


def _print_outcome(result: EnrollResult, dry_run: bool) -> None:
    reg = result.registration
    if not result.verdict.admitted:
        failed = ", ".join(c.id for c in result.verdict.checks if c.status == "fail")
        console.print(f"[red]rejected[/]: failed {failed}; nothing was written")
    elif dry_run or reg is None:
        console.print("dry run: nothing was written")
    elif reg.branch is not None:
        console.print(
            f"committed {reg.path.name} to branch {reg.branch} (commit {reg.commit or 'none: unchanged'}); "
            "the checkout is unchanged: merge the branch once reviewed",
            markup=False,
        )
    else:
        verb = "updated" if reg.previous is not None else "registered"
        console.print(f"{verb} {reg.path} (commit {reg.commit or 'none: unchanged'})")
        for change in reg.changes:
            console.print(f"  changed: {change}", markup=False)


@click.command("facts")
@click.argument("host", required=False)
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Bundle file.")
@click.option(
    "--sample",
    metavar="NAME",
    help="Write the bundle of a sample machine shipped with the fabric (h100x8: 8 x H100 SXM, h200x4, "
    "mi355x8) instead of gathering; HOST names it (default: NAME).",
)
@_connection_options
def facts_command(
    host: str | None,
    out: Path,
    sample: str | None,
    connection: str,
    ssh_user: str | None,
    ssh_port: int | None,
    ssh_key: Path | None,
) -> None:
    """Only gather HOST's facts into a bundle, for `fabric enroll --facts` on another machine.

    With --sample NAME, write a sample machine's bundle instead (no machine needed): the tour enrols it.

    \b
    Example:
      fabric facts gpu7.example.org --ssh-user root -o gpu7.facts.json
      fabric facts gpu7 --sample h100x8 -o gpu7.facts.json
    """
    from llm_fabric.enrollment.enroll import EnrollRequest, gather_one
    from llm_fabric.enrollment.facts import save_bundle
    from llm_fabric.enrollment.samples import sample_bundle

    if sample is not None:
        bundle = sample_bundle(sample, host or sample)
        save_bundle(bundle, out)
        console.print(f"wrote {out}: sample machine {sample} as host {bundle.host} (not gathered)", markup=False)
        return
    if host is None:
        raise UsageError("fabric facts: no HOST given", hint="give HOST to gather from, or --sample NAME")
    request = EnrollRequest(
        host=host,
        site_root=Path("."),
        owner="",
        site="",
        connection=connection,  # type: ignore[arg-type]
        ssh_user=ssh_user,
        ssh_port=ssh_port,
        ssh_key=ssh_key,
    )
    with _Progress(host) as progress:
        bundle = gather_one(request, progress)
    save_bundle(bundle, out)
    ran = sum(1 for p in bundle.probes.values() if p.rc == 0)
    console.print(f"wrote {out}: {ran} of {len(bundle.probes)} probes answered")


@click.group("keys")
def keys_group() -> None:
    """The federation's enrollment key pair: create it once, rotate it as a reviewed change.

    \b
    Examples:
      fabric keys init --site-repo ./site --private-key ~/.config/llm-fabric/site.key
      fabric keys rotate --site-repo ./site --branch rotate-key
    """


@keys_group.command("init")
@site_repo
@click.option(
    "--private-key",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where the private key goes (outside the repo).",
)
def keys_init_command(site_repo: Path, private_key: Path | None) -> None:
    """Create an Ed25519 key pair: public key in SITE_REPO/keys/, private key outside it (mode 0600).

    \b
    Example:
      fabric keys init --site-repo ./site
    """
    from llm_fabric.signing import default_private_key_path, init_keys
    from llm_fabric.site import gitrepo

    pair = init_keys(site_repo, private_key or default_private_key_path(site_repo))
    commit = (
        gitrepo.commit_paths(site_repo, [pair.public_path], f"enrollment key {pair.key_id}")
        if gitrepo.is_repo(site_repo)
        else None
    )
    console.print(
        f"key {pair.key_id}: public {pair.public_path} (commit {commit or '-'}), private {pair.private_path} (0600)"
    )


@keys_group.command("add")
@click.argument("public_key", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@site_repo
@key_option
@click.option("--name", metavar="NAME", help="File name in keys/ (default: PUBLIC_KEY's name).")
def keys_add_command(public_key: Path, site_repo: Path, key_path: Path | None, name: str | None) -> None:
    """Add a federation key, endorsed by a key the site repo already trusts (key rotation).

    Writes keys/NAME.pub and keys/NAME.pub.endorsement and commits them. `fabric validate --base` and
    `fabric plan --base` accept a new key only with such an endorsement by a key of the base revision.

    \b
    Example:
      fabric keys add ./operator-2027.pub --site-repo ./site --key ./site.enrollment.key
    """
    from llm_fabric.signing import default_private_key_path, load_private_key
    from llm_fabric.trust import add_key

    private = load_private_key(key_path or default_private_key_path(site_repo))
    added = add_key(site_repo, public_key, private, name)
    console.print(
        f"key {added.key_id}: {added.path}, endorsed by {added.signer} (commit {added.commit or '-'})", markup=False
    )


@keys_group.command("rotate")
@site_repo
@key_option
@click.option(
    "--new-private-key",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where the new private key goes (default: SITE_REPO.enrollment-NEWID.key beside the repo).",
)
@click.option("--branch", metavar="BRANCH", help="Commit onto BRANCH for review, leaving the checkout as it is.")
def keys_rotate_command(
    site_repo: Path, key_path: Path | None, new_private_key: Path | None, branch: str | None
) -> None:
    """Start a key rotation: a new federation key beside the old one, every node re-signed with it.

    One commit (a reviewed change with --branch). The old key stays trusted, so every node verifies
    before, during and after; once the change has landed, `fabric keys retire OLD_ID` removes it.

    \b
    Example:
      fabric keys rotate --site-repo ./site --branch rotate-key
    """
    from llm_fabric.nodes.key_rotation import rotate_key
    from llm_fabric.signing import default_private_key_path, load_private_key

    old = load_private_key(key_path or default_private_key_path(site_repo))
    r = rotate_key(site_repo, old, new_private_key, branch=branch)
    where = f"branch {r.branch}" if r.branch else "the checkout"
    console.print(
        f"key {r.new_key_id} added beside {r.old_key_id}; {len(r.resigned)} node(s) re-signed; "
        f"committed to {where} (commit {r.commit or '-'})",
        markup=False,
    )
    console.print(
        f"new private key: {r.private_path} (0600): sign with it from now on (--key or $FABRIC_ENROLLMENT_KEY)",
        markup=False,
    )
    console.print(f"once this has landed: fabric keys retire {r.old_key_id} --site-repo {site_repo}", markup=False)


@keys_group.command("retire")
@click.argument("key_id")
@site_repo
def keys_retire_command(key_id: str, site_repo: Path) -> None:
    """Remove federation key KEY_ID (or a file name in keys/) once no node is signed by it (a rotation's end).

    The public key is kept in keys/retired/ (not trusted) for reports signed before the rotation:
    `fabric report verify OUT --public-key SITE_REPO/keys/retired/KEY_ID.pub`.

    \b
    Example:
      fabric keys retire 5415e13d7b5b1b3e --site-repo ./site
    """
    from llm_fabric.nodes.key_rotation import retire_key

    r = retire_key(site_repo, key_id)
    console.print(f"key {r.key_id} retired: kept in {r.kept_at}, commit {r.commit or '-'}", markup=False)


@click.group("nodes")
def nodes_group() -> None:
    """Registered nodes: list, show, verify signatures, cordon, uncordon, retire, sign.

    \b
    Example:
      fabric nodes verify --site-repo ./site
    """


@nodes_group.command("list")
@site_repo
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
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
def nodes_verify_command(site_repo: Path) -> int:
    """Check every node's signature; exit 3 if any manifest was edited by hand or is unsigned.

    \b
    Example:
      fabric nodes verify --site-repo ./site
    """
    from llm_fabric.enrollment.registry import verify_nodes
    from llm_fabric.trust import signature_fix_hint

    statuses = verify_nodes(site_repo)
    bad = [s for s in statuses if s.problem is not None]
    if bad:
        raise PolicyRefusal(
            f"{len(bad)} of {len(statuses)} node manifests fail verification",
            problems=[
                problem
                for s in bad
                for problem in s.load_problems
                or [
                    Problem(
                        s.problem or "",
                        file=s.path,
                        hint=signature_fix_hint(site_repo, s.manifest) if s.manifest else None,
                    )
                ]
            ],
            hint=f"a manifest that does not load: fix what `fabric validate -C {site_repo}` reports first"
            if any(s.manifest is None for s in bad)
            else None,
        )
    console.print(f"[green]all {len(statuses)} node signatures are valid[/]")
    return EXIT_OK


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
    from llm_fabric.signing import default_private_key_path, load_private_key

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
    from llm_fabric.signing import default_private_key_path, load_private_key

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
    from llm_fabric.signing import default_private_key_path, load_private_key

    private = load_private_key(key_path or default_private_key_path(site_repo))
    result = sign_declared(site_repo, name, private)
    console.print(f"signed {result.path} (commit {result.commit or '-'})", markup=False)


commands = [enroll_command, facts_command, keys_group, nodes_group]
