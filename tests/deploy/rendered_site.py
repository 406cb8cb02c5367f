"""The reference federation rendered by the real commands, and what the observability stack holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.fixtures.cli import fabric


class Rendered:
    def __init__(self, out: Path, plan: Path) -> None:
        self.out, self.plan = out, plan

    def objects(self, site: str) -> list[dict[str, Any]]:
        folder = self.out / site / "observability"
        return [yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml")) if p.name != "kustomization.yaml"]

    def dashboard(self, site: str, kind: str) -> dict[str, Any]:
        return next(d for d in self.dashboards(site) if d["uid"] == f"llm-fabric-{site}-{kind}")

    def rule_groups(self, site: str) -> list[dict[str, Any]]:
        (rule,) = [o for o in self.objects(site) if o["kind"] == "PrometheusRule"]
        groups: list[dict[str, Any]] = rule["spec"]["groups"]
        return groups

    def dashboards(self, site: str) -> list[dict[str, Any]]:
        maps = [o for o in self.objects(site) if o["metadata"]["labels"].get("grafana_dashboard") == "1"]
        return [json.loads(text) for m in maps for text in m["data"].values()]

    def queries(self, site: str) -> list[tuple[str, str, str]]:
        """(dashboard, panel, expr) of every target."""
        return [
            (d["title"], p["title"], t["expr"])
            for d in self.dashboards(site)
            for p in d["panels"]
            for t in p.get("targets", [])
        ]

    def recorded(self, site: str) -> set[str]:
        (rule,) = [o for o in self.objects(site) if o["kind"] == "PrometheusRule"]
        return {r["record"] for g in rule["spec"]["groups"] for r in g["rules"] if "record" in r}

    def dcgm_fields(self, site: str) -> set[str]:
        (counters,) = [o for o in self.objects(site) if o["metadata"]["name"].endswith("dcgm-exporter-counters")]
        lines = counters["data"]["counters.csv"].splitlines()
        return {line.split(",")[0].strip() for line in lines if line and not line.startswith("#")}


def render_reference(root: Path) -> Rendered:
    """`fabric init --example cerit-sc`, `fabric plan -o`, `fabric render --all-sites --plan --check` under root."""
    site, plan, out = root / "site", root / "plan.json", root / "out"
    for args in (
        ("init", str(site), "--example", "cerit-sc"),
        ("plan", "-C", str(site), "-o", str(plan)),
        ("render", "-C", str(site), "--all-sites", "--plan", str(plan), "--out", str(out), "--check"),
    ):
        done = fabric(*args)
        assert done.returncode == 0, f"fabric {' '.join(args)}: {done.stderr}{done.stdout}"
    return Rendered(out, plan)
