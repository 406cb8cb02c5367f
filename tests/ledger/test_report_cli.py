"""`fabric report`, `fabric report verify` and `fabric exporter` through the CLI entry point."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from llm_fabric.cli.main import main
from llm_fabric.ledger.store.period import Month
from tests.fixtures.ledger_synthetic import generate_records

PROFILES = {"qwen3-5": (1100, 33958), "qwen3-5-122b": (900, 16000), "glm-5-1": (709, 90351)}
TENANTS = ["ceitec-structural", "muni-researchers"]


def _keys(tmp_path: Path) -> tuple[Path, Path]:
    key = Ed25519PrivateKey.generate()
    private, public = tmp_path / "report.key", tmp_path / "report.pub"
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    private.chmod(0o600)  # the federation's key loader refuses a private key others can read
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public


def _report(site: Path, records: Path, out: Path, key: Path) -> int:
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
            "--sign-key",
            str(key),
        ]
    )


@pytest.fixture
def october(tmp_path: Path) -> Path:
    records = tmp_path / "october.parquet"
    generate_records(records, Month.parse("2026-10"), 30_000, PROFILES, TENANTS, skip_days=[7, 8])
    return records


def test_report_files_verify_and_tamper(site_repo: Path, october: Path, tmp_path: Path) -> None:
    key, pub = _keys(tmp_path)
    out = tmp_path / "out"
    assert _report(site_repo, october, out, key) == 0
    names = {p.name for p in out.iterdir()}
    assert {"report.md", "report.html", "report.json", "manifest.json", "usage_by_model.csv"} <= names
    report = json.loads((out / "report.json").read_text())
    assert report["books"]["operations_ledger"] == 33333.33
    assert "request records: no records at all on 2026-10-07..08" in report["data_gaps"]
    assert "<svg" in (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert "| Operations ledger (amortised hardware + overhead) | 33,333.33 |" in md
    # contributor ledger: ceitec's dedicated deployment, used by itself and lent to muni-researchers
    ceitec = next(c for c in report["contributors"] if c["owner"] == "ceitec-structural")
    assert ceitec["dedicated_deployments"] == ["qwen3-5-122b"] and set(ceitec["lent_to"]) == {"muni-researchers"}
    assert main(["report", "verify", str(out), "--public-key", str(pub)]) == 0
    data = bytearray((out / "daily.csv").read_bytes())
    data[len(data) // 2] ^= 1  # one flipped bit
    (out / "daily.csv").write_bytes(bytes(data))
    assert main(["report", "verify", str(out)]) == 3


def test_a_forged_manifest_fails_the_signature(site_repo: Path, october: Path, tmp_path: Path) -> None:
    key, pub = _keys(tmp_path)
    out = tmp_path / "out"
    assert _report(site_repo, october, out, key) == 0
    (out / "report.md").write_text("# nothing to see\n")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"]["report.md"] = hashlib.sha256(b"# nothing to see\n").hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert main(["report", "verify", str(out)]) == 3
    (tmp_path / "other").mkdir()
    other, _ = _keys(tmp_path / "other")
    resigned = tmp_path / "resigned"
    assert _report(site_repo, october, resigned, other) == 0
    assert main(["report", "verify", str(resigned), "--public-key", str(pub)]) == 3  # not the trusted key


def _without_timestamp(path: Path) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "TS", path.read_text())


def test_same_inputs_give_the_same_report(site_repo: Path, october: Path, tmp_path: Path) -> None:
    key, _ = _keys(tmp_path)
    first, second = tmp_path / "a", tmp_path / "b"
    assert _report(site_repo, october, first, key) == 0
    assert _report(site_repo, october, second, key) == 0
    for path in sorted(first.iterdir()):
        if path.suffix == ".csv":
            assert path.read_bytes() == (second / path.name).read_bytes(), path.name
        elif path.name != "manifest.json":
            assert _without_timestamp(path) == _without_timestamp(second / path.name), path.name


def test_missing_arguments_are_a_usage_error(site_repo: Path) -> None:
    assert main(["report", "--site-repo", str(site_repo), "--month", "2026-10"]) == 2
    assert (
        main(
            [
                "report",
                "--site-repo",
                str(site_repo),
                "--month",
                "2026-13",
                "--out",
                "x",
                "--prometheus",
                "http://127.0.0.1:1",
            ]
        )
        == 2
    )


def test_exporter_metrics_pass_promtool(site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian package prometheus) is not installed")
    now = datetime.now(UTC)
    records = tmp_path / "now.jsonl"
    records.write_text(
        json.dumps(
            {
                "ts": f"{now:%Y-%m-01T00:00:00Z}",
                "model": "qwen3-5",
                "tenant": "muni-researchers",
                "prompt_tokens": 1000,
                "completion_tokens": 50,
                "status": "ok",
            }
        )
        + "\n"
    )
    assert main(["exporter", "--site-repo", str(site_repo), "--requests", str(records), "--once"]) == 0
    text = capsys.readouterr().out
    assert 'fabric_pool_gpus{gpu_model="b200",owner="cerit-sc",site="brno",status="active",tier="full"} 8.0' in text
    assert 'fabric_month_tokens{kind="input",model="qwen3-5"} 1000.0' in text
    assert 'fabric_ledger_month_to_date{currency="USD",ledger="operations_ledger"}' in text
    # each tenant's month so far, priced as the price ledger does: 1,000 x 0.26 + 50 x 1.56 per million
    assert 'fabric_tenant_month_tokens{tenant="muni-researchers"} 1050.0' in text
    assert 'fabric_tenant_month_price{currency="USD",tenant="muni-researchers"} 0.000338' in text
    assert 'fabric_tenant_budget_tokens{tenant="fnusa-clinical"} 2e+09' in text
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), lint.stdout + lint.stderr


def test_verify_takes_the_site_repo_as_every_command_does(
    site_repo: Path, october: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _report(site_repo, october, out, site_repo.parent / "site.enrollment.key") == 0
    capsys.readouterr()
    assert main(["report", "verify", str(out), "-C", str(site_repo)]) == 0
    assert "a trusted key (from" in capsys.readouterr().out
    monkeypatch.setenv("FABRIC_SITE_REPO", str(site_repo))
    assert main(["report", "verify", str(out)]) == 0
    assert "a trusted key (from" in capsys.readouterr().out
    monkeypatch.delenv("FABRIC_SITE_REPO")
    # without one, the current folder is not taken for the site repo: integrity only, as the output says
    monkeypatch.chdir(site_repo)
    assert main(["report", "verify", str(out)]) == 0
    assert "NOT checked against a trusted key" in capsys.readouterr().out
    # a stranger's key is refused against the repo's keys, named either way
    stranger, _ = _keys(tmp_path)
    assert _report(site_repo, october, out, stranger) == 0
    assert main(["report", "verify", str(out), "--site-repo", str(site_repo)]) == 3
    assert main(["report", "verify", str(out), "-C", str(site_repo)]) == 3
