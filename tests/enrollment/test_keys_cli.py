"""`fabric keys init` never replaces a federation key: done on a repo that has one, as an old hint
suggested, it used to overwrite keys/enrollment.pub, commit it, and every node then failed verification."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.fixtures.cli import fabric


def test_keys_init_refuses_a_repo_that_has_a_key(site_repo: Path, tmp_path: Path) -> None:
    public = site_repo / "keys" / "enrollment.pub"
    before = public.read_bytes()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=site_repo, capture_output=True, text=True).stdout
    for extra in ([], ["--private-key", str(tmp_path / "other.key")]):
        out = fabric("keys", "init", "--site-repo", str(site_repo), *extra)
        assert out.returncode == 2, out.stderr
        assert "already exists: the federation has a key" in out.stderr
        assert "fabric keys rotate" in out.stderr
    assert public.read_bytes() == before
    assert not (tmp_path / "other.key").exists()  # refused before a key was made
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=site_repo, capture_output=True, text=True).stdout == head
    assert fabric("nodes", "verify", "--site-repo", str(site_repo)).returncode == 0


def test_keys_init_on_a_repo_without_a_key(tmp_path: Path) -> None:
    site = tmp_path / "bare"
    assert fabric("init", str(site)).returncode == 0
    (site / "keys" / "enrollment.pub").unlink(missing_ok=True)
    out = fabric("keys", "init", "--site-repo", str(site), "--private-key", str(tmp_path / "k.key"))
    assert out.returncode == 0, out.stderr
    assert (site / "keys" / "enrollment.pub").is_file()
