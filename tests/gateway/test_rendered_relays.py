"""Issue 39 F1 in a rendered cluster: each site's gateway signs relays with its own key, believed elsewhere.

The reference federation with each site's relay key pair made by `fabric gateway relay-key` (the private
key outside the repo, the public key in keys/gateway-relay/), rendered and checked against the schemas by
`fabric render --all-sites --check`. Each site's gateway is set up as its pod would be: the rendered
Deployment's env names files under its mounts, which the rendered ConfigMap and the Secret the operator
makes from the private key file (`kubectl create secret generic fabric-gateway-relay-key
--from-file=relay.pem=...`) fill. Then the relay module reads them as the hooks do: a relay brno signs is
believed at vienna; one signed with any other key, or by vienna in brno's name, is refused.

Also: `fabric validate` refuses a relay key file that is no key (file:line), and `fabric plan --base`
lists a replaced relay key.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from tests.fixtures.cli import fabric, git

from llm_fabric.gateway.runtime import relay

SITES = ("brno", "vienna")


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ROOT with site/ (committed, relay keys made), operator/ (the private keys), out/ (the render)."""
    root = tmp_path_factory.mktemp("rendered-relays")
    site, plan = root / "site", root / "plan.json"
    assert fabric("init", str(site), "--example", "cerit-sc").returncode == 0
    for s in SITES:
        done = fabric(
            "gateway",
            "relay-key",
            s,
            "-C",
            str(site),
            "--replace",
            "--private-key",
            str(root / "operator" / f"{s}.pem"),
        )
        assert done.returncode == 0, done.stderr
        assert f"wrote {site / 'keys' / 'gateway-relay' / f'{s}.pub'}" in done.stdout, done.stdout
    git(site, "add", "-A")
    git(site, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "relay keys")
    for args in (
        ("plan", "-C", str(site), "-o", str(plan)),
        ("render", "-C", str(site), "--all-sites", "--plan", str(plan), "--out", str(root / "out"), "--check"),
    ):
        done = fabric(*args)
        assert done.returncode == 0, f"fabric {' '.join(args)}: {done.stderr}{done.stdout}"
    return root


def _objects(root: Path, site: str) -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) for p in sorted((root / "out" / site).rglob("*.yaml"))]


def _pod_env(root: Path, site: str) -> dict[str, str]:
    """The gateway container's relay env, its paths mapped into a folder standing in for the pod's files: each
    mount filled from what its volume names (a rendered ConfigMap, or the Secret made from the operator's file)."""
    objects = _objects(root, site)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "fabric-gateway"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    maps = {o["metadata"]["name"]: o["data"] for o in objects if o["kind"] == "ConfigMap"}
    assert not [o for o in objects if o["kind"] == "Secret"], "a private key is never rendered"
    secrets = {"fabric-gateway-relay-key": {"relay.pem": (root / "operator" / f"{site}.pem").read_text()}}
    files = root / "pods" / site
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            data = maps[volume["configMap"]["name"]]
        elif "secret" in volume and volume["secret"]["secretName"] in secrets:
            data = secrets[volume["secret"]["secretName"]]
        else:
            continue
        folder = files / mount["mountPath"].lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in data.items():
            (folder / name).write_text(text)
    env = {e["name"]: e["value"] for e in container["env"] if e["name"] in (relay.RELAY_KEY_ENV, relay.RELAY_PEERS_ENV)}
    return {name: str(files / value.lstrip("/")) for name, value in env.items()}


def _site_keys(
    root: Path, site: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Ed25519PrivateKey | None, relay.Verifier]:
    """What the site's gateway hooks read at start-up: its signing key and its verifier of relays."""
    env = _pod_env(root, site)
    assert set(env) == {relay.RELAY_KEY_ENV, relay.RELAY_PEERS_ENV}, env
    with monkeypatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        return relay.signing_key(), relay.Verifier(site, relay.peer_keys())


def test_a_relay_brno_signs_is_believed_at_vienna_and_no_other_key_speaks_for_brno(
    federation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    brno_key, _ = _site_keys(federation, "brno", monkeypatch)
    vienna_key, vienna = _site_keys(federation, "vienna", monkeypatch)
    assert brno_key is not None and vienna_key is not None
    header = relay.assertion_header(brno_key, "brno", "vienna", "muni-researchers", "public", uuid.uuid4().hex)
    verdict = vienna.verify(header[relay.RELAY_HEADER], time.time())
    assert isinstance(verdict, relay.Assertion), verdict
    assert (verdict.entry, verdict.tenant, verdict.data_class) == ("brno", "muni-researchers", "public")
    for other in (Ed25519PrivateKey.generate(), vienna_key):  # a key of no site, and vienna's own
        forged = relay.assertion_header(other, "brno", "vienna", "muni-researchers", "public", uuid.uuid4().hex)
        assert vienna.verify(forged[relay.RELAY_HEADER], time.time()) == (
            "the relay's assertion is not signed by `brno`'s relay key"
        )


def test_a_relay_key_file_that_is_no_key_is_refused_with_its_file_and_line(federation: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    git(tmp_path, "clone", "-q", str(federation / "site"), str(site))
    (site / "keys" / "gateway-relay" / "vienna.pub").write_text("not a key\n")
    (site / "keys" / "gateway-relay" / "prague.pub").write_bytes(
        (site / "keys" / "gateway-relay" / "brno.pub").read_bytes()
    )
    done = fabric("validate", "-C", str(site))
    assert done.returncode == 2, done.stdout + done.stderr
    shown = " ".join((done.stdout + done.stderr).split())
    assert f"{site / 'keys' / 'gateway-relay' / 'vienna.pub'}:1" in shown, shown
    assert "not an Ed25519 public key: it holds no PEM public key" in shown, shown
    assert f"{site / 'keys' / 'gateway-relay' / 'prague.pub'}:1" in shown, shown
    assert "`prague.pub` is not the relay key of a site that runs a gateway" in shown, shown


def test_plan_base_lists_a_replaced_relay_key(federation: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    git(tmp_path, "clone", "-q", str(federation / "site"), str(site))
    done = fabric(
        "gateway", "relay-key", "vienna", "-C", str(site), "--replace", "--private-key", str(tmp_path / "v.pem")
    )
    assert done.returncode == 0, done.stderr
    review = fabric("plan", "-C", str(site), "--base", "HEAD", "--format", "markdown")
    assert review.returncode == 0, review.stderr
    assert "### Key changes" in review.stdout, review.stdout[:2000]
    line = next(line for line in review.stdout.splitlines() if "keys/gateway-relay/vienna.pub" in line)
    assert line.startswith("- relay key ") and "of gateway site `vienna` replaced" in line, line
    assert "relays signed by it are believed as entering at `vienna`" in line, line
