"""A screenshot of Brno's deployments dashboard a person can look at, drawn from a real Prometheus server.

Grafana is in neither Debian's nor PyPI's registries here (`apt-cache policy grafana` finds no
package; PyPI's `grafana` is an empty 2021 placeholder), so the dashboard `fabric render` wrote is
drawn by `tests/fixtures/dashboard_page.py` with the report's own charts, and Chromium (headless)
takes the screenshot. The data: two hours of the vLLM engine's series for each replica the plan puts
in Brno, named and labelled as the PodMonitor scrapes them (delivering about half the plan's expected
speed), and the canary prober's verdicts, backfilled with promtool; the recording rules the panels
read are backfilled from those by `promtool tsdb create-blocks-from rules`, as a running server
would have recorded them. With FABRIC_DASHBOARD_SCREENSHOT=PATH the PNG is also copied there
(docs/images/dashboard-brno-deployments.png was made so).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fabric.ledger.report.charts import PALETTE
from tests.deploy.rendered_site import render_reference
from tests.fixtures.chromium import read_png, require_chromium, screenshot
from tests.fixtures.dashboard_page import dashboard_page
from tests.fixtures.prometheus import PROMETHEUS, PROMTOOL, PrometheusServer, start_prometheus
from tests.fixtures.required import missing

pytestmark = pytest.mark.slow

STEP = 30
HOURS = 2
TTFT = {0.01: 0.0, 0.025: 0.05, 0.05: 0.35, 0.1: 0.75, 0.25: 0.93, 0.5: 0.98, 1.0: 0.995, 2.5: 1.0}
ITL = {0.01: 0.02, 0.025: 0.3, 0.05: 0.8, 0.1: 0.96, 0.25: 0.995, 0.5: 1.0}
E2E = {1.0: 0.05, 2.5: 0.2, 5.0: 0.5, 10.0: 0.8, 20.0: 0.95, 40.0: 0.99, 80.0: 1.0}


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def serving_history(plan: dict[str, Any], site: str, start: int, end: int) -> str:
    """OpenMetrics text: the engine series of every replica at `site`, and the canary's verdicts."""
    families: dict[tuple[str, str], list[str]] = {}

    def sample(family: str, kind: str, line: str) -> None:
        families.setdefault((family, kind), []).append(line)

    names = sorted(plan["deployments"])
    for replica in (r for r in plan["replicas"] if r["site"] == site):
        name = replica["deployment"]
        j = names.index(name)  # each deployment its own phase and latency, so that lines do not overlap
        here = [r for r in plan["replicas"] if r["deployment"] == name]
        expected = plan["deployments"][name]["expected"]["output_tokens_per_s_total"] * (1 / len(here))
        labels = {
            "model_name": name,
            "engine": "0",
            "deployment": name,
            "replica": str(replica["index"]),
            "owner": replica["owner"],
            "site": site,
            "node": replica["node"],
        }
        sel = _labels(labels)
        tokens = prompt = requests = 0.0
        histograms = {key: [0.0] * (len(cdf) + 1) for key, cdf in (("ttft", TTFT), ("itl", ITL), ("e2e", E2E))}
        sums = dict.fromkeys(histograms, 0.0)
        for t in range(start, end + 1, STEP):
            wave = math.sin((t - start) / 1200 + 0.9 * j)
            slower = 1 + 0.15 * j + 0.3 * wave  # a power > 1 moves each bucket's share down: slower
            rate = expected * (0.5 + 0.08 * wave)  # tok/s delivered: about half what the plan expects
            tokens += rate * STEP
            prompt += 3 * rate * STEP
            done = rate * STEP / 400
            requests += done
            sample("vllm:generation_tokens", "counter", f"vllm:generation_tokens_total{sel} {tokens:.1f} {t}")
            sample("vllm:prompt_tokens", "counter", f"vllm:prompt_tokens_total{sel} {prompt:.1f} {t}")
            sample("vllm:prefix_cache_queries", "counter", f"vllm:prefix_cache_queries_total{sel} {prompt:.1f} {t}")
            hits = (0.4 + 0.07 * j) * prompt
            sample("vllm:prefix_cache_hits", "counter", f"vllm:prefix_cache_hits_total{sel} {hits:.1f} {t}")
            finished = _labels(labels | {"finished_reason": "stop"})
            sample("vllm:request_success", "counter", f"vllm:request_success_total{finished} {requests:.2f} {t}")
            sample("vllm:num_requests_running", "gauge", f"vllm:num_requests_running{sel} {20 + 4 * wave:.0f} {t}")
            sample("vllm:num_requests_waiting", "gauge", f"vllm:num_requests_waiting{sel} {max(0, 6 * wave):.0f} {t}")
            sample("vllm:kv_cache_usage_perc", "gauge", f"vllm:kv_cache_usage_perc{sel} {0.5 + 0.3 * wave:.3f} {t}")
            for key, cdf, family, per in (
                ("ttft", TTFT, "vllm:time_to_first_token_seconds", done),
                ("itl", ITL, "vllm:inter_token_latency_seconds", rate * STEP),
                ("e2e", E2E, "vllm:e2e_request_latency_seconds", done),
            ):
                counts = histograms[key]
                for i, share in enumerate(cdf.values()):
                    counts[i] += per * share**slower
                counts[-1] += per
                sums[key] += per * list(cdf)[len(cdf) // 2] * (1 + 0.3 * wave)
                for le, count in zip([*cdf, "+Inf"], counts, strict=True):
                    bucket = _labels(labels | {"le": str(le)})
                    sample(family, "histogram", f"{family}_bucket{bucket} {count:.2f} {t}")
                sample(family, "histogram", f"{family}_count{sel} {counts[-1]:.2f} {t}")
                sample(family, "histogram", f"{family}_sum{sel} {sums[key]:.3f} {t}")
            canary = _labels({k: labels[k] for k in ("site", "deployment", "replica", "node")})
            failing = name == "glm-5-1" and start + 3000 <= t < start + 3900  # one replica fails for 15 minutes
            verdict = f"fabric_canary_replica_pass{canary} {0 if failing else 1} {t}"
            sample("fabric_canary_replica_pass", "gauge", verdict)
            rotation = f"fabric_canary_in_rotation{canary} {0 if failing else 1} {t}"
            sample("fabric_canary_in_rotation", "gauge", rotation)
    text = []
    for (family, kind), lines in families.items():
        # OpenMetrics wants each series' samples together, in time order
        text.append(f"# TYPE {family} {kind}")
        text += sorted(lines, key=lambda line: (line.rsplit(" ", 2)[0], int(line.rsplit(" ", 1)[1])))
    return "\n".join(text) + "\n# EOF\n"


def _backfill_rules(prom: PrometheusServer, groups: list[dict[str, Any]], start: int, end: int, out: Path) -> None:
    rules = out.parent / "recording-rules.yaml"
    recording = [{**g, "rules": [r for r in g["rules"] if "record" in r]} for g in groups]
    rules.write_text(yaml.safe_dump({"groups": [g for g in recording if g["rules"]]}))
    done = subprocess.run(
        [
            PROMTOOL,
            "tsdb",
            "create-blocks-from",
            "rules",
            "--quiet",
            f"--start={start}",
            f"--end={end}",
            f"--url={prom.url}",
            f"--output-dir={out}",
            str(rules),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr or done.stdout


def test_a_screenshot_shows_every_panel_of_brnos_deployments_dashboard(tmp_path: Path) -> None:
    require_chromium()
    if not (Path(PROMETHEUS).exists() and Path(PROMTOOL).exists()):
        missing("prometheus", "make system-deps (Debian package prometheus)")
    rendered = render_reference(tmp_path / "render")
    plan = json.loads(rendered.plan.read_text())
    # a window that ended three hours ago: the rules' backfill writes blocks before the server's head
    end = int(time.time()) // 3600 * 3600 - 3 * 3600
    start = end - HOURS * 3600
    root = tmp_path / "prometheus"
    first = start_prometheus(root, backfill=[serving_history(plan, "brno", start, end)])
    try:
        _backfill_rules(first, rendered.rule_groups("brno"), start, end, tmp_path / "rule-blocks")
    finally:
        first.stop()
    for block in (tmp_path / "rule-blocks").iterdir():
        shutil.move(str(block), root / "data" / block.name)
    prom = start_prometheus(root)
    try:
        dashboard = rendered.dashboard("brno", "deployments")
        page = dashboard_page(prom, dashboard, start + 900, end, 60, "brno")
    finally:
        prom.stop()

    titles = [p.title for p in page.panels]
    assert titles[:6] == [
        "Requests/s (succeeded)",
        "End-to-end latency p50 / p95",
        "Queue depth (requests waiting)",
        "KV-cache use (per replica)",
        "Prefix-cache hit rate (30m)",
        "Canary (1 pass, 0 fail) and rotation (1 in)",
    ]
    assert len(titles) == 6 + 3 * 7  # a row of three for each of Brno's seven deployments
    assert [p.title for p in page.panels if p.series == 0] == []  # every panel drew the series it queries
    # "expected 20,829 tok/s here, delivering about half": the legend carries the last values
    (speed, *_) = [p for p in page.panels if p.title == "Output tok/s against the plan"]
    delivering, expected, ceiling = (float(legend.rsplit(" ", 1)[1].replace(",", "")) for legend in speed.legends)
    assert 0.4 * expected < delivering < 0.6 * expected < ceiling

    html = tmp_path / "dashboard.html"
    html.write_text(page.html)
    png = screenshot(html, tmp_path / "dashboard.png", page.width, page.height)
    image = read_png(png)
    assert (image.width, image.height) == (page.width, page.height)
    lines = [tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5)) for colour in PALETTE]
    white = (255, 255, 255)
    blank = [p.title for p in page.panels if sum(image.count(c, p.box) for c in lines[: p.series]) < 200]
    assert blank == []  # each panel's series are drawn where the panel is, in the charts' colours
    margin = (0, page.height - 12, page.width, page.height)
    assert image.count(white, margin, tolerance=0) == page.width * 12  # below the last panel: page, not chart
    if target := os.environ.get("FABRIC_DASHBOARD_SCREENSHOT"):
        shutil.copyfile(png, target)
