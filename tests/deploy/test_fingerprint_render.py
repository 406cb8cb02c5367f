"""The configuration fingerprint from `fabric plan -o` to the rendered objects (`fabric render --plan`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from llm_fabric.cli.main import main
from llm_fabric.plan.document import load_plan
from llm_fabric.serving.workloads import FINGERPRINT_ANNOTATION


def _plan(site_repo: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    plan = out / "plan.json"
    assert main(["plan", "-C", str(site_repo), "-o", str(plan), "--json"]) == 0
    capsys.readouterr()
    return plan


def _engine_workloads(out: Path) -> dict[str, dict[str, object]]:
    docs = {}
    for path in sorted(out.glob("*/serving/deployment-*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc["metadata"]["labels"].get("app.kubernetes.io/component") == "engine":
            docs[doc["metadata"]["name"]] = doc
    return docs


def test_render_annotates_each_replica_with_its_planned_fingerprint(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = _plan(site_repo, tmp_path, capsys)
    plan = load_plan(plan_file)
    fingerprints = {f"{r.deployment}-{r.index}": r.config_fingerprint for r in plan.replicas}
    assert all(f is not None for f in fingerprints.values())
    # the two gpt-oss-120b replicas run on an H100 and an H200: other GPUs, one configuration
    assert fingerprints["gpt-oss-120b-0"] == fingerprints["gpt-oss-120b-1"]
    assert fingerprints["gpt-oss-120b-0"].fields.max_model_len == 131072  # type: ignore[union-attr]

    out = tmp_path / "out"
    assert main(["render", "-C", str(site_repo), "--all-sites", "--plan", str(plan_file), "--out", str(out)]) == 0
    workloads = _engine_workloads(out)
    assert set(workloads) == set(fingerprints)
    for name, doc in workloads.items():
        expected = fingerprints[name].sha256  # type: ignore[union-attr]
        assert doc["metadata"]["annotations"][FINGERPRINT_ANNOTATION] == expected  # type: ignore[index]
        template = doc["spec"]["template"]["metadata"]  # type: ignore[index]
        assert template["annotations"][FINGERPRINT_ANNOTATION] == expected


def test_a_plan_from_before_replicas_carried_their_fields_is_refused_naming_the_field(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = _plan(site_repo, tmp_path, capsys)
    data = json.loads(plan_file.read_text())
    for replica in data["replicas"]:
        del replica["config_fingerprint"]  # what `fabric plan -o` wrote before this field existed
    plan_file.write_text(json.dumps(data))
    out = tmp_path / "out"
    code = main(["render", "-C", str(site_repo), "--site", "brno", "--plan", str(plan_file), "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert "is a plan of an older fabric" in err and "replicas.0.config_fingerprint" in err
    assert "has no `config_fingerprint`" in err and "fabric plan -o FILE" in err
    assert not out.exists()


def test_a_fingerprint_edited_by_hand_is_refused_naming_the_replica(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = _plan(site_repo, tmp_path, capsys)
    data = json.loads(plan_file.read_text())
    data["replicas"][2]["config_fingerprint"]["fields"]["max_model_len"] = 4096
    plan_file.write_text(json.dumps(data))
    code = main(
        ["render", "-C", str(site_repo), "--site", "brno", "--plan", str(plan_file), "--out", str(tmp_path / "o")]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "replicas.2.config_fingerprint" in err
    assert "sha256 is not the digest of the fields" in err
    assert "fabric plan -o FILE" in err
