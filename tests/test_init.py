"""`fabric init`: a real git repo, schemas, and editor modelines that point at them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import yaml

from llm_fabric.site.loader import load_site
from llm_fabric.site.schemas import FILE_KINDS, kind_of


def _as_json(path: Path) -> object:
    # YAML timestamps become date objects in PyYAML; in JSON (what editors check) they are strings
    return json.loads(json.dumps(yaml.safe_load(path.read_text()), default=str))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_init_commits_everything(site_repo: Path) -> None:
    assert _git(site_repo, "status", "--porcelain") == ""
    assert len(_git(site_repo, "log", "--oneline").splitlines()) == 1
    assert "fabric.yaml" in _git(site_repo, "ls-files")


def test_every_file_validates_against_its_exported_schema(site_repo: Path) -> None:
    checked = 0
    for path in sorted(site_repo.rglob("*.yaml")):
        rel = path.relative_to(site_repo)
        kind = kind_of(rel)
        if kind is None:
            continue
        first = path.read_text().splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema="), path
        schema_path = (path.parent / first.split("=", 1)[1]).resolve()
        schema = json.loads(schema_path.read_text())
        jsonschema.validate(_as_json(path), schema)
        checked += 1
    assert checked >= 15
    assert {p.name for p in (site_repo / "schemas").iterdir()} == {f"{k}.schema.json" for k in FILE_KINDS}


def test_empty_skeleton_is_valid(make_site_repo) -> None:  # type: ignore[no-untyped-def]
    root = make_site_repo(example=None, name="skeleton")
    site = load_site(root)
    assert site.nodes == {} and "main" in site.config.sites


def test_schema_rejects_a_typo(site_repo: Path) -> None:
    schema = json.loads((site_repo / "schemas" / "deployment.schema.json").read_text())
    doc = yaml.safe_load((site_repo / "deployments" / "qwen3-5.yaml").read_text())
    doc["replica"] = doc.pop("replicas")
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as exc:
        assert "replica" in exc.message
    else:
        raise AssertionError("the exported schema accepted an unknown key")


def test_init_with_a_folder_name_that_is_no_dns_label_makes_a_valid_site(tmp_path: Path) -> None:
    """`fabric init My_Site`: the federation is named `my-site`, so the new repo validates at once."""
    from tests.fixtures.cli import fabric

    site = tmp_path / "My_Site"
    assert fabric("init", str(site)).returncode == 0
    assert "name: my-site" in (site / "fabric.yaml").read_text()
    out = fabric("validate", "-C", str(site))
    assert out.returncode == 0, out.stdout + out.stderr
