"""A site's dashboards as the builders make them from a plan: the deployment's targets, a plan without figures."""

from __future__ import annotations

from collections.abc import Callable

from llm_fabric.deploy.build import StackInputs
from llm_fabric.distribution import data_path
from llm_fabric.observability.dashboards.panels import Panel
from llm_fabric.observability.dashboards.site_set import site_dashboards

MISTRAL = "deployments/mistral-small-4.yaml"
TARGET = "target: {concurrent_sessions: 8, context_tokens: 8000, ttft_ms: 500, itl_ms: 40}\n"


def _panel(inputs: StackInputs, row_start: str, title: str) -> tuple[str, Panel]:
    deployments = site_dashboards(inputs.site, inputs.the_plan(), inputs.site_id)[0]
    row = next(r for r in deployments.rows if r.title.startswith(row_start))
    return row.title, next(p for p in row.panels if p.title == title)


def test_a_deployments_targets_are_drawn_beside_its_latencies(
    edited_site: Callable[[dict[str, str]], StackInputs],
) -> None:
    text = data_path("examples", "cerit-sc", MISTRAL).read_text()
    inputs = edited_site({MISTRAL: text.replace("replicas: 1\n", TARGET)})
    _, ttft = _panel(inputs, "mistral-small-4", "Time to first token p50 / p95")
    assert [(q.legend, q.expr) for q in ttft.queries][2:] == [("target", "vector(0.5)")]
    _, itl = _panel(inputs, "mistral-small-4", "Inter-token latency p50 / p95")
    assert [(q.legend, q.expr) for q in itl.queries][2:] == [("target", "vector(0.04)")]


def test_a_plan_without_capacity_figures_says_so_and_draws_only_what_is_measured(
    reference_inputs: StackInputs,
) -> None:
    # the seed plan carries placements only (tests/deploy/planfixture.py), no capacity figures
    title, speed = _panel(reference_inputs, "kimi-k2-6", "Output tok/s against the plan")
    assert title == "kimi-k2-6: no calibrated figure in the plan"
    assert [q.legend for q in speed.queries] == ["delivering"]
    _, ttft = _panel(reference_inputs, "kimi-k2-6", "Time to first token p50 / p95")
    assert [q.legend for q in ttft.queries] == ["p50", "p95"]  # no target, no figure: nothing to compare with
