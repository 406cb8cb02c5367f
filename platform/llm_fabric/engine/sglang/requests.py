"""What the gateway adds to a request for SGLang: the loop guard as a custom logit processor.

SGLang runs a custom logit processor only when the request names one, so the gateway attaches
`custom_logit_processor` (the guard, serialized the way SGLang deserializes it) and `custom_params`
to each request (vLLM instead loads the guard for every request at start-up, `--logits-processors`).
"""

from __future__ import annotations

import json
from typing import Any

SGLANG_GUARD_MODULE = "llm_fabric.engine.runtime.sglang_loop_guard"
SGLANG_GUARD_CLASS = "SglangLoopGuard"


def sglang_loop_guard_processor() -> str:
    """`custom_logit_processor` for SGLang: what `SglangLoopGuard.to_str()` returns, built without
    importing SGLang or torch (the gateway has neither).

    SGLang's `CustomLogitProcessor.to_str` is `json.dumps({"callable": dill.dumps(cls).hex()})`; dill
    pickles an importable class by reference, with protocol 4: the module and the class name. The
    engine-side test checks this string against the real `to_str` and loads it with SGLang's `from_str`.
    """
    return json.dumps({"callable": global_reference(SGLANG_GUARD_MODULE, SGLANG_GUARD_CLASS).hex()})


def global_reference(module: str, name: str) -> bytes:
    """Pickle protocol 4 of a reference to `module.name`, as pickle and dill write it for a class."""
    body = b"".join(b"\x8c" + bytes([len(part)]) + part + b"\x94" for part in (module.encode(), name.encode()))
    body += b"\x93\x94."  # STACK_GLOBAL, MEMOIZE, STOP
    return b"\x80\x04\x95" + len(body).to_bytes(8, "little") + body  # PROTO 4, FRAME


def loop_guard_fields(*, enabled: bool) -> dict[str, Any]:
    if not enabled:
        return {}
    return {"custom_logit_processor": sglang_loop_guard_processor(), "custom_params": {"loop_guard": True}}
