"""`fabric validate`: every node manifest must carry a valid signature by a key in keys/.

Unsigned or altered manifests are policy violations (exit 3): a federation cannot place
workloads on hardware claims that nobody with the enrollment key vouched for.
"""

from __future__ import annotations

from pathlib import Path

from llm_fabric.errors import UsageError
from llm_fabric.signing import load_public_keys, verify_manifest
from llm_fabric.site.loader import SiteRepo
from llm_fabric.site.models import NodeManifest
from llm_fabric.site.validation import Finding


def signature_fix_hint(root: Path, node: NodeManifest) -> str:
    """The command that gives NODE a valid signature again, by its provenance.

    `fabric nodes sign` refuses enrolled manifests (their facts come from the machine): for those the
    fix is re-enrolling; a declared manifest is signed by an operator.
    """
    if node.provenance == "enrolled":
        return (
            f"re-enroll the machine: `fabric enroll HOST --site-repo {root} --owner {node.owner} "
            f"--site {node.site} --name {node.name}`"
        )
    return f"have an operator sign it: `fabric nodes sign {node.name} --site-repo {root}`"


def check_node_signatures(site: SiteRepo) -> list[Finding]:
    if not site.nodes:
        return []
    try:
        keys = load_public_keys(site.root)
    except UsageError as exc:
        return [Finding("config", site.problem(site.root / "keys", (), exc.message))]
    findings = []
    for name, node in sorted(site.nodes.items()):
        problem = verify_manifest(node, keys)
        if problem is None:
            continue
        hint = signature_fix_hint(site.root, node)
        if not keys:
            hint = "no keys/*.pub in the site repo: run `fabric keys init --site-repo DIR`, then sign the nodes"
        loc = ("signature",) if node.signature is not None else ("name",)
        findings.append(
            Finding("policy", site.problem(site.path_of("nodes", name), loc, f"node `{name}`: {problem}", hint))
        )
    return findings
