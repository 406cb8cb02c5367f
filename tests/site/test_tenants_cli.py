"""`fabric tenants add|list|show`: a checked tenant file, committed (or onto a review branch), that validates."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.cli import fabric, git


def test_add_then_list_show_and_validate(site_repo: Path) -> None:
    site = str(site_repo)
    out = fabric(
        "tenants", "add", "-C", site, "chem-lab", "--display-name", "Chemistry lab", "--data-class", "public",
        "--data-class", "internal", "--requests-per-minute", "60",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert git(site_repo, "log", "-1", "--format=%s").strip() == "tenants: add chem-lab"
    assert git(site_repo, "status", "--porcelain") == ""
    assert fabric("validate", "-C", site).returncode == 0

    rows = {r["name"]: r for r in json.loads(fabric("tenants", "list", "-C", site, "--json").stdout)}
    assert rows["chem-lab"]["limits"] == {"requests_per_minute": 60}
    assert rows["chem-lab"]["data_classes"] == ["public", "internal"]
    assert rows["ceitec-structural"]["gpus_contributed"] == 4 and rows["ceitec-structural"]["dedicated_gpus"] == 2

    shown = json.loads(fabric("tenants", "show", "-C", site, "ceitec-structural", "--json").stdout)
    assert shown["nodes"] == ["hgx-h200-ceitec"]
    # a key issued by the gateway's command shows up by id
    issued = json.loads(fabric("tenants", "key", "issue", "-C", site, "chem-lab", "--json").stdout)
    assert json.loads(fabric("tenants", "show", "-C", site, "chem-lab", "--json").stdout)["keys"] == [issued["key_id"]]


def test_bad_adds_are_refused_with_the_fix(site_repo: Path) -> None:
    site = str(site_repo)
    head = git(site_repo, "rev-parse", "HEAD")
    taken = fabric("tenants", "add", "-C", site, "cerit-sc", "--display-name", "x", "--data-class", "public")
    assert taken.returncode == 2 and "exists" in taken.stderr and "fabric tenants show cerit-sc" in taken.stderr
    bad_name = fabric("tenants", "add", "-C", site, "Chem_Lab", "--display-name", "x", "--data-class", "public")
    assert bad_name.returncode == 2 and "e.g. `chem-lab`" in bad_name.stderr
    bad_class = fabric("tenants", "add", "-C", site, "chem", "--display-name", "x", "--data-class", "publik")
    assert bad_class.returncode == 2 and "did you mean `public`?" in bad_class.stderr
    unknown = fabric("tenants", "show", "-C", site, "cerit")
    assert unknown.returncode == 2 and "did you mean `cerit-sc`?" in unknown.stderr
    assert git(site_repo, "rev-parse", "HEAD") == head
    assert "Traceback" not in taken.stderr + bad_name.stderr + bad_class.stderr + unknown.stderr


def test_add_onto_a_review_branch(site_repo: Path) -> None:
    site = str(site_repo)
    out = fabric(
        "tenants", "add", "-C", site, "chem-lab", "--display-name", "Chemistry", "--data-class", "public",
        "--branch", "tenant/chem-lab",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert not (site_repo / "tenants" / "chem-lab.yaml").exists()
    assert "chem-lab.yaml" in git(site_repo, "show", "--stat", "--format=", "tenant/chem-lab")
