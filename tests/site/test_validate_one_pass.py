"""`fabric validate` in one pass: schema, reference and signature problems together; `version:` required;
name errors that say the rule and a valid name; hints that name a command that works for the node."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.cli import fabric
from tests.fixtures.factsbundle import write_bundle


def validate(site: Path) -> dict[str, list[dict[str, object]]]:
    out = fabric("validate", "-C", str(site), "--json")
    assert "Traceback" not in out.stderr
    report: dict[str, list[dict[str, object]]] = json.loads(out.stdout)
    return report


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_schema_reference_and_signature_problems_in_one_pass(site_repo: Path) -> None:
    edit(site_repo / "tenants" / "muni-researchers.yaml", "contributor:", "contributer:")  # schema
    edit(site_repo / "deployments" / "gpt-oss-120b.yaml", "recipe: gpt-oss-120b", "recipe: gpt-oss-12b")  # reference
    edit(site_repo / "nodes" / "dgx-b200-01.yaml", "count: 8", "count: 16")  # breaks the signature
    report = validate(site_repo)
    problems = [str(p["message"]) for p in report["problems"]]
    violations = [(str(v["file"]), str(v["message"])) for v in report["violations"]]
    assert any("unknown key `contributer`" in m for m in problems)
    assert any("gpt-oss-12b" in m for m in problems)
    assert any(f.endswith("dgx-b200-01.yaml") and "signature does not match" in m for f, m in violations)


def test_a_file_without_version_is_refused(site_repo: Path) -> None:
    path = site_repo / "tenants" / "cerit-sc.yaml"
    path.write_text(path.read_text().replace("version: 1\n", ""))
    [problem] = validate(site_repo)["problems"]
    assert problem["field"] == "version" and problem["line"] == 1
    assert problem["message"] == "required field `version` is missing"
    assert problem["hint"] == "add `version: 1` as the first line"


def test_a_bad_name_says_the_rule_in_words_and_a_valid_name(site_repo: Path) -> None:
    edit(site_repo / "fabric.yaml", "name: cerit-sc", "name: CERIT_SC")
    out = fabric("validate", "-C", str(site_repo))
    assert out.returncode == 2
    assert "`CERIT_SC` is not a valid name: a DNS label: lowercase letters, digits and '-'" in out.stdout
    assert "e.g. `cerit-sc`" in out.stdout
    assert "^[a-z0-9]" not in out.stdout  # no bare regular expression


def test_signature_hint_names_a_command_that_works_for_the_node(site_repo: Path, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "e.facts.json", "h100x8", uuid_salt="hint")
    site = str(site_repo)
    assert (
        fabric("enroll", "box", "--facts", str(bundle), "-C", site, "--owner", "cerit-sc", "--site", "brno").returncode
        == 0
    )
    edit(site_repo / "nodes" / "box.yaml", "tier: full", "tier: limited")
    edit(site_repo / "nodes" / "dgx-b300-01.yaml", "enrolled_at: 2026-", "enrolled_at: 2025-")
    hints = {Path(str(v["file"])).stem: str(v["hint"]) for v in validate(site_repo)["violations"]}
    # an enrolled node: `fabric nodes sign` refuses it, so the hint is re-enrolling
    assert "fabric enroll HOST" in hints["box"] and "--name box" in hints["box"]
    assert "nodes sign" not in hints["box"]
    refused = fabric("nodes", "sign", "box", "-C", site)
    assert refused.returncode == 2 and "re-enroll" in refused.stderr
    # a declared node: the hint's command works
    assert f"fabric nodes sign dgx-b300-01 --site-repo {site}" in hints["dgx-b300-01"]
    assert fabric("nodes", "sign", "dgx-b300-01", "--site-repo", site).returncode == 0
    # and so does the enrolled node's, with the facts it was enrolled from
    again = fabric("enroll", "box", "--facts", str(bundle), "-C", site, "--owner", "cerit-sc", "--site", "brno")
    assert again.returncode == 0, again.stderr
    assert validate(site_repo)["violations"] == []


def test_models_lists_the_recipe_ids_deployments_take(site_repo: Path) -> None:
    out = fabric("models", "--json")
    assert out.returncode == 0
    ids = {row["id"] for row in json.loads(out.stdout)}
    used = {line.split(":", 1)[1].strip() for p in (site_repo / "deployments").glob("*.yaml")
            for line in p.read_text().splitlines() if line.startswith("recipe:")}  # fmt: skip
    assert used and used <= ids
    assert "gpt-oss-120b" in fabric("models").stdout
