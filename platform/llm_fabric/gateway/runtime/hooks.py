"""The hooks LiteLLM's proxy loads from the generated config: auth, policy, overload and meter.

    general_settings.custom_auth: llm_fabric.gateway.runtime.hooks.user_api_key_auth
    litellm_settings.callbacks:   llm_fabric.gateway.runtime.hooks.fabric_hooks

The deployment filter also leaves out the replicas the canary prober takes out of rotation
(`rotation`, $FABRIC_CANARY_URL).

This module runs inside the proxy's own venv (`make gateway`); it reads the settings file that
`fabric gateway config` wrote ($FABRIC_GATEWAY_SETTINGS) and appends meter records to the day's
file in the folder $FABRIC_GATEWAY_RECORDS. Errors reach the client as LiteLLM's ProxyException (a plain exception
would be a 500) with the status that says what to do: 401 unknown key, 403 not allowed, 429 with
Retry-After come back later.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request
from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import ProxyException, UserAPIKeyAuth

from llm_fabric.gateway.runtime.admission import Admission, Refusal, Ticket, retry_headers
from llm_fabric.gateway.runtime.meter import Meter
from llm_fabric.gateway.runtime.policy import DATA_CLASS_HEADER, Denial, apply_route, route, strip_engine_fields
from llm_fabric.gateway.runtime.rotation import rotation
from llm_fabric.gateway.runtime.settings import RECORDS_ENV, WRITER_ENV, HookSettings, settings_from_env
from llm_fabric.request_record import RequestRecord

# open requests older than this are dropped from memory (a lost callback must not leak slots forever)
STALE_AFTER_S = 3600.0


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class _Open:
    arrived: float
    tenant: str
    deployment: str
    data_class: str | None = None
    ticket: Ticket | None = None
    prompt: str | None = None


class _State:
    def __init__(self, settings: HookSettings) -> None:
        self.settings = settings
        self.by_hash = settings.tenant_by_hash()
        self.admission = Admission(float(settings.retry_after_s))
        records = os.environ.get(RECORDS_ENV)
        self.meter = Meter(Path(records), writer=os.environ.get(WRITER_ENV) or None) if records else None


_state: _State | None = None


def state() -> _State:
    global _state
    if _state is None:
        _state = _State(settings_from_env())
    return _state


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    """Tenant keys by SHA-256: the proxy never holds a key in plain text beyond this call."""
    st = state()
    digest = key_digest(api_key.removeprefix("Bearer ").strip())
    tenant = st.by_hash.get(digest)
    if tenant is None:
        raise ProxyException(message="unknown API key", type="auth_error", param="api_key", code=401)
    groups = {g for by_class in st.settings.tenants[tenant].groups.values() for g in by_class.values()}
    # LiteLLM checks a fallback's group against the key's models too: the allowed groups' fallbacks join them
    allowed = sorted(groups | {f for g in groups for f in st.settings.groups[g].fallbacks})
    return UserAPIKeyAuth(
        api_key=digest, user_id=tenant, key_alias=tenant, models=allowed, metadata={"fabric_tenant": tenant}
    )


def _text_of(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    parts: list[str] = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    return "\n".join(parts)


def _status_of(exc: BaseException) -> int:
    for attr in ("status_code", "code"):
        value = getattr(exc, attr, None)
        try:
            if value is not None and 100 <= int(value) <= 599:
                return int(value)
        except (TypeError, ValueError):
            continue
    return 500


class FabricHooks(CustomLogger):  # type: ignore[misc]  # LiteLLM is not typed for mypy here
    def __init__(self) -> None:
        super().__init__()
        self._open: dict[str, _Open] = {}

    def _forget_stale(self, now: float) -> None:
        for call_id in [k for k, v in self._open.items() if v.arrived < now - STALE_AFTER_S]:
            stale = self._open.pop(call_id)
            if stale.ticket is not None:
                state().admission.release(stale.ticket, input_tokens=None, output_tokens=0)

    def _record(self, request_id: str, opened: _Open, status: int, **fields: Any) -> None:
        st = state()
        if st.meter is None:
            return
        st.meter.write(
            RequestRecord(
                ts=datetime.fromtimestamp(opened.arrived, UTC),
                model=opened.deployment,
                tenant=opened.tenant,
                status=str(status),
                request_id=request_id,
                data_class=opened.data_class,
                prompt=opened.prompt,
                **fields,
            )
        )

    async def async_pre_call_hook(
        self, user_api_key_dict: UserAPIKeyAuth, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        st = state()
        now = time.time()
        self._forget_stale(now)
        tenant = str(user_api_key_dict.user_id)
        call_id = str(data.setdefault("litellm_call_id", str(uuid.uuid4())))
        model = str(data.get("model", ""))
        opened = _Open(arrived=now, tenant=tenant, deployment=model)
        self._open[call_id] = opened
        headers = (data.get("proxy_server_request") or {}).get("headers") or {}
        decision = route(st.settings, tenant, model, headers.get(DATA_CLASS_HEADER))
        if isinstance(decision, Denial):
            raise ProxyException(
                message=decision.message, type="permission_denied", param="model", code=decision.status
            )
        opened.data_class = decision.data_class
        text = _text_of(data.get("messages"))
        if st.settings.log_prompts.get(decision.data_class, False):
            opened.prompt = text
        dep = st.settings.deployments[decision.deployment]
        # an estimate for the input-token window (about 4 characters a token); the meter corrects it
        admitted = st.admission.admit(
            tenant, st.settings.tenants[tenant], decision.deployment, dep, input_tokens=len(text) // 4 + 1, now=now
        )
        if isinstance(admitted, Refusal):
            raise ProxyException(
                message=admitted.reason,
                type="rate_limit_error",
                param=None,
                code=429,
                headers=retry_headers(admitted.retry_after_s),
            )
        opened.ticket = admitted
        apply_route(data, decision, dep, tenant)
        return data

    async def async_filter_deployments(
        self,
        model: str,
        healthy_deployments: list[Any],
        messages: Any,
        request_kwargs: dict[str, Any] | None = None,
        parent_otel_span: Any = None,
    ) -> list[Any]:
        """The last layer: a group's request never reaches a replica at a site outside the group's sites,
        nor one the canary prober took out of rotation (`rotation`)."""
        group = state().settings.groups.get(model)
        if group is None:
            return healthy_deployments  # an external provider's own group
        allowed = [
            d
            for d in healthy_deployments
            if ((d.get("model_info") or {}).get("fabric_site") if isinstance(d, dict) else None) in group.sites
        ]
        return await rotation().keep(allowed)

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any]:
        info = (kwargs.get("litellm_params") or {}).get("model_info") or kwargs.get("model_info") or {}
        if isinstance(info, dict) and info.get("fabric_external"):
            strip_engine_fields(kwargs)
        return kwargs

    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: UserAPIKeyAuth,
        traceback_str: str | None = None,
    ) -> HTTPException | None:
        st = state()
        status = _status_of(original_exception)
        call_id = str(request_data.get("litellm_call_id", ""))
        opened = self._open.pop(call_id, None)
        if opened is not None:
            if opened.ticket is not None:
                st.admission.release(opened.ticket, input_tokens=None, output_tokens=0)
            self._record(call_id, opened, status)
        if status != 429:
            return None
        headers = getattr(original_exception, "headers", None)
        if isinstance(headers, dict) and any(k.lower() == "retry-after" for k in headers):
            return None
        # LiteLLM's own refusals (a deployment at max_parallel_requests) come without Retry-After
        retry = retry_headers(float(st.settings.retry_after_s))
        if isinstance(original_exception, ProxyException):
            original_exception.headers.update(retry)
            return None
        return HTTPException(status_code=429, detail=str(original_exception), headers=retry)

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        st = state()
        call_id = str(kwargs.get("litellm_call_id", ""))
        opened = self._open.pop(call_id, None)
        if opened is None:
            return
        slo = kwargs.get("standard_logging_object") or {}
        usage = getattr(response_obj, "usage", None)
        prompt_tokens = int(slo.get("prompt_tokens") or getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(slo.get("completion_tokens") or getattr(usage, "completion_tokens", 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        first, started = slo.get("completionStartTime"), slo.get("startTime")
        ttft = (float(first) - float(started)) * 1000 if first and started else None
        info = (kwargs.get("litellm_params") or {}).get("model_info") or {}
        site = info.get("fabric_site") or info.get("fabric_external") if isinstance(info, dict) else None
        if opened.ticket is not None:
            st.admission.release(opened.ticket, input_tokens=prompt_tokens, output_tokens=completion_tokens)
        self._record(
            call_id,
            opened,
            200,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_prompt_tokens=None if cached is None else int(cached),
            ttft_ms=ttft,
            site=site,
        )


fabric_hooks = FabricHooks()
