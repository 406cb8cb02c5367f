"""`fabric gateway config` puts only replicas with one configuration fingerprint behind one model name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.fixtures.gateway_site import edit_yaml

from llm_fabric.cli.main import main


def _plan(site_repo: Path, path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["plan", "-C", str(site_repo), "-o", str(path), "--json"]) == 0
    capsys.readouterr()
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_a_plan_mixing_two_configurations_under_one_model_name_is_refused_with_the_fields_named(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planned = _plan(site_repo, tmp_path / "plan.json", capsys)
    gateway = ["gateway", "config", "-C", str(site_repo), "--site", "brno", "--out", str(tmp_path / "gw")]
    assert main([*gateway, "--plan", str(tmp_path / "plan.json")]) == 0  # one fingerprint per deployment
    capsys.readouterr()

    # a second plan after the deployment's context was halved, and a plan document stitched from the
    # two (a hand merge, or a stale copy): gpt-oss-120b/1 runs 65536 tokens, gpt-oss-120b/0 131072
    deployment = site_repo / "deployments" / "gpt-oss-120b.yaml"
    original = deployment.read_text()
    edit_yaml(deployment, lambda d: d.update(max_model_len=65536))
    halved = _plan(site_repo, tmp_path / "halved.json", capsys)
    deployment.write_text(original)
    moved = next(r for r in halved["replicas"] if r["deployment"] == "gpt-oss-120b" and r["index"] == 1)
    planned["replicas"] = [
        moved if (r["deployment"], r["index"]) == ("gpt-oss-120b", 1) else r for r in planned["replicas"]
    ]
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps(planned))

    assert main([*gateway, "--plan", str(mixed)]) == 3
    err = capsys.readouterr().err
    assert "differently configured replicas behind one model name" in err
    assert "deployment `gpt-oss-120b`: replica gpt-oss-120b/0 and replica(s) gpt-oss-120b/1" in err
    assert "max_model_len (131072 vs 65536)" in err
    kept = next(r for r in planned["replicas"] if (r["deployment"], r["index"]) == ("gpt-oss-120b", 0))
    short = f"(fingerprint {kept['config_fingerprint']['sha256'][:12]} vs {moved['config_fingerprint']['sha256'][:12]})"
    assert short in err


def test_a_replica_without_a_fingerprint_beside_one_with_is_refused_too(
    site_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planned = _plan(site_repo, tmp_path / "plan.json", capsys)
    at = next(i for i, r in enumerate(planned["replicas"]) if (r["deployment"], r["index"]) == ("gpt-oss-120b", 1))
    del planned["replicas"][at]["config_fingerprint"]  # as a plan from before fingerprints wrote it
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps(planned))
    gateway = ["gateway", "config", "-C", str(site_repo), "--site", "brno", "--out", str(tmp_path / "gw")]
    assert main([*gateway, "--plan", str(mixed)]) == 2  # refused as it is read, before the gateway compares
    err = capsys.readouterr().err
    assert "replica gpt-oss-120b/1 has no `config_fingerprint`" in err
    assert f"replicas.{at}.config_fingerprint" in err and "fabric plan -o FILE" in err
