"""Report signatures with the federation key: authenticity against the site repo's keys/, not the manifest's own key."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.cli.main import main
from llm_fabric.ledger.report.manifest import MANIFEST, _canonical, write_manifest
from llm_fabric.ledger.store.period import Month
from llm_fabric.trust.signatures import KEY_ENV, init_keys, key_id
from tests.fixtures.ledger_synthetic import generate_records


@pytest.fixture
def records(tmp_path: Path) -> Path:
    path = tmp_path / "october.jsonl"
    generate_records(path, Month.parse("2026-10"), 2_000, {"qwen3-5": (1100, 33958)}, ["muni-researchers"])
    return path


@pytest.fixture
def federation(site_repo: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The site repo's enrollment key pair, which `fabric init` made (private key beside the repo)."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    return init_keys(site_repo, reuse=True).key_id


def _report(site: Path, records: Path, out: Path, *extra: str) -> int:
    return main(
        [
            "report",
            "--site-repo",
            str(site),
            "--month",
            "2026-10",
            "--requests",
            str(records),
            "--out",
            str(out),
            *extra,
        ]
    )


def _resign(out: Path, key: Ed25519PrivateKey) -> None:
    """What a forger does: keep the hashes, replace the signer's key and signature with their own."""
    manifest = json.loads((out / MANIFEST).read_text())
    body = {k: v for k, v in manifest.items() if k != "signature"}
    public = key.public_key()
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    manifest["signature"] = {
        "algorithm": "ed25519",
        "key_id": key_id(public),
        "public_key": base64.b64encode(raw).decode(),
        "value": base64.b64encode(key.sign(_canonical(body))).decode(),
    }
    (out / MANIFEST).write_text(json.dumps(manifest))


def test_report_is_signed_with_the_federation_key_by_default(
    site_repo: Path, federation: str, records: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _report(site_repo, records, out) == 0
    assert f"manifest signed by key {federation} (the federation key" in capsys.readouterr().out
    assert json.loads((out / MANIFEST).read_text())["signature"]["key_id"] == federation
    assert main(["report", "verify", str(out), "--site-repo", str(site_repo), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["authenticated"] is True and result["key_id"] == federation and result["note"] is None


def test_a_forger_with_their_own_key_passes_integrity_only(
    site_repo: Path, federation: str, records: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _report(site_repo, records, out) == 0
    (out / "report.md").write_text("# all tokens were free\n")
    assert main(["report", "verify", str(out)]) == 3  # an edited byte: caught even without trust
    forger = Ed25519PrivateKey.generate()
    write_manifest(out, sorted(json.loads((out / MANIFEST).read_text())["files"]), forger)
    capsys.readouterr()
    assert main(["report", "verify", str(out)]) == 0  # consistent in itself: integrity holds...
    text = capsys.readouterr().out
    assert "NOT checked against a trusted key" in text and "integrity only" in text
    assert main(["report", "verify", str(out), "--site-repo", str(site_repo)]) == 3  # ...authenticity does not
    assert f"signed by key {key_id(forger.public_key())}, which is not a trusted key" in capsys.readouterr().err
    fed_pub = site_repo / "keys" / "enrollment.pub"
    assert main(["report", "verify", str(out), "--public-key", str(fed_pub)]) == 3


def test_a_swapped_key_block_is_refused(site_repo: Path, federation: str, records: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _report(site_repo, records, out) == 0
    manifest = json.loads((out / MANIFEST).read_text())
    other = Ed25519PrivateKey.generate().public_key()
    raw = other.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    manifest["signature"]["public_key"] = base64.b64encode(raw).decode()  # key_id still the federation's
    (out / MANIFEST).write_text(json.dumps(manifest))
    assert main(["report", "verify", str(out)]) == 3
    assert main(["report", "verify", str(out), "--site-repo", str(site_repo)]) == 3
    _resign(out, Ed25519PrivateKey.generate())
    assert main(["report", "verify", str(out), "--site-repo", str(site_repo)]) == 3


def test_unsigned_report_and_missing_keys(
    site_repo: Path,
    records: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "absent.key"))
    out = tmp_path / "out"
    assert _report(site_repo, records, out) == 0
    assert "manifest not signed" in capsys.readouterr().out
    assert main(["report", "verify", str(out)]) == 0
    assert "NOT signed" in capsys.readouterr().out
    assert main(["report", "verify", str(out), "--require-signature"]) == 3
    assert main(["report", "verify", str(out), "--site-repo", str(site_repo)]) == 3  # trusted keys, no signature
    shutil.rmtree(site_repo / "keys")
    assert main(["report", "verify", str(out), "--site-repo", str(site_repo)]) == 2  # nothing to trust
    assert "holds no Ed25519 public key" in capsys.readouterr().err
