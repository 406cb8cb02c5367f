"""`fabric tenants add|list|show` and `fabric tenants key issue|revoke|list` (the repo holds only key hashes)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llm_fabric.cli.options import json_option, site_repo_option, store_option
from llm_fabric.cli.output import console, print_json

if TYPE_CHECKING:
    from llm_fabric.site.tenants import TenantSummary


@click.group("tenants")
def tenants_group() -> None:
    """Tenants of the site repo: add, list, show, and their gateway API keys.

    \b
    Examples:
      fabric tenants add -C ./site chem-lab --display-name "Chemistry lab" --data-class public
      fabric tenants list -C ./site
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
@click.option(
    "--expires-at",
    type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"]),
    metavar="WHEN",
    help="UTC date or time from which the gateway refuses the key (401); default: it does not expire.",
)
@json_option("Print {tenant, key, key_id, commit} as JSON.")
def issue_command(site_repo: Path, tenant: str, expires_at: datetime | None, as_json: bool) -> None:
    """Make a new key for TENANT, print it once and commit only its hash.

    The key is not stored anywhere: hand it to the tenant now. The gateway accepts it once its
    config is regenerated (`fabric gateway config`), until --expires-at if given.

    \b
    Example:
      fabric tenants key issue -C ./site muni-researchers --expires-at 2027-06-30 --json
    """
    from llm_fabric.gateway.keys import issue_key

    issued = issue_key(site_repo, tenant, expires_at=expires_at)
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
@json_option("Print the key ids, issue and expiry times as JSON.")
def list_command(site_repo: Path, tenant: str, as_json: bool) -> None:
    """List TENANT's key ids, when each was issued and when it expires (the keys themselves are not known).

    \b
    Example:
      fabric tenants key list -C ./site muni-researchers
    """
    from llm_fabric.gateway.keys import key_state, list_keys

    keys = list_keys(site_repo, tenant)
    if as_json:
        print_json(
            [
                {
                    "id": k.id,
                    "issued_at": k.issued_at.isoformat(),
                    "expires_at": k.expires_at.isoformat() if k.expires_at else None,
                }
                for k in keys
            ]
        )
        return
    now = datetime.now(UTC)
    for k in keys:
        console.print(f"{k.id}  issued {k.issued_at.isoformat()}  {key_state(k, now)}", markup=False)
    if not keys:
        console.print(f"{tenant} has no key", markup=False)


@tenants_group.command("add")
@site_repo_option(absolute=True)
@click.argument("name")
@click.option("--display-name", required=True, metavar="TEXT", help="Shown in reports.")
@click.option(
    "--data-class", "data_classes", multiple=True, required=True, metavar="CLASS", help="Repeat for each class."
)
@click.option("--contributor", is_flag=True, help="The tenant owns (contributes) machines.")
@click.option("--contact", metavar="TEXT", help="Contact address.")
@click.option("--max-concurrent-requests", type=click.IntRange(min=1), metavar="N", help="Gateway limit.")
@click.option("--requests-per-minute", type=click.IntRange(min=1), metavar="N", help="Gateway limit.")
@click.option("--tokens-per-month", type=click.IntRange(min=1), metavar="N", help="Gateway limit.")
@click.option("--branch", metavar="BRANCH", help="Commit onto BRANCH for review, leaving the checkout as it is.")
def add_command(
    site_repo: Path,
    name: str,
    display_name: str,
    data_classes: tuple[str, ...],
    contributor: bool,
    contact: str | None,
    max_concurrent_requests: int | None,
    requests_per_minute: int | None,
    tokens_per_month: int | None,
    branch: str | None,
) -> None:
    """Add tenants/NAME.yaml (checked: the name, unique, data classes fabric.yaml declares) and commit it.

    The gateway enforces the limits (docs/gateway.md); issue the tenant a key with `fabric tenants key issue`.

    \b
    Example:
      fabric tenants add -C ./site chem-lab --display-name "Chemistry lab" --data-class public --requests-per-minute 60
    """
    from llm_fabric.site.models import Limits
    from llm_fabric.site.tenants import new_tenant

    limits = Limits(
        max_concurrent_requests=max_concurrent_requests,
        requests_per_minute=requests_per_minute,
        tokens_per_month=tokens_per_month,
    )
    added = new_tenant(
        site_repo,
        name,
        display_name=display_name,
        data_classes=list(data_classes),
        contributor=contributor,
        contact=contact,
        limits=limits,
        branch=branch,
    )
    where = f"branch {added.branch}" if added.branch else str(added.path)
    console.print(f"added tenant {name}: {where} (commit {added.commit or '-'})", markup=False)


@tenants_group.command("list")
@site_repo_option()
@json_option("Rows as JSON.")
def tenants_list_command(site_repo: Path, as_json: bool) -> None:
    """List the tenants: contributor, data classes, GPUs contributed, dedicated GPUs, limits, keys.

    \b
    Example:
      fabric tenants list -C ./site
    """
    from rich.table import Table

    from llm_fabric.site.tenants import tenant_summaries

    summaries = tenant_summaries(site_repo)
    if as_json:
        print_json([_tenant_row(s) for s in summaries])
        return
    table = Table("tenant", "contributor", "data classes", "GPUs", "dedicated", "limits", "keys")
    for s in summaries:
        t = s.tenant
        limits = ", ".join(f"{k} {v}" for k, v in t.limits.model_dump(exclude_none=True).items()) or "-"
        dedicated = t.dedicated.gpus if t.dedicated else 0
        table.add_row(
            t.name, "yes" if t.contributor else "no", ", ".join(t.data_classes), str(s.gpus_contributed),
            str(dedicated), limits, str(len(t.keys)),
        )  # fmt: skip
    console.print(table)


@tenants_group.command("show")
@site_repo_option()
@click.argument("name")
@json_option("Print JSON.")
@store_option
def tenants_show_command(site_repo: Path, name: str, as_json: bool, store: Path | None) -> None:
    """Show one tenant: its file's fields, the nodes it contributes, its key ids, its month so far.

    The month-to-date is the ledger store's (what `fabric ledger ingest` stored of the gateways'
    records), priced at ledger.yaml's reference prices, against the tenant's monthly budgets.

    \b
    Example:
      fabric tenants show -C ./site ceitec-structural
    """
    from llm_fabric.ledger.tenant_month import month_to_date
    from llm_fabric.site.loader import load_site
    from llm_fabric.site.tenants import tenant_summary

    row = _tenant_row(tenant_summary(site_repo, name))
    month = month_to_date(load_site(site_repo), site_repo, datetime.now(UTC), store).get(name)
    if as_json:
        row["month_to_date"] = None
        if month is not None:
            row["month_to_date"] = {
                "month": month.month, "requests": month.requests, "tokens": month.tokens,
                "price": str(month.price), "currency": month.currency,
            }  # fmt: skip
    else:
        row["month_to_date"] = month.describe() if month is not None else "no ledger store yet"
    if as_json:
        print_json(row)
        return
    for key, value in row.items():
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        console.print(f"{key}: {'-' if value in (None, '') else value}", markup=False)


def _tenant_row(summary: TenantSummary) -> dict[str, object]:
    t = summary.tenant
    return {
        "name": t.name,
        "display_name": t.display_name,
        "contributor": t.contributor,
        "data_classes": list(t.data_classes),
        "gpus_contributed": summary.gpus_contributed,
        "nodes": summary.nodes,
        "dedicated_gpus": t.dedicated.gpus if t.dedicated else 0,
        "limits": t.limits.model_dump(exclude_none=True),
        "keys": [k.id for k in t.keys],
        "contact": t.contact,
    }


commands = [tenants_group]
