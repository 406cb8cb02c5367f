"""inference-perf configs from the plan: one per deployment of a site, its load and prompts as planned.

What each number comes from:

- **server**: the deployment's engine (vLLM or SGLang, as the plan's replicas at the site run it) and
  served model name, at its in-cluster Service (`http://DEPLOYMENT.NAMESPACE.svc.cluster.local`,
  the Service that spans the site's replicas); `via="gateway"`: the tenant gateway's Service and the
  deployment's name (its model group), which routes to every site's replicas. The tokenizer is the
  checkpoint the engine loads, so inference-perf counts tokens as the engine does.
- **prompts**: the plan's prompt-length p50/p95 for the deployment (`context_p50/p95`, from its
  `context:` in the site repo) as a log-normal, written as the mean and standard deviation that
  inference-perf's moment matching turns back into the same median and p95, clipped at the longest
  prompt the engine accepts (max-model-len less the output cap). `shared_prefix` (the default) puts
  half the p50 into one system prompt shared by every request, as agentic harnesses do, and the rest
  into the question; `synthetic` draws whole prompts.
- **outputs**: the mean prompt over the ratio (17:1 input to output, seed 000), every request the same.
- **load**: Poisson arrivals at 25, 50, 75, 100 and 125 % of the rate the plan says the replicas
  sustain: their output tokens a second (the calibrated `expected` figure, else the roofline
  `ceiling`, else the decode ceiling; the site's share of replicas when sent to the engines directly)
  over the output tokens a request. The last stage is past the plan, to show where it bends.
- **metrics**: the engines' series in Prometheus, filtered to the namespace and deployment (and site)
  by the labels the serving PodMonitor gives them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist, fmean
from typing import Literal

import yaml

from llm_fabric.atomicio import write_atomic
from llm_fabric.errors import UsageError
from llm_fabric.gateway.objects.gateway import NAME as GATEWAY_SERVICE
from llm_fabric.loadtest.burst import lognormal_lengths
from llm_fabric.loadtest.inference_perf import (
    UPSTREAM_COMMIT,
    APIConfig,
    CustomTokenizerConfig,
    DataConfig,
    Distribution,
    InferencePerfConfig,
    LoadConfig,
    LocalStorage,
    MetricsClientConfig,
    ModelServerClientConfig,
    PrometheusClientConfig,
    PrometheusMetricsReportConfig,
    ReportConfig,
    RequestLifecycleMetricsReportConfig,
    SharedPrefix,
    StandardLoadStage,
    StorageConfig,
)
from llm_fabric.plan.document import DeploymentCapacity, Plan
from llm_fabric.site.loader import SiteRepo

STAGE_SHARES = (0.25, 0.5, 0.75, 1.0, 1.25)
INPUT_OUTPUT_RATIO = 17.0
SCRAPE_INTERVAL_S = 30  # the serving PodMonitor's interval (serving/workloads.py)
PERCENTILES = [50.0, 90.0, 95.0, 99.0]
_Z95 = NormalDist().inv_cdf(0.95)

Via = Literal["engine", "gateway"]


@dataclass(frozen=True)
class LoadTest:
    """One deployment's config and where its figures came from (for the header and the summary)."""

    deployment: str
    config: InferencePerfConfig
    capacity_rps: float
    tokens_per_s: float
    tokens_source: str
    output_tokens: int
    via: Via

    def yaml_text(self) -> str:
        # through the gateway a tenant's key is needed: given at run time, never written into the file
        key = ' --server.api_key "$KEY"' if self.via == "gateway" else ""
        head = [
            f"# inference-perf config for `{self.deployment}` (kubernetes-sigs/inference-perf; schema checked at",
            f"# {UPSTREAM_COMMIT}), written by `fabric bench --emit inference-perf` from the plan:",
            f"# {self.tokens_per_s:g} output tokens/s ({self.tokens_source}) / {self.output_tokens} tokens a request"
            f" = {self.capacity_rps:.3f} requests/s planned.",
            f"# Run: inference-perf -c inference-perf-{self.deployment}.yaml{key}",
        ]
        body = yaml.safe_dump(self.config.model_dump(mode="json", exclude_none=True), sort_keys=False)
        return "\n".join(head) + "\n" + body


def lognormal_moments(p50: int, p95: int) -> tuple[float, float]:
    """Mean and standard deviation of the log-normal with this median and p95 (what inference-perf reads)."""
    sigma = math.log(p95 / p50) / _Z95
    mean = p50 * math.exp(sigma**2 / 2)
    return mean, mean * math.sqrt(math.expm1(sigma**2))


def _lognormal(p50: int, p95: int, maximum: int) -> Distribution:
    mean, std = lognormal_moments(p50, p95)
    return Distribution(type="lognormal", mean=round(mean, 3), std_dev=round(std, 3), min=1, max=maximum)


def _throughput(cap: DeploymentCapacity) -> tuple[float, str]:
    if cap.expected is not None:
        return cap.expected.output_tokens_per_s_total, "expected, calibrated"
    if cap.ceiling is not None:
        return cap.ceiling.output_tokens_per_s_total, "roofline ceiling"
    return cap.decode_tokens_per_s_total, "decode ceiling"


def load_tests(
    site: SiteRepo,
    plan: Plan,
    site_id: str,
    *,
    prometheus_url: str,
    via: Via = "engine",
    api: Literal["chat", "completion"] = "chat",
    data: Literal["shared_prefix", "synthetic"] = "shared_prefix",
    stage_seconds: int = 180,
    deployments: tuple[str, ...] = (),
    ratio: float = INPUT_OUTPUT_RATIO,
) -> list[LoadTest]:
    """A config for each deployment with replicas at `site_id` (or those named), in name order."""
    here = sorted({r.deployment for r in plan.replicas if r.site == site_id})
    for name in deployments:
        if name not in here:
            raise UsageError(
                f"the plan has no replica of `{name}` at site `{site_id}`",
                hint="deployments there: " + (", ".join(here) or "(none)"),
            )
    namespace = site.config.sites[site_id].cluster.namespace
    gateway = site.config.gateway
    if via == "gateway" and (gateway is None or site_id not in site.config.gateway_sites()):
        raise UsageError(
            f"site `{site_id}` runs no tenant gateway", hint="drop --via gateway, or pick the gateway's --site"
        )
    return [
        _load_test(site, plan, site_id, name, namespace, prometheus_url, via, api, data, stage_seconds, ratio)
        for name in (sorted(deployments) or here)
    ]


def _load_test(
    site: SiteRepo,
    plan: Plan,
    site_id: str,
    name: str,
    namespace: str,
    prometheus_url: str,
    via: Via,
    api: Literal["chat", "completion"],
    data: Literal["shared_prefix", "synthetic"],
    stage_seconds: int,
    ratio: float,
) -> LoadTest:
    cap = plan.capacity_of(name)
    replicas = [r for r in plan.replicas_of(name) if r.site == site_id]
    engines = sorted({r.engine for r in replicas})
    if len(engines) > 1:
        raise UsageError(
            f"`{name}` runs {' and '.join(engines)} at `{site_id}`: one inference-perf server type cannot measure both",
            hint="benchmark after the change has rolled out",
        )
    deployment = site.deployments.get(name)
    max_output = (
        deployment.generation.max_output_tokens if deployment else None
    ) or site.config.defaults.max_output_tokens
    max_prompt = max(replicas[0].context_length - max_output, cap.context_p95)
    mean_prompt = fmean(lognormal_lengths(1000, cap.context_p50, cap.context_p95, maximum=max_prompt))
    output = max(1, min(max_output, round(mean_prompt / ratio)))
    total, source = _throughput(cap)
    share = 1.0 if via == "gateway" else len(replicas) / max(cap.replicas_planned, 1)
    tokens_per_s = total * share
    capacity_rps = tokens_per_s / output
    fixed_output = Distribution(type="fixed", mean=output, std_dev=0, min=output, max=output)
    if data == "shared_prefix":
        prefix = max(1, cap.context_p50 // 2)
        data_config = DataConfig(
            type="shared_prefix",
            shared_prefix=SharedPrefix(
                num_unique_system_prompts=1,
                num_users_per_system_prompt=max(1, round(cap.max_concurrency_p50 * share)),
                system_prompt_len=prefix,
                question_len=_lognormal(cap.context_p50 - prefix, cap.context_p95 - prefix, max_prompt - prefix),
                output_len=fixed_output,
                seed=0,
            ),
        )
    else:
        data_config = DataConfig(
            type="synthetic",
            input_distribution=_lognormal(cap.context_p50, cap.context_p95, max_prompt),
            output_distribution=fixed_output,
        )
    # both Services listen on port 80 (serving/workloads.py, gateway/objects/gateway.py)
    if via == "gateway":
        base_url, model_name = f"http://{GATEWAY_SERVICE}.{namespace}.svc.cluster.local", name
    else:
        base_url, model_name = f"http://{name}.{namespace}.svc.cluster.local", replicas[0].served_model_name
    filters = [f'namespace="{namespace}"', f'deployment="{name}"']
    if via == "engine":
        filters.append(f'site="{site_id}"')
    config = InferencePerfConfig(
        load=LoadConfig(
            type="poisson",
            stages=[
                StandardLoadStage(rate=max(round(capacity_rps * s, 3), 0.001), duration=stage_seconds)
                for s in STAGE_SHARES
            ],
            base_seed=0,
        ),
        api=APIConfig(type=api, streaming=True),
        server=ModelServerClientConfig(type=engines[0], model_name=model_name, base_url=base_url, ignore_eos=True),
        tokenizer=CustomTokenizerConfig(pretrained_model_name_or_path=replicas[0].checkpoint),
        data=data_config,
        metrics=MetricsClientConfig(
            type="prometheus",
            prometheus=PrometheusClientConfig(url=prometheus_url, scrape_interval=SCRAPE_INTERVAL_S, filters=filters),
        ),
        report=ReportConfig(
            request_lifecycle=RequestLifecycleMetricsReportConfig(
                summary=True, per_stage=True, per_request=False, percentiles=PERCENTILES
            ),
            prometheus=PrometheusMetricsReportConfig(summary=True, per_stage=True),
        ),
        storage=StorageConfig(local_storage=LocalStorage(path=f"reports-{name}-{{timestamp}}")),
    )
    return LoadTest(name, config, round(capacity_rps, 3), round(tokens_per_s, 1), source, output, via)


def write_load_tests(tests: list[LoadTest], out: Path) -> list[Path]:
    """`inference-perf-DEPLOYMENT.yaml` for each, written atomically into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for test in tests:
        path = out / f"inference-perf-{test.deployment}.yaml"
        write_atomic(path, test.yaml_text())
        written.append(path)
    return written
