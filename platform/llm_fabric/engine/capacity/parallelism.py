"""How one replica spreads a model over GPUs and nodes: the strategies the engines offer.

- `tp`: tensor parallelism inside a node (NVLink/NVSwitch/xGMI), and when one node cannot hold the
  model, pipeline parallelism across nodes (one stage per node, `--pipeline-parallel-size`). A
  tensor-parallel group never spans nodes.
- `dp-ep`: data-parallel attention with expert parallelism (vLLM `--data-parallel-size N
  --enable-expert-parallel`, SGLang `--enable-dp-attention`), for MLA mixture-of-experts models:
  each rank runs attention for its own sequences (the latent KV is stored once, not on every
  rank) and holds 1/N of the routed experts; the rest of the weights are on every rank. The ranks
  may span nodes (the all-to-all then crosses the RDMA fabric).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Strategy = Literal["tp", "dp-ep"]
ParallelismChoice = Literal["tp", "dp-ep", "auto"]
STRATEGIES: tuple[Strategy, ...] = ("tp", "dp-ep")
RDMA_LINK = "rdma"  # collectives between nodes: InfiniBand or RoCE


@dataclass(frozen=True)
class Layout:
    """One replica's shape. GPUs = tensor x pipeline x data parallel sizes."""

    strategy: Strategy
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    gpus_per_node: int = 8

    @property
    def gpus(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @property
    def nodes(self) -> int:
        return math.ceil(self.gpus / self.gpus_per_node)

    @property
    def expert_parallel(self) -> bool:
        return self.strategy == "dp-ep"

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    def describe(self) -> str:
        if self.strategy == "dp-ep":
            text = f"DP {self.data_parallel_size} + EP (data-parallel attention)"
        else:
            text = f"TP {self.tensor_parallel_size}"
            if self.pipeline_parallel_size > 1:
                text += f" x PP {self.pipeline_parallel_size}"
        return text + (f" on {self.nodes} nodes" if self.multi_node else "")

    def as_dict(self) -> dict[str, object]:
        return {
            "strategy": self.strategy,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "data_parallel_size": self.data_parallel_size,
            "expert_parallel": self.expert_parallel,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
        }


def tp_layout(tp: int, gpus_per_node: int, nodes: int = 1) -> Layout:
    """TP inside a node; across `nodes` nodes one pipeline stage per node."""
    return Layout("tp", tensor_parallel_size=tp, pipeline_parallel_size=nodes, gpus_per_node=gpus_per_node)


def dp_ep_layout(ranks: int, gpus_per_node: int) -> Layout:
    return Layout("dp-ep", data_parallel_size=ranks, gpus_per_node=gpus_per_node)


# A LeaderWorkerSet sets these in every pod of a group; the serving container expands them.
LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"
MASTER_PORT = 29501  # vLLM's default --master-port (torch.distributed rendezvous of multi-node TP/PP)
DP_RPC_PORT = 13345  # --data-parallel-rpc-port: the DP coordinator's handshake, the same on every node


def engine_parallel_args(layout: Layout, *, node_rank: int = 0, leader_address: str = LEADER_ADDRESS) -> list[str]:
    """`vllm serve` flags (vLLM 0.32) of a layout, for the pod of node `node_rank` (0: the leader, API server).

    Multi-node TP/PP runs vLLM's multiprocessing executor across nodes (`--nnodes --node-rank
    --master-addr`), multi-node DP-EP one DP engine per GPU with `--data-parallel-size-local`; the
    nodes after the first run `--headless` (no API server).
    """
    if layout.strategy == "dp-ep":
        args = ["--tensor-parallel-size", "1", "--data-parallel-size", str(layout.data_parallel_size)]
        args.append("--enable-expert-parallel")
        if layout.multi_node:
            local = layout.gpus_per_node
            args += ["--data-parallel-size-local", str(local), "--data-parallel-address", leader_address]
            args += ["--data-parallel-rpc-port", str(DP_RPC_PORT)]
            if node_rank > 0:
                args += ["--data-parallel-start-rank", str(node_rank * local), "--headless"]
        return args
    args = ["--tensor-parallel-size", str(layout.tensor_parallel_size)]
    if layout.pipeline_parallel_size > 1:
        pp = str(layout.pipeline_parallel_size)
        args += ["--pipeline-parallel-size", pp, "--nnodes", pp, "--node-rank", str(node_rank)]
        args += ["--master-addr", leader_address, "--master-port", str(MASTER_PORT)]
        if node_rank > 0:
            args.append("--headless")
    return args
