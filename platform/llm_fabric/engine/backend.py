"""The one protocol every serving engine's backend meets, and what its methods take and give.

A backend (`engine.vllm.backend.VLLM`, `engine.sglang.backend.SGLANG`) builds the engine's command
from `ServingArgs`, sizes a replica with the engine's own memory semantics on top of the shared
capacity model, and checks its generated commands with the engine's own parser. It also says what
the other layers would otherwise ask by name: its image (the stack options naming it), the
environment every container of it gets, where its command names the model, the recipe's parsers in
its names, what it refuses of a deployment, and what the gateway adds to a request for it (priority
and its polarity, the loop guard). The registry (`engine.backends`) maps an engine's name to its
backend; nothing outside the backends and the registry asks which engine it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from llm_fabric.engine.argcheck import ArgVerdict
from llm_fabric.engine.capacity.model import CapacityEstimate, LatencyTarget
from llm_fabric.engine.command import EngineCommand, ServingArgs
from llm_fabric.engine.recipes import EngineName, Recipe
from llm_fabric.engine.reported import Reported
from llm_fabric.hardware.catalog import GpuSpec


@dataclass(frozen=True)
class CapacityQuery:
    """What `fabric capacity` asks of one recipe on `count` GPUs (`capacity.model.estimate`'s options)."""

    recipe: Recipe
    gpu: GpuSpec
    count: int
    tensor_parallel_size: int | None = None
    parallelism: Literal["tp", "dp-ep", "auto"] = "auto"
    gpus_per_node: int | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    context_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    users: int | Literal["max"] = 1
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int | None = None
    latency_target: LatencyTarget = field(default_factory=LatencyTarget)
    attn_dp_size: int = 1


@dataclass(frozen=True)
class CapacityReport:
    """An engine's capacity figures: the shared estimate, the engine's own fields and a line for people."""

    estimate: CapacityEstimate
    extra: dict[str, object] = field(default_factory=dict)
    note: str | None = None

    def as_dict(self) -> dict[str, object]:
        return self.estimate.as_dict() | self.extra


@dataclass(frozen=True)
class ArgsCheck:
    """Every generated command checked by the engine's own parser."""

    verdicts: list[ArgVerdict]
    refused: list[str]  # combinations the kernel matrix refuses: never generated
    parser: str  # whose parser judged, for people: "vLLM's parser"


@dataclass(frozen=True)
class EngineMetrics:
    """The engine's names of the series the fabric reads on its /metrics. The recording rules and alerts
    (`observability.rules`), the dashboards and the ledger (`ledger.store.engine_usage`) select every
    engine's name of one meaning (`engine.backends.series_selector`)."""

    prompt_tokens: str  # counter: prompt tokens
    cached_prompt_tokens: str  # counter: prompt tokens served from the prefix cache (the books' cached input)
    generation_tokens: str  # counter: generated tokens
    # counters of the prefix cache's lookups, in tokens; None: the engine has none, its hit rate is its
    # cached prompt tokens over its prompt tokens
    prefix_cache_hits: str | None
    prefix_cache_queries: str | None
    requests_finished: str  # counter: finished requests
    requests_aborted: str | None  # counter: aborted requests `requests_finished` counts too; None: it does not
    requests_running: str  # gauge: requests in flight
    requests_waiting: str  # gauge: requests queued
    kv_cache_usage: str  # gauge: the KV cache's used share, 0 to 1
    preemptions: str  # counter: requests preempted (their KV cache evicted)
    ttft_bucket: str  # histogram buckets: time to first token
    itl_bucket: str  # inter-token latency
    e2e_bucket: str  # a request's whole latency
    prompt_tokens_bucket: str  # a request's prompt length

    @property
    def cache_hit_tokens(self) -> str:
        """The numerator of the prefix-cache hit rate."""
        return self.prefix_cache_hits or self.cached_prompt_tokens

    @property
    def cache_query_tokens(self) -> str:
        """Its denominator."""
        return self.prefix_cache_queries or self.prompt_tokens


@dataclass(frozen=True)
class ProbeTraits:
    """What the engine pod's probe program (`engine.runtime.probe`) is told of the engine at render time."""

    python: str  # the image's interpreter, the one llm_fabric is installed for
    health_path: str  # answers 200 once the weights are loaded and the server listens
    running_metric: str  # the gauge of requests in flight on /metrics (the drain waits for 0)


class EngineBackend(Protocol):
    """One serving engine: its name, its program, how it is sized and checked."""

    @property
    def name(self) -> EngineName: ...

    @property
    def version(self) -> str:
        """The engine release the commands are checked against (and its image is built from)."""

    @property
    def launcher(self) -> tuple[str, ...]:
        """The program before the arguments (`vllm serve`)."""

    @property
    def model_positional(self) -> bool:
        """Whether the model is the first, positional argument (it stays on the launcher's line)."""

    @property
    def attention_dp(self) -> bool:
        """Whether the engine takes its own attention-DP/expert-parallel sizes (`--attn-dp`, `--ep`)."""

    @property
    def image_options(self) -> tuple[str, str]:
        """The `deploy.options.StackOptions` fields naming its image: (NVIDIA nodes, AMD nodes)."""

    @property
    def container_env(self) -> Mapping[str, str]:
        """Set on every container of the engine, over the plan's environment."""

    @property
    def streamed_load_format(self) -> str | None:
        """The `--load-format` that streams a staged checkpoint's safetensors to the GPUs; None: none known."""

    @property
    def metrics(self) -> EngineMetrics:
        """Its names of the series the rules, the dashboards and the ledger read."""

    @property
    def probe_traits(self) -> ProbeTraits:
        """What the probes (liveness, readiness, the drain) need to know of the engine."""

    def command(self, serving: ServingArgs) -> EngineCommand: ...

    def parsers(self, recipe: Recipe) -> tuple[str | None, str | None]:
        """(tool-call parser, reasoning parser) of `recipe` in the engine's names."""

    def template_and_args(self, recipe: Recipe) -> tuple[str | None, list[str]]:
        """(chat template, extra engine arguments) the engine's command takes from `recipe`."""

    def refusal(self, recipe: Recipe, kv_cache_dtype: str) -> tuple[str, str, str] | None:
        """Why a deployment of `recipe` cannot run on the engine: (its field, message, hint); None: it can."""

    def priority_scheduling(self, args: Sequence[str]) -> bool:
        """Whether the engine started with `args` schedules requests by their `priority`."""

    def low_values_first(self, args: Sequence[str]) -> bool:
        """Whether the engine started with `args` serves lower `priority` values first (the fabric's numbers)."""

    def loop_guard_fields(self, *, enabled: bool) -> dict[str, Any]:
        """Fields to merge into a request body so the engine runs (or skips) the fabric's loop guard."""

    def capacity(self, query: CapacityQuery) -> CapacityReport: ...

    def check_args(self) -> ArgsCheck: ...

    def planned_config(self, args: list[str]) -> Reported:
        """The fields the engine reports (`reported_config`), as the plan's arguments for it set them."""

    def reported_config(self, base_url: str, timeout: float) -> Reported:
        """What the running engine at `base_url` reports (`engine.reported`); EngineUnreachable when it cannot."""
