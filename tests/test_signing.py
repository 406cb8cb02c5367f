"""Signatures: every single-field mutation of a signed manifest is detected; validate and verify agree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import ValidationError

from llm_fabric.documents import load_model
from llm_fabric.enrollment.registry import manifest_text
from llm_fabric.site.models import NodeManifest
from llm_fabric.trust.signatures import key_id, sign_manifest, verify_manifest
from llm_fabric.validate import validate_site

FABRIC = [str(Path(sys.executable).parent / "fabric")]
_ALTERNATIVES = {
    "tier": {"full": "limited", "limited": "full"},
    "status": {"active": "cordoned"},
    "provenance": {"declared": "enrolled", "enrolled": "declared"},
    "gpus.vendor": {"nvidia": "amd"},
    "gpus.interconnect": {"nvswitch": "pcie"},
    "version": {1: 1},
    "enrolled_at": {},
}


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*path, k))] or [path]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, (*path, i))] + [(*path, "+")]
    return [path]


def _mutate(data: dict[str, Any], path: tuple[Any, ...]) -> None:
    *parents, last = path
    target: Any = data
    for step in parents:
        target = target[step]
    if last == "+":
        target.append(target[-1] if target else "extra")
        return
    old = target[last]
    dotted = ".".join(str(p) for p in path if not isinstance(p, int))
    checks_status = {"pass": "warn", "warn": "fail", "fail": "pass"}
    if dotted == "enrolled_at":
        target[last] = old.replace("09:00", "09:01")
    elif dotted in _ALTERNATIVES:
        target[last] = _ALTERNATIVES[dotted].get(old, old)
    elif dotted == "checks.status":
        target[last] = checks_status[old]
    elif isinstance(old, bool):
        target[last] = not old
    elif isinstance(old, int | float):
        target[last] = old + 1
    elif isinstance(old, str):
        target[last] = old[:-1] + ("x" if not old.endswith("x") else "y") if old else "x"
    elif old is None:
        target[last] = "x"


def _set(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = data
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


@pytest.fixture
def signed(site_repo: Path) -> NodeManifest:
    return load_model(site_repo / "nodes" / "dgx-b200-01.yaml", NodeManifest)


def test_example_nodes_are_signed_and_validate_passes(site_repo: Path) -> None:
    report = validate_site(site_repo)
    assert report.exit_code == 0, report.as_dict()
    assert (site_repo / "keys" / "enrollment.pub").exists()
    private = site_repo.parent / f"{site_repo.name}.enrollment.key"
    assert private.stat().st_mode & 0o777 == 0o600


def test_every_single_field_mutation_is_detected(site_repo: Path) -> None:
    key = Ed25519PrivateKey.generate()
    keys = {key_id(key.public_key()): key.public_key()}
    manifest = sign_manifest(load_model(site_repo / "nodes" / "hgx-h200-ceitec.yaml", NodeManifest), key)
    assert verify_manifest(manifest, keys) is None
    base = manifest.model_dump(mode="json")
    paths = [p for p in _leaves({k: v for k, v in base.items() if k != "signature"}) if p and p[0] != "version"]
    assert len(paths) > 30
    for path in paths:
        data = manifest.model_dump(mode="json")
        _mutate(data, path)
        if data == base:
            continue
        try:
            mutated = NodeManifest.model_validate(data)
        except ValidationError:  # a missing number was filled with text: fill it with a number
            if path[-1] == "+":
                continue  # nothing valid to append to an empty list of models
            _set(data, path, 1)
            mutated = NodeManifest.model_validate(data)
        assert verify_manifest(mutated, keys) is not None, f"mutation of {path} went unnoticed"


def test_hand_edit_fails_verify_with_exit_3_and_validate(site_repo: Path) -> None:
    path = site_repo / "nodes" / "dgx-b300-01.yaml"
    path.write_text(path.read_text().replace("count: 8", "count: 16"))
    proc = subprocess.run([*FABRIC, "nodes", "verify", "--site-repo", str(site_repo)], capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    assert "dgx-b300-01" in proc.stderr and "changed after it was signed" in proc.stderr
    assert validate_site(site_repo).exit_code == 3


def test_unsigned_node_is_a_policy_violation(site_repo: Path, signed: NodeManifest) -> None:
    text = manifest_text(
        signed.model_copy(
            update={"name": "extra-node", "signature": None, "gpus": signed.gpus.model_copy(update={"uuids": []})}
        )
    )
    (site_repo / "nodes" / "extra-node.yaml").write_text(text)
    report = validate_site(site_repo)
    assert report.exit_code == 3
    assert any("not signed" in p.message for p in report.violations)


def test_manifest_text_round_trips_the_signature(signed: NodeManifest, tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    again = sign_manifest(signed, key)
    path = tmp_path / "nodes" / f"{signed.name}.yaml"
    path.parent.mkdir()
    path.write_text(manifest_text(again))
    assert verify_manifest(load_model(path, NodeManifest), {key_id(key.public_key()): key.public_key()}) is None
