"""Models of the site repo's files. Every field is documented in docs/site-repo.md.

Identifiers (site ids, node, tenant and deployment names) are DNS labels so that they can be
used as Kubernetes names and label values unchanged.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from llm_fabric import __version__, wording
from llm_fabric.basemodel import FabricModel

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
NAME_RULE = (
    "a name is a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, 63 at most"
)
_NAME = re.compile(NAME_PATTERN)


def suggest_name(value: str) -> str:
    """A valid name close to `value` (`My_Site` -> `my-site`), for error messages."""
    label = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")[:63].strip("-")
    return label or "name-01"


def _dns_label(value: str) -> str:
    # a rule in words and a suggestion, where a bare `pattern=` says only "should match '^[a-z0-9]...'"
    if not _NAME.match(value):
        raise PydanticCustomError(
            "dns_label",
            "`{value}` is not a valid name: {rule}; e.g. `{suggestion}`",
            {"value": value[:80], "rule": NAME_RULE.removeprefix("a name is "), "suggestion": suggest_name(value)},
        )
    return value


Name = Annotated[
    str, AfterValidator(_dns_label), Field(description="a DNS label", json_schema_extra={"pattern": NAME_PATTERN})
]
CountryCode = Annotated[str, Field(pattern=r"^[A-Z]{2}$", description="ISO 3166-1 alpha-2 country code")]
CurrencyCode = Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 currency code")]
# upper bounds: far above any real site, low enough that a typo cannot make `plan` allocate per unit
MAX_GPUS_PER_NODE = 64
MAX_REPLICAS = 4096
MAX_TOKENS = 1 << 24  # context and output lengths (16 Mi tokens)
Money = Annotated[Decimal, Field(ge=0, le=Decimal(10) ** 12)]
Replicas = Annotated[int, Field(ge=0, le=MAX_REPLICAS)]

SCHEMA_VERSION: Literal[1] = 1


# ---------------------------------------------------------------- fabric.yaml


class Federation(FabricModel):
    name: Name
    display_name: str
    currency: CurrencyCode = "USD"
    contact: str | None = None


class Jurisdiction(FabricModel):
    country: CountryCode
    eu: bool


class Operator(FabricModel):
    name: str
    federation_member: bool = True


class Cluster(FabricModel):
    name: str = Field(description="kubeconfig context of the site's cluster")
    namespace: Name = "llm-fabric"
    kubernetes_version: str = "1.33"
    dcgm_exporter: Literal["fabric", "gpu-operator"] = Field(
        "fabric",
        description="who runs NVIDIA's dcgm-exporter on the GPU nodes: the fabric's observability stack, "
        "or the GPU Operator already (then the fabric renders only the ServiceMonitor that scrapes it)",
    )
    gpu_operator_namespace: Name = Field(
        "gpu-operator", description="namespace of the GPU Operator, whose dcgm-exporter Service is scraped"
    )
    prometheus_namespace: Name = Field(
        "monitoring",
        description="namespace of the Prometheus that scrapes the fabric: its pods (app.kubernetes.io/name: "
        "prometheus) are the only ones outside the fabric the engines' and the canary prober's ingress admits",
    )
    prometheus_url: str | None = Field(
        None,
        description="the site's Prometheus HTTP API as the cluster reaches it: the canary prober reads firing "
        "node-fatal Xid alerts and cordoned nodes there (none: it takes replicas out for canary failures only)",
    )

    @field_validator("prometheus_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                f"`{value}` is not an http(s) URL: write the Prometheus HTTP API's address as the cluster "
                "reaches it, e.g. http://prometheus-operated.monitoring.svc.cluster.local:9090"
            )
        return value


class SiteSpec(FabricModel):
    display_name: str
    jurisdiction: Jurisdiction
    operator: Operator
    cluster: Cluster
    egress_allowed: list[str] = Field(
        default_factory=list, description="CIDRs serving pods may reach besides DNS (e.g. a model mirror)"
    )


class DataClass(FabricModel):
    description: str
    rank: int = Field(ge=0, le=1000, description="sensitivity order: higher is more sensitive")


class Defaults(FabricModel):
    engine: Literal["vllm", "sglang"] | None = Field(
        None, description="engine of the deployments that name none; default: each recipe's (vLLM unless it says)"
    )
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=0.98)
    max_output_tokens: int = Field(32768, ge=1, le=MAX_TOKENS)
    data_class: str = "internal"


class ExternalProvider(FabricModel):
    """An OpenAI-compatible provider outside the federation that some data classes may fall back to."""

    url: str = Field(description="base URL of its OpenAI-compatible API, e.g. https://api.example.com/v1")
    model: str = Field(description="the model to ask for there")
    api_key_env: str | None = Field(None, description="environment variable holding its API key (never the key)")
    data_classes: list[Name] = Field(min_length=1, description="classes whose requests may reach it")
    deployments: list[Name] = Field(default_factory=list, description="deployments it backs up; empty means all")


LITELLM_VERSION = "1.108.7"  # as pinned in pyproject's `gateway` extra
# built by engine/images/gateway.Dockerfile: LiteLLM with llm-fabric's hooks
DEFAULT_GATEWAY_IMAGE = f"llm-fabric/litellm:v{LITELLM_VERSION}-fabric{__version__}"
# the gateway's counter store: the release the tests run (Debian bookworm's redis-server 7.0.15)
DEFAULT_REDIS_IMAGE = "docker.io/library/redis:7.0.15"


class GatewayCounters(FabricModel):
    """The gateway's counter store: a Redis StatefulSet rendered at each gateway site, or the operator's Redis."""

    url: str | None = Field(
        None,
        pattern=r"^rediss?://",
        description="the operator's Redis, shared by every site's gateway (one store for the federation); "
        "default: a Redis rendered at each gateway site",
    )
    image: str = Field(DEFAULT_REDIS_IMAGE, description="the rendered Redis's image")
    storage: str = Field("1Gi", pattern=r"^[1-9][0-9]*(Mi|Gi|Ti)$", description="its claim (append-only file)")
    storage_class: str | None = None


class SiteGateway(FabricModel):
    """One site's gateway as the other sites' gateways see it (docs/gateway.md, "A gateway per site")."""

    url: str | None = Field(
        None,
        description="the gateway's OpenAI-compatible base URL as other sites reach it (its ingress, ending in /v1); "
        "none: no other site relays requests to it",
    )


# the fields a gateway for the whole federation had (one gateway, reaching other sites' engines directly)
def _retired_gateway_fields(data: dict[str, object]) -> list[str]:
    out = []
    if "site" in data:
        out.append(
            "`gateway.site` is gone: every site now runs its own gateway; delete it "
            "(`gateway.sites` lists the sites that run one, default every site)"
        )
    if "remote_endpoints" in data:
        remote = data["remote_endpoints"]
        names = sorted(str(k) for k in remote) if isinstance(remote, dict) and remote else ["SITE"]
        writes = ", ".join(f"`gateway.sites.{n}.url: <{n}'s gateway>/v1`" for n in names)
        out.append(
            "`gateway.remote_endpoints` is gone: a gateway reaches another site only through that site's gateway, "
            f"never its engines; write {writes} in its place"
        )
    return out


class GatewayConfig(FabricModel):
    """The tenant gateway (LiteLLM proxy with the fabric's hooks); docs/gateway.md."""

    @model_validator(mode="before")
    @classmethod
    def _retired_fields(cls, data: object) -> object:
        retired = _retired_gateway_fields(data) if isinstance(data, dict) else []
        if retired:
            raise PydanticCustomError("retired_field", "{message}", {"message": "; ".join(retired)})
        return data

    sites: dict[Name, SiteGateway] = Field(
        default_factory=dict,
        description="the sites whose clusters run a gateway, each with the URL other sites' gateways reach it at; "
        "empty: every site runs one, reachable by none",
    )
    image: str = Field(
        DEFAULT_GATEWAY_IMAGE, description="LiteLLM image with llm-fabric (engine/images/gateway.Dockerfile)"
    )
    replicas: int = Field(1, ge=1)
    routing: Literal["direct", "inference-extension"] = Field(
        "direct", description="inference-extension: a GIE InferencePool per deployment picks the replica"
    )
    inference_gateway_url: str = Field(
        "http://llm-fabric-inference.{namespace}.svc.cluster.local/v1",
        description="with inference-extension: the URL of the `llm-fabric-inference` Gateway's listener, as the "
        "cluster's Gateway implementation names its Service; {namespace} is filled in",
    )
    retry_after_s: int = Field(5, ge=1, description="Retry-After of a refusal for capacity")
    request_timeout_s: int = Field(600, ge=1)
    log_prompts: bool = Field(False, description="record prompts in the meter, where the data class allows it")
    records_storage: str = Field(
        "10Gi",
        pattern=r"^[1-9][0-9]*(Mi|Gi|Ti)$",
        description="size of the meter's PersistentVolumeClaim (its day files of request records)",
    )
    records_storage_class: str | None = Field(
        None, description="StorageClass of that claim (default: the cluster's); ReadWriteMany when replicas > 1"
    )
    owner_reserve: float = Field(
        0.25, ge=0.0, le=1.0, description="share of a dedicated deployment's slots kept for its owner when lending"
    )
    external: dict[Name, ExternalProvider] = Field(default_factory=dict)
    counters: GatewayCounters | None = Field(
        None,
        description="where the gateway's pods count limits and budgets together (Redis); required with replicas > 1",
    )
    budget_shares: dict[Name, Annotated[float, Field(gt=0, le=1)]] = Field(
        default_factory=dict,
        description="site -> its share of each tenant's monthly budget, where every site counts in its own store "
        "(default: equal shares of the gateway sites)",
    )


class FabricConfig(FabricModel):
    version: Literal[1] = SCHEMA_VERSION
    federation: Federation
    data_classes: dict[Name, DataClass]
    sites: dict[Name, SiteSpec] = Field(min_length=1)
    defaults: Defaults = Field(default_factory=Defaults)
    gateway: GatewayConfig | None = None

    @model_validator(mode="after")
    def _default_class_declared(self) -> FabricConfig:
        if self.defaults.data_class not in self.data_classes:
            raise ValueError(
                f"defaults.data_class `{self.defaults.data_class}` is not one of data_classes "
                f"({', '.join(self.data_classes)})"
            )
        return self

    @model_validator(mode="after")
    def _gateway_references(self) -> FabricConfig:
        gw = self.gateway
        if gw is None:
            return self
        unknown_sites = sorted(set(gw.sites) - set(self.sites))
        if unknown_sites:
            raise ValueError(
                f"gateway names unknown site(s) {', '.join(unknown_sites)}; sites: {', '.join(self.sites)}"
            )
        for name, provider in gw.external.items():
            unknown = sorted(set(provider.data_classes) - set(self.data_classes))
            if unknown:
                raise ValueError(
                    f"gateway.external.{name}: unknown data class(es) {', '.join(unknown)}; "
                    f"data_classes: {', '.join(self.data_classes)}"
                )
        return self

    def gateway_sites(self) -> list[str]:
        """The sites that run a gateway: those `gateway.sites` lists, else every site."""
        listed = self.gateway.sites if self.gateway is not None else {}
        return [s for s in self.sites if s in listed] if listed else list(self.sites)

    def gateway_url(self, site: str) -> str | None:
        """Where other sites' gateways reach `site`'s gateway (None: nowhere)."""
        spec = self.gateway.sites.get(site) if self.gateway is not None else None
        return spec.url if spec is not None else None


# ---------------------------------------------------------------- nodes/*.yaml


_REAL_UUID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:._-]{7,127}$")
# what drivers print when they have no UUID: `[N/A]` already fails _REAL_UUID; masked captures are all zeros
_PLACEHOLDER_UUID = re.compile(r"unknown|^(GPU-|MIG-)?[0:x-]+$", re.IGNORECASE)


class GpuInventory(FabricModel):
    catalog_id: str = Field(description="id in enrollment/gpus.yaml, e.g. b200")
    product: str = Field(description="product name as the driver prints it")
    vendor: Literal["nvidia", "amd"] = "nvidia"
    count: int = Field(ge=1, le=MAX_GPUS_PER_NODE)
    memory_mib: int = Field(ge=1, le=1 << 24, description="memory per GPU in MiB, as nvidia-smi/amd-smi report it")
    compute_capability: str = Field(description="e.g. 10.0 (NVIDIA) or gfx942 (AMD)")
    uuids: list[str] = Field(default_factory=list, description="hardware fingerprint")
    interconnect: Literal["nvswitch", "nvlink", "xgmi", "pcie"]
    driver_version: str
    cuda_version: str | None = None

    @property
    def memory_gb_total(self) -> float:
        return self.count * self.memory_mib * 1024 * 1024 / 1e9

    def identity_problems(self) -> list[str]:
        """Why these GPUs cannot be told apart from others ([] when every GPU has its own real UUID).

        A GPU's UUID is how the fabric knows one machine's GPUs are not enrolled twice: a missing one,
        a placeholder the driver prints (`[N/A]`) or one UUID shared by several GPUs would defeat that.
        """
        out = []
        if len(self.uuids) != self.count:
            out.append(
                f"{wording.count(self.count, 'GPU')} but {wording.count(len(self.uuids), 'UUID')}: "
                "every GPU needs its UUID"
            )
        for uuid in self.uuids:
            if not _REAL_UUID.match(uuid) or _PLACEHOLDER_UUID.search(uuid):
                out.append(f"`{uuid}` is not a GPU UUID (the driver did not report one)")
        repeated = sorted({u for u in self.uuids if self.uuids.count(u) > 1})
        if repeated:
            out.append(f"UUID {', '.join(repeated)} is reported by more than one GPU")
        return out


class RdmaPort(FabricModel):
    """One port of an RDMA device (`ibstat`, /sys/class/infiniband): what multi-node replicas run over."""

    device: str = Field(description="RDMA device, e.g. mlx5_0")
    port: int = Field(ge=1)
    link_layer: Literal["InfiniBand", "Ethernet"] | None = Field(None, description="Ethernet = RoCE")
    rate_gbps: float | None = Field(None, description="link rate, e.g. 400 (NDR) or 200")
    state: str | None = Field(None, description="logical port state: ACTIVE, INIT, ARMED, DOWN")
    physical_state: str | None = Field(None, description="LinkUp, Polling, Disabled...")
    netdevs: list[str] = Field(default_factory=list, description="network interfaces of the device (RoCE)")

    @property
    def usable(self) -> bool:
        return self.state == "ACTIVE" and self.physical_state in (None, "LinkUp")


class HostInventory(FabricModel):
    hostname: str | None = None
    cpu_model: str | None = None
    cpu_cores: int | None = Field(None, ge=0, le=1 << 20)
    memory_gb: float | None = Field(None, ge=0, le=1e9)
    os: str | None = None
    kernel: str | None = None
    rdma: list[RdmaPort] = Field(default_factory=list, description="RDMA ports; empty when the host has none")
    storage_read_mb_s: float | None = Field(
        None,
        gt=0,
        le=1e7,
        description="sequential read speed of the model cache's disk (decimal MB/s), measured at enrolment; "
        "sizes the cold start (startup probe, rollout waves)",
    )


class CheckResult(FabricModel):
    id: str
    status: Literal["pass", "warn", "fail"]
    value: str | int | float | bool | None = None
    threshold: str | int | float | bool | None = None
    detail: str = ""


class Signature(FabricModel):
    algorithm: Literal["ed25519"] = "ed25519"
    key_id: str
    value: str = Field(description="base64 signature over the canonical manifest without this block")


class NodeManifest(FabricModel):
    version: Literal[1] = SCHEMA_VERSION
    name: Name
    site: Name
    owner: Name
    tier: Literal["full", "limited"]
    status: Literal["active", "cordoned", "retired"] = "active"
    enrolled_at: datetime
    gpus: GpuInventory
    host: HostInventory = Field(default_factory=HostInventory)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[str] = Field(default_factory=list)
    checks: list[CheckResult] = Field(default_factory=list)
    provenance: Literal["enrolled", "declared"] = Field(
        "declared",
        description="enrolled: facts gathered by `fabric enroll`; declared: written and signed by an operator",
    )
    signature: Signature | None = None


class RetirementRecord(FabricModel):
    """retired/NAME.yaml, written by `fabric nodes retire`: the loader refuses NAME's manifests from before it.

    Restoring a node's old signed `active` manifest from git history would undo the retirement (its
    signature is genuine); with this record, only a manifest enrolled after `enrolled_at` is accepted.
    """

    version: Literal[1] = SCHEMA_VERSION
    name: Name
    enrolled_at: datetime = Field(description="enrolled_at of the manifest that was retired")
    retired_at: datetime


# ---------------------------------------------------------------- tenants/*.yaml


class Dedicated(FabricModel):
    gpus: int = Field(0, ge=0, le=1 << 20, description="GPUs reserved for the tenant out of what it contributed")
    replicas: dict[Name, Replicas] = Field(default_factory=dict, description="deployment name -> replicas reserved")
    lend_surplus: bool = Field(True, description="idle dedicated capacity is lent to the pool")


class Limits(FabricModel):
    max_concurrent_requests: int | None = Field(None, ge=1, le=1 << 40)
    requests_per_minute: int | None = Field(None, ge=1, le=1 << 40)
    tokens_per_month: int | None = Field(
        None, ge=1, le=1 << 60, description="input + output tokens a UTC month, the federation's budget (gateway)"
    )
    price_per_month: Money | None = Field(
        None,
        description="a UTC month's budget in ledger.yaml's currency, priced at its reference prices as the "
        "price ledger does (gateway)",
    )
    input_tokens_per_minute: int | None = Field(
        None, ge=1, le=1 << 50, description="prompt tokens a minute, at the gateway"
    )
    output_tokens_per_minute: int | None = Field(
        None, ge=1, le=1 << 50, description="generated tokens a minute, at the gateway"
    )


class TenantKey(FabricModel):
    """An API key as the repo knows it: its hash only (`fabric tenants key issue` prints the key once)."""

    id: str = Field(pattern=r"^[0-9a-f]{12}$", description="the first 12 hex digits of the hash: names the key")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the key, hex")
    issued_at: datetime
    expires_at: datetime | None = Field(None, description="the gateway refuses the key from then on (401)")


class Tenant(FabricModel):
    version: Literal[1] = SCHEMA_VERSION
    name: Name
    display_name: str
    contributor: bool = False
    data_classes: list[Name] = Field(min_length=1)
    dedicated: Dedicated | None = None
    limits: Limits = Field(default_factory=Limits)
    contact: str | None = None
    keys: list[TenantKey] = Field(default_factory=list, description="hashes of the tenant's gateway API keys")

    @model_validator(mode="after")
    def _dedicated_needs_contribution(self) -> Tenant:
        if self.dedicated is not None and not self.contributor:
            raise ValueError("only a contributor (contributor: true) can have a dedicated allocation")
        return self


# ---------------------------------------------------------------- deployments/*.yaml


class Target(FabricModel):
    concurrent_sessions: int = Field(ge=1, le=1 << 24)
    context_tokens: int = Field(ge=1, le=MAX_TOKENS)
    itl_ms: float | None = Field(
        None,
        gt=0,
        le=3_600_000,
        description="latency target: expected inter-token latency per session at most this (ms)",
    )
    ttft_ms: float | None = Field(
        None, gt=0, le=3_600_000, description="latency target: expected time to first token (ms)"
    )
    output_tokens: int = Field(
        1024, ge=1, le=MAX_TOKENS, description="output tokens per request, for the speed at the target"
    )


class ContextProfile(FabricModel):
    p50: int = Field(ge=1, le=MAX_TOKENS)
    p95: int = Field(ge=1, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _ordered(self) -> ContextProfile:
        if self.p95 < self.p50:
            raise ValueError("p95 must be at least p50")
        return self


class PlacementConstraints(FabricModel):
    sites: list[Name] = Field(default_factory=list, description="allowed sites; empty means any")
    gpu_models: list[str] = Field(default_factory=list, description="allowed GPU catalog ids; empty means any")
    nodes: list[Name] = Field(default_factory=list, description="pin to these nodes; empty means any")


class GenerationDefaults(FabricModel):
    max_output_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)


class RolloutPolicy(FabricModel):
    """How a change restarts the deployment's replicas (`fabric plan --base`, docs/deploy.md "Rollouts")."""

    max_unavailable: int = Field(
        1, ge=1, le=MAX_REPLICAS, description="replicas a change may restart at once; never all of them"
    )
    accept_outage: str | None = Field(
        None,
        min_length=1,
        max_length=500,
        description="why this change may take every replica down at once (reviewed like any field); "
        "without it such a change is refused unless the pool has room for a surge replica",
    )


class Deployment(FabricModel):
    version: Literal[1] = SCHEMA_VERSION
    name: Name
    recipe: str = Field(description="id of a recipe in engine/models/")
    engine: Literal["vllm", "sglang"] | None = Field(None, description="the serving engine; default: the recipe's")
    quantization: str | None = Field(None, description="one the recipe offers; default: the recipe's default")
    kv_cache_dtype: str | None = None
    tensor_parallel_size: int | None = Field(None, ge=1, le=MAX_GPUS_PER_NODE)
    parallelism: Literal["tp", "dp-ep", "auto"] = Field(
        "auto",
        description="tp: tensor parallel (pipeline stages across nodes when one node cannot hold the model); "
        "dp-ep: data-parallel attention + expert parallelism (MLA MoE recipes); auto: the one needing fewest GPUs",
    )
    replicas: Replicas | None = None
    target: Target | None = None
    max_model_len: int | None = Field(None, ge=1, le=MAX_TOKENS)
    max_num_seqs: int | None = Field(
        None,
        ge=1,
        le=1 << 20,
        description="sequences a replica runs at once (vLLM --max-num-seqs, SGLang --max-running-requests); "
        "default: vLLM's for the GPU",
    )
    context: ContextProfile | None = None
    data_classes: list[Name] = Field(min_length=1)
    dedicated_for: Name | None = None
    placement: PlacementConstraints = Field(default_factory=PlacementConstraints)
    generation: GenerationDefaults = Field(default_factory=GenerationDefaults)
    rollout: RolloutPolicy = Field(default_factory=RolloutPolicy)

    @model_validator(mode="after")
    def _replicas_or_target(self) -> Deployment:
        if (self.replicas is None) == (self.target is None):
            raise ValueError("give exactly one of `replicas` or `target`")
        return self


# ---------------------------------------------------------------- policies/*.yaml


class SovereigntyRule(FabricModel):
    jurisdictions: list[CountryCode] = Field(default_factory=list, description="allowed countries; empty means any")
    eu_only: bool = False
    federation_operators_only: bool = False
    external_fallback: bool = False
    prompt_logging: bool = True


ReclaimStep = Literal["pool", "borrowed", "lent"]
DEFAULT_RECLAIM_ORDER: tuple[ReclaimStep, ...] = ("lent", "borrowed", "pool")


class AllocationPolicy(FabricModel):
    lending: bool = True
    borrowing: bool = True
    reclaim_order: list[ReclaimStep] = Field(default_factory=lambda: list(DEFAULT_RECLAIM_ORDER))


class TierPolicy(FabricModel):
    limited_max_total_params_b: float = Field(150.0, gt=0, description="largest model (B params) a limited node takes")


SpareLevel = Literal["n+1", "none"]


class SparePolicy(FabricModel):
    """Spare capacity the plan keeps free and gives first to the replicas of a cordoned node.

    `n+1` for a GPU model: one node's GPUs of that model held free (a whole node, from lent capacity);
    for a deployment: one more replica's GPUs held free where it may run. `none` switches off what an
    earlier file set."""

    gpu_models: dict[Name, SpareLevel] = Field(default_factory=dict, description="GPU catalog id -> n+1 or none")
    deployments: dict[Name, SpareLevel] = Field(default_factory=dict, description="deployment -> n+1 or none")


class PolicySet(FabricModel):
    """A policies/*.yaml file; sections present override the distribution's defaults."""

    version: Literal[1] = SCHEMA_VERSION
    sovereignty: dict[Name, SovereigntyRule] = Field(default_factory=dict)
    allocation: AllocationPolicy | None = None
    tiers: TierPolicy | None = None
    spares: SparePolicy | None = None


# ---------------------------------------------------------------- ledger.yaml


class TokenPrices(FabricModel):
    input: Money = Field(description="per million input tokens")
    cached_input: Money | None = Field(None, description="per million cached input tokens; default: input")
    output: Money = Field(description="per million output tokens")


class HardwareCost(FabricModel):
    node: Name
    capex: Money
    in_service: date


class CommercialReference(FabricModel):
    name: str
    prices: TokenPrices


# a day's file of the meter cut mid-line while it writes is one bad record in thousands
DEFAULT_MAX_BAD_PCT = Decimal(1)


class LedgerConfig(FabricModel):
    version: Literal[1] = SCHEMA_VERSION
    currency: CurrencyCode = "USD"
    reference_prices: dict[Name, TokenPrices] = Field(description="deployment name -> prices")
    hardware: list[HardwareCost] = Field(default_factory=list)
    overhead_pct: Annotated[Decimal, Field(ge=0, le=1000)] = Decimal(20)
    amortisation_months: int = Field(36, ge=1, le=1200)
    commercial_reference: CommercialReference
    drift_warning_pct: Annotated[Decimal, Field(ge=0, le=1000)] = Decimal(1)
    max_bad_pct: Annotated[Decimal, Field(ge=0, le=100)] = Field(
        DEFAULT_MAX_BAD_PCT,
        description="the share of bad records (percent of those read) above which `fabric ledger ingest` "
        "fails and stores nothing: a file of the wrong kind, or a broken export, is noticed",
    )
    store: str | None = Field(
        None,
        description="the ledger store (DuckDB file) that `fabric ledger ingest` fills, relative to the site repo; "
        "default: <site repo>.ledger.duckdb beside the repo, never inside it",
    )
