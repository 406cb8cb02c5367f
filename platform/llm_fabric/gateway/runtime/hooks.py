"""The hooks LiteLLM's proxy loads from the generated config: auth, policy, overload and meter.

    general_settings.custom_auth: llm_fabric.gateway.runtime.hooks.user_api_key_auth
    litellm_settings.callbacks:   llm_fabric.gateway.runtime.hooks.fabric_hooks

The deployment filter also leaves out the replicas the canary prober takes out of rotation
(`rotation`, $FABRIC_CANARY_URL).

This module runs inside the proxy's own venv (`make gateway`); it reads the settings file that
`fabric gateway config` wrote ($FABRIC_GATEWAY_SETTINGS) and appends meter records to the day's
file in the folder $FABRIC_GATEWAY_RECORDS. Errors reach the client as LiteLLM's ProxyException (a plain exception
would be a 500) with the status that says what to do: 401 unknown or expired key, 403 not allowed, 429 with
Retry-After come back later (`rate_limit_error`) or next month (`budget_exceeded`), 503 the counter store
is down for a restricted tenant.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request
from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import LitellmUserRoles, ProxyException, UserAPIKeyAuth
from litellm.proxy.auth.auth_utils import get_request_route
from litellm.proxy.auth.route_checks import RouteChecks

from llm_fabric import names as N
from llm_fabric.gateway.runtime.admission import Admission, Refusal, Ticket, Usage, retry_headers
from llm_fabric.gateway.runtime.counters import Counters, MemoryCounters, RedisCounters
from llm_fabric.gateway.runtime.frontdoor import (
    UNAVAILABLE,
    is_peer_key,
    relay_headers,
    unavailable_message,
)
from llm_fabric.gateway.runtime.inference import picker_headers
from llm_fabric.gateway.runtime.meter import Meter
from llm_fabric.gateway.runtime.policy import (
    DATA_CLASS_HEADER,
    Denial,
    apply_route,
    output_bound,
    route,
    strip_engine_fields,
)
from llm_fabric.gateway.runtime.relay import RELAY_HEADER, Assertion, Verifier, assertion_header, peer_keys, signing_key
from llm_fabric.gateway.runtime.rotation import rotation
from llm_fabric.gateway.runtime.settings import (
    RECORDS_ENV,
    WRITER_ENV,
    HookSettings,
    clock_from_env,
    counters_url,
    settings_from_env,
)
from llm_fabric.request_record import CUT, RequestRecord

# the error `type` of each refusal in the OpenAI-shaped body: a client tells "later" from "next month" by it
REFUSAL_TYPES = {
    "rate": "rate_limit_error",
    "capacity": "rate_limit_error",
    "budget": "budget_exceeded",
    "store": "service_unavailable",
}


# the only routes a tenant's key (or a relay) reaches: LiteLLM's admin, health and info routes take the
# master key (issue 39, F10: /health called every backend unmetered, /model/info listed internal URLs)
TENANT_ROUTES = (
    "/v1/chat/completions",
    "/chat/completions",
    "/v1/completions",
    "/completions",
    "/v1/embeddings",
    "/embeddings",
    "/v1/models",
    "/models",
)
ADMIN = "fabric-admin"


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _is_master_key(key: str) -> bool:
    import litellm.proxy.proxy_server as proxy  # the proxy's own, resolved from its config at start-up

    expected = proxy.master_key
    return bool(expected) and hmac.compare_digest(key.encode(), str(expected).encode())


def _on_tenant_routes(request: Request, token: UserAPIKeyAuth) -> UserAPIKeyAuth:
    """LiteLLM's own check of a key's `allowed_routes` (the proxy skips its common checks under custom auth)."""
    route_name = get_request_route(request)
    try:
        RouteChecks.is_virtual_key_allowed_to_call_route(route=route_name, valid_token=token, request=request)
    except HTTPException as exc:
        raise ProxyException(
            message=f"route {route_name} takes the gateway's master key: a tenant key reaches only "
            + ", ".join(TENANT_ROUTES),
            type="permission_denied",
            param="route",
            code=403,
        ) from exc
    return token


@dataclass
class _Open:
    arrived: float
    tenant: str
    deployment: str
    data_class: str | None = None
    ticket: Ticket | None = None
    prompt: str | None = None
    group: str | None = None
    relayed_for: str | None = None  # the entry site, when another site's gateway relayed this request
    relay_id: str | None = None  # the entry's request id (its record's), which this site's record shares


class _State:
    def __init__(self, settings: HookSettings) -> None:
        self.settings = settings
        self.by_hash = settings.tenant_by_hash()
        self.clock = clock_from_env()
        url = counters_url(settings)
        store: Counters = MemoryCounters()
        if url is not None and settings.counters is not None:
            store = RedisCounters(url, settings.counters.prefix, timeout_s=settings.counters.timeout_s)
        self.admission = Admission(
            float(settings.retry_after_s), store, stale_after_s=settings.stale_after_s, currency=settings.currency
        )
        self.signer = signing_key()
        self.relays = Verifier(settings.site, peer_keys())
        records = os.environ.get(RECORDS_ENV)
        self.meter = (
            Meter(Path(records), writer=os.environ.get(WRITER_ENV) or None, clock=self.clock) if records else None
        )


_state: _State | None = None


def state() -> _State:
    global _state
    if _state is None:
        _state = _State(settings_from_env())
    return _state


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    """Tenant keys by SHA-256: the proxy never holds a key in plain text beyond this call."""
    st = state()
    key = api_key.removeprefix("Bearer ").strip()
    if _is_master_key(key):
        if any(RouteChecks._route_matches_allowed_route(get_request_route(request), r) for r in TENANT_ROUTES):
            raise ProxyException(
                message="the master key is for LiteLLM's admin routes: requests take a tenant's key",
                type="permission_denied",
                param="api_key",
                code=403,
            )
        return UserAPIKeyAuth(api_key=key_digest(key), user_id=ADMIN, user_role=LitellmUserRoles.PROXY_ADMIN)
    if is_peer_key(key):
        return _on_tenant_routes(request, _relay_auth(st, request))
    digest = key_digest(key)
    tenant = st.by_hash.get(digest)
    if tenant is None:
        raise ProxyException(message="unknown API key", type="auth_error", param="api_key", code=401)
    expires = st.settings.tenants[tenant].key_expiry.get(digest[:12])
    if expires is not None and expires.timestamp() <= st.clock():
        raise ProxyException(
            message=f"API key {digest[:12]} of tenant `{tenant}` expired at {expires.isoformat()}: "
            "ask the federation for a new key",
            type="auth_error",
            param="api_key",
            code=401,
        )
    groups = {g for by_class in st.settings.tenants[tenant].groups.values() for g in by_class.values()}
    # LiteLLM checks a fallback's group against the key's models too: the allowed groups' fallbacks join them
    allowed = sorted(groups | {f for g in groups for f in st.settings.groups[g].fallbacks})
    token = UserAPIKeyAuth(
        api_key=digest,
        user_id=tenant,
        key_alias=tenant,
        models=allowed,
        metadata={N.KEY_METADATA_TENANT: tenant},
        allowed_routes=list(TENANT_ROUTES),
    )
    return _on_tenant_routes(request, token)


def _relay_auth(st: _State, request: Request) -> UserAPIKeyAuth:
    """Another site's gateway relays a request it admitted: believed only with the entry site's signature
    (`relay`), and then only as far as the tenant's own key would go here: its classes, only its groups."""
    verdict = st.relays.verify(request.headers.get(RELAY_HEADER), time.time())
    if isinstance(verdict, str):
        raise ProxyException(message=verdict, type="auth_error", param=RELAY_HEADER, code=401)
    refused = _relay_refusal(st, verdict)
    if refused is not None:
        raise ProxyException(message=refused, type="auth_error", param=RELAY_HEADER, code=403)
    tenant = verdict.tenant
    groups = sorted({g for by_class in st.settings.tenants[tenant].groups.values() for g in by_class.values()})
    return UserAPIKeyAuth(
        api_key=key_digest(f"relay:{verdict.entry}"),
        user_id=tenant,
        key_alias=f"{tenant} via {verdict.entry}",
        models=groups,
        metadata={
            N.KEY_METADATA_TENANT: tenant,
            N.KEY_METADATA_RELAY: verdict.entry,
            "fabric_relay_class": verdict.data_class,
            "fabric_relay_id": verdict.request_id,
        },
        allowed_routes=list(TENANT_ROUTES),
    )


def _relay_refusal(st: _State, asserted: Assertion) -> str | None:
    """What a signed assertion claims beyond the tenant's own reach (None: nothing)."""
    access = st.settings.tenants.get(asserted.tenant)
    if access is None:
        return f"a relay names tenant `{asserted.tenant}`, which this gateway does not know"
    if asserted.data_class not in access.data_classes:
        return f"a relay claims `{asserted.data_class}` data for tenant `{asserted.tenant}`, not one of its classes"
    entries = st.settings.entry_sites.get(asserted.data_class)
    if entries is not None and asserted.entry not in entries:
        return f"`{asserted.data_class}` data may not enter at `{asserted.entry}`: a relay from there is refused"
    return None


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


class StreamCut(Exception):
    """The engine's stream ended before its finish: LiteLLM's proxy turns this into the stream's error event."""

    status_code = 502
    type = "stream_cut"
    param = None

    def __init__(self, delivered: int) -> None:
        self.delivered = delivered  # content chunks the client got: about one token each
        self.message = (
            f"the answer broke off after {delivered} chunks: the engine's stream ended without finishing; "
            "what arrived is incomplete, send the request again"
        )
        super().__init__(self.message)


def _made_up_finish(response: Any, chunk: Any) -> bool:
    """Whether `chunk` is the finish LiteLLM adds when the upstream stream simply ended: it keeps a finish the
    provider sent in the stream's `chunks` (and in `received_finish_reason`), never the one it makes up."""
    choices = getattr(chunk, "choices", None) or []
    if not choices or getattr(choices[0], "finish_reason", None) is None:
        return False
    if getattr(response, "received_finish_reason", None) or getattr(response, "intermittent_finish_reason", None):
        return False
    kept = getattr(response, "chunks", None)  # what LiteLLM builds the logged answer from (copies of chunks)
    if not isinstance(kept, list):
        return False
    return not any(getattr(c, "choices", None) and getattr(c.choices[0], "finish_reason", None) for c in kept)


def _has_content(chunk: Any) -> bool:
    choices = getattr(chunk, "choices", None) or []
    delta = getattr(choices[0], "delta", None) if choices else None
    return bool(getattr(delta, "content", None) or getattr(delta, "reasoning_content", None))


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

    async def _forget_stale(self, now: float) -> None:
        """Open requests whose callback never came leave memory (the store's sets drop them by themselves)."""
        for call_id in [k for k, v in self._open.items() if v.arrived < now - state().settings.stale_after_s]:
            stale = self._open.pop(call_id)
            if stale.ticket is not None:
                await state().admission.release(stale.ticket, None)

    def _record(self, request_id: str, opened: _Open, status: int | str, **fields: Any) -> None:
        st = state()
        if st.meter is None:
            return
        st.meter.write(
            RequestRecord(
                ts=datetime.fromtimestamp(opened.arrived, UTC),
                model=opened.deployment,
                tenant=opened.tenant,
                status=str(status),
                request_id=opened.relay_id or request_id,  # a relay's record is the entry's request: one id
                relay_from=opened.relayed_for,
                data_class=opened.data_class,
                prompt=opened.prompt,
                **fields,
            )
        )

    async def async_pre_call_hook(
        self, user_api_key_dict: UserAPIKeyAuth, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        st = state()
        now = st.clock()
        await self._forget_stale(now)
        tenant = str(user_api_key_dict.user_id)
        call_id = str(data.setdefault("litellm_call_id", str(uuid.uuid4())))
        model = str(data.get("model", ""))
        opened = _Open(arrived=now, tenant=tenant, deployment=model)
        meta = user_api_key_dict.metadata or {}
        relayed = meta.get(N.KEY_METADATA_RELAY)
        opened.relayed_for = str(relayed) if relayed is not None else None
        opened.relay_id = str(meta["fabric_relay_id"]) if relayed is not None else None
        self._open[call_id] = opened
        headers = (data.get("proxy_server_request") or {}).get("headers") or {}
        # a relay's class is the one its entry signed, never a header
        asked = str(meta["fabric_relay_class"]) if relayed is not None else headers.get(DATA_CLASS_HEADER)
        decision = route(st.settings, tenant, model, asked)
        if isinstance(decision, Denial):
            raise ProxyException(
                message=decision.message, type="permission_denied", param="model", code=decision.status
            )
        opened.data_class = decision.data_class
        opened.group = decision.group
        if opened.relayed_for is not None and st.settings.groups[decision.group].sites != [st.settings.site]:
            raise ProxyException(
                message=f"`{decision.group}` is not served at `{st.settings.site}`: a relay is not relayed on",
                type="service_unavailable",
                param="model",
                code=UNAVAILABLE,
            )
        text = _text_of(data.get("messages"))
        if st.settings.log_prompts.get(decision.data_class, False):
            opened.prompt = text
        dep = st.settings.deployments[decision.deployment]
        # a relay gets the tenant's own limits and budget here too: never more than its key would get
        access = st.settings.tenants[tenant]
        # a budgeted request reserves its most against the month: one that names no bound gets the settings'
        bound = output_bound(data, dep)
        if bound is None and (access.tokens_per_month is not None or access.price_per_month is not None):
            bound = data["max_tokens"] = st.settings.reserve_tokens
        # an estimate for the input-token window (about 4 characters a token); the meter corrects it
        admitted = await st.admission.admit(
            tenant,
            access,
            decision.deployment,
            dep,
            input_tokens=len(text) // 4 + 1,
            now=now,
            call_id=call_id,
            output_tokens=bound or 0,
            rates=st.settings.prices.get(decision.deployment),
        )
        if isinstance(admitted, Refusal):
            raise ProxyException(
                message=admitted.reason,
                type=REFUSAL_TYPES[admitted.kind],
                param=None,
                code=admitted.status,
                headers=retry_headers(admitted.retry_after_s),
            )
        opened.ticket = admitted
        apply_route(data, decision, dep, tenant)
        if opened.relayed_for is not None:
            data["disable_fallbacks"] = True  # retries at one layer: the entry's fallbacks
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
            if ((d.get("model_info") or {}).get(N.MODEL_INFO_SITE) if isinstance(d, dict) else None) in group.sites
        ]
        return await rotation().keep(allowed)

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: UserAPIKeyAuth, response: Any, request_data: dict[str, Any]
    ) -> AsyncIterator[Any]:
        """A stream the engine ended without its finish (it died, its connection closed) ends in an error
        event, not LiteLLM's made-up `finish_reason: stop` and [DONE]; the failure hook meters it as `cut`."""
        delivered = 0
        async for chunk in response:
            if _made_up_finish(response, chunk):
                raise StreamCut(delivered)
            delivered += 1 if _has_content(chunk) else 0
            yield chunk

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any]:
        info = (kwargs.get("litellm_params") or {}).get("model_info") or kwargs.get("model_info") or {}
        if isinstance(info, dict) and info.get(N.MODEL_INFO_EXTERNAL):
            strip_engine_fields(kwargs)
        if isinstance(info, dict) and info.get(N.MODEL_INFO_INFERENCE):
            opened = self._open.get(str(kwargs.get("litellm_call_id", "")))
            dep = state().settings.deployments.get(str(info.get(N.MODEL_INFO_DEPLOYMENT)))
            if opened is not None and dep is not None:
                picked = picker_headers(opened.tenant, str(info[N.MODEL_INFO_DEPLOYMENT]), dep)
                kwargs["extra_headers"] = {**(kwargs.get("extra_headers") or {}), **picked}
        if isinstance(info, dict) and info.get(N.MODEL_INFO_RELAY):
            opened = self._open.get(str(kwargs.get("litellm_call_id", "")))
            if opened is not None and opened.data_class is not None:
                headers = {
                    **(kwargs.get("extra_headers") or {}),
                    **relay_headers(opened.tenant, state().settings.site),
                    DATA_CLASS_HEADER: opened.data_class,
                    **assertion_header(
                        state().signer,
                        state().settings.site,
                        str(info[N.MODEL_INFO_RELAY]),
                        opened.tenant,
                        opened.data_class,
                        str(kwargs.get("litellm_call_id", "")),
                    ),
                }
                kwargs["extra_headers"] = headers
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
        if isinstance(original_exception, StreamCut):
            if opened is not None:
                await self._cut(call_id, opened, original_exception.delivered)
            return None
        # a refusal the hooks raised themselves (a ProxyException: the store down, a relay not relayed on)
        # keeps its own body; only what the router met at the engines becomes the front door's 503
        ours = isinstance(original_exception, ProxyException)
        unavailable = self._unavailable(opened, status) if opened is not None and not ours else None
        if opened is not None:
            if opened.ticket is not None:
                await st.admission.release(opened.ticket, None)
            self._record(call_id, opened, UNAVAILABLE if unavailable is not None else status)
        if unavailable is not None:
            return unavailable
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

    async def _cut(self, call_id: str, opened: _Open, delivered: int) -> None:
        """A cut stream settles what it used (its prompt's estimate, a token a chunk delivered) and is metered
        as `cut`, never as a success."""
        st = state()
        if opened.ticket is not None:
            used = Usage(opened.ticket.input_tokens, 0, delivered)
            rates = st.settings.prices.get(opened.ticket.deployment)
            await st.admission.release(opened.ticket, used, rates)
        self._record(call_id, opened, CUT, completion_tokens=delivered)

    def _unavailable(self, opened: _Open, status: int) -> HTTPException | None:
        """A 5xx after the router tried every site (and provider) the request may go to: the documented 503."""
        st = state()
        group = st.settings.groups.get(opened.group or "")
        if status < 500 or group is None or opened.data_class is None:
            return None
        tried = list(group.sites)
        for fallback in group.fallbacks:
            spec = st.settings.groups.get(fallback)
            tried += spec.sites if spec is not None else [fallback]
        message = unavailable_message(
            group.deployment, opened.data_class, tried, bool(group.fallbacks), st.settings.retry_after_s
        )
        return HTTPException(
            status_code=UNAVAILABLE, detail=message, headers=retry_headers(float(st.settings.retry_after_s))
        )

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
        site = info.get(N.MODEL_INFO_SITE) or info.get(N.MODEL_INFO_EXTERNAL) if isinstance(info, dict) else None
        if opened.ticket is not None:
            used = Usage(prompt_tokens, int(cached or 0), completion_tokens)
            rates = st.settings.prices.get(opened.ticket.deployment)
            await st.admission.release(opened.ticket, used, rates)
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
