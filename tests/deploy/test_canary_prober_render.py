"""The canary prober as rendered: with the site's Prometheus named in fabric.yaml, it reads the node-fatal
Xid alerts and cordoned nodes there (docs/canary.md); without it, canary failures alone take replicas out.
Chained through the real commands: init, an edited and committed fabric.yaml, plan -o, render --check."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from llm_fabric.cli.main import main

PROMETHEUS = "http://prometheus-operated.monitoring.svc.cluster.local:9090"


def _site(tmp_path: Path, url: str) -> Path:
    repo = tmp_path / "site"
    assert main(["init", str(repo), "--example", "cerit-sc"]) == 0
    fabric = repo / "fabric.yaml"
    text = fabric.read_text()
    fabric.write_text(
        text.replace("      name: cerit-brno\n", f"      name: cerit-brno\n      prometheus_url: {url}\n", 1)
    )
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "brno's Prometheus"], check=True)
    return repo


def _prober_args(out: Path, site: str) -> list[str]:
    deployment: dict[str, Any] = yaml.safe_load((out / site / "serving" / "deployment-fabric-canary.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def test_the_prober_reads_the_sites_prometheus_where_fabric_yaml_names_it(tmp_path: Path) -> None:
    repo = _site(tmp_path, PROMETHEUS)
    plan = tmp_path / "plan.json"
    assert main(["plan", "-C", str(repo), "-o", str(plan)]) == 0
    out = tmp_path / "deploy"
    assert main(["render", "-C", str(repo), "--plan", str(plan), "--all-sites", "--out", str(out), "--check"]) == 0
    brno = _prober_args(out, "brno")
    assert brno[brno.index("--prometheus") + 1] == PROMETHEUS
    assert "--prometheus" not in _prober_args(out, "vienna")  # vienna names none: canary failures only


def test_a_prometheus_url_without_a_scheme_is_refused_naming_the_field(tmp_path: Path, capsys: Any) -> None:
    repo = _site(tmp_path, "prometheus:9090")
    capsys.readouterr()
    assert main(["validate", "-C", str(repo)]) == 2
    out = capsys.readouterr().out
    assert "site/fabric.yaml:33: sites.brno.cluster.prometheus_url: " in out, out
    assert "`prometheus:9090` is not an http(s) URL: write the Prometheus HTTP API's address" in out
