"""The trust gate: a `TrustedSite` is a site repo whose every node manifest may be used.

Plan, render, the Pulumi stacks, the gateway config and provisioning take a `TrustedSite`, never a plain
`SiteRepo`, and only `load_trusted_site` makes one: a delivery path that skips the signature check does
not type-check. A node that is unsigned, signed by an untrusted key, edited after signing, or a replay
of a manifest from before its retirement is refused (exit 3), never used; that verdict comes before
any other problem of the repo, so a broken signature is never hidden behind what the edit broke.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import InitVar, dataclass, fields
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from llm_fabric import wording
from llm_fabric.errors import PolicyRefusal, Problem
from llm_fabric.site.loader import SiteRepo, collect_site, require_valid
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.signatures import load_public_keys, verify_manifest

Keys = Mapping[str, Ed25519PublicKey]

_GATE = object()  # what `load_trusted_site` hands the constructor; nothing outside this module has it


@dataclass
class TrustedSite(SiteRepo):
    """A site repo that passed the trust gate; made only by `load_trusted_site` (TypeError otherwise)."""

    gate: InitVar[object] = None

    def __post_init__(self, gate: object) -> None:
        if gate is not _GATE:
            raise TypeError("a TrustedSite is made only by load_trusted_site (llm_fabric.trust.sites)")


def back_in_service(site: TrustedSite) -> TrustedSite:
    """The same trusted nodes with the cordoned ones back in service: the plan's what-if of a repaired
    fault (what a cordon costs), never rendered; a node's status is the only field that changes."""
    back = {
        n: node.model_copy(update={"status": "active"}) for n, node in site.nodes.items() if node.status == "cordoned"
    }
    values = {f.name: getattr(site, f.name) for f in fields(SiteRepo)}
    return TrustedSite(**(values | {"nodes": site.nodes | back}), gate=_GATE)


def load_trusted_site(root: Path, keys: Keys | None = None) -> TrustedSite:
    """The site repo at `root` when every node is trusted under `keys` (default: the repo's keys/).

    PolicyRefusal naming each untrusted node first; then ConfigError for any other problem of the repo.
    """
    site, problems = collect_site(root)
    if site is not None:
        trusted_nodes(site, keys)
    valid = require_valid(root, site, problems)
    return TrustedSite(**{f.name: getattr(valid, f.name) for f in fields(SiteRepo)}, gate=_GATE)


def untrusted_nodes(site: SiteRepo, keys: Keys | None = None) -> list[Problem]:
    """Why each node that may not be used may not be; [] when all may.

    A node may be used when a trusted key signed it, its GPUs each have their own UUID, and it is not
    an older manifest of a node that was retired since.
    """
    trusted = dict(keys) if keys is not None else load_public_keys(site.root)
    out = []
    for name, node in sorted(site.nodes.items()):
        path = site.path_of("nodes", name)
        problem = verify_manifest(node, trusted)
        if problem is not None:
            loc = ("signature",) if node.signature is not None else ("name",)
            out.append(site.problem(path, loc, f"node `{name}`: {problem}", signature_hint(site.root, node, trusted)))
        for identity in node.gpus.identity_problems():
            out.append(
                site.problem(
                    path, ("gpus", "uuids"), f"node `{name}`: {identity}", "re-enroll it on a driver that reports UUIDs"
                )
            )
        record = site.retirements.get(name)
        if record is not None and node.status != "retired" and node.enrolled_at <= record.enrolled_at:
            out.append(
                site.problem(
                    path,
                    ("status",),
                    f"node `{name}` was retired on {record.retired_at:%Y-%m-%d}; this manifest is from before that",
                    "an old manifest was restored: re-enroll the machine (`fabric enroll`) to bring it back",
                )
            )
    return out


def signature_hint(root: Path, node: NodeManifest, keys: Keys) -> str:
    """What to do about NODE's failing signature under `keys` (`fabric validate`, `fabric nodes verify`)."""
    if not keys:
        return "no trusted keys/*.pub: run `fabric keys init --site-repo DIR`, then sign the nodes"
    if node.signature is not None and node.signature.key_id in keys:  # a trusted key signed other content
        return edited_hint(root, node)
    return signature_fix_hint(root, node)


def edited_hint(root: Path, node: NodeManifest) -> str:
    """What to do about a manifest edited after a trusted key signed it.

    Never a command with the manifest's own owner or site: those may be the edit itself.
    """
    shown = f"`git -C {root} log -p -- nodes/{node.name}.yaml` shows the edit"
    restore = f"restore the signed content from git ({shown})"
    if node.provenance == "enrolled":
        return (
            f"{restore}, or re-enroll the machine so that its gathered facts are signed again: "
            f"`fabric enroll HOST --site-repo {root} --owner OWNER --site SITE --name {node.name}`"
        )
    return f"{restore}, or have an operator sign it: `fabric nodes sign {node.name} --site-repo {root}`"


def signature_fix_hint(root: Path, node: NodeManifest) -> str:
    """The command that gives NODE a valid signature again, by its provenance.

    `fabric nodes sign` refuses enrolled manifests (their facts come from the machine): for those the
    fix is re-enrolling; a declared manifest is signed by an operator.
    """
    if node.provenance == "enrolled":
        return f"re-enroll the machine: `{reenroll_command(root, node)}`"
    return f"have an operator sign it: `fabric nodes sign {node.name} --site-repo {root}`"


def reenroll_command(root: Path, node: NodeManifest) -> str:
    """`fabric enroll` for the machine behind NODE, under the same name, owner and site."""
    return f"fabric enroll HOST --site-repo {root} --owner {node.owner} --site {node.site} --name {node.name}"


def trusted_nodes(site: SiteRepo, keys: Keys | None = None) -> dict[str, NodeManifest]:
    """The site's nodes, when every one is trusted under `keys` (default: the repo's keys/); PolicyRefusal otherwise."""
    problems = untrusted_nodes(site, keys)
    if problems:
        raise PolicyRefusal(
            f"{wording.count(len(problems), 'node manifest problem')}: "
            "untrusted nodes are never planned, rendered or provisioned",
            problems=problems,
            hint="`fabric validate` lists them; `fabric nodes verify` checks the signatures",
        )
    return dict(site.nodes)
