"""The site repo loader against real files: every problem with its file, line and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fabric.errors import ConfigError
from llm_fabric.site.loader import collect_site, load_site


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def _line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def test_reference_site_loads(site_repo: Path) -> None:
    site = load_site(site_repo)
    assert set(site.config.sites) == {"brno", "vienna"}
    assert site.config.sites["vienna"].jurisdiction.country == "AT"
    assert site.nodes["hgx-h100-tuwien"].site == "vienna"
    assert site.nodes["dgx-b200-01"].gpus.count == 8
    assert site.contributed_gpus("cerit-sc") == 16
    assert site.ledger is not None and site.ledger.amortisation_months == 36


def test_unknown_key_names_file_line_and_suggestion(site_repo: Path) -> None:
    path = site_repo / "deployments" / "qwen3-5.yaml"
    _edit(path, "replicas: 1", "replica: 2")
    _, problems = collect_site(site_repo)
    assert len(problems) == 1, problems
    problem = problems[0]
    assert problem.file == path
    assert problem.line == _line_of(path, "replica: 2")
    assert "did you mean `replicas`" in str(problem)


def test_nested_unknown_key_suggests_from_the_nested_model(site_repo: Path) -> None:
    path = site_repo / "fabric.yaml"
    _edit(path, "federation_member: true", "federation_membr: true")
    _, problems = collect_site(site_repo)
    assert [p.field for p in problems] == ["sites.brno.operator.federation_membr"]
    assert problems[0].hint == "did you mean `federation_member`?"
    assert problems[0].line == _line_of(path, "federation_membr")


def test_all_problems_of_all_files_are_listed(site_repo: Path) -> None:
    _edit(site_repo / "tenants" / "muni-researchers.yaml", "contributor: false", "contributor: maybe")
    _edit(site_repo / "nodes" / "dgx-b200-01.yaml", "site: brno", "site: brnoo")
    _edit(
        site_repo / "deployments" / "glm-5-1.yaml",
        "data_classes: [public, internal, sensitive]",
        "data_classes: [publik]",
    )
    _, problems = collect_site(site_repo)
    rendered = "\n".join(str(p) for p in problems)
    assert "muni-researchers.yaml" in rendered and "contributor" in rendered
    assert "unknown site `brnoo`" in rendered and "did you mean `brno`?" in rendered
    assert "unknown data class `publik`" in rendered and "did you mean `public`?" in rendered


def test_yaml_syntax_error_reports_its_line(site_repo: Path) -> None:
    path = site_repo / "tenants" / "cerit-sc.yaml"
    path.write_text(path.read_text() + "broken: [unclosed\n")
    _, problems = collect_site(site_repo)
    assert len(problems) == 1
    assert problems[0].file == path and "invalid YAML" in problems[0].message
    assert problems[0].line is not None and problems[0].line >= _line_of(path, "broken")


def test_dedicated_allocation_cannot_exceed_contribution(site_repo: Path) -> None:
    path = site_repo / "tenants" / "ceitec-structural.yaml"
    _edit(path, "gpus: 2", "gpus: 6")
    _, problems = collect_site(site_repo)
    assert len(problems) == 1
    assert "exceeds the 4 GPUs" in problems[0].message
    assert problems[0].line == _line_of(path, "gpus: 6")


def test_file_name_must_match_name(site_repo: Path) -> None:
    src = site_repo / "tenants" / "muni-researchers.yaml"
    src.rename(site_repo / "tenants" / "muni.yaml")
    _, problems = collect_site(site_repo)
    messages = [str(p) for p in problems]
    assert any("does not match the file name" in m for m in messages), messages


def test_an_unloadable_file_does_not_cascade(site_repo: Path) -> None:
    _edit(site_repo / "deployments" / "qwen3-5.yaml", "replicas: 1", "replica: 1")
    _, problems = collect_site(site_repo)
    # the ledger prices qwen3-5: that reference is not reported as unknown on top of the typo
    assert len(problems) == 1


def test_missing_repo_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as missing:
        load_site(tmp_path / "nope")
    assert "does not exist" in str(missing.value.problems[0])
    (tmp_path / "fabric.yaml").write_text("")
    _, problems = collect_site(tmp_path)
    assert problems[0].message == "the file is empty"


def test_default_data_class_must_be_declared(site_repo: Path) -> None:
    _edit(site_repo / "fabric.yaml", "data_class: internal", "data_class: secret")
    _, problems = collect_site(site_repo)
    assert len(problems) == 1 and "defaults.data_class `secret`" in problems[0].message
