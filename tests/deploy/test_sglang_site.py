"""The reference site switched to SGLang with one line per deployment: validate, plan and render --check,
chained through the real commands (what `plan -o` writes, `render --plan` reads)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.cli.main import main
from llm_fabric.engine.sglang.command import LAUNCHER
from llm_fabric.kube import labels as L
from tests.deploy.crdschemas import crds_or_skip


def switch(site: Path, deployments: list[str] | None = None, line: str = "engine: sglang") -> list[str]:
    """Add `line` under `recipe:` in the named deployment files (all by default); their names."""
    names = []
    for path in sorted((site / "deployments").glob("*.yaml")):
        if deployments is not None and path.stem not in deployments:
            continue
        text = path.read_text()
        assert "\nrecipe: " in text
        head, rest = text.split("\nrecipe: ", 1)
        recipe_line, tail = rest.split("\n", 1)
        path.write_text(f"{head}\nrecipe: {recipe_line}\n{line}\n{tail}")
        names.append(path.stem)
    return names


def _serving(out: Path) -> dict[str, dict[str, Any]]:
    """Rendered engine workloads: replica name -> its container (not the tenant gateway's)."""
    containers = {}
    for path in (out / "brno" / "serving").glob("deployment-*.yaml"):
        doc = yaml.safe_load(path.read_text())
        if L.REPLICA not in doc["metadata"]["labels"]:
            continue
        containers[doc["metadata"]["name"]] = doc["spec"]["template"]["spec"]["containers"][0]
    return containers


def _chain(site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], Path]:
    assert main(["validate", "-C", str(site)]) == 0, capsys.readouterr()
    plan_file = tmp_path / "plan.json"
    assert main(["plan", "-C", str(site), "-o", str(plan_file)]) == 0, capsys.readouterr()
    out = tmp_path / "out"
    crds = crds_or_skip()
    capsys.readouterr()
    args = [
        "render",
        "--site",
        "brno",
        "-C",
        str(site),
        "--plan",
        str(plan_file),
        "--out",
        str(out),
        "--check",
        "--crds",
        str(crds),
    ]
    assert main([*args, "--json"]) == 0, capsys.readouterr()
    check = json.loads(capsys.readouterr().out)["check"]
    assert check["custom_unchecked"] == 0
    return json.loads(plan_file.read_text()), out


def test_every_deployment_switched_to_sglang(
    make_site_repo: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = make_site_repo()
    switched = switch(site)
    plan, out = _chain(site, tmp_path, capsys)
    assert {r["deployment"] for r in plan["replicas"]} == set(switched)
    for replica in plan["replicas"]:
        assert replica["engine"] == "sglang"
        assert replica["engine_args"][:2] == ["--model-path", replica["engine_args"][1]]
        assert "--enable-metrics" in replica["engine_args"] and "--gpu-memory-utilization" not in replica["engine_args"]
    containers = _serving(out)
    assert containers and all(c["name"] == "sglang" for c in containers.values())
    for container in containers.values():
        assert container["command"] == list(LAUNCHER)
        assert container["image"].startswith("llm-fabric/sglang:v0.5.23")
        assert container["startupProbe"]["httpGet"] == {"path": "/health", "port": "http"}
        assert "VLLM_NO_USAGE_STATS" not in {e["name"] for e in container["env"]}


def test_one_deployment_switched_the_rest_stay_on_vllm(
    make_site_repo: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = make_site_repo()
    switch(site, ["gpt-oss-120b"])
    plan, out = _chain(site, tmp_path, capsys)
    engines = {r["deployment"]: r["engine"] for r in plan["replicas"]}
    assert engines.pop("gpt-oss-120b") == "sglang" and set(engines.values()) == {"vllm"}
    gpt = next(r for r in plan["replicas"] if r["deployment"] == "gpt-oss-120b")
    args = gpt["engine_args"]
    assert (args[args.index("--tool-call-parser") + 1], args[args.index("--reasoning-parser") + 1]) == (
        "gpt-oss",
        "gpt-oss",
    )
    names = {name.rsplit("-", 1)[0]: c["name"] for name, c in _serving(out).items()}
    assert names["gpt-oss-120b"] == "sglang" and names["kimi-k2-6"] == "vllm"
    # one Service, NetworkPolicy and PodMonitor select the pods of both engines
    monitor = yaml.safe_load((out / "brno" / "serving" / "podmonitor-llm-fabric-engines.yaml").read_text())
    assert "app.kubernetes.io/name" not in monitor["spec"]["selector"]["matchLabels"]


def test_a_misspelt_engine_is_named_with_file_line_and_fix(
    make_site_repo: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    site = make_site_repo()
    switch(site, ["glm-5-1"], line="engine: sglnag")
    assert main(["validate", "-C", str(site)]) == 2
    shown = "".join(capsys.readouterr())
    assert "deployments/glm-5-1.yaml:7: engine:" in shown and "use one of 'vllm' or 'sglang'" in shown
    assert "Traceback" not in shown


def test_plan_base_shows_the_switch_for_review(
    make_site_repo: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    site = make_site_repo()
    switch(site, ["gpt-oss-120b"])
    # its replicas at brno and vienna restart under two controllers that do not wait for each other: an outage
    # the change must accept (docs/deploy.md "Rollouts")
    dep = site / "deployments" / "gpt-oss-120b.yaml"
    dep.write_text(dep.read_text() + "rollout:\n  accept_outage: the engine switch, in the maintenance window\n")
    git = ["git", "-C", str(site), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "commit", "-qam", "gpt-oss-120b on SGLang"], check=True)
    capsys.readouterr()
    assert main(["plan", "-C", str(site), "--base", "HEAD~1", "--json"]) == 0
    reviewed = json.loads(capsys.readouterr().out)
    [rollout] = reviewed["rollout"]["deployments"]
    assert (rollout["unordered_sites"], rollout["outage_accepted"]) == (
        ["brno", "vienna"],
        "the engine switch, in the maintenance window",
    )
    diff = reviewed["diff"]
    assert diff["replicas"] == [  # its two replicas, in Brno and in Vienna
        {"deployment": "gpt-oss-120b", "index": i, "change": "engine", "before": "vllm", "after": "sglang"}
        for i in (0, 1)
    ]
