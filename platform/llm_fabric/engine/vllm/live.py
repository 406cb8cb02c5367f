"""What a running vLLM reports about its configuration (`fabric check live`).

- `GET /v1/models`: the served model name (`id`), the checkpoint it loaded (`root`, the model argument)
  and `max_model_len`;
- `GET /version`: the release (`{"version": ...}`);
- `GET /metrics`: `vllm:cache_config_info`, an info gauge whose labels are the engine's CacheConfig;
  its `cache_dtype` is the KV-cache dtype (`--kv-cache-dtype`, `auto` unless given).
Quantization, parsers and the chat template are not exposed by a production vLLM (its `/server_info`
answers only with VLLM_SERVER_DEV_MODE=1): those fields are checked by the canaries, not here.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from llm_fabric.engine.reported import EngineUnreachable, Reported, flag, get_json, get_text

CACHE_INFO = "vllm:cache_config_info"


def planned_config(args: list[str]) -> Reported:
    """The reported fields as the plan's `vllm serve` arguments (model first) set them."""
    length = flag(args, "--max-model-len")
    return {
        "served_model_name": flag(args, "--served-model-name") or args[0],
        "checkpoint": args[0],
        "max_model_len": int(length) if length is not None else None,
        "kv_cache_dtype": flag(args, "--kv-cache-dtype") or "auto",
    }


def _cache_dtype(metrics: str) -> str | None:
    for family in text_string_to_metric_families(metrics):
        # a gauge of this full name: vLLM emulates an info metric (multiprocess mode has no Info type)
        if family.name == CACHE_INFO:
            for sample in family.samples:
                return sample.labels.get("cache_dtype")
    return None


def reported_config(base_url: str, timeout: float) -> Reported:
    models: Any = get_json(base_url, "/v1/models", timeout)
    try:
        model = models["data"][0]
    except (KeyError, IndexError, TypeError) as exc:
        raise EngineUnreachable(f"{base_url}/v1/models lists no model") from exc
    version: Any = get_json(base_url, "/version", timeout)
    return {
        "served_model_name": model.get("id"),
        "checkpoint": model.get("root"),
        "max_model_len": model.get("max_model_len"),
        "kv_cache_dtype": _cache_dtype(get_text(base_url, "/metrics", timeout)),
        "engine_version": version.get("version") if isinstance(version, dict) else None,
    }
