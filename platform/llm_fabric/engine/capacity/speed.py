"""How fast a replica serves: the roofline ceiling, and what an engine is expected to deliver.

Decode runs in steps; each step produces one token for every sequence in the batch.

- **Ceiling** (roofline): a step takes the longer of its memory time (the weights the batch
  touches plus every sequence's KV, at the GPU's datasheet bandwidth) and its compute time (FLOPs
  at the datasheet dense tensor throughput). Prefill is FLOPs at peak. Nothing else costs time.
- **Expected**: the same bytes and FLOPs at the efficiencies engines reach, plus a per-step floor
  no batch amortises: a fixed cost per layer (kernel launches, synchronisation) and the per-layer
  collectives (two all-reduces per layer under tensor parallelism, two all-to-alls per MoE layer
  under expert parallelism), each a latency by the link it crosses (NVSwitch, PCIe, RDMA between
  nodes) plus its bytes over the link bandwidth. Prefill runs at a calibrated fraction of peak.

The constants are fitted to published measurements (`llm_fabric.engine.capacity.calibration`,
`engine/calibration/`); their values and the fit's error live in `engine/calibration/fit.yaml`,
and the error band of every expected figure comes from that fit.

Traffic: `input_tokens` (ISL) and `output_tokens` (OSL) per request, `batch` requests in flight on
the replica (continuous batching). A request spends its prefill (its TTFT) and then OSL decode
steps, during which the other requests' prefills are interleaved (chunked prefill), so

    itl   = step(batch) + (batch - 1) * prefill(ISL) / OSL
    per-user output tok/s = OSL / (prefill(ISL) + OSL * itl),   total = batch * per-user,

which is how published output-tok/s figures count: the time spent on prefill is in them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Literal

from pydantic import Field

from llm_fabric.basemodel import FabricModel
from llm_fabric.distribution import data_path
from llm_fabric.documents import load_model
from llm_fabric.engine.capacity.model_shape import ModelShape
from llm_fabric.engine.capacity.parallelism import RDMA_LINK, Layout
from llm_fabric.hardware.catalog import GpuSpec

LOW_PRECISION_COMPUTE = frozenset({"fp8", "nvfp4", "mxfp4"})
FP4_COMPUTE = frozenset({"nvfp4", "mxfp4"})
ACTIVATION_BYTES = 2  # bf16 activations in the all-reduces and the MoE combine
DISPATCH_BYTES = 1  # MoE dispatch sends fp8 activations (DeepEP / FlashInfer all-to-all)


class LinkSpec(FabricModel):
    latency_us: float = Field(ge=0, description="one small collective over this link")
    bandwidth_gbs: float = Field(gt=0, description="per GPU, one direction, GB/s")


class SpeedConstants(FabricModel):
    """The fitted constants (and the fit's error) of the expected-speed model."""

    bandwidth_efficiency: float = Field(gt=0, le=1, description="achieved / datasheet HBM bandwidth in decode")
    compute_efficiency: float = Field(gt=0, le=1, description="achieved / datasheet dense tensor FLOPs in decode")
    prefill_efficiency: float = Field(gt=0, le=1, description="achieved / datasheet dense tensor FLOPs in prefill")
    layer_overhead_us: float = Field(ge=0, description="per layer and decode step: launches, synchronisation")
    expert_parallel_efficiency: float = Field(
        gt=0,
        le=1,
        description="under expert parallelism: average / busiest rank's work (routing imbalance, "
        "dispatch and combine kernels) applied to the step's memory and compute time",
    )
    links: dict[str, LinkSpec] = Field(description="nvswitch, nvlink, xgmi, pcie, rdma")
    error_band: tuple[float, float] = Field(
        description="measured / expected over the calibration cases: 10th and 90th percentile"
    )
    median_error: float = Field(description="median |expected - measured| / measured over the cases")
    worst_error: float = Field(description="largest |expected - measured| / measured over the cases")
    cases: int = Field(ge=1, description="calibration cases the constants were fitted to")


class FitFile(FabricModel):
    version: Literal[1] = 1
    constants: SpeedConstants


@cache
def fitted_constants() -> SpeedConstants:
    return load_model(data_path("engine", "calibration", "fit.yaml"), FitFile).constants


@dataclass(frozen=True)
class Speed:
    """Speed figures of a deployment of replicas under one traffic shape."""

    kind: Literal["ceiling", "expected"]
    output_tokens_per_s_total: float
    output_tokens_per_s_per_user: float
    itl_ms: float
    ttft_ms: float
    error_band: tuple[float, float] | None = None  # expected only: the factors measured/expected ranges over

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "output_tokens_per_s_total": round(self.output_tokens_per_s_total, 1),
            "output_tokens_per_s_per_user": round(self.output_tokens_per_s_per_user, 1),
            "itl_ms": round(self.itl_ms, 2),
            "ttft_ms": round(self.ttft_ms, 1),
        }
        if self.error_band is not None:
            low, high = self.error_band
            out["error_band"] = {
                "low": round(low, 3),
                "high": round(high, 3),
                "output_tokens_per_s_total": [
                    round(self.output_tokens_per_s_total * low, 1),
                    round(self.output_tokens_per_s_total * high, 1),
                ],
                "basis": "10th-90th percentile of measured/expected over the calibration cases (docs/capacity.md)",
            }
        return out


def peak_flops(gpu: GpuSpec, quantization: str) -> float:
    """Dense tensor FLOP/s for the GEMMs of a quantization: FP4 at twice FP8 on FP4 hardware."""
    if quantization in FP4_COMPUTE and gpu.fp4 and gpu.fp8_tflops is not None:
        return 2.0 * gpu.fp8_tflops * 1e12
    return gpu.peak_tflops("fp8" if quantization in LOW_PRECISION_COMPUTE else "bf16") * 1e12


def _link(consts: SpeedConstants, kind: str) -> LinkSpec:
    return consts.links.get(kind) or consts.links[RDMA_LINK if kind == RDMA_LINK else "pcie"]


def _collectives(shape: ModelShape, gpu: GpuSpec, layout: Layout, batch: int, consts: SpeedConstants) -> float:
    """Seconds per decode step spent in collectives: a latency per collective plus bytes over the link."""
    arch = shape.arch
    if layout.strategy == "dp-ep":
        if layout.data_parallel_size == 1 or arch.experts is None:
            return 0.0
        link = _link(consts, RDMA_LINK if layout.multi_node else gpu.interconnect)
        per_rank = math.ceil(batch / layout.data_parallel_size)
        moved = per_rank * arch.experts.active * arch.hidden_size * (DISPATCH_BYTES + ACTIVATION_BYTES)
        return arch.layers * (2 * link.latency_us * 1e-6 + moved / (link.bandwidth_gbs * 1e9))
    total = 0.0
    tp = layout.tensor_parallel_size
    if tp > 1:
        link = _link(consts, gpu.interconnect)
        ring = 2.0 * (tp - 1) / tp * batch * arch.hidden_size * ACTIVATION_BYTES
        total += 2 * arch.layers * (link.latency_us * 1e-6 + ring / (link.bandwidth_gbs * 1e9))
    if layout.pipeline_parallel_size > 1:  # activations handed to the next stage over the RDMA fabric
        link = _link(consts, RDMA_LINK)
        hand_over = batch * arch.hidden_size * ACTIVATION_BYTES / (link.bandwidth_gbs * 1e9)
        total += (layout.pipeline_parallel_size - 1) * (link.latency_us * 1e-6 + hand_over)
    return total


def _stage_bytes_and_flops(shape: ModelShape, layout: Layout, batch: int, context: int) -> tuple[float, float]:
    """Bytes read and FLOPs of one decode step on the busiest GPU of the replica."""
    kv_token = shape.kv_bytes_per_token()
    if layout.strategy == "dp-ep":
        ranks = layout.data_parallel_size
        per_rank = math.ceil(batch / ranks)
        touched = shape.experts_touched(batch)  # the whole replica's tokens route to all ranks' experts
        expert_bytes = shape.expert_params_b * 1e9 * shape.bytes_per_param * touched / ranks
        memory = shape.shared_bytes + expert_bytes + per_rank * context * kv_token
        return memory, shape.decode_flops(per_rank, context)
    tp, pp = layout.tensor_parallel_size, layout.pipeline_parallel_size
    kv = batch * context * kv_token * shape.kv_replication(tp) / tp
    memory = (shape.weights_read(batch) / tp + kv) / pp
    return memory, shape.decode_flops(batch, context) / (tp * pp)


def step_seconds(
    shape: ModelShape, gpu: GpuSpec, layout: Layout, batch: int, context: int, consts: SpeedConstants | None
) -> float:
    """One decode step for `batch` sequences of `context` tokens; `consts=None` gives the roofline ceiling.

    Under pipeline parallelism every token passes all stages in turn, so a step is the stages' sum;
    the other in-flight batches fill the pipeline, which is why throughput still scales with batch.
    """
    memory, flops = _stage_bytes_and_flops(shape, layout, max(1, batch), context)
    bandwidth = gpu.memory_bandwidth_tbs * 1e12
    compute = peak_flops(gpu, shape.quantization)
    pp = layout.pipeline_parallel_size
    if consts is None:
        return pp * max(memory / bandwidth, flops / compute)
    roof = max(memory / (bandwidth * consts.bandwidth_efficiency), flops / (compute * consts.compute_efficiency))
    if layout.expert_parallel:
        roof /= consts.expert_parallel_efficiency
    floor = shape.arch.layers / pp * consts.layer_overhead_us * 1e-6
    return pp * (roof + floor) + _collectives(shape, gpu, layout, batch, consts)


def prefill_seconds(
    shape: ModelShape, gpu: GpuSpec, layout: Layout, tokens: int, consts: SpeedConstants | None
) -> float:
    """Prefill of one `tokens`-token prompt: its FLOPs over the replica's GPUs (pipeline stages run in turn)."""
    if tokens <= 0:
        return 0.0
    efficiency = 1.0 if consts is None else consts.prefill_efficiency
    parallel = layout.tensor_parallel_size * layout.data_parallel_size
    return shape.prefill_flops(tokens) / (parallel * peak_flops(gpu, shape.quantization) * efficiency)


def replica_speed(
    shape: ModelShape,
    gpu: GpuSpec,
    layout: Layout,
    *,
    input_tokens: int,
    output_tokens: int,
    batch: int,
    replicas: int = 1,
    consts: SpeedConstants | None = None,
) -> Speed:
    """Speed of `replicas` replicas, each with `batch` requests in flight (see the module docstring)."""
    osl = max(1, output_tokens)
    if batch < 1 or replicas < 1:
        kind: Literal["ceiling", "expected"] = "ceiling" if consts is None else "expected"
        return Speed(kind, 0.0, 0.0, 0.0, 0.0, None if consts is None else consts.error_band)
    context = input_tokens + osl // 2  # the mean KV length a sequence has while it decodes
    step = step_seconds(shape, gpu, layout, batch, context, consts)
    prefill = prefill_seconds(shape, gpu, layout, input_tokens, consts)
    # other requests' prefills, spread over every pipeline stage's GPUs when the pipeline is full
    others = (batch - 1) * prefill / layout.pipeline_parallel_size
    itl = step + others / osl
    ttft = prefill + step
    per_user = osl / (ttft + (osl - 1) * itl)
    if consts is None:
        return Speed("ceiling", per_user * batch * replicas, per_user, itl * 1e3, ttft * 1e3)
    return Speed("expected", per_user * batch * replicas, per_user, itl * 1e3, ttft * 1e3, consts.error_band)
