"""The tiny test model: a random-weight Llama that vLLM serves on a CPU in seconds, built without a hub.

No model hub is reachable from the fabric's test machines, so the model is written from scratch:
`config.json` (Llama: hidden 128, 2 layers, 4 heads / 2 KV heads), `model.safetensors` with
seeded random weights (the safetensors format is a JSON header plus raw little-endian tensors, so
no torch is needed), and a byte-level BPE `tokenizer.json` (the 256 byte symbols of GPT-2's
byte-level alphabet, no merges) with a chat template. Its tokenizer carries `<think>`, `</think>`,
`<tool_call>` and `</tool_call>` as added tokens so that the reasoning and tool parsers that look
these up by id can run against it.

Greedy decoding of random weights falls into short cycles on its own, which is what the loop
guard's live test needs. The same seed gives byte-identical files.
"""

from __future__ import annotations

import json
import math
import random
import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llm_fabric.atomicio import write_atomic

BOS = "<s>"
EOS = "</s>"
PARSER_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<s>{{ message['role'] }}\n{{ message['content'] }}</s>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class TinyModelShape:
    hidden_size: int = 128
    intermediate_size: int = 256
    layers: int = 2
    attention_heads: int = 4
    kv_heads: int = 2
    max_positions: int = 2048

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.attention_heads


def byte_alphabet() -> list[str]:
    """GPT-2's byte-level alphabet: byte b is the printable character `alphabet[b]`."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def tokenizer_json(markers: Sequence[str] = PARSER_TOKENS) -> dict[str, object]:
    """A byte-level BPE tokenizer (tokenizer.json) whose added tokens are BOS, EOS and `markers`."""
    vocab = {symbol: index for index, symbol in enumerate(byte_alphabet())}
    added = []
    for content in (BOS, EOS, *markers):
        index = len(vocab)
        vocab[content] = index
        added.append(
            {
                "id": index,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": content in (BOS, EOS),
            }
        )
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }


def _tensor_shapes(shape: TinyModelShape, vocab_size: int) -> dict[str, tuple[int, ...]]:
    h, kv = shape.hidden_size, shape.kv_heads * shape.head_dim
    tensors: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab_size, h)}
    for layer in range(shape.layers):
        prefix = f"model.layers.{layer}"
        tensors |= {
            f"{prefix}.input_layernorm.weight": (h,),
            f"{prefix}.self_attn.q_proj.weight": (h, h),
            f"{prefix}.self_attn.k_proj.weight": (kv, h),
            f"{prefix}.self_attn.v_proj.weight": (kv, h),
            f"{prefix}.self_attn.o_proj.weight": (h, h),
            f"{prefix}.post_attention_layernorm.weight": (h,),
            f"{prefix}.mlp.gate_proj.weight": (shape.intermediate_size, h),
            f"{prefix}.mlp.up_proj.weight": (shape.intermediate_size, h),
            f"{prefix}.mlp.down_proj.weight": (h, shape.intermediate_size),
        }
    tensors |= {"model.norm.weight": (h,), "lm_head.weight": (vocab_size, h)}
    return tensors


def safetensors_bytes(shapes: dict[str, tuple[int, ...]], seed: int) -> bytes:
    """float32 tensors: norms are ones, matrices N(0, 1/sqrt(fan_in)) so activations neither vanish nor blow up."""
    rng = random.Random(seed)
    header: dict[str, object] = {"__metadata__": {"format": "pt", "producer": "llm-fabric tiny model"}}
    blobs: list[bytes] = []
    offset = 0
    for name, dims in shapes.items():
        count = math.prod(dims)
        if name.endswith("norm.weight"):
            values = array("f", [1.0] * count)
        else:
            std = 1.0 / math.sqrt(dims[-1])
            values = array("f", [rng.gauss(0.0, std) for _ in range(count)])
        if sys.byteorder == "big":  # safetensors is little-endian
            values.byteswap()
        blob = values.tobytes()
        header[name] = {"dtype": "F32", "shape": list(dims), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data section starts 8-byte aligned
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def build_tiny_model(directory: Path, *, seed: int = 0, shape: TinyModelShape | None = None) -> Path:
    """Write the tiny test model into `directory` (created if missing) and return it.

    The folder is a Hugging Face model folder that `vllm serve DIR` (or `fabric engine run --local`)
    loads offline: config.json, generation_config.json, model.safetensors, tokenizer.json,
    tokenizer_config.json, special_tokens_map.json.
    """
    shape = shape or TinyModelShape()
    tokenizer = tokenizer_json()
    vocab = tokenizer["model"]["vocab"]  # type: ignore[index]
    vocab_size = len(vocab)
    bos_id, eos_id = vocab[BOS], vocab[EOS]
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.attention_heads,
        "num_key_value_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": shape.max_positions,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "vocab_size": vocab_size,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "torch_dtype": "float32",
    }
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "model_max_length": shape.max_positions,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "chat_template": CHAT_TEMPLATE,
    }
    files: dict[str, str | bytes] = {
        "config.json": json.dumps(config, indent=2),
        "generation_config.json": json.dumps({"bos_token_id": bos_id, "eos_token_id": eos_id}, indent=2),
        "tokenizer.json": json.dumps(tokenizer, ensure_ascii=False),
        "tokenizer_config.json": json.dumps(tokenizer_config, indent=2),
        "special_tokens_map.json": json.dumps({"bos_token": BOS, "eos_token": EOS}, indent=2),
        "model.safetensors": safetensors_bytes(_tensor_shapes(shape, vocab_size), seed),
    }
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        write_atomic(directory / name, data)
    return directory
