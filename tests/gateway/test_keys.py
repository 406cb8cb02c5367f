"""`fabric tenants key issue|revoke|list`: the key is printed once, only its hash reaches the repo."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import subprocess
from pathlib import Path

from llm_fabric.cli.main import main
from llm_fabric.site.loader import load_site


def _run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


def test_issue_commits_only_the_hash_and_revoke_removes_it(site_repo: Path) -> None:
    code, out = _run("tenants", "key", "issue", "-C", str(site_repo), "muni-researchers", "--json")
    assert code == 0
    issued = json.loads(out)
    key = issued["key"]
    digest = hashlib.sha256(key.encode()).hexdigest()
    tenant = load_site(site_repo).tenants["muni-researchers"]
    assert [k.sha256 for k in tenant.keys] == [digest]
    assert tenant.keys[0].id == issued["key_id"] == digest[:12]
    # the key itself is nowhere in the repo: not in the work tree, not in any commit
    history = subprocess.run(["git", "log", "-p", "--all"], cwd=site_repo, capture_output=True, text=True, check=True)
    assert key not in history.stdout
    assert issued["commit"] in history.stdout
    assert subprocess.run(["git", "grep", "-q", key], cwd=site_repo, check=False).returncode != 0
    assert (
        "tenants: key"
        in subprocess.run(
            ["git", "log", "-1", "--format=%s"], cwd=site_repo, capture_output=True, text=True, check=True
        ).stdout
    )
    # a comment of the tenant file survives the edit
    code, listed = _run("tenants", "key", "list", "-C", str(site_repo), "muni-researchers", "--json")
    assert code == 0 and [k["id"] for k in json.loads(listed)] == [issued["key_id"]]
    code, _ = _run("tenants", "key", "revoke", "-C", str(site_repo), "muni-researchers", issued["key_id"])
    assert code == 0
    assert load_site(site_repo).tenants["muni-researchers"].keys == []


def test_comments_of_the_tenant_file_are_kept(site_repo: Path) -> None:
    path = site_repo / "tenants" / "fnusa-clinical.yaml"
    path.write_text("# clinical research: sensitive data only\n" + path.read_text())
    assert _run("tenants", "key", "issue", "-C", str(site_repo), "fnusa-clinical")[0] == 0
    assert path.read_text().startswith("# clinical research: sensitive data only\n")


def test_unknown_tenant_and_unknown_key_are_usage_errors(site_repo: Path, capsys: object) -> None:
    assert _run("tenants", "key", "issue", "-C", str(site_repo), "nobody")[0] == 2
    assert _run("tenants", "key", "revoke", "-C", str(site_repo), "muni-researchers", "0123456789ab")[0] == 2
    assert _run("tenants", "key", "revoke", "-C", str(site_repo), "muni-researchers")[0] == 2
