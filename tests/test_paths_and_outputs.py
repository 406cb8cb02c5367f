"""Writes stay in their place: names checked before paths, no symlink or special file followed, output folders
owned through a marker, normal file modes, and `report verify` over the whole folder tree (issue 20).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from llm_fabric.cli.main import main
from llm_fabric.enrollment.facts import save_bundle
from llm_fabric.ledger.report.manifest import MANIFEST
from llm_fabric.ledger.store.period import Month
from llm_fabric.trust.signatures import default_private_key_path
from tests.fixtures.factsbundle import make_bundle
from tests.fixtures.ledger_synthetic import generate_records

FABRIC = str(Path(sys.executable).parent / "fabric")
MARKER = ".fabric-output"  # llm_fabric.outdir.MARKER, spelt out so that this file also runs on older code


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A node manifest outside the site repo, as an attacker would point a command at."""
    outside = tmp_path / "outside"
    outside.mkdir()
    path = outside / "victim.yaml"
    path.write_text("name: victim\n")
    return path


def test_retire_and_sign_take_names_not_paths(
    site_repo: Path, victim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(capsys, "nodes", "retire", "../../outside/victim", "-C", str(site_repo), "--no-drain")
    assert code == 2 and "is not a valid name" in out
    code, out = _run(capsys, "nodes", "sign", "../..", "-C", str(site_repo))
    assert code == 2 and "is not a valid name" in out
    assert victim.read_text() == "name: victim\n"


@pytest.mark.parametrize("name", ["../../x", "Bad_Name", "a" * 64])
def test_enroll_name_is_checked_before_anything(
    site_repo: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "h.facts.json"
    save_bundle(make_bundle("h100x8", uuid_salt="n"), bundle)
    args = ["enroll", "h", "--facts", str(bundle), "-C", str(site_repo), "--owner", "cerit-sc", "--site", "brno"]
    code, out = _run(capsys, *args, "--name", name, "--dry-run")
    assert code == 2 and "not a valid name" in out and "Traceback" not in out


def test_a_symlinked_nodes_folder_is_refused(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "elsewhere"
    (site_repo / "nodes").rename(outside)
    (site_repo / "nodes").symlink_to(outside)
    code, out = _run(capsys, "validate", "-C", str(site_repo))
    assert code == 2 and "symbolic link" in out
    bundle = tmp_path / "h.facts.json"
    save_bundle(make_bundle("h100x8", uuid_salt="s"), bundle)
    args = ["enroll", "h", "--facts", str(bundle), "-C", str(site_repo), "--owner", "cerit-sc", "--site", "brno"]
    code, out = _run(capsys, *args, "--name", "new-box")
    assert code == 2
    assert not (outside / "new-box.yaml").exists()


def test_links_to_devices_and_fifos_are_refused_without_reading(site_repo: Path) -> None:
    (site_repo / "tenants" / "zero.yaml").symlink_to("/dev/zero")
    os.mkfifo(site_repo / "deployments" / "pipe.yaml")
    proc = subprocess.run(
        [FABRIC, "validate", "-C", str(site_repo)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert "zero.yaml" in proc.stdout and "symbolic links are not read" in proc.stdout
    assert "pipe.yaml" in proc.stdout and "FIFO" in proc.stdout


def test_written_files_have_normal_modes(site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(site_repo / "fabric.yaml") == 0o644
    assert mode(site_repo / "nodes" / "dgx-b200-01.yaml") == 0o644
    assert mode(default_private_key_path(site_repo)) == 0o600
    out = tmp_path / "deploy"
    assert _run(capsys, "render", "--site", "brno", "-C", str(site_repo), "--out", str(out))[0] == 0
    rendered = [p for p in out.rglob("*.yaml")]
    assert rendered and {mode(p) for p in rendered} == {0o644}


@pytest.fixture
def records(tmp_path: Path) -> Path:
    path = tmp_path / "october.jsonl"
    generate_records(path, Month.parse("2026-10"), 500, {"qwen3-5": (1100, 33958)}, ["muni-researchers"])
    return path


def _report(site: Path, records: Path, out: Path) -> list[str]:
    return ["report", "-C", str(site), "--month", "2026-10", "--requests", str(records), "--out", str(out)]


def test_report_out_never_deletes_the_users_files(
    site_repo: Path, records: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "README.md").write_text("my notes\n")
    (out / "budget.csv").write_text("a,b\n")
    code, text = _run(capsys, *_report(site_repo, records, out))
    assert code == 2 and "did not write" in text
    assert (out / "README.md").read_text() == "my notes\n" and (out / "budget.csv").exists()


def test_report_verify_covers_the_tree_and_the_signature_metadata(
    site_repo: Path, records: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    assert _run(capsys, *_report(site_repo, records, out))[0] == 0
    assert (out / MARKER).is_file() and {stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {0o644}
    assert _run(capsys, "report", "verify", str(out))[0] == 0

    (out / "extra").mkdir()
    (out / "extra" / "payload.csv").write_text("x\n")
    code, text = _run(capsys, "report", "verify", str(out))
    assert code == 3 and "payload.csv" in text
    (out / "extra" / "payload.csv").unlink()
    (out / "extra").rmdir()

    manifest = json.loads((out / MANIFEST).read_text())
    manifest["signature"]["algorithm"] = "rsa"
    (out / MANIFEST).write_text(json.dumps(manifest))
    assert _run(capsys, "report", "verify", str(out))[0] == 3

    (out / MANIFEST).write_bytes(b'{"version": 2, "files": {"\xff": "x"}}')
    code, text = _run(capsys, "report", "verify", str(out))
    assert code == 3 and "Traceback" not in text

    (out / MANIFEST).unlink()
    code, text = _run(capsys, "report", "verify", str(out))
    assert code == 3 and "missing" in text


def test_a_killed_reports_temp_file_is_cleaned_by_the_rerun(
    site_repo: Path, records: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    assert _run(capsys, *_report(site_repo, records, out))[0] == 0
    (out / ".report.md.abcd1234.tmp").write_text("half a report")  # what a kill before the rename leaves
    assert _run(capsys, *_report(site_repo, records, out))[0] == 0
    assert not (out / ".report.md.abcd1234.tmp").exists()
    assert _run(capsys, "report", "verify", str(out))[0] == 0


def test_a_killed_renders_temp_files_are_cleaned_by_the_rerun(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "deploy"
    assert _run(capsys, "render", "--site", "brno", "-C", str(site_repo), "--out", str(out))[0] == 0
    leftover = out / "brno" / "serving" / ".namespace.yaml.q1w2e3r4.tmp"
    leftover.write_text("partial")
    assert _run(capsys, "render", "--site", "brno", "-C", str(site_repo), "--out", str(out))[0] == 0
    assert not leftover.exists()
    # and render, too, leaves a folder holding the user's own files alone
    (tmp_path / "other" / "brno").mkdir(parents=True)
    (tmp_path / "other" / "brno" / "notes.yaml").write_text("mine: true\n")
    code, text = _run(capsys, "render", "--site", "brno", "-C", str(site_repo), "--out", str(tmp_path / "other"))
    assert code == 2 and "did not write" in text and (tmp_path / "other" / "brno" / "notes.yaml").exists()


def test_nodes_verify_refuses_a_linked_manifest(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "copy.yaml"
    outside.write_text((site_repo / "nodes" / "dgx-b200-01.yaml").read_text())
    (site_repo / "nodes" / "dgx-b200-01.yaml").unlink()
    (site_repo / "nodes" / "dgx-b200-01.yaml").symlink_to(outside)
    code, out = _run(capsys, "nodes", "verify", "-C", str(site_repo))
    assert code == 3 and "symbolic links are not read" in out


def test_init_of_the_current_folder_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    code, out = _run(capsys, "init", ".")
    assert code == 2 and "current folder" in out
    monkeypatch.chdir(tmp_path)
    assert _run(capsys, "init", "here")[0] == 0  # an existing empty folder is fine from outside it
    assert (tmp_path / "here" / ".git").is_dir()


def test_tenant_names_are_names_not_paths(site_repo: Path, victim: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "tenants", "key", "issue", "../../outside/victim", "-C", str(site_repo))
    assert code == 2 and "is not a valid name" in out
    assert victim.read_text() == "name: victim\n"
