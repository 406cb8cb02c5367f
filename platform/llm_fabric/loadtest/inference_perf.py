"""inference-perf's config file (kubernetes-sigs/inference-perf), the fields the fabric writes.

Mirrors `inference_perf/config/` of kubernetes-sigs/inference-perf at commit
7de5ef2ed6f7934e0ecbc8297e593f79e68430c0 (2026-08-19): `Config` (config.py), `LoadConfig` and
`StandardLoadStage` (loadgen), `APIConfig` (apis), `ModelServerClientConfig` (client/modelserver),
`CustomTokenizerConfig` (utils), `DataConfig`, `SharedPrefix` (datagen) and `Distribution` (common),
`MetricsClientConfig` and `PrometheusClientConfig` (metrics, client/server_metrics), `ReportConfig`
(reportgen), `StorageConfig` (client/filestorage). Upstream's models forbid unknown keys too
(`StrictBaseModel`), so a field here that upstream renamed fails its own load, not silently. Only
the fields the fabric sets are modelled; upstream's defaults hold for the rest. `SharedPrefix` is
written with the names upstream serialises (`num_unique_system_prompts`,
`num_users_per_system_prompt`; it reads `num_groups`/`num_prompts_per_group` too).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from llm_fabric.basemodel import FabricModel

UPSTREAM_COMMIT = "7de5ef2ed6f7934e0ecbc8297e593f79e68430c0"


class StandardLoadStage(FabricModel):
    rate: float = Field(gt=0, description="requests a second")
    duration: int = Field(gt=0, description="seconds")


class LoadConfig(FabricModel):
    type: Literal["constant", "poisson"]
    stages: list[StandardLoadStage] = Field(min_length=1)
    base_seed: int


class APIConfig(FabricModel):
    type: Literal["completion", "chat"]
    streaming: bool


class ModelServerClientConfig(FabricModel):
    type: Literal["vllm", "sglang"]
    model_name: str
    base_url: str = Field(description="without /v1: inference-perf appends /v1/completions or /v1/chat/completions")
    ignore_eos: bool


class CustomTokenizerConfig(FabricModel):
    pretrained_model_name_or_path: str


class Distribution(FabricModel):
    type: Literal["lognormal", "fixed"]
    mean: float
    std_dev: float = Field(ge=0)
    min: int
    max: int


class SharedPrefix(FabricModel):
    num_unique_system_prompts: int = Field(ge=1)
    num_users_per_system_prompt: int = Field(ge=1)
    system_prompt_len: int = Field(ge=1)
    question_len: Distribution
    output_len: Distribution
    seed: int


class DataConfig(FabricModel):
    type: Literal["shared_prefix", "synthetic"]
    shared_prefix: SharedPrefix | None = None
    input_distribution: Distribution | None = None
    output_distribution: Distribution | None = None


class PrometheusClientConfig(FabricModel):
    url: str
    scrape_interval: int = Field(gt=0)
    filters: list[str]


class MetricsClientConfig(FabricModel):
    type: Literal["prometheus"]
    prometheus: PrometheusClientConfig


class RequestLifecycleMetricsReportConfig(FabricModel):
    summary: bool
    per_stage: bool
    per_request: bool
    percentiles: list[float]


class PrometheusMetricsReportConfig(FabricModel):
    summary: bool
    per_stage: bool


class ReportConfig(FabricModel):
    request_lifecycle: RequestLifecycleMetricsReportConfig
    prometheus: PrometheusMetricsReportConfig


class LocalStorage(FabricModel):
    path: str


class StorageConfig(FabricModel):
    local_storage: LocalStorage


class InferencePerfConfig(FabricModel):
    """One run of inference-perf (`inference-perf -c FILE`) against one deployment."""

    load: LoadConfig
    api: APIConfig
    server: ModelServerClientConfig
    tokenizer: CustomTokenizerConfig
    data: DataConfig
    metrics: MetricsClientConfig
    report: ReportConfig
    storage: StorageConfig
