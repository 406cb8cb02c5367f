"""`fabric tenants key issue|revoke|list`: tenant API keys, of which the repo holds only hashes."""

from __future__ import annotations

from pathlib import Path

import click

from llm_fabric.cli.options import site_repo_option
from llm_fabric.cli.output import console, print_json


@click.group("tenants")
def tenants_group() -> None:
    """Tenants of the site repo.

    \b
    Examples:
      fabric tenants key issue muni-researchers
      fabric tenants key revoke muni-researchers 3f2a9c0d41be
    """


@tenants_group.group("key")
def key_group() -> None:
    """Gateway API keys: issued once, stored as SHA-256 hashes in tenants/NAME.yaml.

    \b
    Example:
      fabric tenants key issue -C ./site muni-researchers
    """


@key_group.command("issue")
@site_repo_option(absolute=True)
@click.argument("tenant")
@click.option("--json", "as_json", is_flag=True, help="Print {tenant, key, key_id, commit} as JSON.")
def issue_command(site_repo: Path, tenant: str, as_json: bool) -> None:
    """Make a new key for TENANT, print it once and commit only its hash.

    The key is not stored anywhere: hand it to the tenant now. The gateway accepts it once its
    config is regenerated (`fabric gateway config`).

    \b
    Example:
      fabric tenants key issue -C ./site muni-researchers --json
    """
    from llm_fabric.gateway.keys import issue_key

    issued = issue_key(site_repo, tenant)
    if as_json:
        print_json({"tenant": issued.tenant, "key": issued.key, "key_id": issued.key_id, "commit": issued.commit})
        return
    console.print(f"key {issued.key_id} for {tenant} (shown once, only its hash is kept):", markup=False)
    click.echo(issued.key)
    if issued.commit:
        console.print(f"committed {issued.commit[:12]}", markup=False)


@key_group.command("revoke")
@site_repo_option(absolute=True)
@click.argument("tenant")
@click.argument("key_ids", nargs=-1, metavar="[KEY_ID]...")
@click.option("--all", "all_keys", is_flag=True, help="Revoke every key of TENANT.")
def revoke_command(site_repo: Path, tenant: str, key_ids: tuple[str, ...], all_keys: bool) -> None:
    """Remove keys of TENANT (by id, or --all) and commit.

    \b
    Example:
      fabric tenants key revoke -C ./site muni-researchers 3f2a9c0d41be
    """
    from llm_fabric.gateway.keys import revoke_keys

    revoked = revoke_keys(site_repo, tenant, list(key_ids), all_keys=all_keys)
    if not revoked.key_ids:
        console.print(f"{tenant} had no key", markup=False)
        return
    console.print(
        f"revoked {', '.join(revoked.key_ids)} of {tenant}"
        + (f"; committed {revoked.commit[:12]}" if revoked.commit else ""),
        markup=False,
    )


@key_group.command("list")
@site_repo_option()
@click.argument("tenant")
@click.option("--json", "as_json", is_flag=True, help="Print the key ids and issue times as JSON.")
def list_command(site_repo: Path, tenant: str, as_json: bool) -> None:
    """List TENANT's key ids (the keys themselves are not known to the repo).

    \b
    Example:
      fabric tenants key list -C ./site muni-researchers
    """
    from llm_fabric.gateway.keys import list_keys

    keys = list_keys(site_repo, tenant)
    if as_json:
        print_json([{"id": k.id, "issued_at": k.issued_at.isoformat()} for k in keys])
        return
    for k in keys:
        console.print(f"{k.id}  issued {k.issued_at.isoformat()}", markup=False)
    if not keys:
        console.print(f"{tenant} has no key", markup=False)


commands = [tenants_group]
