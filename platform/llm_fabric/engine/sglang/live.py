"""What a running SGLang reports about its configuration (`fabric check live`).

`GET /get_server_info` (SGLang 0.5.23; `/server_info` is its new name) answers the resolved
`ServerArgs` as a flat object plus `version`: `model_path`, `served_model_name`, `context_length`,
`kv_cache_dtype` (`auto` unless given), `quantization`, `tool_call_parser`, `reasoning_parser`,
`chat_template`. All are compared, in SGLang's own names, with the plan's arguments.
"""

from __future__ import annotations

from typing import Any

from llm_fabric.engine.reported import EngineUnreachable, Reported, flag, get_json

# fingerprint field -> SGLang's server argument
FIELDS = {
    "checkpoint": "model_path",
    "served_model_name": "served_model_name",
    "max_model_len": "context_length",
    "kv_cache_dtype": "kv_cache_dtype",
    "quantization": "quantization",
    "tool_call_parser": "tool_call_parser",
    "reasoning_parser": "reasoning_parser",
    "chat_template": "chat_template",
}


def planned_config(args: list[str]) -> Reported:
    """The reported fields as the plan's `sglang.launch_server` arguments set them (SGLang's defaults else)."""
    length = flag(args, "--context-length")
    return {
        "checkpoint": flag(args, "--model-path"),
        "served_model_name": flag(args, "--served-model-name") or flag(args, "--model-path"),
        "max_model_len": int(length) if length is not None else None,
        "kv_cache_dtype": flag(args, "--kv-cache-dtype") or "auto",
        "quantization": flag(args, "--quantization"),
        "tool_call_parser": flag(args, "--tool-call-parser"),
        "reasoning_parser": flag(args, "--reasoning-parser"),
        "chat_template": flag(args, "--chat-template"),
    }


def reported_config(base_url: str, timeout: float) -> Reported:
    info: Any = get_json(base_url, "/get_server_info", timeout)
    if not isinstance(info, dict):
        raise EngineUnreachable(f"{base_url}/get_server_info answered no object")
    out: Reported = {name: info.get(arg) for name, arg in FIELDS.items()}
    out["engine_version"] = info.get("version")
    return out
