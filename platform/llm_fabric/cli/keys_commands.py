"""`fabric keys init|add|rotate|retire`: the federation's enrollment key pair."""

from __future__ import annotations

from pathlib import Path

import click

from llm_fabric.cli.options import key_option, site_repo_option
from llm_fabric.cli.output import console

# absolute: the key files are found beside the repo and git runs inside it
site_repo = site_repo_option(absolute=True)


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
    from llm_fabric.site import gitrepo
    from llm_fabric.trust.signatures import default_private_key_path, init_keys

    pair = init_keys(site_repo, private_key or default_private_key_path(site_repo, new_repo=True))
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
    from llm_fabric.trust.root import add_key
    from llm_fabric.trust.signatures import default_private_key_path, load_private_key

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
    from llm_fabric.trust.signatures import default_private_key_path, load_private_key

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


commands = [keys_group]
