"""What the capacity and speed models read of a model: bytes of weights, KV cache and FLOPs.

A `ModelShape` is an architecture (from a recipe, or from a calibration case for a model the
fabric does not serve) with the weight bytes of one quantization and a KV-cache dtype. The
functions here are arithmetic over it; capacity (`llm_fabric.engine.capacity.model`) and speed
(`llm_fabric.engine.capacity.speed`) both build on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from llm_fabric.engine.recipes import KV_DTYPE_BYTES, Architecture, MlaAttention
from llm_fabric.errors import UsageError

GB = 1e9
INDEXER_SCALE_BYTES = 4  # DSA indexer keys are fp8 with one fp32 scale per token and layer


def kv_dtype_bytes(kv_cache_dtype: str) -> int:
    try:
        return KV_DTYPE_BYTES[kv_cache_dtype]
    except KeyError:
        known = ", ".join(KV_DTYPE_BYTES)
        raise UsageError(f"unknown KV-cache dtype `{kv_cache_dtype}`", hint=f"use one of {known}") from None


@dataclass(frozen=True)
class ModelShape:
    """Frozen, so the derived sizes are computed once per shape (the planner asks for them thousands of times)."""

    arch: Architecture
    weights_gb: float
    quantization: str
    kv_cache_dtype: str = "auto"

    @cached_property
    def is_mla(self) -> bool:
        return isinstance(self.arch.attention, MlaAttention)

    @cached_property
    def bytes_per_param(self) -> float:
        return self.weights_gb * GB / (self.arch.total_params_b * 1e9)

    @cached_property
    def expert_params_b(self) -> float:
        """Parameters of one routed expert (all layers), 0 for a dense model."""
        experts = self.arch.experts
        if experts is None or experts.routed == experts.active:
            return 0.0
        return (self.arch.total_params_b - self.arch.active_params_b) / (experts.routed - experts.active)

    @cached_property
    def shared_bytes(self) -> float:
        """Weights every token reads: attention, dense layers, shared experts, embeddings (all but routed experts)."""
        experts = self.arch.experts
        if experts is None or self.expert_params_b == 0.0:
            return self.weights_gb * GB
        shared_b = self.arch.active_params_b - experts.active * self.expert_params_b
        return shared_b * 1e9 * self.bytes_per_param

    @cached_property
    def routed_bytes(self) -> float:
        """Weights of all routed experts together."""
        return self.weights_gb * GB - self.shared_bytes

    def experts_touched(self, tokens: int) -> float:
        """Distinct routed experts `tokens` tokens route to, in expectation: E * (1 - (1 - k/E)^b)."""
        experts = self.arch.experts
        if experts is None or self.expert_params_b == 0.0:
            return 0.0
        return experts.routed * (1.0 - (1.0 - experts.active / experts.routed) ** max(1, tokens))

    def weights_read(self, tokens: int) -> float:
        """Weight bytes one decode step reads for `tokens` sequences: the shared part plus the experts touched."""
        if self.expert_params_b == 0.0:
            return self.weights_gb * GB
        return self.shared_bytes + self.expert_params_b * 1e9 * self.bytes_per_param * self.experts_touched(tokens)

    def kv_bytes_per_token(self) -> int:
        """Bytes of KV cache one token adds, whole model (GQA: 2*L*H_kv*d*b; MLA: L*(r + d_rope)*b)."""
        return self._kv_token

    @cached_property
    def _kv_token(self) -> int:
        arch = self.arch
        dtype_bytes = kv_dtype_bytes(self.kv_cache_dtype)
        att = arch.attention
        if isinstance(att, MlaAttention):
            per_layer = (att.kv_lora_rank + att.qk_rope_head_dim) * dtype_bytes
            if att.indexer_head_dim is not None:
                per_layer += att.indexer_head_dim + INDEXER_SCALE_BYTES
            return arch.full_kv_layers * per_layer
        return 2 * arch.full_kv_layers * att.kv_heads * att.head_dim * dtype_bytes

    def kv_replication(self, tensor_parallel_size: int) -> int:
        """Copies of each token's KV a tensor-parallel group holds.

        vLLM shards GQA KV heads across ranks but replicates a head when ranks outnumber heads; an MLA
        latent is shared by all heads, so every rank keeps the whole latent.
        """
        att = self.arch.attention
        if isinstance(att, MlaAttention):
            return tensor_parallel_size
        return max(1, tensor_parallel_size // att.kv_heads) if tensor_parallel_size > att.kv_heads else 1

    def fixed_bytes_per_sequence(self) -> int:
        """Cache a sequence holds whatever its length: sliding-window layers and recurrent state."""
        arch = self.arch
        total = 0
        if arch.sliding_window is not None and not isinstance(arch.attention, MlaAttention):
            att = arch.attention
            total += (
                2
                * arch.sliding_window.layers
                * att.kv_heads
                * att.head_dim
                * kv_dtype_bytes(self.kv_cache_dtype)
                * arch.sliding_window.window
            )
        if arch.linear_attention is not None:
            la = arch.linear_attention
            total += la.layers * la.value_heads * la.key_head_dim * la.value_head_dim * la.state_dtype_bytes
        return total

    def prefill_flops(self, tokens: int) -> float:
        """2 * active params * tokens, plus causal attention 2 * layers * tokens^2 * hidden (seed 002)."""
        arch = self.arch
        flops = 2.0 * arch.active_params_b * 1e9 * tokens
        flops += 2.0 * arch.full_kv_layers * tokens * tokens * arch.hidden_size
        if arch.sliding_window is not None:
            window = min(tokens, arch.sliding_window.window)
            flops += 2.0 * arch.sliding_window.layers * tokens * window * arch.hidden_size
        return flops

    def decode_flops(self, tokens: int, context: int) -> float:
        """FLOPs of one decode step for `tokens` sequences of `context` tokens: the GEMMs over the active
        parameters plus attention over the context (4 * layers * context * hidden per sequence)."""
        arch = self.arch
        return tokens * (2.0 * arch.active_params_b * 1e9 + 4.0 * arch.full_kv_layers * context * arch.hidden_size)
